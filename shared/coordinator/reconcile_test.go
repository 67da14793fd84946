package coordinator

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

var t0 = time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)

func testCfg() Config {
	return Config{Warmup: 10 * time.Minute, Grace: 10 * time.Minute, SuspectAfter: 30 * time.Second, FirstBatch: 10, MaxBatch: 40}
}

func worker(id string, st store.WorkerState, beats uint64) store.Worker {
	return store.Worker{ID: id, State: st, Beats: beats}
}

// ringOf builds a ring with the given members and its stored head, past its warm-up.
func ringOf(t *testing.T, ids ...string) (store.Ring, *ring.Ring) {
	t.Helper()
	r := ring.New()
	var err error
	for _, id := range ids {
		if r, err = r.Add(store.Member{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	return store.Ring{Version: 3, Hash: ring.HashID, WarmupUntil: t0.Add(-time.Hour), Batch: 10}, r
}

func repo(i int, st store.RepoState, owner string) store.Repo {
	url := fmt.Sprintf("https://example.org/r/%d", i)
	return store.Repo{ID: store.RepoID(url), URL: url, State: st, Owner: owner, OwnerEpoch: 1}
}

func ownerOf(r *ring.Ring, rp store.Repo, salt int) string {
	o, _ := r.Owner(store.RingHash(store.RingKey(rp.URL, salt)))
	return o
}

// seenAt says every worker was first seen at its current count at `at`.
func seenAt(at time.Time, ws ...store.Worker) map[string]time.Time {
	m := map[string]time.Time{}
	for _, w := range ws {
		m[w.ID] = at
	}
	return m
}

func plan(t *testing.T, head store.Ring, cur *ring.Ring, ws []store.Worker, seen map[string]time.Time, now time.Time) Membership {
	t.Helper()
	m, err := PlanMembership(head, cur, ws, seen, now, testCfg())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFirstStartWarmsUpBeforeHashing(t *testing.T) {
	ws := []store.Worker{worker("a", store.WorkerJoining, 1), worker("b", store.WorkerJoining, 1)}
	m := plan(t, store.Ring{}, ring.New(), ws, nil, t0)
	if !m.WarmingUp || !m.Stored.WarmupUntil.Equal(t0.Add(10*time.Minute)) || m.New.Len() != 0 || !m.RingChanged {
		t.Fatalf("first start: warming %v until %v with %d members", m.WarmingUp, m.Stored.WarmupUntil, m.New.Len())
	}
	if len(m.Timers) != 1 || m.Timers[0].Name != warmupTimer || !m.Timers[0].At.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("warm-up timer not armed: %+v", m.Timers)
	}
	// Still warming up a minute before the end: nobody joins.
	later := t0.Add(9 * time.Minute)
	m2 := plan(t, m.Stored, ring.New(), ws, seenAt(later, ws...), later)
	if m2.New.Len() != 0 || len(m2.WorkerOps) != 0 || m2.RingChanged {
		t.Fatalf("members added during warm-up: %d, ops %v", m2.New.Len(), m2.WorkerOps)
	}
	// At the end both join, in one ring.
	end := t0.Add(10 * time.Minute)
	m3 := plan(t, m.Stored, ring.New(), ws, seenAt(end, ws...), end)
	if m3.New.Len() != 2 || len(m3.WorkerOps) != 2 || !m3.RingChanged || len(m3.Stored.Scans) != 0 {
		t.Fatalf("after warm-up: %d members, ops %v, scans %v (none: nothing was owned)", m3.New.Len(), m3.WorkerOps, m3.Stored.Scans)
	}
	// A restart with the stored ring does not warm up again.
	stored := m3.Stored
	stored.Version = 2
	if m4 := plan(t, stored, m3.New, ws, nil, t0.Add(time.Hour)); m4.WarmingUp || len(m4.Timers) != 0 {
		t.Fatalf("second warm-up on restart: %+v", m4.Timers)
	}
}

// Silence is measured from when the coordinator saw the count last change, on its own
// clock; decisions are conditioned on the count they saw.
func TestSuspectThenDeadOnlyAfterGrace(t *testing.T) {
	head, cur := ringOf(t, "a", "b")
	seenB := t0.Add(-time.Minute)
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
		now := seenB.Add(c.age)
		ws := []store.Worker{worker("a", store.WorkerActive, 9), worker("b", c.state, 7)}
		m := plan(t, head, cur, ws, map[string]time.Time{"a": now, "b": seenB}, now)
		var got store.WorkerState
		for _, op := range m.WorkerOps {
			if s := op.(store.SetWorkerState); s.ID == "b" {
				got = s.State
				if s.State != store.WorkerActive && s.ExpectBeats != 7 {
					t.Fatalf("age %s: decision not conditioned on the count it saw", c.age)
				}
				if s.State == store.WorkerSuspect && !s.SilentSince.Equal(seenB) {
					t.Fatalf("age %s: silence recorded since %v, want %v", c.age, s.SilentSince, seenB)
				}
			}
		}
		if got != c.want || m.New.Has("b") != c.inRng {
			t.Fatalf("age %s from %s: got %q in ring %v, want %q in ring %v", c.age, c.state, got, m.New.Has("b"), c.want, c.inRng)
		}
	}
}

func TestDeathTimerIsArmedOnceWhenAWorkerTurnsSuspect(t *testing.T) {
	head, cur := ringOf(t, "a", "b")
	seenB := t0.Add(-time.Minute)
	timers := func(state store.WorkerState) []TimerOp {
		ws := []store.Worker{worker("a", store.WorkerActive, 3), worker("b", state, 5)}
		return plan(t, head, cur, ws, map[string]time.Time{"a": t0, "b": seenB}, t0).Timers
	}
	first := timers(store.WorkerActive)
	if len(first) != 1 || first[0].Name != deathTimer("b") || first[0].Cancel || !first[0].At.Equal(seenB.Add(10*time.Minute)) {
		t.Fatalf("turning suspect: timers %+v, want one death timer for b when its grace ends", first)
	}
	var p TimerPayload
	if err := json.Unmarshal(first[0].Payload, &p); err != nil || p.Kind != "death" || p.Worker != "b" || p.Beats != 5 {
		t.Fatalf("payload %s (%v)", first[0].Payload, err)
	}
	if again := timers(store.WorkerSuspect); len(again) != 0 {
		t.Fatalf("already suspect: timers %+v, want none (re-arming would push the timer back)", again)
	}
}

// liveStep plays one tick's view of workers whose heartbeats land every 10 s, for the
// liveness tests: alive workers' counts move, dead ones' do not.
type liveStep struct {
	l    liveness
	head store.Ring
	cur  *ring.Ring
	ws   map[string]*store.Worker
}

func (s *liveStep) tick(t *testing.T, now time.Time, alive map[string]bool) Membership {
	t.Helper()
	var ws []store.Worker
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range s.ws {
			if !yield(id) {
				return
			}
		}
	}) {
		w := s.ws[id]
		if alive[id] {
			w.Beats++
		}
		ws = append(ws, *w)
	}
	m := plan(t, s.head, s.cur, ws, s.l.observe(ws, now), now)
	for _, op := range m.WorkerOps { // apply the decisions as the store would
		o := op.(store.SetWorkerState)
		w := s.ws[o.ID]
		w.State, w.SilentSince, w.SilentBeats = o.State, o.SilentSince, 0
		if !o.SilentSince.IsZero() {
			w.SilentBeats = o.ExpectBeats
		}
	}
	return m
}

// A worker's own clock plays no part: one 11 minutes behind is never suspected while it
// heartbeats, one an hour ahead is dead one grace after it stops, and a late heartbeat
// (an old timestamp) cannot make a silent worker look fresh.
func TestLivenessIgnoresWorkerClocks(t *testing.T) {
	head, cur := ringOf(t, "ahead", "behind", "steady")
	s := &liveStep{head: head, cur: cur, ws: map[string]*store.Worker{
		"behind": {ID: "behind", State: store.WorkerActive, Beats: 1, HeartbeatAt: t0.Add(-11 * time.Minute)},
		"ahead":  {ID: "ahead", State: store.WorkerActive, Beats: 1, HeartbeatAt: t0.Add(time.Hour)},
		"steady": {ID: "steady", State: store.WorkerActive, Beats: 1, HeartbeatAt: t0},
	}}
	all := map[string]bool{"behind": true, "ahead": true, "steady": true}
	now := t0
	for range 30 { // five minutes of 10 s ticks, everyone heartbeating
		for _, w := range s.ws {
			w.HeartbeatAt = w.HeartbeatAt.Add(10 * time.Second)
		}
		if m := s.tick(t, now, all); len(m.WorkerOps) != 0 {
			t.Fatalf("at %s: %v for heartbeating workers", now.Sub(t0), m.WorkerOps)
		}
		now = now.Add(10 * time.Second)
	}
	// "ahead" stops. Its last timestamp is an hour in the future: irrelevant.
	stopped := now
	var suspectAt, deadAt time.Time
	live := map[string]bool{"behind": true, "steady": true}
	for now.Sub(stopped) < 20*time.Minute && deadAt.IsZero() {
		m := s.tick(t, now, live)
		for _, op := range m.WorkerOps {
			o := op.(store.SetWorkerState)
			if o.ID != "ahead" {
				t.Fatalf("%s changed to %s", o.ID, o.State)
			}
			switch o.State {
			case store.WorkerSuspect:
				suspectAt = now
			case store.WorkerDead:
				deadAt = now
			}
		}
		if !deadAt.IsZero() && m.New.Has("ahead") {
			t.Fatal("dead worker left in the ring")
		}
		now = now.Add(10 * time.Second)
	}
	// Its count was last seen changing at the tick `stopped - 10s`... it heartbeated just
	// before `stopped`; the first tick seeing the final count is `stopped - 10s`.
	lastSeen := stopped.Add(-10 * time.Second)
	if suspectAt.Sub(lastSeen) < 30*time.Second || suspectAt.Sub(lastSeen) > 40*time.Second {
		t.Fatalf("suspect %s after the count stopped, want 30-40 s", suspectAt.Sub(lastSeen))
	}
	if deadAt.Sub(lastSeen) != 10*time.Minute {
		t.Fatalf("dead %s after the count stopped, want the 10 min grace exactly", deadAt.Sub(lastSeen))
	}

	// A coordinator that restarted (forgot what it saw) uses the silence recorded with the
	// suspect worker, and never declares a death early.
	s2 := &liveStep{head: head, cur: cur, ws: map[string]*store.Worker{
		"w": {ID: "w", State: store.WorkerSuspect, Beats: 4, SilentBeats: 4, SilentSince: t0, HeartbeatAt: t0.Add(-time.Hour)},
	}}
	if m := s2.tick(t, t0.Add(10*time.Minute-time.Second), nil); len(m.WorkerOps) != 0 {
		t.Fatalf("a restarted coordinator judged early: %v", m.WorkerOps)
	}
	if m := s2.tick(t, t0.Add(10*time.Minute), nil); len(m.WorkerOps) != 1 || m.WorkerOps[0].(store.SetWorkerState).State != store.WorkerDead {
		t.Fatalf("the recorded silence did not end in a death: %v", m.WorkerOps)
	}
	// A heartbeat after the recorded silence clears it, whatever its timestamp.
	s3 := &liveStep{head: head, cur: cur, ws: map[string]*store.Worker{
		"w": {ID: "w", State: store.WorkerSuspect, Beats: 4, SilentBeats: 4, SilentSince: t0, HeartbeatAt: t0.Add(-time.Hour)},
	}}
	m := s3.tick(t, t0.Add(11*time.Minute), map[string]bool{"w": true})
	if len(m.WorkerOps) != 1 || m.WorkerOps[0].(store.SetWorkerState).State != store.WorkerActive {
		t.Fatalf("a heartbeat after the silence: %v, want active again", m.WorkerOps)
	}
}

// inScans reports whether a repo's position lies in one of its owner's scans.
func inScans(scans []store.Scan, r store.Repo) bool {
	pos := r.RingPos()
	for _, s := range scans {
		if s.Owner == r.Owner && s.From <= pos && pos <= s.To {
			return true
		}
	}
	return false
}

// The scans of a change cover exactly the repos that must move: a join's are the
// donors' arcs given to the newcomer, a death's the whole circle of the dead worker.
func TestScansCoverExactlyWhatMoves(t *testing.T) {
	_, old := ringOf(t, "a", "b", "c", "d", "e")
	joined, err := old.Add(store.Member{ID: "f"})
	if err != nil {
		t.Fatal(err)
	}
	died, err := old.Remove("c")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		next *ring.Ring
	}{{"join", joined}, {"death", died}} {
		scans := PlanScans(nil, old, c.next)
		covered, moved := 0, 0
		for i := range 5000 {
			r := repo(i, store.RepoOK, "")
			r.Owner = ownerOf(old, r, 0)
			must := ownerOf(c.next, r, 0) != r.Owner
			if must {
				moved++
			}
			if in := inScans(scans, r); in != must {
				t.Fatalf("%s: repo at %x owned by %s: in a scan %v, must move %v (scans %+v)", c.name, r.RingPos(), r.Owner, in, must, scans)
			} else if in {
				covered++
			}
		}
		if moved == 0 || covered != moved {
			t.Fatalf("%s: %d must move, %d covered", c.name, moved, covered)
		}
		if c.name == "death" && (len(scans) != 1 || scans[0] != (store.Scan{Owner: "c", From: 0, To: store.MaxPos})) {
			t.Fatalf("death scans %+v, want the dead worker's whole circle", scans)
		}
		t.Logf("%s: %d scans cover the %d of 5000 repos that move", c.name, len(scans), moved)
	}
}

// A change on top of scans not done yet (a join cut short, then another join or a death)
// keeps every repo that is not where the new ring puts it inside a scan.
func TestScansComposeAcrossChanges(t *testing.T) {
	_, r0 := ringOf(t, "a", "b", "c", "d")
	r1, _ := r0.Add(store.Member{ID: "e"})
	s1 := PlanScans(nil, r0, r1)
	// Half of the join's moves landed before a crash.
	var repos []store.Repo
	for i := range 4000 {
		r := repo(i, store.RepoOK, "")
		r.Owner = ownerOf(r0, r, 0)
		if inScans(s1, r) && i%2 == 0 {
			r.Owner = ownerOf(r1, r, 0)
		}
		repos = append(repos, r)
	}
	r2a, _ := r1.Add(store.Member{ID: "f"})
	r2b, _ := r1.Remove("b")
	r2c, _ := r1.Remove("e") // the newcomer itself dies
	for name, r2 := range map[string]*ring.Ring{"second join": r2a, "death": r2b, "newcomer's death": r2c} {
		s2 := PlanScans(s1, r1, r2)
		misplaced := 0
		for _, r := range repos {
			if ownerOf(r2, r, 0) == r.Owner {
				continue
			}
			misplaced++
			if !inScans(s2, r) {
				t.Fatalf("%s: repo at %x on %s, ring says %s, outside every scan", name, r.RingPos(), r.Owner, ownerOf(r2, r, 0))
			}
		}
		for _, s := range s2 {
			if r2.Has(s.Owner) {
				for _, sp := range r2.Spans(s.From, s.To) {
					if sp.Owner == s.Owner {
						t.Fatalf("%s: scan %+v includes positions its owner keeps", name, s)
					}
				}
			}
		}
		t.Logf("%s: %d misplaced repos, all in %d scans", name, misplaced, len(s2))
	}
}

func TestArcRanges(t *testing.T) {
	const m = store.MaxPos
	for _, c := range []struct {
		start, end uint64
		want       [][2]uint64
	}{
		{5, 5, [][2]uint64{{0, m}}},
		{5, 9, [][2]uint64{{6, 9}}},
		{9, 5, [][2]uint64{{10, m}, {0, 5}}},
		{m, 5, [][2]uint64{{0, 5}}},
		{m - 1, 0, [][2]uint64{{m, m}, {0, 0}}},
	} {
		if got := arcRanges(c.start, c.end); !reflect.DeepEqual(got, c.want) {
			t.Errorf("arcRanges(%d, %d) = %v, want %v", c.start, c.end, got, c.want)
		}
	}
	sc := func(owner string, from, to uint64) store.Scan { return store.Scan{Owner: owner, From: from, To: to} }
	got := mergeScans([]store.Scan{sc("b", 5, 9), sc("a", 20, 30), sc("a", 0, 10), sc("a", 11, 15), sc("a", 12, 13), sc("b", 11, 12)})
	want := []store.Scan{sc("a", 0, 15), sc("a", 20, 30), sc("b", 5, 9), sc("b", 11, 12)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mergeScans = %v, want %v", got, want)
	}
}

func TestDeadWorkersReposMoveAsOrphansToTheFront(t *testing.T) {
	head, cur := ringOf(t, "a", "b", "c")
	ws := []store.Worker{worker("a", store.WorkerActive, 1), worker("b", store.WorkerSuspect, 1), worker("c", store.WorkerActive, 1)}
	m := plan(t, head, cur, ws, map[string]time.Time{"a": t0, "b": t0.Add(-time.Hour), "c": t0}, t0)
	if m.New.Has("b") || len(m.Stored.Scans) != 1 || m.Stored.Scans[0].Owner != "b" {
		t.Fatalf("dead b: in ring %v, scans %+v", m.New.Has("b"), m.Stored.Scans)
	}
	p := NewPlanner(m, ws, testCfg())
	moved := 0
	for i := range 300 {
		r := repo(i, store.RepoOK, "")
		r.Owner, r.Priority = ownerOf(cur, r, 0), 500
		a, ok := p.Decide(r)
		if r.Owner != "b" {
			if ok {
				t.Fatalf("repo of live worker %s moved", r.Owner)
			}
			continue
		}
		if !ok || a.Assign == nil || a.Assign.Owner == "b" || a.Assign.Priority != 0 || a.Assign.ExpectEpoch != 1 {
			t.Fatalf("bad orphan move %+v", a.Assign)
		}
		if len(a.Deliveries) != 1 || a.Deliveries[0].Worker != a.Assign.Owner || a.Deliveries[0].Entry.Op != store.OpAdd || a.Deliveries[0].Entry.Epoch != 2 {
			t.Fatalf("deliveries %+v: want one add to the new owner and nothing to the dead one", a.Deliveries)
		}
		moved++
	}
	if moved == 0 {
		t.Fatal("the dead worker owned nothing")
	}
}

func TestPendingAssignedWithinTheBatch(t *testing.T) {
	head, cur := ringOf(t, "a", "b")
	ws := []store.Worker{worker("a", store.WorkerActive, 1), worker("b", store.WorkerActive, 1)}
	m := plan(t, head, cur, ws, seenAt(t0, ws...), t0)
	p := NewPlanner(m, ws, testCfg())
	assigned := 0
	for i := range 100 {
		if a, ok := p.Decide(repo(i, store.RepoPending, "")); ok {
			assigned++
			if a.Assign.Owner != ownerOf(cur, a.Repo, 0) || a.Assign.State != store.RepoCloning {
				t.Fatalf("pending repo assigned to %s state %s", a.Assign.Owner, a.Assign.State)
			}
		}
	}
	if assigned != 10 || p.Batch != 0 {
		t.Fatalf("assigned %d of a batch of 10 (left %d)", assigned, p.Batch)
	}
	// A sync request jumps the batch.
	r := repo(200, store.RepoPending, "")
	r.SyncRequested = true
	if a, ok := p.Decide(r); !ok || a.Assign == nil || !a.Assign.ClearSync {
		t.Fatalf("pending repo with a sync request beyond the batch: %+v %v", a, ok)
	}
}

func TestOverflowRehashesWithTheNextSaltThatLeavesTheFullWorker(t *testing.T) {
	head, cur := ringOf(t, "a", "b", "c")
	ws := []store.Worker{worker("a", store.WorkerActive, 1), worker("b", store.WorkerActive, 1), worker("c", store.WorkerActive, 1)}
	p := NewPlanner(plan(t, head, cur, ws, seenAt(t0, ws...), t0), ws, testCfg())
	for i := range 50 {
		base := repo(i, "", "")
		full := ownerOf(cur, base, 0)
		a, ok := p.Decide(repo(i, store.RepoOverflow, full))
		want := 1
		for ownerOf(cur, base, want) == full {
			want++
		}
		if !ok || a.Assign.Salt != want || a.Assign.Owner == full || a.Assign.Owner != ownerOf(cur, base, want) || a.Assign.State != store.RepoCloning {
			t.Fatalf("overflow from %s: %+v; want salt %d", full, a.Assign, want)
		}
	}
	// With one member every re-hash lands on it: no action, the repo stays overflow.
	head1, cur1 := ringOf(t, "a")
	ws1 := ws[:1]
	p1 := NewPlanner(plan(t, head1, cur1, ws1, seenAt(t0, ws1...), t0), ws1, testCfg())
	if a, ok := p1.Decide(repo(1, store.RepoOverflow, "a")); ok {
		t.Fatalf("overflow on the only worker got %+v", a)
	}
}

func TestDeleteAndSyncRequests(t *testing.T) {
	head, cur := ringOf(t, "a", "b")
	ws := []store.Worker{worker("a", store.WorkerActive, 1), worker("b", store.WorkerActive, 1)}
	p := NewPlanner(plan(t, head, cur, ws, seenAt(t0, ws...), t0), ws, testCfg())
	del := repo(1, store.RepoDeleting, "")
	del.Owner = ownerOf(cur, del, 0)
	syn := repo(2, store.RepoOK, "")
	syn.Owner = ownerOf(cur, syn, 0)
	syn.SyncRequested = true
	a, ok := p.Decide(del)
	if !ok || a.Delete == nil || a.Delete.ExpectEpoch != 1 || a.Deliveries[0].Entry.Op != store.OpPurge || a.Deliveries[0].Worker != del.Owner {
		t.Fatalf("delete action %+v", a)
	}
	a, ok = p.Decide(syn)
	if !ok || a.Assign == nil || !a.Assign.ClearSync || a.Assign.Owner != syn.Owner || a.Deliveries[0].Entry.Op != store.OpSync {
		t.Fatalf("sync action %+v", a)
	}
}

// A sync request (a hook, repos sync) on a repo whose owner the ring no longer gives it
// to is carried out by the new owner: the move clears the request.
func TestSyncRequestFollowsAMovingRepo(t *testing.T) {
	head, cur := ringOf(t, "a", "b")
	ws := []store.Worker{worker("a", store.WorkerActive, 1), worker("b", store.WorkerActive, 1)}
	p := NewPlanner(plan(t, head, cur, ws, seenAt(t0, ws...), t0), ws, testCfg())
	for i := range 20 {
		r := repo(i, store.RepoOK, "")
		want := ownerOf(cur, r, 0)
		r.Owner = "a"
		if want == "a" {
			r.Owner = "b"
		}
		r.SyncRequested = true
		a, ok := p.Decide(r)
		if !ok || a.Assign == nil || a.Assign.Owner != want || !a.Assign.ClearSync {
			t.Fatalf("repo %d: %+v %v; want a move to %s that clears the request", i, a, ok, want)
		}
		var ops []store.OutboxOp
		for _, d := range a.Deliveries {
			if d.Worker == want {
				ops = append(ops, d.Entry.Op)
			}
		}
		if !slices.Equal(ops, []store.OutboxOp{store.OpAdd, store.OpSync}) {
			t.Fatalf("repo %d: new owner %s gets %v, want add then sync", i, want, ops)
		}
		r.SyncRequested = false
		a, _ = p.Decide(r)
		for _, d := range a.Deliveries {
			if d.Entry.Op == store.OpSync {
				t.Fatalf("repo %d: a move without a request delivers a sync", i)
			}
		}
	}
}

func TestPlanIsDeterministic(t *testing.T) {
	head, cur := ringOf(t, "a", "b", "c")
	ws := []store.Worker{worker("c", store.WorkerActive, 1), worker("a", store.WorkerDead, 1), worker("b", store.WorkerActive, 1), worker("d", store.WorkerJoining, 1)}
	seen := seenAt(t0, ws...)
	m1 := plan(t, head, cur, ws, seen, t0)
	m2 := plan(t, head, cur, []store.Worker{ws[3], ws[1], ws[2], ws[0]}, seen, t0)
	if !reflect.DeepEqual(m1.Stored, m2.Stored) || !reflect.DeepEqual(m1.WorkerOps, m2.WorkerOps) || !reflect.DeepEqual(m1.New.Tokens(), m2.New.Tokens()) {
		t.Fatal("plans differ for the same state")
	}
}

// A plan that changes nothing stays so, for the same workers and ring, at every moment
// before its Until: a coordinator may reuse it without reading the workers.
func TestNoOpPlanHoldsUntilItsUntil(t *testing.T) {
	cfg := testCfg()
	rng := rand.New(rand.NewPCG(1, 2))
	ago := func(max time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(max))) }
	checked := 0
	for c := range 500 {
		warming := c%4 == 0
		var ws []store.Worker
		seen := map[string]time.Time{}
		var members []string
		for i := range 1 + rng.IntN(6) {
			id := fmt.Sprintf("w%d", i)
			var w store.Worker
			var age time.Duration
			switch rng.IntN(4) {
			case 0: // heartbeating
				w, age = worker(id, store.WorkerActive, 5), ago(cfg.SuspectAfter)
				members = append(members, id)
			case 1: // silent, already suspect
				w, age = worker(id, store.WorkerSuspect, 5), cfg.SuspectAfter+ago(cfg.Grace-cfg.SuspectAfter)
				members = append(members, id)
			case 2: // joining while the warm-up lasts, or silent too long to join
				w, age = worker(id, store.WorkerJoining, 1), ago(cfg.Grace)
				if !warming {
					age = cfg.SuspectAfter + ago(cfg.Grace-cfg.SuspectAfter)
				}
			default:
				w, age = worker(id, store.WorkerDead, 2), ago(3*cfg.Grace)
			}
			ws = append(ws, w)
			seen[id] = t0.Add(-age)
		}
		head, cur := ringOf(t, members...)
		if warming {
			head, cur = ringOf(t)
			head.WarmupUntil = t0.Add(ago(cfg.Warmup))
			for i := range ws { // nothing is in the ring before the warm-up ends
				if ws[i].State != store.WorkerDead {
					ws[i].State = store.WorkerJoining
				}
			}
		}
		m := plan(t, head, cur, ws, seen, t0)
		if !m.NoOp() {
			continue
		}
		if m.Until.IsZero() && len(members) > 0 {
			t.Fatalf("case %d: no-op plan with live members has no Until", c)
		}
		if !m.Until.IsZero() && !m.Until.After(t0) {
			t.Fatalf("case %d: Until %v is not after now", c, m.Until)
		}
		checked++
		end := m.Until
		if end.IsZero() {
			end = t0.Add(3 * cfg.Grace)
		}
		for _, at := range []time.Time{t0.Add(end.Sub(t0) / 2), end.Add(-time.Nanosecond)} {
			if later := plan(t, head, cur, ws, seen, at); !later.NoOp() {
				t.Fatalf("case %d: the no-op plan at now (until %v) changes at %v: %+v", c, m.Until, at, later.WorkerOps)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d of 500 random fleets planned a no-op: the test checks too little", checked)
	}
}

// Trims delete at most MaxTrim entries a worker a tick, and are packed so that one Apply
// deletes at most MaxTrim, never in one Apply that outlasts the tick; the trim point
// itself moves at once, so a worker far behind is cut at its head in one tick (it
// resyncs in full once, with nothing to replay) while the deletes spread over ticks.
func TestTrimsAreBounded(t *testing.T) {
	cfg := testCfg()
	cfg.TrimEvery, cfg.MaxLag, cfg.MaxTrim = 10, 500, 100
	head, cur := ringOf(t, "acked", "behind", "small", "quiet")
	ws := []store.Worker{
		{ID: "acked", State: store.WorkerActive, OutboxHead: 900, AckSeq: 850, TrimmedTo: 100}, // 750 acked: 100 now
		{ID: "behind", State: store.WorkerActive, OutboxHead: 2000, AckSeq: 30, TrimmedTo: 20}, // cut at the head, 100 deleted now
		{ID: "small", State: store.WorkerActive, OutboxHead: 60, AckSeq: 40, TrimmedTo: 25},    // 15 acked
		{ID: "quiet", State: store.WorkerActive, OutboxHead: 60, AckSeq: 60, TrimmedTo: 55},    // 5: under TrimEvery
	}
	mem := plan(t, head, cur, ws, seenAt(t0, ws...), t0)
	cl := PlanCleanup(mem, ws, seenAt(t0, ws...), t0, cfg)
	want := []Trim{
		{store.TrimOutbox{Worker: "acked", Through: 850, Max: 100}, 100},
		{store.TrimOutbox{Worker: "behind", Through: 2000, Max: 100}, 100},
		{store.TrimOutbox{Worker: "small", Through: 40, Max: 100}, 15},
	}
	if !reflect.DeepEqual(cl.Trims, want) {
		t.Fatalf("trims %+v, want %+v", cl.Trims, want)
	}
	chunks := trimChunks(cl.Trims, cfg.MaxTrim)
	if len(chunks) != 3 {
		t.Fatalf("%d Apply calls for trims of 100, 100 and 15 entries at 100 an Apply, want 3: %v", len(chunks), chunks)
	}
	if got := trimChunks([]Trim{{Entries: 40}, {Entries: 50}, {Entries: 20}}, 100); len(got) != 2 || len(got[0]) != 2 {
		t.Fatalf("trims of 40, 50, 20 at 100 an Apply packed as %v, want 2 then 1", got)
	}
}
