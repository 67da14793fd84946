package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/schedulerfake"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/sim"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
	"github.com/mirrorfleet/mirrorfleet/shared/timer/scheduler"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// endpointEnv names the DynamoDB Local endpoint.
const endpointEnv = dynamotest.EndpointEnv

// Scheduler identities of the fake: only their shape is checked.
const (
	scheduleGroup = "mirrorfleet-timers"
	lambdaARN     = "arn:aws:lambda:us-east-1:000000000000:function:mirrorfleet-coordinator"
	roleARN       = "arn:aws:iam::000000000000:role/mirrorfleet-scheduler"
)

// newClient is DynamoDB Local's client (dynamotest's: its credentials and region) for
// endpoint over rt.
func newClient(endpoint string, rt http.RoundTripper) *dynamodb.Client {
	return dynamotest.Client(endpoint, func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: rt, Timeout: 2 * time.Minute}
	})
}

func transport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 16
	return t
}

// fleetConfig describes one simulated fleet on its own fresh table.
type fleetConfig struct {
	name        string
	workers     int
	seed        uint64
	step        time.Duration
	coordinator coordinator.Config
	worker      worker.Config
}

// fleet is a simulated fleet — the real coordinator and workers — on the dynamo store,
// with the coordinator's timers on the real Scheduler timer over a fake Scheduler API.
type fleet struct {
	ctx   context.Context
	log   *slog.Logger
	m     *meter
	st    *dynamo.Store
	s     *sim.Sim
	fake  *schedulerfake.Fake
	repos int
	// The fleet runs the coordinator's minute tick itself (the simulation's own tick is
	// pushed out of reach), so a tick can be metered alone.
	nextTick time.Time
	// onTick and onFire, if set, run the tick and handle Scheduler firings instead of
	// the coordinator's Tick and OnTimer.
	onTick func(ctx context.Context) error
	onFire func(ctx context.Context, d schedulerfake.Delivery) error
}

// tickEvery is the stack's EventBridge rule: a coordinator tick a minute.
const tickEvery = time.Minute

func newFleet(ctx context.Context, log *slog.Logger, endpoint string, cfg fleetConfig) (*fleet, error) {
	m := newMeter(transport())
	side := newClient(endpoint, transport())
	table := fmt.Sprintf("storecost_%s_%d", cfg.name, time.Now().UnixNano()%1_000_000_000)
	st, err := dynamo.New(ctx, dynamo.Config{Client: newClient(endpoint, m), Table: table, OnConsumed: m.consumed, Log: log})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := st.CreateTable(ctx); err != nil {
		return nil, fmt.Errorf("create table %s: %w", table, err)
	}
	f := &fleet{ctx: ctx, log: log, m: m, st: st}
	if err := m.describe(ctx, side, table); err != nil {
		f.close()
		return nil, err
	}
	// The simulation ticks once, at its first step; the fleet ticks after that.
	s, err := sim.New(ctx, sim.Config{Seed: cfg.seed, Store: st, Workers: cfg.workers, Tick: 10000 * time.Hour, Step: cfg.step,
		Coordinator: cfg.coordinator, Worker: cfg.worker, Log: log, CheckEvery: 1 << 30})
	if err != nil {
		f.close()
		return nil, fmt.Errorf("sim: %w", err)
	}
	f.s = s
	f.nextTick = s.Now().Add(tickEvery)
	f.fake = schedulerfake.New(schedulerfake.Options{Now: s.Clock.Now, Groups: []string{scheduleGroup}})
	tm, err := scheduler.New(scheduler.Config{Client: f.fake.Client(), Group: scheduleGroup, TargetARN: lambdaARN,
		RoleARN: roleARN, Clock: s.Clock, Log: log})
	if err != nil {
		f.close()
		return nil, fmt.Errorf("scheduler timer: %w", err)
	}
	for _, c := range s.Coords {
		c.Timer = tm
	}
	return f, nil
}

// close deletes the table and stops the fake.
func (f *fleet) close() {
	if f.fake != nil {
		f.fake.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.st.DeleteTable(ctx); err != nil {
		f.log.Warn("delete table", "table", f.st.Table(), "err", err)
	}
}

// step advances the simulation one step (heartbeats, fetches), runs the tick when one
// is due, then delivers the Scheduler firings due.
func (f *fleet) step() error {
	if err := f.s.Step(); err != nil {
		return fmt.Errorf("sim step: %w", err)
	}
	if now := f.s.Now(); !now.Before(f.nextTick) {
		f.nextTick = now.Add(tickEvery)
		if err := f.tick(f.ctx); err != nil {
			return fmt.Errorf("tick: %w", err)
		}
	}
	if _, err := f.fake.FireDue(f.ctx, f.s.Now(), f.deliver); err != nil {
		return fmt.Errorf("timer firing: %w", err)
	}
	return nil
}

func (f *fleet) tick(ctx context.Context) error {
	if f.onTick != nil {
		return f.onTick(ctx)
	}
	_, err := f.s.Coords[0].Tick(ctx)
	return err
}

func (f *fleet) deliver(ctx context.Context, d schedulerfake.Delivery) error {
	if f.onFire != nil {
		return f.onFire(ctx, d)
	}
	_, err := f.s.Coords[0].OnTimer(ctx, d.Input)
	return err
}

func (f *fleet) runFor(d time.Duration) error {
	end := f.s.Now().Add(d)
	for f.s.Now().Before(end) {
		if err := f.step(); err != nil {
			return err
		}
	}
	return nil
}

// runUntil steps until cond holds (checked every `every` of simulated time) or d passes.
func (f *fleet) runUntil(d, every time.Duration, cond func() (bool, error)) (bool, error) {
	end := f.s.Now().Add(d)
	next := f.s.Now()
	for f.s.Now().Before(end) {
		if !f.s.Now().Before(next) {
			ok, err := cond()
			if err != nil || ok {
				return ok, err
			}
			next = f.s.Now().Add(every)
		}
		if err := f.step(); err != nil {
			return false, err
		}
	}
	return cond()
}

// settled: every repo owned by its ring owner, held by it, and mirrored (state ok).
func (f *fleet) settled() (bool, error) {
	if err := f.s.Settled(); err != nil {
		return false, nil
	}
	rs, err := f.s.AllRepos()
	if err != nil {
		return false, err
	}
	for _, r := range rs {
		if r.State != store.RepoOK {
			return false, nil
		}
	}
	return true, nil
}

func (f *fleet) settle(d time.Duration) error {
	ok, err := f.runUntil(d, 30*time.Second, f.settled)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("fleet %s did not settle within %s: %v", f.st.Table(), d, f.s.Settled())
	}
	return nil
}

// liveWorkers counts worker processes that are not stopped.
func (f *fleet) liveWorkers() int {
	n := 0
	for _, nd := range f.s.Nodes {
		if nd.W.ID() != "" {
			n++
		}
	}
	return n
}

// measure meters fn as count events of one kind.
func (f *fleet) measure(key, name string, count int, fn func() error) (results.StoreCostMeasurement, error) {
	sched := len(f.fake.Calls())
	f.m.start()
	t0 := time.Now()
	err := fn()
	wall := time.Since(t0)
	calls, merr := f.m.stop()
	if err != nil {
		return results.StoreCostMeasurement{}, fmt.Errorf("%s: %w", key, err)
	}
	if merr != nil {
		return results.StoreCostMeasurement{}, fmt.Errorf("%s: meter: %w", key, merr)
	}
	total, ops := aggregate(calls, count)
	return results.StoreCostMeasurement{Key: key, Name: name, Repos: f.repos, Workers: f.liveWorkers(), Count: count,
		Total: total, Ops: ops, SchedulerAPICalls: float64(len(f.fake.Calls())-sched) / float64(count),
		WallMillis: float64(wall.Microseconds()) / 1000 / float64(count)}, nil
}
