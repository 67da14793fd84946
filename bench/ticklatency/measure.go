package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
)

// ks are the change counts measured beside the quiet (k = 0) ticks.
var ks = []int{10, 100, 1000}

// changeKinds are the changes a tick is timed deciding. Both go through the
// needs-decision index, which is how the API and the workers hand work to the coordinator.
var changeKinds = []results.ChangeKind{
	{Name: "add", Description: "k repos added through the API (pending) since the last tick; the tick assigns each one: " +
		"an owner write plus an `add` outbox entry, batched into Apply calls of at most 99 items"},
	{Name: "delete", Description: "k repos marked for deletion through the API since the last tick; the tick removes each " +
		"record and sends its owner a `purge` entry"},
}

// reps is how many times each measurement repeats at one grid point.
type reps struct {
	quiet   int
	changes map[int]int // per k
	naive   int         // naive ticks and bare full scans each
	cycles  int         // join + death cycles
}

// repsFor keeps the run inside its time budget: what costs O(repos) per sample gets
// fewer samples at the larger sizes.
func repsFor(repos int) reps {
	switch {
	case repos <= 1000:
		return reps{quiet: 200, changes: map[int]int{10: 50, 100: 30, 1000: 8}, naive: 30, cycles: 8}
	case repos <= 10000:
		return reps{quiet: 200, changes: map[int]int{10: 50, 100: 30, 1000: 8}, naive: 10, cycles: 4}
	case repos <= 100000:
		return reps{quiet: 200, changes: map[int]int{10: 30, 100: 20, 1000: 6}, naive: 3, cycles: 2}
	default:
		return reps{quiet: 100, changes: map[int]int{10: 20, 100: 10, 1000: 4}, naive: 2, cycles: 1}
	}
}

// measureCell times every kind of tick on a settled fleet of the given size. The fleet
// ends settled with the same number of repos and workers.
func measureCell(ctx context.Context, log *slog.Logger, f *fleet, repos, workers int, r reps) (results.TickCell, error) {
	cell := results.TickCell{Repos: repos, Workers: workers}
	// Each phase starts from a collected heap, so a tick's peak heap is not the garbage of
	// the phase before (the baseline's full scans leave a whole table of it).
	runtime.GC()
	quiet, err := quietTicks(ctx, f, r.quiet)
	if err != nil {
		return cell, err
	}
	cell.Quiet = summarize(quiet)
	lists := 0
	for _, t := range quiet {
		if t.lists > 0 {
			lists++
		}
	}
	cell.QuietWorkerReads = round(float64(lists) / float64(max(len(quiet), 1)))
	log.Info("quiet ticks", "repos", repos, "workers", workers, "p50_ms", cell.Quiet.P50Ms, "p99_ms", cell.Quiet.P99Ms,
		"worker_reads", cell.QuietWorkerReads)

	for _, k := range ks {
		if k > repos || r.changes[k] == 0 {
			continue // k above the fleet's size would no longer be "a few changes to many repos"
		}
		runtime.GC()
		add, del, err := changeTicks(ctx, f, k, r.changes[k])
		if err != nil {
			return cell, err
		}
		for kind, ts := range map[string][]tickResult{"add": add, "delete": del} {
			cl := results.ChangeLatency{Kind: kind, K: k, Latency: summarize(ts)}
			decided := 0
			for _, t := range ts {
				decided += t.rep.Assigned + t.rep.Deleted
			}
			cl.Decisions = round(float64(decided) / float64(len(ts)))
			cell.Changes = append(cell.Changes, cl)
		}
		log.Info("change ticks", "repos", repos, "workers", workers, "k", k,
			"add_p50_ms", summarize(add).P50Ms, "delete_p50_ms", summarize(del).P50Ms)
	}
	sortChanges(cell.Changes)

	runtime.GC()
	naive, scans, err := baseline(ctx, f, r.naive)
	if err != nil {
		return cell, err
	}
	cell.NaiveQuiet, cell.FullScan = summarize(naive), summarize(scans)
	log.Info("baseline", "repos", repos, "workers", workers, "naive_p50_ms", cell.NaiveQuiet.P50Ms, "scan_p50_ms", cell.FullScan.P50Ms)

	runtime.GC()
	joins, deaths, err := membershipTicks(ctx, f, r.cycles)
	if err != nil {
		return cell, err
	}
	cell.Join, cell.Death = membership(joins), membership(deaths)
	log.Info("join and death", "repos", repos, "workers", workers, "join_p50_ms", cell.Join.P50Ms, "join_moved", cell.Join.Moved,
		"join_read", cell.Join.ReposRead, "death_p50_ms", cell.Death.P50Ms, "death_moved", cell.Death.Moved)
	return cell, nil
}

func sortChanges(cs []results.ChangeLatency) {
	order := map[string]int{}
	for i, k := range changeKinds {
		order[k.Name] = i
	}
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && (order[cs[j].Kind] < order[cs[j-1].Kind] ||
			order[cs[j].Kind] == order[cs[j-1].Kind] && cs[j].K < cs[j-1].K); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// quiesce steps, untimed, until the workers have acked everything and the coordinator
// has trimmed their outboxes (at most Config.MaxTrim entries a worker a tick, so a bulk
// add's outboxes take several ticks): until two heartbeat rounds and a worker read
// write nothing. It also warms caches.
func quiesce(ctx context.Context, f *fleet) error {
	// A kept plan reads the workers (and sees their acks) only when a silence could
	// reach SuspectAfter: a whole round is that as well as two heartbeats.
	round := int((2*heartbeatEvery+coordinator.DefaultConfig().SuspectAfter)/tickEvery) + 1
	for quiet, i := 0, 0; quiet < round; i++ {
		if i == 1000 {
			return errors.New("quiesce: the coordinator still writes after 1,000 ticks")
		}
		t, err := f.step(ctx)
		if err != nil {
			return err
		}
		if t.rep.Writes > 0 || t.rep.Moved+t.rep.Deleted > 0 {
			quiet = 0
		} else {
			quiet++
		}
	}
	return nil
}

// quietTicks times n ticks with nothing to decide, failing if any tick reads a repo or
// writes anything but its election record.
func quietTicks(ctx context.Context, f *fleet, n int) ([]tickResult, error) {
	if err := quiesce(ctx, f); err != nil {
		return nil, err
	}
	out := make([]tickResult, 0, n)
	for range n {
		t, err := f.step(ctx)
		if err != nil {
			return nil, err
		}
		// The anti-entropy sweep reads a paced slice of repos on some quiet ticks: its
		// cost is part of a quiet tick's; nothing else may read or write.
		if t.rep.Moved+t.rep.Deleted+t.rep.Skipped+t.rep.Writes > 0 || t.read > t.rep.SweepRead {
			return nil, fmt.Errorf("quiet tick was not quiet: moved %d, deleted %d, %d writes, read %d repos (%d by the sweep)",
				t.rep.Moved, t.rep.Deleted, t.rep.Writes, t.read, t.rep.SweepRead)
		}
		out = append(out, t)
	}
	return out, nil
}

// changeTicks times n ticks that each assign k newly added repos and n ticks that each
// delete those k again, so the fleet keeps its size. Each tick must decide exactly k.
func changeTicks(ctx context.Context, f *fleet, k, n int) (adds, dels []tickResult, err error) {
	for range n {
		ids, err := f.createRepos(ctx, k)
		if err != nil {
			return nil, nil, err
		}
		t, err := f.step(ctx)
		if err != nil {
			return nil, nil, err
		}
		if t.rep.Assigned != k || t.rep.Moved != k {
			return nil, nil, fmt.Errorf("add tick assigned %d (moved %d), want %d", t.rep.Assigned, t.rep.Moved, k)
		}
		adds = append(adds, t)
		if err := f.requestDelete(ctx, ids); err != nil {
			return nil, nil, err
		}
		t, err = f.step(ctx)
		if err != nil {
			return nil, nil, err
		}
		if t.rep.Deleted != k {
			return nil, nil, fmt.Errorf("delete tick deleted %d, want %d", t.rep.Deleted, k)
		}
		dels = append(dels, t)
	}
	return adds, dels, nil
}

// baseline times n naive ticks (the same Tick reading every repo instead of the
// needs-decision index) and n bare scans of the repo table.
func baseline(ctx context.Context, f *fleet, n int) (naive, scans []tickResult, err error) {
	if err := quiesce(ctx, f); err != nil {
		return nil, nil, err
	}
	f.probe.naive = true
	defer func() { f.probe.naive = false }()
	for range n {
		t, err := f.step(ctx)
		if err != nil {
			return nil, nil, err
		}
		if t.rep.Moved+t.rep.Deleted+t.rep.Writes > 0 {
			return nil, nil, fmt.Errorf("naive quiet tick moved %d, deleted %d, wrote %d times", t.rep.Moved, t.rep.Deleted, t.rep.Writes)
		}
		naive = append(naive, t)
	}
	for range n {
		start := time.Now()
		rs, err := scanAll(ctx, f.st)
		if err != nil {
			return nil, nil, err
		}
		scans = append(scans, tickResult{dur: time.Since(start), read: len(rs)})
	}
	return naive, scans, nil
}

// change is one membership change: its first tick, which changes the ring, and the
// ticks after it until none of its repos is left to move (a change larger than a
// tick's caps and deadline takes several).
type change []tickResult

// total sums a change's ticks into one result: its time, reads, moves and writes; the
// peak heap is the largest of its ticks'.
func (c change) total() tickResult {
	var t tickResult
	for _, x := range c {
		t.dur += x.dur
		t.read += x.read
		t.heap = max(t.heap, x.heap)
		t.rep.Moved += x.rep.Moved
		t.rep.Writes += x.rep.Writes
		t.rep.SweepRead += x.rep.SweepRead
	}
	return t
}

// follow ticks on after a membership change's first tick until its scans are done.
func (f *fleet) follow(ctx context.Context, first tickResult) (change, error) {
	c := change{first}
	for t := first; t.rep.ScansLeft > 0; {
		if len(c) == maxChangeTicks {
			return c, fmt.Errorf("%d ranges of the ring still to scan after %d ticks", t.rep.ScansLeft, len(c))
		}
		var err error
		if t, err = f.step(ctx); err != nil {
			return c, err
		}
		c = append(c, t)
	}
	return c, nil
}

// maxChangeTicks bounds the ticks of one join or death: at 100,000 repos a worker a
// change moves about 100,000, two or three ticks' worth.
const maxChangeTicks = 50

// settleTicks bounds the ticks a fleet takes to settle after moving n repos: the
// outbox entries of the moves are trimmed at most Config.MaxTrim a worker a tick.
func settleTicks(n int) int {
	return 10 + 2*n/int(coordinator.DefaultConfig().MaxTrim)
}

// membershipTicks runs n cycles of: a worker joins (timed ticks), then a random worker
// falls silent and is declared dead when its grace ends (timed ticks), then its record
// is cleaned up. The worker count is back where it started after each cycle.
func membershipTicks(ctx context.Context, f *fleet, n int) (joins, deaths []change, err error) {
	cfg := coordinator.DefaultConfig()
	for range n {
		before := len(f.live)
		if _, err := f.addWorker(ctx); err != nil {
			return nil, nil, err
		}
		t, err := f.step(ctx)
		if err != nil {
			return nil, nil, err
		}
		if t.rep.Members != before+1 || t.rep.Moved == 0 {
			return nil, nil, fmt.Errorf("join tick: %d members (want %d), moved %d", t.rep.Members, before+1, t.rep.Moved)
		}
		join, err := f.follow(ctx, t)
		if err != nil {
			return nil, nil, fmt.Errorf("join: %w", err)
		}
		joins = append(joins, join)
		if _, err := f.settle(ctx, settleTicks(join.total().rep.Moved)); err != nil { // acks and trims of the join
			return nil, nil, err
		}

		victim := f.live[f.rng.IntN(len(f.live))]
		f.kill(victim)
		// First the tick that finds it silent (suspect: nothing moves), then the one at
		// the end of its grace, which moves its repos.
		f.clk.Advance(cfg.SuspectAfter)
		if _, err := f.step(ctx); err != nil {
			return nil, nil, err
		}
		f.clk.Advance(cfg.Grace)
		t, err = f.step(ctx)
		if err != nil {
			return nil, nil, err
		}
		if t.rep.Members != before || t.rep.Moved == 0 {
			return nil, nil, fmt.Errorf("death tick: %d members (want %d), moved %d", t.rep.Members, before, t.rep.Moved)
		}
		death, err := f.follow(ctx, t)
		if err != nil {
			return nil, nil, fmt.Errorf("death: %w", err)
		}
		deaths = append(deaths, death)
		// The dead worker's record goes once it has owned nothing for KeepDead.
		f.clk.Advance(cfg.KeepDead)
		if _, err := f.settle(ctx, settleTicks(death.total().rep.Moved)); err != nil {
			return nil, nil, err
		}
	}
	return joins, deaths, nil
}
