package sim_test

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/sim"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// chaosConfig is a fleet of four workers with a short grace, so restarts land both
// inside it (the worker resumes its record) and after it (a new incarnation).
func chaosConfig(st, check store.Store, skew time.Duration) sim.Config {
	return sim.Config{
		Seed: 99, Store: st, CheckStore: check, Workers: 4, Tick: 10 * time.Second,
		Coordinator:         coordinator.Config{Warmup: coordinator.NoWarmup, Grace: 2 * time.Minute, SuspectAfter: 30 * time.Second},
		Worker:              worker.Config{Heartbeat: heartbeat, Fetchers: 4, MinInterval: time.Minute, BackoffMax: 5 * time.Minute},
		TolerateStoreErrors: true,
		ClockSkew:           skew,
	}
}

type killPoint struct {
	stage sim.Stage
	clone bool
}

func (k killPoint) String() string {
	if k.clone {
		return string(k.stage) + "/clone"
	}
	return string(k.stage) + "/fetch"
}

// runChaos kills workers at every stage of a clone and of a fetch, in turn, and the
// coordinator at one of its next writes each round, while repos are added and
// deleted and (through throttle) the store refuses a share of its calls; it restarts
// the dead, inside the grace or after it. Then, the store healthy again and the fleet
// settled: no repo lost, none left behind by a delete, every repo owned once by a live
// worker and mirrored, and no mirror ever went back or was fetched twice at once
// (checked after every simulated step).
func runChaos(t *testing.T, s *sim.Sim, throttle func(float64)) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 8))
	if err := s.AddRepos(120, 48*time.Hour); err != nil {
		t.Fatal(err)
	}
	settle(t, s, 10*time.Minute)
	want := map[string]bool{}
	for id := range owners(t, s) {
		want[id] = true
	}

	var points []killPoint
	for _, st := range sim.Stages {
		points = append(points, killPoint{st, true}, killPoint{st, false})
	}
	for round := 0; len(s.Kills) < len(points) || round < 3*len(points); round++ {
		if round > 6*len(points) {
			t.Fatalf("after %d rounds, kills only at %v", round, s.Kills)
		}
		p := points[round%len(points)]
		if s.Kills[p.String()] > 0 && len(s.Kills) < len(points) {
			continue // cover every point first
		}
		var live []*sim.Node
		for _, n := range s.Nodes {
			if !n.Killed() {
				live = append(live, n)
			}
		}
		victim := live[rng.IntN(len(live))]
		throttle(0) // an operator's adds and deletes are retried until they land
		if p.clone {
			// New repos, so there are clones to be killed in.
			before := owners(t, s)
			if err := s.AddRepos(6, 48*time.Hour); err != nil {
				t.Fatal(err)
			}
			added := 0
			for id := range owners(t, s) {
				if _, old := before[id]; !old {
					want[id] = true
					added++
				}
			}
			if added != 6 {
				t.Fatalf("%d repos new after adding 6", added)
			}
		}
		if rng.IntN(3) == 0 {
			ids := slices.Sorted(maps.Keys(want))
			id := ids[rng.IntN(len(ids))]
			if err := s.Store.RequestDelete(ctx, id); err != nil {
				t.Fatal(err)
			}
			delete(want, id)
		}
		throttle(0.25)
		s.KillAt(victim, p.stage, p.clone)
		s.Store.FailApplyAt(1 + round%4) // the coordinator dies at one of its next writes
		if _, err := s.RunUntil(5*time.Minute, victim.Killed); err != nil {
			t.Fatal(err)
		}
		if !victim.Killed() {
			s.Disarm(victim) // it had no such sync to do
			continue
		}
		// Back within the grace (its record resumes) or after it (a new incarnation).
		down := 20 * time.Second
		if rng.IntN(2) == 0 {
			down = 3 * time.Minute
		}
		if err := s.RunFor(down); err != nil {
			t.Fatal(err)
		}
		s.Restart(victim)
	}

	throttle(0)
	for _, n := range s.Nodes {
		s.Restart(n)
	}
	settle(t, s, 20*time.Minute)
	if err := s.RunFor(10 * time.Minute); err != nil { // every repo polled again since
		t.Fatal(err)
	}
	got := owners(t, s)
	for id := range want {
		r, ok := got[id]
		if !ok {
			t.Errorf("repo %s lost", id)
			continue
		}
		if n, ok := s.Storage.Mirrored(r.URL); !ok || r.State != store.RepoOK {
			t.Errorf("repo %s %s (%s), mirrored %v (%d commits)", id, r.State, r.LastError, ok, n)
		}
	}
	for id := range got {
		if !want[id] {
			t.Errorf("deleted repo %s still stored", id)
		}
	}
	if err := s.Settled(); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	restarts := 0
	for _, n := range s.Nodes {
		restarts += n.Restarts
	}
	if s.Store.Injected() == 0 {
		t.Fatal("the coordinator never crashed at a write")
	}
	t.Logf("kills by stage %v; %d restarts; coordinator crashed at %d writes; store errors ridden out %v; %d repos, none lost; temp files left by killed syncs %d",
		s.Kills, restarts, s.Store.Injected(), s.StoreErrors, len(got), s.Storage.TempsLeft)
}

// TestChaos runs the chaos on the embedded store.
func TestChaos(t *testing.T) {
	s, err := sim.New(context.Background(), chaosConfig(boltStore(t), nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	runChaos(t, s, func(float64) {})
}

// TestChaosWithClockSkew runs the chaos with each worker's clock off by up to 10 s.
// Skew past the coordinator's SuspectAfter (30 s here) keeps a slow-clocked worker
// looking stale, so the fleet never settles (no safety invariant breaks: liveness
// does) as long as liveness is judged from the heartbeat times workers write; once
// the coordinator judges by its own clock alone (issue 12), raise this to minutes.
func TestChaosWithClockSkew(t *testing.T) {
	s, err := sim.New(context.Background(), chaosConfig(boltStore(t), nil, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range s.Nodes {
		if n.Offset == 0 {
			t.Fatalf("worker %s has no clock offset", n.Name)
		}
	}
	runChaos(t, s, func(float64) {})
}

// TestChaosOnThrottledDynamoDB runs the chaos on DynamoDB Local, with a quarter of the
// fleet's store calls answered ProvisionedThroughputExceededException or
// ThrottlingException on the real SDK path (see dynamotest.Throttler); the checks read
// through a client that is not throttled.
func TestChaosOnThrottledDynamoDB(t *testing.T) {
	th := dynamotest.NewThrottler(3)
	ep := dynamotest.Endpoint(t)
	fleetStore := dynamotest.Table(t, "chaos", dynamo.Config{Client: dynamotest.Client(ep, th.Options)})
	checkStore, err := dynamo.New(t.Context(), dynamo.Config{Client: dynamotest.Client(ep), Table: fleetStore.Table()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(context.Background(), chaosConfig(fleetStore, checkStore, 0))
	if err != nil {
		t.Fatal(err)
	}
	runChaos(t, s, th.SetRate)
	calls, throttled := th.Counts()
	if throttled == 0 {
		t.Fatal("nothing was throttled: the test proves nothing")
	}
	t.Logf("DynamoDB calls %d, throttled %d (%.1f%%)", calls, throttled, 100*float64(throttled)/float64(calls))
}
