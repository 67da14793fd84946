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
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
)

func main() {
	out := flag.String("out", "bench/results", "directory for freshness.json")
	repos := flag.Int("repos", 10000, "simulated upstream repos")
	seed := flag.Uint64("seed", 1, "random seed")
	budgets := flag.String("budgets", "0.25,0.5,1,2", "poll budgets, polls per repo per day")
	warmup := flag.Float64("warmup", 365, "days simulated before measuring (a fleet that has run a year)")
	window := flag.Float64("window", 90, "days measured")
	drain := flag.Float64("drain", 45, "days simulated after the window so late commits are seen")
	cold := flag.Float64("coldstart", 30, "days measured from the fleet's first day (every repo new)")
	parallel := flag.Int("parallel", 2, "simulations run at once")
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
	res := measure(log, *repos, *seed, bs, days{*warmup, *window, *drain, *cold}, *parallel, *only, *drift, *sigs, *realistic)
	if *costs {
		if res.Costs, err = measureCosts(context.Background(), log); err != nil {
			log.Error("costs", "err", err)
			os.Exit(1)
		}
	}
	res.Meta.Finish()
	if err := results.Write(*out, "freshness", res); err != nil {
		log.Error("write", "err", err)
		os.Exit(1)
	}
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

func measure(log *slog.Logger, n int, seed uint64, budgets []float64, d days, parallel int, only string, drift float64, withSignals, withRealistic bool) results.Freshness {
	meta := results.Collect()
	pop := NewPopulation(n, seed, targets)
	end := d.warmup + d.window + d.drain
	steady := pop.NewUpstream(seed, end, 0, batch, targets)
	setup := results.FreshnessSetup{Repos: n, Seed: seed, WarmupDays: d.warmup, WindowDays: d.window, DrainDays: d.drain,
		MinIntervalMin: 5, Budgets: budgets, ColdStartDays: d.cold,
		Batch: results.FreshnessBatch{MeanCommits: batch.MeanCommits, NewestDelayMin: batch.NewestDelayMin, GapMin: batch.GapMin,
			Sigma: batch.Sigma, BranchShare: batch.BranchShare, BranchDelayDays: batch.BranchDelayDays},
		HistoryWindowDays: fetch.HistoryWindow.Hours() / 24, MaxHistoryCommits: fetch.MaxHistoryCommits, MaxNewCommits: fetch.MaxNewCommits,
		MinRate: priority.MinRate, GuardRate: priority.GuardRate}
	var drifting Upstream
	if drift > 0 {
		setup.DriftPerMonth, setup.DriftBudgets = drift, budgets
		drifting = pop.NewUpstream(seed^0xd1f7, end, drift, batch, targets)
	}
	var (
		real                Population
		realSteady, realDft Upstream
	)
	if withRealistic {
		real = NewRealisticPopulation(n, seed, targets, realism)
		realSteady = real.NewUpstream(seed^0x5ea1, end, 0, batch, targets)
		if drift > 0 {
			realDft = real.NewUpstream(seed^0x5ea1^0xd1f7, end, drift, batch, targets)
		}
	}
	desc := describe(pop, steady, d.warmup, d.warmup+d.window)
	log.Info("population", "repos", n, "sigma", desc.Sigma, "mu", desc.Mu, "top_share", desc.MeasuredTopShare,
		"monthly_changed", desc.MeasuredMonthly, "window_commits", desc.WindowCommits)

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
	var jobs []job
	for _, u := range []struct {
		pop       Population
		up        Upstream
		drift     bool
		realistic bool
	}{{pop, steady, false, false}, {pop, drifting, true, false}, {real, realSteady, false, true}, {real, realDft, true, true}} {
		if u.up == nil {
			continue
		}
		for _, b := range budgets {
			for _, mk := range schedulers(u.up, nil) {
				if only != "" && !slices.Contains(strings.Split(only, ","), mk().name()) {
					continue
				}
				jobs = append(jobs, job{len(jobs), b, mk, u.pop, u.up, u.drift, u.realistic, nil})
			}
		}
	}
	if withSignals {
		setup.HookStretch, setup.FeedStretch, setup.SignalMemoryDays, setup.OrgMeanRepos = hookStretch, feedStretch, signalMemory, 1+orgExtra
		for _, sg := range signalSections {
			up := steady
			if sg.Drift {
				if drifting == nil {
					continue
				}
				up = drifting
			}
			setup.Signals = append(setup.Signals, sg.doc())
			// The default policy, and the optimum given the same signals for reference.
			for _, b := range budgets {
				for _, mk := range []func() scheduler{func() scheduler { return production{defaultPolicy()} }, func() scheduler { return optimum{up: up} }} {
					if only != "" && !slices.Contains(strings.Split(only, ","), mk().name()) {
						continue
					}
					jobs = append(jobs, job{len(jobs), b, mk, pop, up, sg.Drift, false, &sg})
				}
			}
		}
	}
	runs := make([][]results.FreshnessRun, len(jobs))
	ch := make(chan job)
	var wg sync.WaitGroup
	for range max(1, parallel) {
		wg.Go(func() {
			for j := range ch {
				rng := rand.New(rand.NewPCG(seed, uint64(j.k)+1000))
				s := j.make()
				if sw, ok := s.(*swh); ok {
					sw.rng = rng
				}
				cfg := runConfig{Budget: j.budget, End: end, MinInterval: setup.MinIntervalMin / (24 * 60),
					Windows: []window{{d.warmup, d.warmup + d.window}}}
				if !j.drift && j.signal == nil {
					cfg.Windows = append(cfg.Windows, window{0, d.cold})
				}
				if j.signal != nil {
					cfg.Signal, cfg.Orgs = j.signal, orgs(n, seed)
					cfg.Covered = covered(cfg.Orgs, seed, j.signal.Share)
					cfg.Deliveries = j.signal.deliveries(j.up, cfg.Covered, end, rand.New(rand.NewPCG(seed, uint64(j.k)+2000)))
				}
				rs := run(j.pop, j.up, s, cfg, rng)
				section := ""
				if j.signal != nil {
					section = j.signal.Section
				}
				for k, r := range rs {
					log.Info("run", "section", section, "realistic", j.realistic, "drift", j.drift, "signal_fetches", r.SignalFetches, "window", cfg.Windows[k], "policy", r.Policy, "budget", r.Budget,
						"lag_mean_h", round(r.LagMeanH), "lag_p99_h", round(r.LagP99H), "dormant_polls", round(r.DormantPolls),
						"censored", r.Censored)
				}
				runs[j.k] = rs
			}
		})
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()

	def, _ := priority.ByName("")
	var opt []results.FreshnessAnalytic
	for _, b := range budgets {
		opt = append(opt, results.FreshnessAnalytic{Budget: b, LagMeanH: analyticOptimum(pop, b*float64(n)) * 24})
	}
	res := results.Freshness{Meta: meta, Setup: setup, Population: desc, Optimum: opt}
	if withRealistic {
		rd := describe(real, realSteady, d.warmup, d.warmup+d.window)
		rd.Realism = describeRealism(real, realSteady)
		res.PopulationRealistic = &rd
	}
	brng := rand.New(rand.NewPCG(seed, 0xb0))
	for _, b := range []struct {
		section string
		day     float64
	}{{"coldstart", d.cold / 2}, {"runs", d.warmup + d.window/2}} {
		x := bound(pop, b.day, 2, brng)
		x.Section = b.section
		res.Bound = append(res.Bound, x)
	}
	// The bounds with everything a first clone and the fetches show, for both populations.
	for _, b := range []struct {
		section string
		day     float64
		real    bool
	}{{"coldstart", d.cold / 2, false}, {"runs", d.warmup + d.window/2, false},
		{"coldstart_realistic", d.cold / 2, true}, {"runs_realistic", d.warmup + d.window/2, true}} {
		if b.real && !withRealistic {
			continue
		}
		draw := func(s uint64) Upstream {
			return NewPopulation(n, s, targets).NewUpstream(s, b.day+1, 0, batch, targets)
		}
		evalSeed := seed
		if b.real {
			draw = func(s uint64) Upstream {
				return NewRealisticPopulation(n, s, targets, realism).NewUpstream(s^0x5ea1, b.day+1, 0, batch, targets)
			}
		}
		x := infoBound(draw, evalSeed, b.day)
		x.Section = b.section
		log.Info("bound", "section", x.Section, "evidence", x.Evidence, "ratio", round(x.Ratio), "dormant_polls", round(x.DormantPolls))
		res.Bound = append(res.Bound, x)
	}
	if drifting != nil {
		// Three days across the measured window: the silent share moves as repos wake.
		x := driftBound(pop, drifting, drift, []float64{d.warmup + d.window/6, d.warmup + d.window/2, d.warmup + 5*d.window/6}, brng)
		x.Section = "drift"
		res.Bound = append(res.Bound, x)
	}
	for _, j := range jobs {
		rs := runs[j.k]
		for k := range rs {
			rs[k].Default = rs[k].Policy == def.Name()
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
	for _, p := range policyDocs {
		p.Default = p.Name == def.Name()
		res.Policies = append(res.Policies, p)
	}
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
	{Name: "bayes", Description: "priority.Bayes: the expected current push rate under the prior the worker learns from its repos (empirical Bayes on a grid of rates with a dormant point mass, and a learned rate of changes of behaviour); a repo's evidence is the pushes (bursts of commits less than " + fmt.Sprint(priority.SessionGap.Hours()) + " h apart) its first clone's history and its fetches showed, judged every " + fmt.Sprint(priority.Window.Hours()/24) + " days as a change of behaviour or not; step 1/√rate, the rate held above " + fmt.Sprint(priority.MinRate) + "/day",
		Uses: "the commit times each fetch brought, the first clone's history (bounded), the time between polls, the prior learned from the worker's other repos"},
	{Name: "optimum", Description: "reference: the true current rates, periodic polls at f ∝ √λ, never polls a repo while it does not change",
		Uses: "the true push rates (not knowable)"},
	{Name: "optimum04", Description: "reference: the optimum's periodic polls at f ∝ λ^0.4 instead of √λ, which gives up a little of the mean for a shorter tail",
		Uses: "the true push rates (not knowable)"},
}
