package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/sim"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// chaos runs the simulation's chaos (sim.Chaos, as the tests do) on bbolt, on bbolt
// with worker clocks off by up to 10 s, and, where DynamoDB Local runs, on it with a
// quarter of the fleet's calls throttled.
func chaos(ctx context.Context, log *slog.Logger) ([]results.HostileChaos, error) {
	dir, err := os.MkdirTemp("", "hostile-chaos-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var out []results.HostileChaos
	for i, skew := range []time.Duration{0, 10 * time.Second} {
		st, err := bolt.OpenWith(filepath.Join(dir, fmt.Sprintf("fleet%d.db", i)), bolt.Options{NoSync: true})
		if err != nil {
			return nil, err
		}
		r := runChaos(ctx, "bbolt", st, nil, skew, nil)
		st.Close()
		out = append(out, r)
	}
	ep := os.Getenv(dynamotest.EndpointEnv)
	if ep == "" {
		log.Warn("DynamoDB Local not running: the throttled chaos run is left out (make bench starts it)")
		return out, nil
	}
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": dynamotest.AccessKey, "AWS_SECRET_ACCESS_KEY": dynamotest.AccessKey, "AWS_REGION": dynamotest.Region} {
		os.Setenv(k, v)
	}
	th := dynamotest.NewThrottler(3)
	table := fmt.Sprintf("hostile_chaos_%d", time.Now().UnixNano()%1e9)
	fleetStore, err := dynamo.New(ctx, dynamo.Config{Client: dynamotest.Client(ep, th.Options), Table: table})
	if err != nil {
		return nil, err
	}
	if err := fleetStore.CreateTable(ctx); err != nil {
		return nil, err
	}
	defer fleetStore.DeleteTable(context.Background())
	checkStore, err := dynamo.New(ctx, dynamo.Config{Client: dynamotest.Client(ep), Table: table})
	if err != nil {
		return nil, err
	}
	r := runChaos(ctx, "DynamoDB Local, 25% of calls throttled", fleetStore, checkStore, 0, th)
	r.StoreCalls, r.Throttled = th.Counts()
	return append(out, r), nil
}

func runChaos(ctx context.Context, name string, st, check storetest.Store, skew time.Duration, th *dynamotest.Throttler) results.HostileChaos {
	start := time.Now()
	r := results.HostileChaos{Store: name, ClockSkewSeconds: skew.Seconds()}
	s, err := sim.New(ctx, sim.Config{
		Seed: 99, Store: st, CheckStore: check, Workers: 4, Tick: 10 * time.Second,
		Coordinator:         coordinator.Config{Warmup: coordinator.NoWarmup, Grace: 2 * time.Minute, SuspectAfter: 30 * time.Second},
		Worker:              worker.Config{Heartbeat: 10 * time.Second, Fetchers: 4, MinInterval: time.Minute, BackoffMax: 5 * time.Minute},
		TolerateStoreErrors: true, ClockSkew: skew, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		r.Violations = err.Error()
		return r
	}
	o := sim.ChaosOptions{}
	if th != nil {
		o.Throttle = th.SetRate
	}
	res, err := s.Chaos(o)
	if err != nil {
		r.Violations = err.Error()
	}
	r.Rounds, r.Kills, r.Restarts, r.CoordinatorCrashes, r.StoreErrors = res.Rounds, res.Kills, res.Restarts, res.CoordinatorCrashes, res.StoreErrors
	r.Repos, r.Added, r.Deleted = res.Repos, res.Added, res.Deleted
	r.Lost, r.LeftOver, r.NotMirrored = len(res.Lost), len(res.LeftOver), len(res.NotMirrored)
	r.Seconds = time.Since(start).Seconds()
	return r
}
