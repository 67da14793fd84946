package sim_test

import (
	"context"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/sim"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
)

// capacity sums the request units DynamoDB reports, by operation.
type capacity struct {
	mu  sync.Mutex
	rcu float64
	wcu float64
}

// add files a call's units as reads or writes by its API name ("Method/API").
func (c *capacity) add(op string, cc types.ConsumedCapacity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	units := aws.ToFloat64(cc.CapacityUnits)
	switch api := op[strings.LastIndex(op, "/")+1:]; api {
	case "GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems":
		c.rcu += units
	default:
		c.wcu += units
	}
}

func (c *capacity) take() (float64, float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, w := c.rcu, c.wcu
	c.rcu, c.wcu = 0, 0
	return r, w
}

// TestFleetOnDynamoDBLocal runs the core scenarios on the DynamoDB backend: a cold start
// with warm-up, a join, a worker going silent past the grace, with the invariants checked
// after every step; and it measures the request units of the coordinator and heartbeats.
func TestFleetOnDynamoDBLocal(t *testing.T) {
	cc := &capacity{}
	st := dynamotest.Table(t, "sim", dynamo.Config{OnConsumed: cc.add})
	const n = 150
	s, err := sim.New(context.Background(), sim.Config{
		Seed: 7, Store: st, Workers: 3, Tick: 10 * time.Second,
		Coordinator: coordinator.Config{Warmup: time.Minute, Grace: 2 * time.Minute, SuspectAfter: 30 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddRepos(n, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.RunFor(time.Minute - time.Second); err != nil {
		t.Fatal(err)
	}
	rs, err := s.AllRepos()
	if err != nil {
		t.Fatal(err)
	}
	for id, r := range rs {
		if r.Owner != "" {
			t.Fatalf("repo %s assigned during the warm-up", id)
		}
	}
	settle(t, s, 3*time.Minute)

	// Request units of one quiet tick and of one heartbeat, on a settled fleet.
	if err := s.RunFor(time.Minute); err != nil {
		t.Fatal(err)
	}
	cc.take()
	if _, err := s.Coords[0].Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	tickR, tickW := cc.take()
	if err := s.Nodes[0].W.Heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}
	hbR, hbW := cc.take()

	before := owners(t, s)
	nw := s.AddWorker()
	if err := s.Step(); err != nil { // the new worker registers
		t.Fatal(err)
	}
	cc.take()
	if _, err := s.Coords[0].Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	joinR, joinW := cc.take()
	settle(t, s, 2*time.Minute)
	moved := 0
	for id, r := range owners(t, s) {
		if r.Owner != before[id].Owner {
			moved++
			if r.Owner != nw.W.ID() {
				t.Fatalf("repo %s moved to %s, not to the new worker", id, r.Owner)
			}
		}
	}
	if moved == 0 || moved > n/2 {
		t.Fatalf("join moved %d of %d repos", moved, n)
	}

	victim := s.Nodes[1]
	s.Silence(victim, time.Hour)
	ok, err := s.RunUntil(5*time.Minute, func() bool {
		w, err := s.Store.GetWorker(context.Background(), victim.W.ID())
		return err == nil && w.State == store.WorkerDead
	})
	if err != nil || !ok {
		t.Fatalf("silent worker never declared dead: %v", err)
	}
	cc.take()
	settle(t, s, 2*time.Minute)
	for id, r := range owners(t, s) {
		if r.Owner == victim.W.ID() {
			t.Fatalf("repo %s still owned by the dead worker", id)
		}
	}
	t.Logf("DynamoDB Local request units: quiet tick %.1f RCU + %.1f WCU; heartbeat %.1f RCU + %.1f WCU; tick with a join (%d repos moved) %.1f RCU + %.1f WCU",
		tickR, tickW, hbR, hbW, moved, joinR, joinW)
}
