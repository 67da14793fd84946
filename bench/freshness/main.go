// Command freshness measures how fresh the mirrors stay under a fixed poll budget for
// each scheduling policy, on a simulated population of upstream repos shaped like a
// public forge's, and writes bench/results/freshness.json.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
)

func main() {
	out := flag.String("out", "bench/results", "directory for the results")
	name := flag.String("name", "freshness", "results file name: freshness (the fleet at scale, every budget) or freshness_seeds (the study over seeds)")
	repos := flag.Int("repos", 10000, "simulated upstream repos")
	seed := flag.Uint64("seed", 1, "random seed (when -seeds is not given)")
	seeds := flag.String("seeds", "", "seeds to run, e.g. 1-5 or 1,3: the results are the first seed's, with the spread over all")
	budgets := flag.String("budgets", "0.25,0.5,1,2", "poll budgets, polls per repo per day")
	warmup := flag.Float64("warmup", 365, "days simulated before measuring (a fleet that has run a year)")
	window := flag.Float64("window", 90, "days measured")
	drain := flag.Float64("drain", 45, "days simulated after the window so late commits are seen")
	cold := flag.Float64("coldstart", 30, "days measured from the fleet's first day (every repo new)")
	parallel := flag.Int("parallel", runtime.GOMAXPROCS(0), "simulations run at once")
	only := flag.String("policies", "", "comma-separated policies to run (default: all)")
	drift := flag.Float64("drift", 0.1, "for the drift runs: chance per month that a repo draws a new rate (0: no drift runs)")
	costs := flag.Bool("costs", true, "measure the worker-side costs (needs git)")
	realistic := flag.Bool("realistic", true, "also run the realistic population (repos of every age, dormant repos with long histories)")
	sigs := flag.Bool("signals", true, "run the sections with hooks and feeds (the default policy and the optimum)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here")
	flag.Parse()
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
	res := measure(log, options{n: *repos, seeds: ss, budgets: bs, days: days{*warmup, *window, *drain, *cold}, parallel: *parallel,
		only: *only, drift: *drift, signals: *sigs, realism: *realistic})
	if *costs {
		if res.Costs, err = measureCosts(context.Background(), log); err != nil {
			log.Error("costs", "err", err)
			os.Exit(1)
		}
	}
	res.Meta.Finish()
	if err := results.Write(*out, *name, res); err != nil {
		log.Error("write", "err", err)
		os.Exit(1)
	}
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

// measure runs every seed's sections on one pool and returns the first seed's results,
// with the spread over all seeds (results.FreshnessSpread) on each row, bound and goal.
// A seed's figures depend on the seed alone, not on the pool or the order it ran in.
func measure(log *slog.Logger, o options) results.Freshness {
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
	res := withSpread(all)
	res.Meta = meta
	return res
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

// seedRun is one seed's populations, upstreams and simulations.
type seedRun struct {
	o                        options
	seed                     uint64
	setup                    results.FreshnessSetup
	pop, real                Population
	steady, drifting         Upstream
	realSteady, realDrifting Upstream
	jobs                     []job
	runs                     [][]results.FreshnessRun
	bounds                   []results.FreshnessBound // in a fixed order, whatever order they are computed in
	signalBounds             []results.FreshnessBound // one per signalSections entry, by its index
	desc                     results.FreshnessPopulation
	tables                   map[tableKey]func() *rateTable // each learned on first use
}

// stream numbers the random stream of the job's simulation by what it simulates (the
// policy, the section, the budget), not by its place in the job list, so a section's
// figures do not move when jobs are added; with policy "", the stream its section and
// budget share (the signals' deliveries, the same for every policy).
func (j job) stream(policy string) uint64 {
	section := "runs"
	if j.signal != nil {
		section = j.signal.Section
	} else if j.drift {
		section = "drift"
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%s|%v|%g", policy, section, j.realistic, j.budget)
	return h.Sum64()
}

// tableKey names a rate table: the population (plain or realistic) and the day.
type tableKey struct {
	real bool
	day  float64
}

// draw is the function that draws the plain or the realistic population of this
// fleet's size with a seed, up to day.
func (sr *seedRun) draw(real bool, day float64) func(uint64) Upstream {
	n := sr.o.n
	if real {
		return func(s uint64) Upstream {
			return NewRealisticPopulation(n, s, targets, realism).NewUpstream(s^0x5ea1, day+1, 0, batch, targets)
		}
	}
	return func(s uint64) Upstream { return NewPopulation(n, s, targets).NewUpstream(s, day+1, 0, batch, targets) }
}

// job is one simulation: a policy at a budget in a section.
type job struct {
	k         int
	budget    float64
	make      func() scheduler
	pop       Population
	up        Upstream
	drift     bool
	realistic bool
	signal    *signals
}

func newSeedRun(log *slog.Logger, o options, seed uint64) *seedRun {
	n, d := o.n, o.days
	sr := &seedRun{o: o, seed: seed}
	sr.pop = NewPopulation(n, seed, targets)
	end := d.warmup + d.window + d.drain
	sr.steady = sr.pop.NewUpstream(seed, end, 0, batch, targets)
	sr.setup = results.FreshnessSetup{Repos: n, Seed: seed, Seeds: o.seeds, WarmupDays: d.warmup, WindowDays: d.window, DrainDays: d.drain,
		MinIntervalMin: 5, Budgets: o.budgets, ColdStartDays: d.cold,
		Batch: results.FreshnessBatch{MeanCommits: batch.MeanCommits, NewestDelayMin: batch.NewestDelayMin, GapMin: batch.GapMin,
			Sigma: batch.Sigma, BranchShare: batch.BranchShare, BranchDelayDays: batch.BranchDelayDays},
		HistoryWindowDays: fetch.HistoryWindow.Hours() / 24, MaxHistoryCommits: fetch.MaxHistoryCommits, MaxNewCommits: fetch.MaxNewCommits,
		MinRate: priority.MinRate, GuardRate: priority.GuardRate,
		NewStepExp: priority.NewExp, NewSpanDays: priority.NewSpan.Hours() / 24}
	if o.drift > 0 {
		sr.setup.DriftPerMonth, sr.setup.DriftBudgets = o.drift, o.budgets
		sr.drifting = sr.pop.NewUpstream(seed^0xd1f7, end, o.drift, batch, targets)
	}
	if o.realism {
		sr.real = NewRealisticPopulation(n, seed, targets, realism)
		sr.realSteady = sr.real.NewUpstream(seed^0x5ea1, end, 0, batch, targets)
		if o.drift > 0 {
			sr.realDrifting = sr.real.NewUpstream(seed^0x5ea1^0xd1f7, end, o.drift, batch, targets)
		}
	}
	sr.desc = describe(sr.pop, sr.steady, d.warmup, d.warmup+d.window)
	log.Info("population", "seed", seed, "repos", n, "sigma", sr.desc.Sigma, "mu", sr.desc.Mu, "top_share", sr.desc.MeasuredTopShare,
		"monthly_changed", sr.desc.MeasuredMonthly, "window_commits", sr.desc.WindowCommits)

	wanted := func(s scheduler) bool { return o.only == "" || slices.Contains(strings.Split(o.only, ","), s.name()) }
	for _, u := range []struct {
		pop       Population
		up        Upstream
		drift     bool
		realistic bool
	}{{sr.pop, sr.steady, false, false}, {sr.pop, sr.drifting, true, false}, {sr.real, sr.realSteady, false, true}, {sr.real, sr.realDrifting, true, true}} {
		if u.up == nil {
			continue
		}
		for _, b := range o.budgets {
			for _, mk := range schedulers(u.up, nil) {
				if wanted(mk()) {
					sr.jobs = append(sr.jobs, job{len(sr.jobs), b, mk, u.pop, u.up, u.drift, u.realistic, nil})
				}
			}
		}
	}
	// The rate tables of the measured days, shared by the bounds and the bound run as a
	// policy.
	sr.tables = map[tableKey]func() *rateTable{}
	for _, real := range []bool{false, true} {
		for _, day := range []float64{d.cold / 2, d.warmup + d.window/2} {
			sr.tables[tableKey{real, day}] = sync.OnceValue(func() *rateTable { return learnTable(sr.draw(real, day), seed, day) })
		}
	}
	// The all-evidence bound run as a policy, beside the stationary sections' policies.
	for _, u := range []struct {
		up   Upstream
		real bool
		pop  Population
	}{{sr.steady, false, sr.pop}, {sr.realSteady, true, sr.real}} {
		if u.up == nil {
			continue
		}
		var tables []dayTable
		for _, day := range []float64{d.cold / 2, d.warmup + d.window/2} {
			tables = append(tables, dayTable{day, sr.tables[tableKey{u.real, day}]})
		}
		mk := func() scheduler { return &informed{up: u.up, tables: tables} }
		if !wanted(mk()) {
			continue
		}
		for _, b := range o.budgets {
			sr.jobs = append(sr.jobs, job{len(sr.jobs), b, mk, u.pop, u.up, false, u.real, nil})
		}
	}
	if o.signals {
		sr.setup.HookStretch, sr.setup.FeedStretch, sr.setup.SignalMemoryDays, sr.setup.OrgMeanRepos = hookStretch, feedStretch, signalMemory, 1+orgExtra
		sr.setup.OwnerLevelShare, sr.setup.OwnerRepos = ownerLevelShare, ownerRepos
		for _, sg := range signalSections {
			up := sr.steady
			if sg.Drift {
				if sr.drifting == nil {
					continue
				}
				up = sr.drifting
			}
			sr.setup.Signals = append(sr.setup.Signals, sg.doc())
			// The default policy, and the optimum given the same signals for reference.
			for _, b := range o.budgets {
				for _, mk := range []func() scheduler{func() scheduler { return production{defaultPolicy()} }, func() scheduler { return optimum{up: up} }} {
					if wanted(mk()) {
						sr.jobs = append(sr.jobs, job{len(sr.jobs), b, mk, sr.pop, up, sg.Drift, false, &sg})
					}
				}
			}
		}
	}
	sr.runs = make([][]results.FreshnessRun, len(sr.jobs))
	return sr
}

// boundSlots is how many bounds a seed computes at most, in the order of Freshness.Bound.
const boundSlots = 8

// tasks are the seed's simulations and bounds.
func (sr *seedRun) tasks(log *slog.Logger) []task {
	o, d := sr.o, sr.o.days
	end := d.warmup + d.window + d.drain
	var out []task
	for _, j := range sr.jobs {
		cost := j.budget
		if j.make().name() == "bayes" {
			cost *= 5 // it learns its prior and weighs every repo's evidence
		}
		out = append(out, task{cost, func() {
			s := j.make()
			rng := rand.New(rand.NewPCG(sr.seed, j.stream(s.name())))
			if sw, ok := s.(*swh); ok {
				sw.rng = rng
			}
			cfg := runConfig{Budget: j.budget, End: end, MinInterval: sr.setup.MinIntervalMin / (24 * 60),
				Windows: []window{{d.warmup, d.warmup + d.window}}}
			if !j.drift && j.signal == nil {
				cfg.Windows = append(cfg.Windows, window{0, d.cold})
			}
			if j.signal != nil {
				cfg.Signal, cfg.Orgs = j.signal, orgs(o.n, sr.seed)
				cfg.Covered = covered(cfg.Orgs, sr.seed, j.signal.Share)
				cfg.Deliveries = j.signal.deliveries(j.up, cfg.Covered, ownerLevel(cfg.Orgs, sr.seed), end, rand.New(rand.NewPCG(sr.seed, j.stream("")^0xde1)))
			}
			rs := run(j.pop, j.up, s, cfg, rng)
			section := ""
			if j.signal != nil {
				section = j.signal.Section
			}
			for k, r := range rs {
				log.Info("run", "seed", sr.seed, "section", section, "realistic", j.realistic, "drift", j.drift, "signal_fetches", r.SignalFetches, "window", cfg.Windows[k], "policy", r.Policy, "budget", r.Budget,
					"lag_mean_h", round(r.LagMeanH), "lag_p99_h", round(r.LagP99H), "dormant_polls", round(r.DormantPolls),
					"censored", r.Censored)
			}
			sr.runs[j.k] = rs
		}})
	}
	sr.bounds = make([]results.FreshnessBound, boundSlots)
	sr.signalBounds = make([]results.FreshnessBound, len(signalSections))
	// The bounds from push counts, and the drift bound, share one random stream: one task.
	out = append(out, task{1, func() {
		brng := rand.New(rand.NewPCG(sr.seed, 0xb0))
		for k, b := range []struct {
			section string
			day     float64
		}{{"coldstart", d.cold / 2}, {"runs", d.warmup + d.window/2}} {
			x := bound(sr.pop, b.day, 2, brng)
			x.Section = b.section
			sr.bounds[k] = x
		}
		if sr.drifting != nil {
			// Three days across the measured window: the silent share moves as repos wake.
			x := driftBound(sr.pop, sr.drifting, o.drift, []float64{d.warmup + d.window/6, d.warmup + d.window/2, d.warmup + 5*d.window/6}, nil, brng)
			x.Section = "drift"
			sr.bounds[boundSlots-2] = x
		}
	}})
	if sr.realDrifting != nil {
		out = append(out, task{1, func() {
			x := driftBound(sr.real, sr.realDrifting, o.drift, []float64{d.warmup + d.window/6, d.warmup + d.window/2, d.warmup + 5*d.window/6},
				nil, rand.New(rand.NewPCG(sr.seed, 0xb1)))
			x.Section = "drift_realistic"
			sr.bounds[boundSlots-1] = x
		}})
	}
	// The bounds with everything a first clone and the fetches show, for both populations.
	for k, b := range []struct {
		section string
		day     float64
		real    bool
	}{{"coldstart", d.cold / 2, false}, {"runs", d.warmup + d.window/2, false},
		{"coldstart_realistic", d.cold / 2, true}, {"runs_realistic", d.warmup + d.window/2, true}} {
		if b.real && !o.realism {
			continue
		}
		out = append(out, task{0.5, func() {
			seed := sr.seed
			var sigs []signals
			if b.section == "runs" && o.signals {
				sigs = sr.signalSections(false)
			}
			xs := infoBound(sr.tables[tableKey{b.real, b.day}](), sr.draw(b.real, b.day)(seed), b.day, sr.missed(sigs)...)
			xs[0].Section = b.section
			sr.bounds[2+k] = xs[0]
			for j, sg := range sigs {
				xs[1+j].Section = sg.Section
				sr.signalBounds[sectionIndex(sg.Section)] = xs[1+j]
			}
			for _, x := range xs {
				log.Info("bound", "seed", seed, "section", x.Section, "evidence", x.Evidence, "ratio", round(x.Ratio), "dormant_polls", round(x.DormantPolls))
			}
		}})
	}
	if o.signals && sr.drifting != nil {
		for k, sg := range sr.signalSections(true) {
			out = append(out, task{1, func() {
				x := driftBound(sr.pop, sr.drifting, o.drift, []float64{d.warmup + d.window/6, d.warmup + d.window/2, d.warmup + 5*d.window/6},
					sr.missed([]signals{sg})[0], rand.New(rand.NewPCG(sr.seed, 0xb2+uint64(k))))
				x.Section = sg.Section
				log.Info("bound", "seed", sr.seed, "section", x.Section, "ratio", round(x.Ratio), "dormant_polls", round(x.DormantPolls))
				sr.signalBounds[sectionIndex(sg.Section)] = x
			}})
		}
	}
	return out
}

// sectionIndex is the index of the signal section named in signalSections.
func sectionIndex(name string) int {
	return slices.IndexFunc(signalSections, func(s signals) bool { return s.Section == name })
}

// signalSections are the sections with signals on the drifting population or not.
func (sr *seedRun) signalSections(drift bool) []signals {
	var out []signals
	for _, sg := range signalSections {
		if sg.Drift == drift {
			out = append(out, sg)
		}
	}
	return out
}

// missed is, for each signal, the share of each repo's pushes polls must find (its
// signal bound, signalBound): the lost hooks of a covered repo, nothing of a repo a feed
// covers, every push of the others. The bound knows which repos are covered.
func (sr *seedRun) missed(sigs []signals) []func(i int) float64 {
	var out []func(int) float64
	org := orgs(sr.o.n, sr.seed)
	for _, sg := range sigs {
		cov := covered(org, sr.seed, sg.Share)
		loss := sg.Loss
		if sg.Period > 0 {
			loss = 0
		}
		out = append(out, func(i int) float64 {
			if cov[i] {
				return loss
			}
			return 1
		})
	}
	return out
}

// simBounds are the bound runs (informed) as bounds "all, cloned", one per section and
// budget, over the optimum's run of the same section.
func (sr *seedRun) simBounds(res results.Freshness) []results.FreshnessBound {
	var out []results.FreshnessBound
	for _, j := range sr.jobs {
		rs := sr.runs[j.k]
		if len(rs) < 2 || rs[0].Policy != boundPolicy {
			continue
		}
		names := [2]string{"runs", "coldstart"}
		if j.realistic {
			names = [2]string{"runs_realistic", "coldstart_realistic"}
		}
		seen := [2]float64{sr.o.days.warmup + sr.o.days.window/2, sr.o.days.cold / 2}
		for k, name := range names {
			for _, opt := range *res.Section(name) {
				if opt.Policy != "optimum" || opt.Budget != j.budget || opt.LagMeanH <= 0 {
					continue
				}
				x := results.FreshnessBound{Section: name, Evidence: results.EvidenceCloned, Budget: j.budget,
					SeenDays: sr.setup.HistoryWindowDays + seen[k], Ratio: rs[k].LagMeanH / opt.LagMeanH, DormantPolls: rs[k].DormantPolls}
				if opt.LagP99H > 0 {
					x.P99 = rs[k].LagP99H / opt.LagP99H
				}
				out = append(out, x)
			}
		}
	}
	return out
}

// result is the seed's results, once its tasks ran.
func (sr *seedRun) result() results.Freshness {
	o, d := sr.o, sr.o.days
	def, _ := priority.ByName("")
	var opt []results.FreshnessAnalytic
	for _, b := range o.budgets {
		opt = append(opt, results.FreshnessAnalytic{Budget: b, LagMeanH: analyticOptimum(sr.pop, b*float64(o.n)) * 24})
	}
	res := results.Freshness{Setup: sr.setup, Population: sr.desc, Optimum: opt}
	if o.realism {
		rd := describe(sr.real, sr.realSteady, d.warmup, d.warmup+d.window)
		rd.Realism = describeRealism(sr.real, sr.realSteady)
		res.PopulationRealistic = &rd
	}
	for _, x := range sr.bounds {
		if x.Section != "" {
			res.Bound = append(res.Bound, x)
		}
	}
	for _, x := range sr.signalBounds {
		if x.Section != "" {
			res.Bound = append(res.Bound, x)
		}
	}
	for _, j := range sr.jobs {
		rs := sr.runs[j.k]
		for k := range rs {
			rs[k].Default = rs[k].Policy == def.Name()
		}
		if rs[0].Policy == boundPolicy {
			continue // bounds, once the optimum's rows are in (simBounds)
		}
		if j.signal != nil {
			sec := res.SignalSection(j.signal.Section)
			*sec = append(*sec, rs[0])
			continue
		}
		if j.realistic {
			if j.drift {
				res.DriftRealistic = append(res.DriftRealistic, rs[0])
			} else {
				res.RunsRealistic = append(res.RunsRealistic, rs[0])
				res.ColdStartRealistic = append(res.ColdStartRealistic, rs[1])
			}
			continue
		}
		if j.drift {
			res.Drift = append(res.Drift, rs[0])
		} else {
			res.Runs = append(res.Runs, rs[0])
			res.ColdStart = append(res.ColdStart, rs[1])
		}
	}
	res.Bound = append(res.Bound, sr.simBounds(res)...)
	for _, p := range policyDocs {
		p.Default = p.Name == def.Name()
		res.Policies = append(res.Policies, p)
	}
	res.Goals = goals(res)
	return res
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
			k, _ := slices.BinarySearchFunc(l.Pushes, a, func(p Push, t float64) int { return cmp.Compare(p.At, t) })
			if k < len(l.Pushes) && l.Pushes[k].At < b {
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
	{Name: "bayes", Description: "priority.Bayes: the expected current push rate under the prior the worker learns from its repos (empirical Bayes on a grid of rates with a dormant point mass, and a learned rate of changes of behaviour); a repo's evidence is the pushes (bursts of commits less than " + fmt.Sprint(priority.SessionGap.Hours()) + " h apart) its first clone's history and its fetches showed, judged every " + fmt.Sprint(priority.Window.Hours()/24) + " days as a change of behaviour or not, the making of a repo (its first run of work, at most " + fmt.Sprint(priority.MaxMaking.Hours()/24) + " days) not counted; step 1/√rate (rate^−" + fmt.Sprint(priority.NewExp) + " while its polls cover under " + fmt.Sprint(priority.NewSpan.Hours()/24) + " days), the rate held above " + fmt.Sprint(priority.MinRate) + "/day",
		Uses: "the commit times each fetch brought, the first clone's history (bounded), whether it reached the repo's first commit and that commit's age (under a year or not), the time between polls, the prior learned from the worker's other repos"},
	{Name: "optimum", Description: "reference: the true current rates, periodic polls at f ∝ √λ, never polls a repo while it does not change",
		Uses: "the true push rates (not knowable)"},
	{Name: "optimum04", Description: "reference: the optimum's periodic polls at f ∝ λ^0.4 instead of √λ, which gives up a little of the mean for a shorter tail",
		Uses: "the true push rates (not knowable)"},
}
