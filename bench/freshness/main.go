// Command freshness measures how fresh the mirrors stay under a fixed poll budget for
// each scheduling policy, on a simulated population of upstream repos shaped like a
// public forge's, and writes bench/results/freshness.json.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
)

func main() {
	out := flag.String("out", "bench/results", "directory for the results")
	name := flag.String("name", "freshness", "results file name: freshness (the fleet at scale, every budget) or freshness_seeds (the study over seeds)")
	first := flag.String("first", "", "also write the first seed's results alone under this name, as a run of that seed alone writes them (with the costs): one run gives the study over seeds and the fleet's figures")
	repos := flag.Int("repos", 10000, "simulated upstream repos")
	seed := flag.Uint64("seed", 1, "random seed (when -seeds is not given)")
	seeds := flag.String("seeds", "", "seeds to run, e.g. 1-5 or 1,3: the results are the first seed's, with the spread over all")
	budgets := flag.String("budgets", "0.25,0.5,1,2", "poll budgets, polls per repo per day")
	warmup := flag.Float64("warmup", 365, "days simulated before measuring (a fleet that has run a year)")
	window := flag.Float64("window", 90, "days measured")
	drain := flag.Float64("drain", 45, "at most this many days simulated after the window so late commits are seen (a run ends once every measured push is mirrored)")
	cold := flag.Float64("coldstart", 30, "days measured from the fleet's first day (every repo new)")
	parallel := flag.Int("parallel", runtime.GOMAXPROCS(0), "simulations run at once")
	only := flag.String("policies", "", "comma-separated policies to run (default: all)")
	drift := flag.Float64("drift", 0.1, "for the drift runs: chance per month that a repo draws a new rate (0: no drift runs)")
	costs := flag.Bool("costs", true, "measure the worker-side costs (needs git)")
	realistic := flag.Bool("realistic", true, "also run the realistic population (repos of every age, dormant repos with long histories)")
	sigs := flag.Bool("signals", true, "run the sections with hooks and feeds (the default policy and the optimum)")
	// default.pgo beside this file is such a profile of the job (2,000 repos, seed 1, 0.5
	// polls a day, -costs=false), which go build and go run use to optimise the bench
	// (profile-guided optimisation): take it again when the simulation's hot code changes.
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here")
	flag.Parse()
	if os.Getenv("GOGC") == "" {
		// The simulations keep little alive and allocate steadily: a heap allowed to grow
		// further before each collection leaves the collector a smaller share of the run.
		debug.SetGCPercent(400)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "cpuprofile:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	bs, err := parseBudgets(*budgets)
	if err != nil {
		log.Error("bad -budgets", "err", err)
		os.Exit(2)
	}
	ss, err := parseSeeds(*seeds, *seed)
	if err != nil {
		log.Error("bad -seeds", "err", err)
		os.Exit(2)
	}
	if *first != "" && *first == *name {
		log.Error("bad -first: it names the file -name writes; give the first seed's file a name of its own", "name", *name)
		os.Exit(2)
	}
	all := measure(log, options{n: *repos, seeds: ss, budgets: bs, days: days{*warmup, *window, *drain, *cold}, parallel: *parallel,
		only: *only, drift: *drift, signals: *sigs, realism: *realistic})
	files := map[string]results.Freshness{}
	costsTo := *name
	if *first != "" {
		files[*first], costsTo = alone(all[0]), *first
	}
	files[*name] = withSpread(all)
	if *costs {
		f := files[costsTo]
		if f.Costs, err = measureCosts(context.Background(), log); err != nil {
			log.Error("costs", "err", err)
			os.Exit(1)
		}
		files[costsTo] = f
	}
	for fn, res := range files {
		res.Meta = all[0].Meta
		res.Meta.Finish()
		if err := results.Write(*out, fn, res); err != nil {
			log.Error("write", "err", err)
			os.Exit(1)
		}
	}
}

// alone is one seed's results as a run of that seed alone gives them: its goals over
// that seed only. The goals are copied: withSpread writes over a seed's own.
func alone(r results.Freshness) results.Freshness {
	r.Goals = slices.Clone(r.Goals)
	r.Setup.Seeds = []uint64{r.Setup.Seed}
	return withSpread([]results.Freshness{r})
}

// parseSeeds reads "1-5" or "1,3,4"; "" is just seed.
func parseSeeds(s string, seed uint64) ([]uint64, error) {
	if strings.TrimSpace(s) == "" {
		return []uint64{seed}, nil
	}
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(f), "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		b := a
		if err == nil && isRange {
			b, err = strconv.ParseUint(hi, 10, 64)
		}
		if err != nil || b < a || b-a > 1000 {
			return nil, fmt.Errorf("seeds %q: want a list of seeds or ranges like 1-5", f)
		}
		for x := a; x <= b; x++ {
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	return out, nil
}

func parseBudgets(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("budget %q: want a positive number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// targets are the published figures the population is tuned to (see the report).
var targets = Targets{Dormant: 0.5, TopFraction: 0.025, TopShare: 0.5, MonthlyChanged: 0.13}

// days are the stretches of a simulation.
type days struct{ warmup, window, drain, cold float64 }

// options are what one measurement runs: every section for every seed, on a pool of
// parallel simulations.
type options struct {
	n        int
	seeds    []uint64
	budgets  []float64
	days     days
	parallel int
	only     string  // comma-separated policies; "" for all
	drift    float64 // changes of rate per repo per month; 0: no drift sections
	signals  bool
	realism  bool
}

// task is a piece of work for the pool; cost orders them (the longest first, so the
// pool ends together).
type task struct {
	cost float64
	do   func()
}

// measure runs every seed's sections on one pool and returns each seed's results (in
// o.seeds' order), the first with the measurement's metadata. A seed's figures depend
// on the seed alone, not on the pool or the order it ran in.
func measure(log *slog.Logger, o options) []results.Freshness {
	meta := results.Collect()
	var (
		seeds []*seedRun
		tasks []task
	)
	for _, seed := range o.seeds {
		sr := newSeedRun(log, o, seed)
		seeds = append(seeds, sr)
		tasks = append(tasks, sr.tasks(log)...)
	}
	// Longest first; the sort is stable, so ties keep their order.
	slices.SortStableFunc(tasks, func(a, b task) int { return cmp.Compare(b.cost, a.cost) })
	ch := make(chan task)
	var wg sync.WaitGroup
	prog := newProgress(tasks)
	for range max(1, o.parallel) {
		wg.Go(func() {
			for t := range ch {
				t.do()
				prog.done(log, t.cost)
			}
		})
	}
	for _, t := range tasks {
		ch <- t
	}
	close(ch)
	wg.Wait()

	all := make([]results.Freshness, len(seeds))
	for k, sr := range seeds {
		all[k] = sr.result()
	}
	all[0].Meta = meta
	return all
}

// progress reports a long measurement as its tasks finish: how many, and the time
// left, estimated from the tasks' costs.
type progress struct {
	mu               sync.Mutex
	start            time.Time
	n, of            int
	costDone, costOf float64
}

func newProgress(tasks []task) *progress {
	p := &progress{start: time.Now(), of: len(tasks)}
	for _, t := range tasks {
		p.costOf += t.cost
	}
	return p
}

func (p *progress) done(log *slog.Logger, cost float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	p.costDone += cost
	elapsed := time.Since(p.start)
	left := time.Duration(0)
	if p.costDone > 0 {
		left = time.Duration(float64(elapsed) * (p.costOf - p.costDone) / p.costDone)
	}
	log.Info("progress", "tasks_done", p.n, "tasks", p.of, "elapsed", elapsed.Round(time.Second), "left_about", left.Round(time.Second))
}

func round(v float64) float64 { return math.Round(v*1000) / 1000 }

// describe measures the simulated population against the targets.
func describe(pop Population, up Upstream, ws, we float64) results.FreshnessPopulation {
	n := len(pop.Rates)
	d := results.FreshnessPopulation{Sigma: pop.Sigma, Mu: pop.Mu, TopFraction: targets.TopFraction,
		TargetTopShare: targets.TopShare, TargetMonthly: targets.MonthlyChanged}
	counts := make([]int, n)
	var active []float64
	total := 0.0
	for i, r := range pop.Rates {
		total += r
		if r == 0 {
			d.DormantShare++
		} else {
			active = append(active, r)
		}
		for _, p := range up[i].Pushes {
			if p.At >= ws && p.At < we {
				counts[i] += len(p.Authored)
			}
		}
	}
	d.DormantShare /= float64(n)
	d.MeanPerDay = total / float64(n)
	slices.Sort(active)
	if len(active) > 0 {
		d.MedianActivePerDay = active[len(active)/2]
		d.P99PerDay = active[int(0.99*float64(len(active)-1))]
		d.MaxPerDay = active[len(active)-1]
	}
	sorted := slices.Clone(counts)
	slices.SortFunc(sorted, func(a, b int) int { return b - a })
	top := int(math.Round(targets.TopFraction * float64(n)))
	sumTop, sum := 0, 0
	for k, c := range sorted {
		sum += c
		if k < top {
			sumTop += c
		}
	}
	d.WindowCommits = sum
	if sum > 0 {
		d.MeasuredTopShare = float64(sumTop) / float64(sum)
	}
	// Share of repos with a push, averaged over the window's 30-day stretches.
	months := int((we - ws) / 30)
	for m := range months {
		a, b := ws+30*float64(m), ws+30*float64(m+1)
		changed := 0
		for _, l := range up {
			if k := l.pushedBefore(a); k < len(l.Pushes) && l.Pushes[k].At < b {
				changed++
			}
		}
		d.MeasuredMonthly += float64(changed) / float64(n) / float64(months)
	}
	return d
}

var policyDocs = []results.FreshnessPolicyDoc{
	{Name: "uniform", Description: "round-robin: every repo polled in turn, whatever it does",
		Uses: "nothing"},
	{Name: "swh", Description: "Software Heritage's origin-visit policy: offset −2 after a visit that found changes, +1 otherwise (0…10, from 4); next visit 1 day (offset 0–1), 2 days (2–4) or 4^(offset−4) days later in queue time, ±10 % fudge",
		Uses: "whether each poll found a change"},
	{Name: "cbrt", Description: "the seed's policy (priority.Cbrt): step cbrt(seconds since the newest commit)",
		Uses: "the newest commit's time"},
	{Name: "rate", Description: "priority.Rate: change rate estimated from what the polls saw (Cho & Garcia-Molina, decayed with a " + fmt.Sprint(priority.HalfLife.Hours()/24) + "-day half-life; half a change over the longest known quiet stretch when polls saw none); step 1/√rate",
		Uses: "whether each poll found a change, the time between polls, the newest commit's time"},
	{Name: "bayes", Description: "priority.Bayes: the expected current push rate under the prior the worker learns from its repos (empirical Bayes on a grid of rates with a dormant point mass, and a learned rate of changes of behaviour); a repo's belief is filtered at each poll through the pushes (bursts of commits less than " + fmt.Sprint(priority.SessionGap.Hours()) + " h apart) its fetch showed and the quiet between them, in which it may have changed behaviour, and kept unweighed, so the prior current at each decision weighs it; it starts from its first clone's history, judged every " + fmt.Sprint(priority.Window.Hours()/24) + " days as a change of behaviour or not, the making of a repo (its first run of work, at most " + fmt.Sprint(priority.MaxMaking.Hours()/24) + " days) not counted; the prior's rate weights are learned from the repos' beliefs, its rate of changes from how well each candidate predicted the polls of that windowed evidence; step 1/√rate (rate^−" + fmt.Sprint(priority.NewExp) + " while its polls cover under " + fmt.Sprint(priority.NewSpan.Hours()/24) + " days), the rate held above " + fmt.Sprint(priority.MinRate) + "/day",
		Uses: "the commit times each fetch brought, the first clone's history (bounded), whether it reached the repo's first commit and that commit's age (under a year or not), the time between polls, the prior learned from the worker's other repos"},
	{Name: "optimum", Description: "reference: the true current rates, periodic polls at f ∝ √λ, never polls a repo while it does not change (simulated; the figures are read against its closed form over the same pushes, which it matches)",
		Uses: "the true push rates (not knowable)"},
}
