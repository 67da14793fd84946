package coordinator

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

var t0 = time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)

func testCfg() Config {
	return Config{Warmup: 10 * time.Minute, Grace: 10 * time.Minute, SuspectAfter: 30 * time.Second, FirstBatch: 10, MaxBatch: 40}
}

func worker(id string, st store.WorkerState, hb time.Time) store.Worker {
	return store.Worker{ID: id, State: st, HeartbeatAt: hb}
}

// ringOf builds a stored ring with the given members, past its warm-up.
func ringOf(t *testing.T, ids ...string) store.Ring {
	t.Helper()
	r := ring.New()
	var err error
	for _, id := range ids {
		if r, err = r.Add(store.Member{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	return store.Ring{Version: 3, Hash: ring.HashID, Members: r.Members(), Tokens: r.Tokens(), WarmupUntil: t0.Add(-time.Hour), Batch: 10}
}

func repo(i int, st store.RepoState, owner string) store.Repo {
	url := fmt.Sprintf("https://example.org/r/%d", i)
	return store.Repo{ID: store.RepoID(url), URL: url, State: st, Owner: owner, OwnerEpoch: 1}
}

func ownerOf(t *testing.T, sr store.Ring, r store.Repo, salt int) string {
	t.Helper()
	rg, err := ring.FromStore(sr)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := rg.Owner(ring.KeyHash(store.RingKey(r.URL, salt)))
	return o
}

func TestFirstStartWarmsUpBeforeHashing(t *testing.T) {
	ws := []store.Worker{worker("a", store.WorkerJoining, t0), worker("b", store.WorkerJoining, t0)}
	m, err := PlanMembership(store.Ring{}, ws, t0, testCfg())
	if err != nil {
		t.Fatal(err)
	}
	if !m.WarmingUp || !m.Stored.WarmupUntil.Equal(t0.Add(10*time.Minute)) || m.New.Len() != 0 {
		t.Fatalf("first start: warming %v until %v with %d members", m.WarmingUp, m.Stored.WarmupUntil, m.New.Len())
	}
	if len(m.Timers) != 1 || m.Timers[0].Name != warmupTimer || !m.Timers[0].At.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("warm-up timer not armed: %+v", m.Timers)
	}
	// Still warming up a minute before the end: nobody joins.
	m2, _ := PlanMembership(m.Stored, ws, t0.Add(9*time.Minute), testCfg())
	if m2.New.Len() != 0 || len(m2.WorkerOps) != 0 {
		t.Fatalf("members added during warm-up: %d, ops %v", m2.New.Len(), m2.WorkerOps)
	}
	// At the end both join, in one ring.
	ws = []store.Worker{worker("a", store.WorkerJoining, t0.Add(10*time.Minute)), worker("b", store.WorkerJoining, t0.Add(10*time.Minute))}
	m3, _ := PlanMembership(m.Stored, ws, t0.Add(10*time.Minute), testCfg())
	if m3.New.Len() != 2 || len(m3.WorkerOps) != 2 || !m3.RingChanged {
		t.Fatalf("after warm-up: %d members, ops %v", m3.New.Len(), m3.WorkerOps)
	}
	// A restart with the stored ring does not warm up again.
	stored := m3.Stored
	stored.Version = 2
	m4, _ := PlanMembership(stored, ws, t0.Add(time.Hour), testCfg())
	if m4.WarmingUp || len(m4.Timers) != 0 {
		t.Fatalf("second warm-up on restart: %+v", m4.Timers)
	}
}

func TestSuspectThenDeadOnlyAfterGrace(t *testing.T) {
	sr := ringOf(t, "a", "b")
	hb := t0.Add(-time.Minute)
	cases := []struct {
		age   time.Duration
		state store.WorkerState
		want  store.WorkerState // "" = no change
		inRng bool
	}{
		{29 * time.Second, store.WorkerActive, "", true},
		{30 * time.Second, store.WorkerActive, store.WorkerSuspect, true},
		{10*time.Minute - time.Nanosecond, store.WorkerSuspect, "", true},
		{10 * time.Minute, store.WorkerSuspect, store.WorkerDead, false},
		{5 * time.Second, store.WorkerSuspect, store.WorkerActive, true},
	}
	for _, c := range cases {
		now := hb.Add(c.age)
		ws := []store.Worker{worker("a", store.WorkerActive, now), worker("b", c.state, hb)}
		m, err := PlanMembership(sr, ws, now, testCfg())
		if err != nil {
			t.Fatal(err)
		}
		var got store.WorkerState
		for _, op := range m.WorkerOps {
			if s := op.(store.SetWorkerState); s.ID == "b" {
				got = s.State
				if s.State != store.WorkerActive && !s.ExpectHeartbeat.Equal(hb) {
					t.Fatalf("age %s: decision not conditioned on the heartbeat it saw", c.age)
				}
			}
		}
		if got != c.want || m.New.Has("b") != c.inRng {
			t.Fatalf("age %s from %s: got %q in ring %v, want %q in ring %v", c.age, c.state, got, m.New.Has("b"), c.want, c.inRng)
		}
	}
}

func TestDeathTimerIsArmedOnceWhenAWorkerTurnsSuspect(t *testing.T) {
	sr := ringOf(t, "a", "b")
	hb := t0.Add(-time.Minute)
	timers := func(state store.WorkerState) []TimerOp {
		ws := []store.Worker{worker("a", store.WorkerActive, t0), worker("b", state, hb)}
		m, err := PlanMembership(sr, ws, t0, testCfg())
		if err != nil {
			t.Fatal(err)
		}
		return m.Timers
	}
	first := timers(store.WorkerActive)
	if len(first) != 1 || first[0].Name != deathTimer("b") || first[0].Cancel || !first[0].At.Equal(hb.Add(10*time.Minute)) {
		t.Fatalf("turning suspect: timers %+v, want one death timer for b at heartbeat + grace", first)
	}
	var p TimerPayload
	if err := json.Unmarshal(first[0].Payload, &p); err != nil || p.Kind != "death" || p.Worker != "b" || !p.HeartbeatAt.Equal(hb) {
		t.Fatalf("payload %s (%v)", first[0].Payload, err)
	}
	if again := timers(store.WorkerSuspect); len(again) != 0 {
		t.Fatalf("already suspect: timers %+v, want none (re-arming would push the timer back)", again)
	}
}

func TestDeadWorkersReposMoveAsOrphansToTheFront(t *testing.T) {
	sr := ringOf(t, "a", "b", "c")
	ws := []store.Worker{worker("a", store.WorkerActive, t0), worker("b", store.WorkerSuspect, t0.Add(-time.Hour)), worker("c", store.WorkerActive, t0)}
	var repos []store.Repo
	for i := range 300 {
		r := repo(i, store.RepoOK, ownerOf(t, sr, repo(i, "", ""), 0))
		r.Priority = 500
		repos = append(repos, r)
	}
	p, err := Reconcile(State{Ring: sr, Workers: ws, Repos: repos}, t0, testCfg())
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, a := range p.Actions {
		if a.Repo.Owner != "b" {
			t.Fatalf("repo of live worker %s moved", a.Repo.Owner)
		}
		if a.Assign == nil || a.Assign.Owner == "b" || a.Assign.Priority != 0 || a.Assign.ExpectEpoch != 1 {
			t.Fatalf("bad orphan move %+v", a.Assign)
		}
		if len(a.Deliveries) != 1 || a.Deliveries[0].Worker != a.Assign.Owner || a.Deliveries[0].Entry.Op != store.OpAdd || a.Deliveries[0].Entry.Epoch != 2 {
			t.Fatalf("deliveries %+v: want one add to the new owner and nothing to the dead one", a.Deliveries)
		}
		moved++
	}
	for _, r := range repos {
		if r.Owner == "b" {
			moved--
		}
	}
	if moved != 0 {
		t.Fatal("not every repo of the dead worker moved")
	}
}

func TestPendingAssignedInGrowingBatches(t *testing.T) {
	sr := ringOf(t, "a", "b")
	ws := []store.Worker{worker("a", store.WorkerActive, t0), worker("b", store.WorkerActive, t0)}
	var repos []store.Repo
	for i := range 100 {
		repos = append(repos, repo(i, store.RepoPending, ""))
	}
	p, err := Reconcile(State{Ring: sr, Workers: ws, Repos: repos}, t0, testCfg())
	if err != nil {
		t.Fatal(err)
	}
	if p.Assigned != 10 || p.PendingLeft != 90 || p.Stored.Batch != 20 || !p.RingChanged {
		t.Fatalf("assigned %d, left %d, next batch %d", p.Assigned, p.PendingLeft, p.Stored.Batch)
	}
	for _, a := range p.Actions {
		if a.Assign.Owner != ownerOf(t, sr, a.Repo, 0) || a.Assign.State != store.RepoCloning {
			t.Fatalf("pending repo assigned to %s state %s", a.Assign.Owner, a.Assign.State)
		}
	}
	sr.Batch = 40
	p, _ = Reconcile(State{Ring: sr, Workers: ws, Repos: repos}, t0, testCfg())
	if p.Assigned != 40 || p.Stored.Batch != 40 {
		t.Fatalf("batch capped at MaxBatch: assigned %d next %d", p.Assigned, p.Stored.Batch)
	}
}

func TestOverflowRehashesWithTheNextSaltThatLeavesTheFullWorker(t *testing.T) {
	sr := ringOf(t, "a", "b", "c")
	ws := []store.Worker{worker("a", store.WorkerActive, t0), worker("b", store.WorkerActive, t0), worker("c", store.WorkerActive, t0)}
	for i := range 50 {
		base := repo(i, "", "")
		full := ownerOf(t, sr, base, 0)
		r := repo(i, store.RepoOverflow, full)
		p, err := Reconcile(State{Ring: sr, Workers: ws, Repos: []store.Repo{r}}, t0, testCfg())
		if err != nil {
			t.Fatal(err)
		}
		a := p.Actions[0].Assign
		want := 1
		for ownerOf(t, sr, base, want) == full {
			want++
		}
		if a.Salt != want || a.Owner == full || a.Owner != ownerOf(t, sr, base, want) || a.State != store.RepoCloning {
			t.Fatalf("overflow from %s: salt %d owner %s; want salt %d", full, a.Salt, a.Owner, want)
		}
	}
}

func TestDeleteAndSyncRequests(t *testing.T) {
	sr := ringOf(t, "a", "b")
	ws := []store.Worker{worker("a", store.WorkerActive, t0), worker("b", store.WorkerActive, t0)}
	del := repo(1, store.RepoDeleting, "")
	del.Owner = ownerOf(t, sr, del, 0)
	syn := repo(2, store.RepoOK, "")
	syn.Owner = ownerOf(t, sr, syn, 0)
	syn.SyncRequested = true
	p, err := Reconcile(State{Ring: sr, Workers: ws, Repos: []store.Repo{del, syn}}, t0, testCfg())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actions) != 2 {
		t.Fatalf("%d actions", len(p.Actions))
	}
	for _, a := range p.Actions {
		switch a.Repo.ID {
		case del.ID:
			if a.Delete == nil || a.Delete.ExpectEpoch != 1 || a.Deliveries[0].Entry.Op != store.OpPurge || a.Deliveries[0].Worker != del.Owner {
				t.Fatalf("delete action %+v", a)
			}
		case syn.ID:
			if a.Assign == nil || !a.Assign.ClearSync || a.Assign.Owner != syn.Owner || a.Deliveries[0].Entry.Op != store.OpSync {
				t.Fatalf("sync action %+v", a)
			}
		}
	}
}

func TestMaxMovesLeavesTheRingUnwritten(t *testing.T) {
	sr := ringOf(t, "a", "b")
	ws := []store.Worker{worker("a", store.WorkerActive, t0), worker("b", store.WorkerDraining, t0)}
	var repos []store.Repo
	for i := range 50 {
		repos = append(repos, repo(i, store.RepoOK, "b"))
	}
	cfg := testCfg()
	cfg.MaxMoves = 20
	p, err := Reconcile(State{Ring: sr, Workers: ws, Repos: repos}, t0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Incomplete || len(p.Actions) != 20 {
		t.Fatalf("incomplete %v with %d actions", p.Incomplete, len(p.Actions))
	}
	if p.New.Has("b") || !p.RingChanged {
		t.Fatal("draining worker still in the planned ring")
	}
}

func TestReconcileIsDeterministic(t *testing.T) {
	sr := ringOf(t, "a", "b", "c")
	ws := []store.Worker{worker("c", store.WorkerActive, t0), worker("a", store.WorkerDead, t0.Add(-time.Hour)), worker("b", store.WorkerActive, t0), worker("d", store.WorkerJoining, t0)}
	var repos []store.Repo
	for i := range 200 {
		repos = append(repos, repo(i, store.RepoOK, []string{"a", "b", "c"}[i%3]))
	}
	p1, _ := Reconcile(State{Ring: sr, Workers: ws, Repos: repos}, t0, testCfg())
	// Same input in another order.
	rev := make([]store.Repo, len(repos))
	for i, r := range repos {
		rev[len(repos)-1-i] = r
	}
	ws2 := []store.Worker{ws[3], ws[1], ws[2], ws[0]}
	p2, _ := Reconcile(State{Ring: sr, Workers: ws2, Repos: rev}, t0, testCfg())
	if len(p1.Actions) == 0 || !reflect.DeepEqual(p1.Actions, p2.Actions) || !reflect.DeepEqual(p1.Stored, p2.Stored) {
		t.Fatal("plans differ for the same state")
	}
}
