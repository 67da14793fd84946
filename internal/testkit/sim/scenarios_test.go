package sim_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/sim"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

const (
	grace     = 10 * time.Minute
	warmup    = 10 * time.Minute
	heartbeat = 10 * time.Second
)

func boltStore(t *testing.T) storetest.Store {
	t.Helper()
	s, err := bolt.OpenWith(filepath.Join(t.TempDir(), "fleet.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newSim builds a fleet on a fresh bbolt store.
func newSim(t *testing.T, workers int, mod func(*sim.Config)) *sim.Sim {
	t.Helper()
	cfg := sim.Config{
		Seed:        42,
		Store:       boltStore(t),
		Workers:     workers,
		Coordinator: coordinator.Config{Warmup: warmup, Grace: grace, SuspectAfter: 3 * heartbeat},
		Worker:      worker.Config{Heartbeat: heartbeat, Fetchers: 10, MinInterval: time.Minute},
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := sim.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// settle runs until the fleet has converged or fails the test.
func settle(t *testing.T, s *sim.Sim, within time.Duration) {
	t.Helper()
	ok, err := s.RunUntil(within, func() bool { return s.Settled() == nil })
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("fleet did not settle within %s: %v", within, s.Settled())
	}
}

func owners(t *testing.T, s *sim.Sim) map[string]store.Repo {
	t.Helper()
	rs, err := s.AllRepos()
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func workerState(t *testing.T, s *sim.Sim, id string) store.WorkerState {
	t.Helper()
	w, err := s.Store.GetWorker(context.Background(), id)
	if err != nil {
		t.Fatalf("worker %s: %v", id, err)
	}
	return w.State
}

func TestColdStartAssignsNothingBeforeWarmupThenEverything(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 2000
	}
	s := newSim(t, 5, nil)
	if err := s.AddRepos(n, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.RunFor(warmup - time.Second); err != nil {
		t.Fatal(err)
	}
	for id, r := range owners(t, s) {
		if r.Owner != "" || r.State != store.RepoPending {
			t.Fatalf("repo %s assigned during warm-up: owner %q state %s", id, r.Owner, r.State)
		}
	}
	settle(t, s, 5*time.Minute)

	load := map[string]int{}
	for _, r := range owners(t, s) {
		load[r.Owner]++
	}
	if len(load) != 5 {
		t.Fatalf("repos spread over %d workers, want 5: %v", len(load), load)
	}
	peak := 0
	for _, c := range load {
		peak = max(peak, c)
	}
	ratio := float64(peak) / (float64(n) / 5)
	// Arcs are exactly balanced, so what is left is sampling noise: 4σ at 2000 per worker.
	if bound := 1 + 4/math.Sqrt(float64(n)/5); ratio > bound {
		t.Fatalf("peak/mean load %.3f above %.3f: %v", ratio, bound, load)
	}
	t.Logf("load per worker %v, peak/mean %.3f", load, ratio)

	// The batches grew: the first tick after warm-up did not assign everything at once.
	firstAssign := 0
	for _, r := range s.Reports {
		if r.Assigned > 0 {
			firstAssign = r.Assigned
			break
		}
	}
	if firstAssign == 0 || firstAssign >= n {
		t.Fatalf("first assignment batch %d, want a small first batch of %d repos", firstAssign, n)
	}
}

func TestJoinMovesAboutOneNth(t *testing.T) {
	const n = 3000
	s := newSim(t, 5, func(c *sim.Config) { c.Coordinator.Warmup = coordinator.NoWarmup })
	if err := s.AddRepos(n, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	settle(t, s, 5*time.Minute)
	before := owners(t, s)
	nw := s.AddWorker()
	settle(t, s, 5*time.Minute)
	after := owners(t, s)
	moved := 0
	for id, r := range after {
		if r.Owner != before[id].Owner {
			moved++
			if r.Owner != nw.W.ID() {
				t.Fatalf("repo %s moved from %s to %s, not to the new worker", id, before[id].Owner, r.Owner)
			}
		}
	}
	ideal := float64(n) / 6
	if got := float64(moved); got > 1.1*ideal+3*math.Sqrt(ideal) || got < 0.8*ideal {
		t.Fatalf("join moved %d repos, ideal %.0f", moved, ideal)
	}
	t.Logf("join moved %d of %d repos (ideal %.0f, ratio %.3f)", moved, n, ideal, float64(moved)/ideal)
}

func TestSilentWorkerDiesExactlyAfterGraceAndItsReposMove(t *testing.T) {
	const n = 1000
	s := newSim(t, 5, func(c *sim.Config) { c.Coordinator.Warmup = coordinator.NoWarmup })
	if err := s.AddRepos(n, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	settle(t, s, 10*time.Minute)
	// Let the clones finish so the moved repos compete with a full queue.
	if err := s.RunFor(5 * time.Minute); err != nil {
		t.Fatal(err)
	}
	victim := s.Nodes[2]
	id := victim.W.ID()
	s.Silence(victim, time.Hour)
	var theirs []string
	for rid, r := range owners(t, s) {
		if r.Owner == id {
			theirs = append(theirs, rid)
		}
	}
	if len(theirs) == 0 {
		t.Fatal("victim owns nothing")
	}
	// Suspect after a few missed heartbeats, silent since the tick that last saw its
	// heartbeat count move (the coordinator's clock); dead not one step before the grace.
	ok, err := s.RunUntil(grace, func() bool { return workerState(t, s, id) == store.WorkerSuspect })
	if err != nil || !ok {
		t.Fatalf("worker never became suspect: %v", err)
	}
	w, err := s.Store.GetWorker(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	silent := w.SilentSince
	if silent.IsZero() || silent.After(s.Now()) || s.Now().Sub(silent) > 3*heartbeat+s.Tick() {
		t.Fatalf("silence recorded since %s, at %s", silent, s.Now())
	}
	if _, err := s.RunUntil(grace, func() bool { return !s.Now().Before(silent.Add(grace - time.Second)) }); err != nil {
		t.Fatal(err)
	}
	if st := workerState(t, s, id); st == store.WorkerDead {
		t.Fatalf("declared dead at %s, before the grace ended at %s", s.Now(), silent.Add(grace))
	}
	for _, rid := range theirs {
		if r := owners(t, s)[rid]; r.Owner != id {
			t.Fatalf("repo %s moved to %s before the grace", rid, r.Owner)
		}
	}
	fetchedBy := map[string]time.Time{}
	s.Storage.OnFetch = func(e sim.FetchEvent) {
		if _, ok := fetchedBy[e.URL]; !ok && e.Worker != victim.Name {
			fetchedBy[e.URL] = e.Start
		}
	}
	if err := s.Step(); err != nil {
		t.Fatal(err)
	}
	if !s.Now().Equal(silent.Add(grace)) {
		t.Fatalf("step landed at %s, want the death timer at %s", s.Now(), silent.Add(grace))
	}
	if st := workerState(t, s, id); st != store.WorkerDead {
		t.Fatalf("state %s at the end of the grace, want dead", st)
	}
	deadAt := s.Now()
	after := owners(t, s)
	perWorker := map[string]int{}
	for _, rid := range theirs {
		r := after[rid]
		if r.Owner == id || r.Owner == "" {
			t.Fatalf("repo %s not moved off the dead worker: owner %q", rid, r.Owner)
		}
		if r.Priority != 0 {
			t.Fatalf("orphan %s kept priority %v, want the minimum (0)", rid, r.Priority)
		}
		perWorker[r.Owner]++
	}
	// Within one heartbeat the new owners learn of them; they go to the front of their
	// queues, so each is fetched in the first round of fetches after that.
	most := 0
	for _, c := range perWorker {
		most = max(most, c)
	}
	rounds := (most + 9) / 10
	deadline := deadAt.Add(heartbeat + time.Duration(rounds+1)*s.Storage.Duration() + time.Second)
	if err := s.RunFor(deadline.Sub(s.Now())); err != nil {
		t.Fatal(err)
	}
	for _, rid := range theirs {
		url := after[rid].URL
		at, ok := fetchedBy[url]
		if !ok {
			t.Fatalf("moved repo %s not fetched by %s", rid, deadline)
		}
		if at.Before(deadAt) {
			t.Fatalf("repo %s fetched at %s, before it moved", rid, at)
		}
	}
	settle(t, s, time.Minute)
	t.Logf("%d repos moved off %s at %s; all fetched by %s", len(theirs), id, deadAt, deadline)
}

func TestWorkerBackBeforeGraceMovesNothing(t *testing.T) {
	s := newSim(t, 5, func(c *sim.Config) { c.Coordinator.Warmup = coordinator.NoWarmup })
	if err := s.AddRepos(1000, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	settle(t, s, 5*time.Minute)
	before := owners(t, s)
	victim := s.Nodes[1]
	s.Silence(victim, grace-2*time.Minute)
	ok, err := s.RunUntil(grace, func() bool { return workerState(t, s, victim.W.ID()) == store.WorkerSuspect })
	if err != nil || !ok {
		t.Fatalf("never suspect: %v", err)
	}
	if err := s.RunFor(grace); err != nil {
		t.Fatal(err)
	}
	if st := workerState(t, s, victim.W.ID()); st != store.WorkerActive {
		t.Fatalf("state %s after coming back, want active", st)
	}
	for id, r := range owners(t, s) {
		if r.Owner != before[id].Owner || r.OwnerEpoch != before[id].OwnerEpoch {
			t.Fatalf("repo %s moved from %s to %s", id, before[id].Owner, r.Owner)
		}
	}
	settle(t, s, time.Minute)
}

func TestDeathTimerAfterNewHeartbeatIsIgnored(t *testing.T) {
	s := newSim(t, 3, func(c *sim.Config) { c.Coordinator.Warmup = coordinator.NoWarmup })
	if err := s.AddRepos(300, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	settle(t, s, 5*time.Minute)
	id := s.Nodes[0].W.ID()
	w, err := s.Store.GetWorker(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	armedFor := w.Beats
	before := owners(t, s)
	// The worker heartbeats again; then a (late, duplicate) death timer armed for the old
	// heartbeat count fires after the grace.
	if err := s.RunFor(2 * heartbeat); err != nil {
		t.Fatal(err)
	}
	s.Clock.Set(s.Now().Add(grace))
	payload := []byte(fmt.Sprintf(`{"kind":"death","worker":%q,"beats":%d}`, id, armedFor))
	rep, err := s.Coords[0].OnTimer(context.Background(), payload)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ignored == "" || rep.Leader {
		t.Fatalf("firing not ignored: %+v", rep)
	}
	if st := workerState(t, s, id); st == store.WorkerDead {
		t.Fatal("worker declared dead by a stale timer")
	}
	for rid, r := range owners(t, s) {
		if r.Owner != before[rid].Owner {
			t.Fatalf("repo %s moved on a stale timer", rid)
		}
	}
	// The same firing for the current heartbeat is not ignored: it runs a tick.
	w, _ = s.Store.GetWorker(context.Background(), id)
	payload = []byte(fmt.Sprintf(`{"kind":"death","worker":%q,"beats":%d}`, id, w.Beats))
	rep, err = s.Coords[0].OnTimer(context.Background(), payload)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ignored != "" {
		t.Fatalf("current firing ignored: %s", rep.Ignored)
	}
}

func TestDiskGuardHandsBackAndRehashes(t *testing.T) {
	s := newSim(t, 4, func(c *sim.Config) { c.Coordinator.Warmup = coordinator.NoWarmup })
	full := s.Nodes[0]
	full.Disk.Set(90, 100) // above the 85% threshold: no new clones
	if err := s.AddRepos(800, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	ok, err := s.RunUntil(20*time.Minute, func() bool {
		rs := owners(t, s)
		for _, r := range rs {
			if r.State != store.RepoOK {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("not every repo got cloned")
	}
	if got := full.W.Stats().HandedBack; got == 0 {
		t.Fatal("the full worker handed nothing back")
	}
	salted := 0
	for id, r := range owners(t, s) {
		if r.Owner == full.W.ID() {
			t.Fatalf("repo %s still owned by the full worker", id)
		}
		if r.Salt > 0 {
			salted++
		}
	}
	if int64(salted) < full.W.Stats().HandedBack {
		t.Fatalf("%d repos re-hashed with a salt, %d handed back", salted, full.W.Stats().HandedBack)
	}
	t.Logf("handed back %d repos; %d re-hashed with salt+1", full.W.Stats().HandedBack, salted)
}

func TestTrimmedOutboxForcesFullResync(t *testing.T) {
	s := newSim(t, 3, func(c *sim.Config) {
		c.Coordinator.Warmup = coordinator.NoWarmup
		c.Coordinator.MaxLag = 20 // cut the outbox of a worker more than 20 entries behind
	})
	if err := s.AddRepos(300, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	settle(t, s, 5*time.Minute)
	lagger := s.Nodes[1]
	s.Silence(lagger, 2*time.Minute)
	if err := s.AddRepos(600, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.RunFor(time.Minute); err != nil {
		t.Fatal(err)
	}
	w, err := s.Store.GetWorker(context.Background(), lagger.W.ID())
	if err != nil {
		t.Fatal(err)
	}
	if w.TrimmedTo <= w.AckSeq {
		t.Fatalf("outbox not trimmed past the ack: trimmed to %d, ack %d", w.TrimmedTo, w.AckSeq)
	}
	settle(t, s, 5*time.Minute)
	if got := lagger.W.Stats().FullResyncs; got == 0 {
		t.Fatal("the lagging worker never resynced in full")
	}
	held := lagger.W.Owned()
	for id, r := range owners(t, s) {
		_, has := held[id]
		if (r.Owner == lagger.W.ID()) != has {
			t.Fatalf("repo %s: owner %s, held by lagger %v", id, r.Owner, has)
		}
	}
}

func TestNoChangePollsWriteNothing(t *testing.T) {
	s := newSim(t, 3, func(c *sim.Config) { c.Coordinator.Warmup = coordinator.NoWarmup })
	// Upstreams whose last commit is in the past: after the clone, every poll is a no-op.
	for i := range 300 {
		url := fmt.Sprintf("https://git.example.org/quiet/repo%d", i)
		if err := s.AddRepo(&sim.Upstream{URL: url, Commits: []time.Time{s.Now().Add(-time.Hour)}}); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, s, 5*time.Minute)
	if _, err := s.RunUntil(10*time.Minute, func() bool {
		for _, r := range owners(t, s) {
			if r.State != store.RepoOK {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.RunFor(2 * time.Minute); err != nil { // let trims and batches settle
		t.Fatal(err)
	}
	before, fetches := s.Store.Writes(), s.Storage.Fetches
	if err := s.RunFor(30 * time.Minute); err != nil {
		t.Fatal(err)
	}
	after := s.Store.Writes()
	polls := s.Storage.Fetches - fetches
	if polls < 300 {
		t.Fatalf("only %d polls in 30 minutes", polls)
	}
	for _, kind := range []string{"ReportFetch", "Apply", "HandBack", "CreateRepo"} {
		if d := after[kind] - before[kind]; d != 0 {
			t.Fatalf("%d no-change polls made %d %s writes", polls, d, kind)
		}
	}
	t.Logf("%d no-change polls, 0 repo writes; heartbeats %d, election renewals %d",
		polls, after["Heartbeat"]-before["Heartbeat"], after["CASElection"]-before["CASElection"])
}

func TestDeletedRepoIsPurged(t *testing.T) {
	s := newSim(t, 3, func(c *sim.Config) { c.Coordinator.Warmup = coordinator.NoWarmup })
	if err := s.AddRepos(100, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	settle(t, s, 5*time.Minute)
	var victim store.Repo
	for _, r := range owners(t, s) {
		victim = r
		break
	}
	if err := s.Store.RequestDelete(context.Background(), victim.ID); err != nil {
		t.Fatal(err)
	}
	settle(t, s, time.Minute)
	if _, ok := owners(t, s)[victim.ID]; ok {
		t.Fatal("deleted repo still stored")
	}
	if _, ok := s.Storage.Mirrored(victim.URL); ok {
		t.Fatal("mirror of the deleted repo not moved to the trash")
	}
}
