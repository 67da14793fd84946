package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/schedulerfake"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/sim"
	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// fleetResult is what one fleet size yields.
type fleetResult struct {
	measurements []results.StoreCostMeasurement
	itemSizes    []results.StoreCostItemSize
}

// runFleet measures a fleet of repos repos and workers workers: a quiet tick, heartbeats,
// a worker joining, and a worker dying (its death timer firing).
func runFleet(ctx context.Context, log, quiet *slog.Logger, endpoint string, repos, workers int, sizes bool) (fleetResult, error) {
	var out fleetResult
	f, err := newFleet(ctx, quiet, endpoint, fleetConfig{name: fmt.Sprintf("fleet%d", repos), workers: workers, seed: uint64(repos),
		coordinator: coordinator.Config{Warmup: coordinator.NoWarmup}})
	if err != nil {
		return out, err
	}
	defer f.close()
	f.repos = repos
	t0 := time.Now()
	if err := f.s.AddRepos(repos, 48*time.Hour); err != nil {
		return out, fmt.Errorf("add repos: %w", err)
	}
	if err := f.settle(20 * time.Minute); err != nil {
		return out, err
	}
	// A few quiet minutes: acked outbox entries are trimmed, nothing is left pending.
	if err := f.runFor(3 * time.Minute); err != nil {
		return out, err
	}
	log.Info("fleet settled", "repos", repos, "workers", workers, "took", time.Since(t0).Round(time.Second))
	add := func(m results.StoreCostMeasurement, err error) error {
		if err == nil {
			out.measurements = append(out.measurements, m)
		}
		return err
	}
	coord := f.s.Coords[0]

	// A quiet tick as the Lambda runs it: the tick, then CountRepos for its metrics.
	const ticks = 3
	if err := add(f.measure(fmt.Sprintf("idle_tick_%d", repos), "coordinator tick, nothing to do (tick + CountRepos for metrics)", ticks, func() error {
		for range ticks {
			rep, err := coord.Tick(ctx)
			if err != nil {
				return err
			}
			if rep.Moved+rep.Deleted > 0 || !rep.Leader {
				return fmt.Errorf("quiet tick was not quiet: %+v", rep)
			}
			if _, err := f.st.CountRepos(ctx); err != nil {
				return err
			}
		}
		return nil
	})); err != nil {
		return out, err
	}
	if err := add(f.measure(fmt.Sprintf("heartbeat_%d", repos), "worker heartbeat (Heartbeat + ReadOutbox, nothing new)", len(f.s.Nodes), func() error {
		return heartbeatAll(ctx, f.s.Nodes)
	})); err != nil {
		return out, err
	}

	// A worker joins: it registers, then the next tick adds it to the ring and moves its
	// arcs' repos; every worker's next heartbeat reads what moved.
	nw := f.s.AddWorker()
	if err := add(f.measure(fmt.Sprintf("worker_join_%d", repos), "worker registers (ClaimSlot, first heartbeat)", 1, func() error {
		return nw.W.Heartbeat(ctx)
	})); err != nil {
		return out, err
	}
	var rep coordinator.Report
	m, err := f.measure(fmt.Sprintf("join_tick_%d", repos), "tick that adds a joining worker and moves its repos", 1, func() error {
		var err error
		rep, err = coord.Tick(ctx)
		return err
	})
	m.Moved = rep.Moved
	if err := add(m, err); err != nil {
		return out, err
	}
	if rep.Moved == 0 {
		return out, fmt.Errorf("join moved nothing: %+v", rep)
	}
	if err := add(f.measure(fmt.Sprintf("join_heartbeats_%d", repos), "every worker's next heartbeat after the join (reads the moves)", 1, func() error {
		return heartbeatAll(ctx, f.s.Nodes)
	})); err != nil {
		return out, err
	}
	out.measurements[len(out.measurements)-1].Moved = rep.Moved
	if err := f.settle(10 * time.Minute); err != nil {
		return out, fmt.Errorf("after the join: %w", err)
	}
	if err := f.runFor(2 * time.Minute); err != nil {
		return out, err
	}

	// A worker dies: silent, it turns suspect (its death timer armed once); once the
	// grace has passed, a minute tick or the timer's firing, whichever
	// comes first, declares it dead and moves its repos. Every tick and firing of this
	// phase is metered; the one that declares the death is kept.
	victim := f.s.Nodes[1]
	victimID := victim.W.ID()
	f.s.Silence(victim, 3*time.Hour)
	var death *results.StoreCostMeasurement
	var suspects []results.StoreCostMeasurement
	firings := 0
	watch := func(ctx context.Context, by string, run func() (coordinator.Report, error)) error {
		if death != nil {
			_, err := run()
			return err
		}
		var rep coordinator.Report
		m, err := f.measure(fmt.Sprintf("death_tick_%d", repos), "tick that declares a silent worker dead and moves its repos", 1, func() error {
			var err error
			rep, err = run()
			return err
		})
		if err != nil {
			return err
		}
		w, err := f.st.GetWorker(ctx, victimID)
		if err != nil {
			return err
		}
		switch {
		case w.State == store.WorkerDead:
			m.Moved, m.Note = rep.Moved, "declared dead by the "+by
			death = &m
		case w.State == store.WorkerSuspect && by == "minute tick":
			suspects = append(suspects, m)
		}
		return nil
	}
	f.onTick = func(ctx context.Context) error {
		return watch(ctx, "minute tick", func() (coordinator.Report, error) { return coord.Tick(ctx) })
	}
	f.onFire = func(ctx context.Context, d schedulerfake.Delivery) error {
		if strings.Contains(string(d.Input), victimID) {
			firings++
		}
		return watch(ctx, "death timer", func() (coordinator.Report, error) { return coord.OnTimer(ctx, d.Input) })
	}
	defer func() { f.onTick, f.onFire = nil, nil }()
	for end := f.s.Now().Add(15 * time.Minute); death == nil; {
		if !f.s.Now().Before(end) {
			return out, errors.New("the silent worker was never declared dead")
		}
		if err := f.step(); err != nil {
			return out, err
		}
	}
	// The death timer fires once whichever way the death was declared (a firing after
	// the death runs one more, quiet, tick).
	if _, err := f.runUntil(5*time.Minute, 30*time.Second, func() (bool, error) { return firings > 0, nil }); err != nil {
		return out, err
	}
	death.SchedulerInvocations = float64(firings)
	if firings > 0 && !strings.HasSuffix(death.Note, "timer") {
		death.Note += "; its death timer fired afterwards and ran one more, quiet, tick"
	}
	if death.Moved == 0 {
		return out, fmt.Errorf("death moved nothing: %+v", *death)
	}
	if len(suspects) == 0 {
		return out, errors.New("no tick saw the silent worker suspect")
	}
	sm := average(suspects)
	sm.Key, sm.Name = fmt.Sprintf("suspect_tick_%d", repos), "tick with a suspect worker"
	sm.Note = fmt.Sprintf("mean of the %d ticks between the worker turning suspect and its death", len(suspects))
	out.measurements = append(out.measurements, sm, *death)
	var alive []*sim.Node
	for _, n := range f.s.Nodes {
		if n != victim {
			alive = append(alive, n)
		}
	}
	if err := add(f.measure(fmt.Sprintf("death_heartbeats_%d", repos), "every live worker's next heartbeat after the death (reads the moves)", 1, func() error {
		return heartbeatAll(ctx, alive)
	})); err != nil {
		return out, err
	}
	out.measurements[len(out.measurements)-1].Moved = death.Moved
	if err := f.settle(10 * time.Minute); err != nil {
		return out, fmt.Errorf("after the death: %w", err)
	}
	if sizes {
		if out.itemSizes, err = f.itemSizes(ctx); err != nil {
			return out, err
		}
	}
	log.Info("fleet measured", "repos", repos, "took", time.Since(t0).Round(time.Second))
	return out, nil
}

// average is the mean of measurements of one event kind (each of Count 1).
func average(ms []results.StoreCostMeasurement) results.StoreCostMeasurement {
	out := ms[0]
	n := len(ms)
	var total results.StoreCostUnits
	by := map[string]*results.StoreCostUnits{}
	var names []string
	sched, inv, wall := 0.0, 0.0, 0.0
	for _, m := range ms {
		add(&total, m.Total)
		for _, op := range m.Ops {
			u := by[op.Op]
			if u == nil {
				u = &results.StoreCostUnits{}
				by[op.Op] = u
				names = append(names, op.Op)
			}
			add(u, op.StoreCostUnits)
		}
		sched += m.SchedulerAPICalls
		inv += m.SchedulerInvocations
		wall += m.WallMillis
	}
	slices.Sort(names)
	out.Ops = nil
	for _, name := range names {
		out.Ops = append(out.Ops, results.StoreCostOp{Op: name, StoreCostUnits: scale(*by[name], n)})
	}
	out.Count, out.Total = n, scale(total, n)
	out.SchedulerAPICalls, out.SchedulerInvocations, out.WallMillis = sched/float64(n), inv/float64(n), wall/float64(n)
	return out
}

func heartbeatAll(ctx context.Context, nodes []*sim.Node) error {
	for _, n := range nodes {
		if err := n.W.Heartbeat(ctx); err != nil {
			return err
		}
	}
	return nil
}

// itemSizes scans the table and sizes its records by kind (the partition key's prefix).
func (f *fleet) itemSizes(ctx context.Context) ([]results.StoreCostItemSize, error) {
	type agg struct {
		n, sum, max int
	}
	by := map[string]*agg{}
	note := func(k string, s int) {
		a := by[k]
		if a == nil {
			a = &agg{}
			by[k] = a
		}
		a.n++
		a.sum += s
		a.max = max(a.max, s)
	}
	in := &dynamodb.ScanInput{TableName: aws.String(f.st.Table())}
	for {
		out, err := f.m.side.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		for _, it := range out.Items {
			k := kindOf(it)
			note(k, itemSize(it))
			if k == "repo" {
				idx := 0
				for _, g := range f.m.indexes {
					if e := g.entry(it, f.m.tableKeys); e != nil {
						idx += itemSize(e) + 100
					}
				}
				note(repoIndexKind, idx)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	var res []results.StoreCostItemSize
	for _, k := range kindOrder {
		if a, ok := by[k]; ok {
			res = append(res, results.StoreCostItemSize{Kind: k, Count: a.n, MeanSize: float64(a.sum) / float64(a.n), MaxSize: a.max})
		}
	}
	return res, nil
}

var kindOrder = []string{"repo", repoIndexKind, "worker", "outbox entry", "election", "ring head", "ring chunk", "slot", "counter shard", "list sync"}

func kindOf(it map[string]types.AttributeValue) string {
	pk, _ := it["pk"].(*types.AttributeValueMemberS)
	sk, _ := it["sk"].(*types.AttributeValueMemberS)
	if pk == nil || sk == nil {
		return "other"
	}
	switch {
	case strings.HasPrefix(pk.Value, "REPO#"):
		return "repo"
	case pk.Value == "WORKERS":
		return "worker"
	case strings.HasPrefix(pk.Value, "OUTBOX#"):
		return "outbox entry"
	case pk.Value == "ELECTION":
		return "election"
	case pk.Value == "RING" && sk.Value == "HEAD":
		return "ring head"
	case pk.Value == "RING":
		return "ring chunk"
	case pk.Value == "SLOTS":
		return "slot"
	case pk.Value == "COUNTS":
		return "counter shard"
	case pk.Value == "LISTSYNC":
		return "list sync"
	}
	return "other"
}

// pollResult is what the poll scenario yields.
type pollResult struct {
	measurements []results.StoreCostMeasurement
}

// runPolls measures polls on a small fleet for over the checkpoint interval: no-change
// polls (no store call at all), polls that found a change (ReportFetch), and the
// checkpoint writes a no-change poll makes once the record is older than the interval.
// It ends with a repo added through the API's store path and the tick that assigns it.
func runPolls(ctx context.Context, log *slog.Logger, endpoint string, checkpoint time.Duration) (pollResult, error) {
	var out pollResult
	const static, active = 40, 10
	// Steps of a heartbeat interval: six simulated hours stay cheap to run.
	f, err := newFleet(ctx, log, endpoint, fleetConfig{name: "polls", workers: 1, seed: 1, step: 10 * time.Second,
		coordinator: coordinator.Config{Warmup: coordinator.NoWarmup}})
	if err != nil {
		return out, err
	}
	defer f.close()
	f.repos = static + active
	start := f.s.Now()
	for i := range static + active {
		up := &sim.Upstream{URL: fmt.Sprintf("https://git.example.org/polls/repo%d", i)}
		up.Commits = []time.Time{start.Add(-48 * time.Hour), start.Add(-24 * time.Hour)}
		if i >= static { // a commit every 30 minutes
			for t := start.Add(30 * time.Minute); t.Before(start.Add(checkpoint + 2*time.Hour)); t = t.Add(30 * time.Minute) {
				up.Commits = append(up.Commits, t)
			}
		}
		if err := f.s.AddRepo(up); err != nil {
			return out, fmt.Errorf("add repo: %w", err)
		}
	}
	if err := f.settle(10 * time.Minute); err != nil {
		return out, err
	}
	cloned := f.s.Now()

	// Every fetch, with the meter's position when it happened: the store calls a poll
	// makes come after its fetch and before the next.
	type poll struct {
		changed bool
		mark    int
	}
	var polls []poll
	f.s.Storage.OnFetch = func(ev sim.FetchEvent) { polls = append(polls, poll{ev.Changed, f.m.mark()}) }
	f.m.start()
	if err := f.runFor(checkpoint + 15*time.Minute); err != nil {
		return out, err
	}
	calls, err := f.m.stop()
	f.s.Storage.OnFetch = nil
	if err != nil {
		return out, fmt.Errorf("meter: %w", err)
	}
	var changed, checkpointed []*call
	nChanged, nQuiet, nCheckpoint := 0, 0, 0
	for i, p := range polls {
		end := len(calls)
		if i+1 < len(polls) {
			end = polls[i+1].mark
		}
		var mine []*call
		for _, c := range calls[p.mark:end] {
			if strings.HasPrefix(c.op, "ReportFetch/") || strings.HasPrefix(c.op, "HandBack/") {
				mine = append(mine, c)
			}
		}
		switch {
		case p.changed:
			nChanged++
			changed = append(changed, mine...)
		case len(mine) == 0:
			nQuiet++
		default:
			nCheckpoint++
			checkpointed = append(checkpointed, mine...)
		}
	}
	if nQuiet == 0 || nChanged == 0 || nCheckpoint == 0 {
		return out, fmt.Errorf("poll window saw %d no-change, %d changed, %d checkpoint polls: want all three", nQuiet, nChanged, nCheckpoint)
	}
	mk := func(key, name string, n int, cs []*call, note string) results.StoreCostMeasurement {
		total, ops := aggregate(cs, n)
		return results.StoreCostMeasurement{Key: key, Name: name, Repos: f.repos, Workers: 1, Count: n, Total: total, Ops: ops, Note: note}
	}
	out.measurements = append(out.measurements,
		mk("poll_nochange", "poll that finds nothing new", nQuiet, nil,
			fmt.Sprintf("%d no-change polls over %s made no store call at all (invariant 6)", nQuiet, checkpoint.Round(time.Minute))),
		mk("poll_change", "poll that found a change (ReportFetch)", nChanged, changed, ""),
		mk("poll_checkpoint", "no-change poll with the record older than the checkpoint interval (ReportFetch)", nCheckpoint, checkpointed,
			fmt.Sprintf("first no-change poll %s after the last write", checkpoint.Round(time.Minute))))
	log.Info("polls measured", "no_change", nQuiet, "changed", nChanged, "checkpoint", nCheckpoint, "window", f.s.Now().Sub(cloned).Round(time.Minute))

	// A worker's read of its signal item, as it makes one a second (nothing pending).
	wid := f.s.Nodes[0].W.ID()
	const reads = 10
	m, err := f.measure("signal_read", "a worker's read of its signal item (GetSignals, nothing pending): one a second per worker", reads, func() error {
		for range reads {
			if _, err := f.st.GetSignals(ctx, wid); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	out.measurements = append(out.measurements, m)

	// A repo added as the API adds it, then the tick that assigns it.
	m, err = f.measure("add_repo", "add a repo (API path: api.AddRepo → CreateRepo)", 1, func() error {
		res := api.AddRepo(ctx, f.s.Store, urlpolicy.Default(), "https://git.example.org/polls/added", store.SourceAPI, f.s.Now())
		if res.Err == nil && !res.Created {
			return errors.New("repo not created")
		}
		return res.Err
	})
	if err != nil {
		return out, err
	}
	out.measurements = append(out.measurements, m)
	var rep coordinator.Report
	m, err = f.measure("assign_tick", "tick that assigns one new repo", 1, func() error {
		var err error
		rep, err = f.s.Coords[0].Tick(ctx)
		return err
	})
	if err != nil {
		return out, err
	}
	m.Moved = rep.Moved
	out.measurements = append(out.measurements, m)
	return out, nil
}
