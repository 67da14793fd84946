// Command ticklatency measures the wall-clock latency of one coordinator tick
// (coordinator.Tick, the code the coordinator Lambda runs) against the number of repos,
// workers and changes, beside a naive coordinator that reads every repo each tick, and
// writes bench/results/ticklatency.json.
//
// Each grid point is a settled fleet on a bbolt store (NoSync, temp dir): the repos are
// created through the store as the API would and assigned by the coordinator itself.
// Workers are played by their store calls (claim a slot, heartbeat, ack the outbox), time
// between ticks is virtual, and only Tick itself is timed, in real time.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
)

// The grids. A (repos, workers) pair is measured when each worker holds between 100
// and 100,000 repos (gridCell): a worker with fewer has little for a join to move; at
// 100,000 a worker (1M repos on 10) a join or death moves more than one tick's caps.
var (
	repoSizes    = []int{1000, 10000, 100000, 1000000}
	workerCounts = []int{10, 100, 1000}
	// dynamoCells are the DynamoDB Local grid's (repos, workers) pairs, in order.
	dynamoCells = [][2]int{{1000, 10}, {5000, 10}, {100000, 100}}
)

func gridCell(repos, workers int) bool {
	per := repos / workers
	return per >= 100 && per <= 100000
}

// options are the run's knobs; tests shrink the grid and the repetitions.
type options struct {
	out       string
	maxRepos  int
	dynamoMax int
	seed      uint64
	restart   int   // outbox entries of the restart measurement (0: skip it)
	onlyRest  bool  // only the restart measurement
	repos     []int // bbolt grid
	workers   []int
	cell      func(repos, workers int) bool // which pairs of the grid run; nil: all
	reps      func(repos int) reps
}

func main() {
	o := options{repos: repoSizes, workers: workerCounts, cell: gridCell, reps: repsFor}
	flag.StringVar(&o.out, "out", "bench/results", "directory to write ticklatency.json into")
	flag.IntVar(&o.maxRepos, "max-repos", 1000000, "largest fleet measured on bbolt")
	flag.IntVar(&o.dynamoMax, "dynamo-max-repos", 100000, "largest fleet measured on DynamoDB Local (0: skip it)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the random choices (victims of worker deaths)")
	flag.IntVar(&o.restart, "restart-entries", 100000, "outbox backlog of the restarted-worker measurement (0: skip it)")
	flag.BoolVar(&o.onlyRest, "only-restart", false, "run only the restarted-worker measurement")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(context.Background(), log, o); err != nil {
		log.Error("ticklatency", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, o options) error {
	res := results.TickLatency{Meta: results.Collect(), Seed: o.seed, Store: "bbolt (NoSync, temp dir)", Kinds: changeKinds,
		TickBudgetS: coordinator.DefaultConfig().Budget.Seconds()}
	res.Notes = []string{
		"Only Coordinator.Tick is timed (wall clock); heartbeats, repo creation and delete requests happen between ticks, untimed.",
		"Workers are simulated by their store calls: they heartbeat every 10 s of virtual time (ticks are 2 s apart) and ack the outbox head they saw at the previous heartbeat.",
		"The coordinator runs with its defaults (assignment batch doubling from 1,000 per tick, at most 50,000 moves per tick) except the first-start warm-up, which is off.",
		"Quiet ticks have heartbeats flowing between them (every fifth tick follows a round). A tick reads the worker records only when the membership changed (the workers version, on both stores; heartbeats do not move it) or a silence could reach SuspectAfter (30 s): quiet_worker_reads is the share of quiet ticks that read them.",
		"The anti-entropy sweep reads a slice of repos on some quiet ticks, paced to end a pass over every repo within 4.5 h of the coordinator's clock (virtual time between ticks plus the run's wall time); those reads are part of the quiet ticks' times, and counted apart (sweep_read, not repos_read). " +
			"A tick that works a join's or a death's scans leaves its slice to the next tick while the pass is on course (ADR 33).",
		"The naive baseline is the same Tick with its needs-decision read replaced by a scan of every repo (ListRepos, 1,000 a page).",
		"A death is timed from the tick that finds the worker past its 10 min grace; an earlier tick, past 30 s of silence, marked it suspect (nothing moves then). " +
			"A join or death that moves more than a tick's caps (50,000 moves) or budget allow goes on over the next ticks (2 s apart): its time, reads and moves are those ticks' summed, `ticks` says how many.",
		"Setup, untimed: each size's repos are created into a template file through the bbolt store's bulk path (CreateRepos, 20,000 repos a transaction), " +
			"copied for each worker count; the coordinator's own ticks then assign them, in Apply calls of at most 99 items. " +
			"That assignment is the bulk add: every repo pending and every worker new at once, timed tick by tick.",
		"Peak heap is the Go heap (live and not yet collected objects, default GOGC) sampled every millisecond while ticks ran; " +
			"the bench's own state is in it too. Each phase (bulk add, quiet, each k, baseline, membership) starts after a forced GC.",
	}
	if o.cell != nil {
		res.Notes = append(res.Notes, "A (repos, workers) pair runs when each worker holds 100 to 100,000 repos: "+
			"with fewer a join has next to nothing to move; at 100,000 a worker a join or death moves more than a tick's caps allow.")
	}
	dir, err := os.MkdirTemp("", "ticklatency-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)

	if o.onlyRest {
		o.repos, o.dynamoMax = nil, 0
	}
	lastN, lastTook := 0, time.Duration(0)
	for _, n := range o.repos {
		if n > o.maxRepos {
			why := fmt.Sprintf("%d repos: over -max-repos %d", n, o.maxRepos)
			if lastN > 0 {
				// Setup, naive ticks and joins are all linear in the repos.
				why += fmt.Sprintf("; scaling the %d-repo point's %.0f s linearly, it would take about %.0f min",
					lastN, lastTook.Seconds(), lastTook.Minutes()*float64(n)/float64(lastN))
			}
			res.NotRun = append(res.NotRun, why)
			continue
		}
		res.Repos = append(res.Repos, n)
		start := time.Now()
		cells, setup, bulk, err := boltSize(ctx, log, dir, n, o)
		if err != nil {
			return err
		}
		lastN, lastTook = n, time.Since(start)
		res.Cells = append(res.Cells, cells...)
		res.Setup = append(res.Setup, setup...)
		res.BulkAdd = append(res.BulkAdd, bulk...)
	}
	res.Workers = o.workers

	var bulk []results.TickBulkAdd
	res.Dynamo, bulk = runDynamo(ctx, log, o.dynamoMax, o.seed)
	res.BulkAdd = append(res.BulkAdd, bulk...)
	if o.restart > 0 {
		rs, err := runRestart(ctx, log, dir, o.restart)
		if err != nil {
			return err
		}
		res.RestartBacklog = rs
	}
	res.Meta.Finish()
	if err := results.Write(o.out, "ticklatency", res); err != nil {
		return err
	}
	log.Info("results written", "path", filepath.Join(o.out, "ticklatency.json"), "seconds", res.Meta.Seconds)
	return nil
}

// boltSize measures every worker count at n repos. The repos are created once into a
// template file (pending, no workers), which each worker count copies: creating is the
// slow part of the setup (one bbolt transaction per repo), assigning is the coordinator's.
func boltSize(ctx context.Context, log *slog.Logger, dir string, n int, o options) ([]results.TickCell, []results.SetupTiming, []results.TickBulkAdd, error) {
	start := time.Now()
	tmpl := filepath.Join(dir, fmt.Sprintf("template-%d.db", n))
	st, err := bolt.OpenWith(tmpl, bolt.Options{NoSync: true})
	if err != nil {
		return nil, nil, nil, err
	}
	if err := newFleet(st, o.seed).loadRepos(ctx, n); err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	if err := st.Close(); err != nil {
		return nil, nil, nil, fmt.Errorf("close template: %w", err)
	}
	defer os.Remove(tmpl)
	log.Info("repos created", "repos", n, "seconds", time.Since(start).Seconds())

	var cells []results.TickCell
	var bulks []results.TickBulkAdd
	setup := []results.SetupTiming{{Store: "bbolt", Repos: n, Seconds: round(time.Since(start).Seconds())}}
	for _, w := range o.workers {
		if o.cell != nil && !o.cell(n, w) {
			continue
		}
		start := time.Now()
		path := filepath.Join(dir, fmt.Sprintf("fleet-%d-%d.db", n, w))
		if err := copyFile(tmpl, path); err != nil {
			return nil, nil, nil, err
		}
		st, err := bolt.OpenWith(path, bolt.Options{NoSync: true})
		if err != nil {
			return nil, nil, nil, err
		}
		f := newFleet(st, o.seed)
		f.nextRepo = n
		bulk, err := f.setup(ctx, n, w, false)
		if err != nil {
			st.Close()
			return nil, nil, nil, err
		}
		bulk.Store = "bbolt"
		bulks = append(bulks, bulk)
		setup = append(setup, results.SetupTiming{Store: "bbolt", Repos: n, Workers: w, Seconds: round(time.Since(start).Seconds())})
		log.Info("fleet settled", "repos", n, "workers", w, "ticks", bulk.Ticks, "slowest_tick_ms", bulk.SlowestTickMs,
			"peak_heap_mib", bulk.PeakHeapMiB, "seconds", time.Since(start).Seconds())
		cell, err := measureCell(ctx, log, f, n, w, o.reps(n))
		st.Close()
		os.Remove(path)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%d repos, %d workers: %w", n, w, err)
		}
		cells = append(cells, cell)
	}
	return cells, setup, bulks, nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return fmt.Errorf("copy to %s: %w", to, err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return dst.Close()
}

// dynamoEndpoint is where DynamoDB Local listens, if `make bench` started it.
func dynamoEndpoint() string { return os.Getenv(dynamotest.EndpointEnv) }

// runRestart measures a worker restarted under a backlog on bbolt and, when it runs, on
// DynamoDB Local.
func runRestart(ctx context.Context, log *slog.Logger, dir string, entries int) ([]results.RestartBacklog, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := bolt.OpenWith(filepath.Join(dir, "restart.db"), bolt.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	r, err := restartBacklog(ctx, quiet, st, "bbolt", entries)
	st.Close()
	if err != nil {
		return nil, fmt.Errorf("restart on bbolt: %w", err)
	}
	log.Info("restart under a backlog", "store", r.Store, "longest_call_s", r.LongestCallS, "heartbeats", r.Heartbeats, "caught_up", r.CaughtUp)
	out := []results.RestartBacklog{r}
	ep := dynamoEndpoint()
	if ep == "" {
		return out, nil
	}
	ds, err := dynamo.New(ctx, dynamo.Config{Client: dynamotest.Client(ep),
		Table: fmt.Sprintf("ticklatency_restart_%d", time.Now().UnixNano()%1e9), Log: quiet})
	if err != nil {
		return nil, err
	}
	if err := ds.CreateTable(ctx); err != nil {
		return nil, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ds.DeleteTable(dctx); err != nil {
			log.Warn("delete table", "table", ds.Table(), "err", err)
		}
	}()
	r, err = restartBacklog(ctx, quiet, ds, "DynamoDB Local", entries)
	if err != nil {
		return nil, fmt.Errorf("restart on DynamoDB Local: %w", err)
	}
	log.Info("restart under a backlog", "store", r.Store, "longest_call_s", r.LongestCallS, "heartbeats", r.Heartbeats, "caught_up", r.CaughtUp)
	return append(out, r), nil
}
