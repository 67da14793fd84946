package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/sim"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// chaosConfig is a fleet of four workers with a short grace, so restarts land both
// inside it (the worker resumes its record) and after it (a new incarnation).
func chaosConfig(st, check storetest.Store, skew time.Duration) sim.Config {
	return sim.Config{
		Seed: 99, Store: st, CheckStore: check, Workers: 4, Tick: 10 * time.Second,
		Coordinator:         coordinator.Config{Warmup: coordinator.NoWarmup, Grace: 2 * time.Minute, SuspectAfter: 30 * time.Second},
		Worker:              worker.Config{Heartbeat: heartbeat, Fetchers: 4, MinInterval: time.Minute, BackoffMax: 5 * time.Minute},
		TolerateStoreErrors: true,
		ClockSkew:           skew,
	}
}

// runChaos runs Chaos and requires its findings clean: every stage of a clone and of a
// fetch killed in, the coordinator crashed at writes, nothing lost, nothing left over,
// everything mirrored, and the invariants held after every step.
func runChaos(t *testing.T, s *sim.Sim, throttle func(float64)) sim.ChaosResult {
	t.Helper()
	res, err := s.Chaos(sim.ChaosOptions{Throttle: throttle})
	if err != nil {
		t.Fatalf("chaos: %v (so far: %+v)", err, res)
	}
	if len(res.Kills) != 2*len(sim.Stages) {
		t.Errorf("workers killed at %v, not at every stage of a clone and a fetch", res.Kills)
	}
	if res.CoordinatorCrashes == 0 {
		t.Error("the coordinator never crashed at a write")
	}
	if len(res.Lost)+len(res.LeftOver)+len(res.NotMirrored) > 0 {
		t.Errorf("lost %v; deleted but still stored %v; not mirrored %v", res.Lost, res.LeftOver, res.NotMirrored)
	}
	t.Logf("%d rounds; kills by stage %v; %d restarts; coordinator crashed at %d writes; store errors ridden out %v; "+
		"%d repos (%d added, %d deleted), 0 lost; temp files left by killed syncs %d",
		res.Rounds, res.Kills, res.Restarts, res.CoordinatorCrashes, res.StoreErrors, res.Repos, res.Added, res.Deleted, res.TempsLeft)
	return res
}

// TestChaos runs the chaos on the embedded store.
func TestChaos(t *testing.T) {
	s, err := sim.New(context.Background(), chaosConfig(boltStore(t), nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	runChaos(t, s, func(float64) {})
}

// TestChaosWithClockSkew runs the chaos with each worker's clock off by up to 15 min,
// far past the coordinator's SuspectAfter (30 s here): liveness is judged by when the
// coordinator saw a heartbeat count change, on its own clock (ADR 3), so a worker's
// clock never makes it look dead or alive, and the fleet settles as without skew.
func TestChaosWithClockSkew(t *testing.T) {
	s, err := sim.New(context.Background(), chaosConfig(boltStore(t), nil, 15*time.Minute))
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
