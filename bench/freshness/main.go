// Command freshness measures how fresh the mirrors stay under a fixed poll budget for
// each scheduling policy, on a simulated population of upstream repos shaped like a
// public forge's, and writes bench/results/freshness.json.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
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
	parallel := flag.Int("parallel", 2, "simulations run at once")
	only := flag.String("policies", "", "comma-separated policies to run (default: all)")
	drift := flag.Float64("drift", 0.1, "for the drift runs: chance per month that a repo draws a new rate (0: no drift runs)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	bs, err := parseBudgets(*budgets)
	if err != nil {
		log.Error("bad -budgets", "err", err)
		os.Exit(2)
	}
	res := measure(log, *repos, *seed, bs, *warmup, *window, *drain, *parallel, *only, *drift)
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
// freshGoalBudgets are the budgets the goals are checked at; the drift runs use them too.
var freshGoalBudgets = []float64{0.5, 2}

var targets = Targets{Dormant: 0.5, TopFraction: 0.025, TopShare: 0.5, MonthlyChanged: 0.13}

func measure(log *slog.Logger, n int, seed uint64, budgets []float64, warmup, window, drain float64, parallel int, only string, drift float64) results.Freshness {
	meta := results.Collect()
	pop := NewPopulation(n, seed, targets)
	end := warmup + window + drain
	commits := pop.Commits(seed, end)
	setup := results.FreshnessSetup{Repos: n, Seed: seed, WarmupDays: warmup, WindowDays: window, DrainDays: drain,
		MinIntervalMin: 5, Budgets: budgets}
	var drifting [][]float64
	if drift > 0 {
		setup.DriftPerMonth = drift
		for _, b := range freshGoalBudgets {
			if slices.Contains(budgets, b) {
				setup.DriftBudgets = append(setup.DriftBudgets, b)
			}
		}
		drifting = pop.DriftingCommits(seed, end, drift, targets)
	}
	desc := describe(pop, commits, warmup, warmup+window)
	log.Info("population", "repos", n, "sigma", desc.Sigma, "mu", desc.Mu, "top_share", desc.MeasuredTopShare,
		"monthly_changed", desc.MeasuredMonthly, "window_commits", desc.WindowCommits)

	type job struct {
		k       int
		budget  float64
		make    func() scheduler
		commits [][]float64
		drift   bool
	}
	var jobs []job
	for _, b := range budgets {
		for _, mk := range schedulers(pop, nil) {
			if only != "" && !slices.Contains(strings.Split(only, ","), mk().name()) {
				continue
			}
			jobs = append(jobs, job{len(jobs), b, mk, commits, false})
		}
	}
	for _, b := range setup.DriftBudgets {
		for _, mk := range schedulers(pop, nil) {
			name := mk().name()
			// The optimum would have to foresee each change of rate; it is left out.
			if name == "optimum" || (only != "" && !slices.Contains(strings.Split(only, ","), name)) {
				continue
			}
			jobs = append(jobs, job{len(jobs), b, mk, drifting, true})
		}
	}
	runs := make([]results.FreshnessRun, len(jobs))
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
				cfg := runConfig{Budget: j.budget, Warmup: warmup, Window: window, Drain: drain,
					MinInterval: setup.MinIntervalMin / (24 * 60), Seed: seed}
				r := run(pop, j.commits, s, cfg, rng)
				log.Info("run", "drift", j.drift, "policy", r.Policy, "budget", r.Budget, "lag_mean_h", round(r.LagMeanH),
					"lag_p99_h", round(r.LagP99H), "freshness", round(r.Freshness), "censored", r.Censored)
				runs[j.k] = r
			}
		})
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()

	var opt []results.FreshnessAnalytic
	for _, b := range budgets {
		opt = append(opt, results.FreshnessAnalytic{Budget: b, LagMeanH: analyticOptimum(pop, b*float64(n)) * 24})
	}
	var steady, drifted []results.FreshnessRun
	for _, j := range jobs {
		if j.drift {
			drifted = append(drifted, runs[j.k])
		} else {
			steady = append(steady, runs[j.k])
		}
	}
	meta.Finish()
	return results.Freshness{Meta: meta, Setup: setup, Population: desc, Runs: steady, Drift: drifted, Optimum: opt, Policies: policyDocs}
}

func round(v float64) float64 { return math.Round(v*1000) / 1000 }

// describe measures the simulated population against the targets.
func describe(pop Population, commits [][]float64, ws, we float64) results.FreshnessPopulation {
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
		for _, t := range commits[i] {
			if t >= ws && t < we {
				counts[i]++
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
	// Share of repos with a commit, averaged over the window's 30-day stretches.
	months := int((we - ws) / 30)
	for m := range months {
		a, b := ws+30*float64(m), ws+30*float64(m+1)
		changed := 0
		for _, ts := range commits {
			k, _ := slices.BinarySearch(ts, a)
			if k < len(ts) && ts[k] < b {
				changed++
			}
		}
		d.MeasuredMonthly += float64(changed) / float64(n) / float64(months)
	}
	return d
}

var policyDocs = []results.FreshnessPolicyDoc{
	{Name: "uniform", Description: "round-robin: every repo polled in turn, whatever it does"},
	{Name: "swh", Description: "Software Heritage's origin-visit policy: offset −2 after a visit that found changes, +1 otherwise (0…10, from 4); next visit 1 day (offset 0–1), 2 days (2–4) or 4^(offset−4) days later in queue time, ±10 % fudge"},
	{Name: "cbrt", Description: "the seed's policy (priority.Cbrt): step cbrt(seconds since the newest commit)"},
	{Name: "rate", Description: "ours (priority.Rate): change rate estimated from what the polls saw (Cho & Garcia-Molina, decayed with a " + fmt.Sprint(priority.HalfLife.Hours()/24) + "-day half-life; half a change over the longest known quiet stretch when polls saw none); step 1/√rate"},
	{Name: "optimum", Description: "reference: the true rates, periodic polls at f ∝ √λ, never polls a repo that does not change"},
}
