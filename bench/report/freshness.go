package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/plot"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// Goals of the freshness benchmark: the default policy's mean lag over the optimum's in
// each section, and its p99 over the optimum's p99 in every section.
var freshGoals = map[string]float64{"runs": 1.10, "coldstart": 1.25, "drift": 1.25}

const (
	freshGoalP99 = 1.2
	freshOpt     = "optimum"
)

// freshRuns indexes one section's runs by policy and budget.
type freshRuns map[string]map[float64]results.FreshnessRun

func indexRuns(rs []results.FreshnessRun) freshRuns {
	out := freshRuns{}
	for _, x := range rs {
		if out[x.Policy] == nil {
			out[x.Policy] = map[float64]results.FreshnessRun{}
		}
		out[x.Policy][x.Budget] = x
	}
	return out
}

// freshSection is one measured section of freshness.json.
type freshSection struct {
	key, title string
	budgets    []float64
	runs       freshRuns
}

func freshSections(v results.Freshness) []freshSection {
	return []freshSection{
		{"runs", fmt.Sprintf("Stationary, after %g days (days %g–%g)", v.Setup.WarmupDays, v.Setup.WarmupDays, v.Setup.WarmupDays+v.Setup.WindowDays), v.Setup.Budgets, indexRuns(v.Runs)},
		{"coldstart", fmt.Sprintf("Cold start: every repo new on day 0, days 0–%g", v.Setup.ColdStartDays), v.Setup.Budgets, indexRuns(v.ColdStart)},
		{"drift", fmt.Sprintf("Drift: %.0f%% of repos draw a new rate a month, days %g–%g", 100*v.Setup.DriftPerMonth, v.Setup.WarmupDays, v.Setup.WarmupDays+v.Setup.WindowDays), v.Setup.DriftBudgets, indexRuns(v.Drift)},
	}
}

// defaultPolicy is the name of the policy marked default.
func defaultPolicy(v results.Freshness) (string, error) {
	for _, p := range v.Policies {
		if p.Default {
			return p.Name, nil
		}
	}
	return "", fmt.Errorf("freshness: no policy is marked default")
}

// freshnessSection renders freshness.json: lag, freshness and age per policy and budget.
func freshnessSection(r *Report) (string, results.Meta, error) {
	var v results.Freshness
	if err := r.Load("freshness", &v); err != nil {
		return "", results.Meta{}, err
	}
	def, err := defaultPolicy(v)
	if err != nil {
		return "", v.Meta, err
	}
	var names []string
	for _, p := range v.Policies {
		names = append(names, p.Name)
	}
	for _, need := range []string{def, freshOpt, "uniform", "cbrt", "rate", "swh"} {
		if !slices.Contains(names, need) {
			return "", v.Meta, fmt.Errorf("freshness: policy %s not measured", need)
		}
	}
	secs := freshSections(v)
	for _, s := range secs {
		for _, n := range names {
			for _, b := range s.budgets {
				if _, ok := s.runs[n][b]; !ok {
					return "", v.Meta, fmt.Errorf("freshness: no %s run of %s at budget %g", s.key, n, b)
				}
			}
		}
	}
	p := v.Population
	var md strings.Builder
	md.WriteString("## 1. Freshness\n\n")
	md.WriteString("What a user of a mirror feels is **lag**: the time from a push upstream until the mirror has it, counted once per commit the push carried. ")
	fmt.Fprintf(&md, "Each policy below schedules %s simulated upstream repos from the worker's own priority queue "+
		"(`shared/worker.Queue`, the same %g-minute minimum interval per repo) under a fixed poll budget; the production "+
		"policies (`cbrt`, `rate`, `bayes`) are the code the workers run, fed what a worker's mirror reports and learning "+
		"what a worker learns (`priority.Fold`, `priority.Fit`). Every policy sees exactly the same pushes. The fleet "+
		"starts on day 0 with every repo new (its first poll clones it); the **cold start** is measured over days 0–%g, "+
		"the **stationary** section after %g days over %g days, then %g more days run so late pushes are seen "+
		"(censored commits, if any, count with the lag they had at the end). The **optimum** in every section knows each "+
		"repo's true current rate λ and polls it periodically at f ∝ √λ (it never polls a repo while it is dormant).\n\n",
		fmtInt(v.Setup.Repos), v.Setup.MinIntervalMin, v.Setup.ColdStartDays, v.Setup.WarmupDays, v.Setup.WindowDays, v.Setup.DrainDays)

	md.WriteString("**Population.** ")
	fmt.Fprintf(&md, "%.0f%% of the repos are dormant (no push during the run; last touched 1–8 years ago). The others "+
		"push as Poisson processes with log-normal rates (σ = %.2f, median %.4f pushes/day, p99 %.3f, max %.2f), "+
		"with σ tuned so that the top %.1f%% of repos hold %.0f%% of the pushes and the scale so that %.0f%% of all "+
		"repos change in a month. Measured on the simulated commits of the window: the top %.1f%% made **%.1f%%** of "+
		"the %s commits and **%.1f%%** of repos changed per 30 days.\n\n",
		100*p.DormantShare, p.Sigma, p.MedianActivePerDay, p.P99PerDay, p.MaxPerDay, 100*p.TopFraction,
		100*p.TargetTopShare, 100*p.TargetMonthly, 100*p.TopFraction, 100*p.MeasuredTopShare,
		fmtInt(p.WindowCommits), 100*p.MeasuredMonthly)
	md.WriteString("Sources for the shape: Open Hub's census of open-source projects " +
		"(<https://blog.openhub.net/2012/04/measuring-project-activity/>) counted 96,824 projects with a commit in the " +
		"past two years, of which 46,883 (48%) had one in the past year and 12,870 (**13.3%**) in the past month — " +
		"about half dormant and 13% changing per month; Kalliamvakou et al., *The Promises and Perils of Mining " +
		"GitHub* (MSR 2014), found that the majority of GitHub projects are personal and inactive and that commits " +
		"concentrate in few projects. The top-2.5%-hold-half concentration is the figure this benchmark was specified " +
		"with; we did not find its primary source, so read it as an assumption that sets how heavy the tail is.\n\n")
	bt := v.Setup.Batch
	fmt.Fprintf(&md, "**What a worker sees.** A push carries 1 + a geometric number of commits (mean %g). Its newest "+
		"commit was authored a log-normal time before the push (median %g min), each earlier one a further log-normal "+
		"gap (median %g min; σ = %g for both), and %.0f%% of pushes bring a branch worked on earlier (its commits a "+
		"further log-normal median %g days older). These figures are assumptions, not measurements. A policy never "+
		"sees a push's time: a fetch reports the times of the commits it brought, a first clone the newest %s commits "+
		"of the last %.0f years of history (or back to the repo's first commit), as `shared/mirror` does. Before day 0 "+
		"an active repo pushed at its rate for years; a dormant one was made with a burst of pushes over a few days "+
		"(7 on average), its last touch, then left.\n\n",
		bt.MeanCommits, bt.NewestDelayMin, bt.GapMin, bt.Sigma, 100*bt.BranchShare, bt.BranchDelayDays,
		fmtInt(v.Setup.MaxHistoryCommits), v.Setup.HistoryWindowDays/365)

	md.WriteString("**Policies** and the information each decides from:\n\n| policy | what it does | information it uses |\n|---|---|---|\n")
	for _, d := range v.Policies {
		name := "`" + d.Name + "`"
		if d.Default {
			name = "**`" + d.Name + "` (default)**"
		}
		fmt.Fprintf(&md, "| %s | %s | %s |\n", name, d.Description, d.Uses)
	}
	md.WriteString("\n")

	md.WriteString(freshGoalTable(secs, def))
	for _, s := range secs {
		md.WriteString(freshSectionTable(v, s, def))
	}
	if b := 0.5; slices.Contains(v.Setup.Budgets, b) {
		md.WriteString(freshDetail(v, secs[0], def, b))
	}
	chart, err := freshChart(r, v, secs[0].runs)
	if err != nil {
		return "", v.Meta, err
	}
	md.WriteString(chart)
	md.WriteString(freshCosts(v))
	md.WriteString(freshExplain(v, secs, def))
	return md.String(), v.Meta, nil
}

// freshGoalTable is the default policy against each goal, at every budget.
func freshGoalTable(secs []freshSection, def string) string {
	var md strings.Builder
	fmt.Fprintf(&md, "**Goals** (`%s`, the default, over the optimum of the same section):\n\n| budget (polls/repo/day) |", def)
	for _, s := range secs {
		fmt.Fprintf(&md, " %s mean (goal ≤ %g) | %s p99 (goal ≤ %g) |", s.key, freshGoals[s.key], s.key, freshGoalP99)
	}
	md.WriteString("\n|---|" + strings.Repeat("---|---|", len(secs)) + "\n")
	for _, b := range secs[0].budgets {
		fmt.Fprintf(&md, "| %g |", b)
		for _, s := range secs {
			ours, ok := s.runs[def][b]
			if !ok {
				md.WriteString(" — | — |")
				continue
			}
			opt := s.runs[freshOpt][b]
			mean, p99 := ours.LagMeanH/opt.LagMeanH, ours.LagP99H/opt.LagP99H
			fmt.Fprintf(&md, " %s | %s |", mark(mean, mean <= freshGoals[s.key]), mark(p99, p99 <= freshGoalP99))
		}
		md.WriteString("\n")
	}
	md.WriteString("\n")
	return md.String()
}

// mark formats a ratio with whether its goal is met.
func mark(v float64, ok bool) string {
	if ok {
		return fmt.Sprintf("%.2f ✅", v)
	}
	return fmt.Sprintf("%.2f ❌", v)
}

// freshSectionTable is every policy's mean and p99 lag at every budget of a section.
func freshSectionTable(v results.Freshness, s freshSection, def string) string {
	var md strings.Builder
	fmt.Fprintf(&md, "**%s** — mean lag in hours (× the optimum's), then p99 lag in hours (× the optimum's):\n\n| policy |", s.title)
	for _, b := range s.budgets {
		fmt.Fprintf(&md, " mean, %g |", b)
	}
	for _, b := range s.budgets {
		fmt.Fprintf(&md, " p99, %g |", b)
	}
	md.WriteString("\n|---|" + strings.Repeat("---|", 2*len(s.budgets)) + "\n")
	for _, d := range v.Policies {
		name := "`" + d.Name + "`"
		if d.Name == def {
			name = "**`" + d.Name + "`**"
		}
		fmt.Fprintf(&md, "| %s |", name)
		for _, b := range s.budgets {
			x, o := s.runs[d.Name][b], s.runs[freshOpt][b]
			fmt.Fprintf(&md, " %.2f (%.2f) |", x.LagMeanH, x.LagMeanH/o.LagMeanH)
		}
		for _, b := range s.budgets {
			x, o := s.runs[d.Name][b], s.runs[freshOpt][b]
			fmt.Fprintf(&md, " %.1f (%.2f) |", x.LagP99H, x.LagP99H/o.LagP99H)
		}
		md.WriteString("\n")
	}
	if s.key == "runs" {
		md.WriteString("| optimum, closed form (Σ√λ)²/(2·B·N·Σλ) |")
		for _, b := range s.budgets {
			for _, a := range v.Optimum {
				if a.Budget == b {
					fmt.Fprintf(&md, " %.2f (%.2f) |", a.LagMeanH, a.LagMeanH/s.runs[freshOpt][b].LagMeanH)
				}
			}
		}
		md.WriteString(strings.Repeat(" |", len(s.budgets)) + "\n")
	}
	md.WriteString("\n")
	return md.String()
}

// freshDetail is every figure of one budget of a section.
func freshDetail(v results.Freshness, s freshSection, def string, b float64) string {
	var md strings.Builder
	fmt.Fprintf(&md, "**Stationary, budget %g polls per repo per day** (%s polls/day for the fleet), every figure:\n\n", b, fmtInt(int(math.Round(b*float64(v.Setup.Repos)))))
	md.WriteString("| policy | mean lag (h) | × optimum | p50 lag (h) | p99 lag (h) | mean freshness | mean age (h) | polls on dormant repos | polls that found a change | censored |\n|---|---|---|---|---|---|---|---|---|---|\n")
	opt := s.runs[freshOpt][b].LagMeanH
	for _, d := range v.Policies {
		x := s.runs[d.Name][b]
		name := "`" + d.Name + "`"
		if d.Name == def {
			name = "**`" + d.Name + "` (default)**"
		}
		fmt.Fprintf(&md, "| %s | %.2f | %.2f | %.2f | %.1f | %.4f | %.3f | %.1f%% | %.2f%% | %d |\n", name, x.LagMeanH,
			x.LagMeanH/opt, x.LagP50H, x.LagP99H, x.Freshness, x.AgeMeanH, 100*x.DormantPolls, 100*x.ChangingPolls, x.Censored)
	}
	md.WriteString("\n")
	return md.String()
}

func freshChart(r *Report, v results.Freshness, runs freshRuns) (string, error) {
	mean := plot.Line{Title: "Mean push-to-mirror lag against the poll budget (stationary)", XLabel: "polls per repo per day",
		YLabel: "mean lag (hours)", LogX: true, LogY: true}
	p99 := plot.Line{Title: "p99 push-to-mirror lag against the poll budget (stationary)", XLabel: "polls per repo per day",
		YLabel: "p99 lag (hours)", LogX: true, LogY: true}
	for _, d := range v.Policies {
		sm := plot.Series{Name: d.Name, Dash: d.Name == freshOpt}
		s99 := plot.Series{Name: d.Name, Dash: d.Name == freshOpt}
		for _, b := range v.Setup.Budgets {
			x := runs[d.Name][b]
			sm.X, sm.Y = append(sm.X, b), append(sm.Y, x.LagMeanH)
			s99.X, s99.Y = append(s99.X, b), append(s99.Y, x.LagP99H)
		}
		mean.Series = append(mean.Series, sm)
		p99.Series = append(p99.Series, s99)
	}
	a, err := r.Plot("freshness-lag-mean.svg", "mean lag against budget", mean)
	if err != nil {
		return "", err
	}
	b, err := r.Plot("freshness-lag-p99.svg", "p99 lag against budget", p99)
	if err != nil {
		return "", err
	}
	return a + "\n" + b + "\n", nil
}

// freshCosts is what the default policy costs a worker.
func freshCosts(v results.Freshness) string {
	c := v.Costs
	if c.Policy == "" {
		return ""
	}
	var md strings.Builder
	fmt.Fprintf(&md, "**What `%s` costs a worker** (`testing.Benchmark` in the same run):\n\n", c.Policy)
	fmt.Fprintf(&md, "- Memory per owned repo for scheduling (its queue entry and its record, the policy's stats "+
		"included), heap bytes over %s repos: **%.0f B**.\n", fmtInt(c.ReposMeasured), c.BytesPerRepo)
	fmt.Fprintf(&md, "- One priority decision: %.2f µs; folding a poll that brought commits into the stats: %.2f µs; "+
		"learning the prior from %s repos: %.0f ms (weekly, and while a new fleet's clones come in).\n",
		c.NextNs/1000, c.FoldNs/1000, fmtInt(c.ReposMeasured), c.FitMs)
	if len(c.Walks) > 0 {
		md.WriteString("- Reading commit times from a real mirror (generated repositories, go-git, as `shared/mirror` does " +
			"after a fetch and a first clone), against reading the whole history:\n\n" +
			"| repository | commits | refs | a fetch's new commits | listing them (ms) | first clone: commits listed | listing them (ms) | whole history (ms) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, w := range c.Walks {
			fmt.Fprintf(&md, "| %s | %s | %s | %d | %.2f | %s | %.1f | %.1f |\n", w.Repo, fmtInt(w.Commits), fmtInt(w.Refs),
				w.NewCommits, w.NewWalkMs, fmtInt(w.HistoryListed), w.HistoryMs, w.FullWalkMs)
		}
	}
	md.WriteString("\n")
	return md.String()
}

// freshExplain reads the figures, with the arithmetic behind each goal not met.
func freshExplain(v results.Freshness, secs []freshSection, def string) string {
	var md strings.Builder
	md.WriteString("**Reading the figures.**\n\n")
	b := 0.5
	if !slices.Contains(v.Setup.Budgets, b) {
		b = v.Setup.Budgets[0]
	}
	runs, cold, drift := secs[0].runs, secs[1].runs, secs[2].runs
	ours, opt := runs[def][b], runs[freshOpt][b]
	for _, x := range v.Bound {
		if x.Section != "runs" {
			continue
		}
		fmt.Fprintf(&md, "- **Stationary.** `%s` is at %.2f× the optimum at %g polls/repo/day; it spends %.1f%% of "+
			"its polls on repos that never change (the optimum none), which alone costs 1/(1 − %.3f) = %.2f×. Those polls "+
			"are not waste a worker could avoid: a repo silent for a few years is, to anything but the optimum, as likely "+
			"a slow repo as a dead one. The bound: a policy that knew the population's true prior and the exact number of "+
			"pushes of every repo over the %.0f days it could have seen (history and polls), allocating f ∝ √E[λ | pushes], "+
			"would be at **%.2f×** the optimum, with %.1f%% of its polls on dormant repos — so the goal of %.2f is out of "+
			"reach by %.0f%% for any policy with a worker's information; `%s` is %.0f%% above that bound (estimating the "+
			"prior, counting pushes from commit times, allowing for changes of behaviour).\n",
			def, ours.LagMeanH/opt.LagMeanH, b, 100*ours.DormantPolls, ours.DormantPolls, 1/(1-ours.DormantPolls),
			x.SeenDays, x.Ratio, 100*x.DormantPolls, freshGoals["runs"], 100*(x.Ratio/freshGoals["runs"]-1), def,
			100*(ours.LagMeanH/opt.LagMeanH/x.Ratio-1))
	}
	for _, x := range v.Bound {
		if x.Section != "coldstart" {
			continue
		}
		c, co := cold[def][b], cold[freshOpt][b]
		lo := v.Setup.Budgets[0]
		fmt.Fprintf(&md, "- **Cold start.** A new fleet must clone every repo before it knows anything of it; at B polls "+
			"per repo per day that takes at least 1/B days (%g days at %g), while the optimum polls a busy repo within its "+
			"short period from the first hour. `%s` clones first (a clone tells a repo's history) and is at %.2f× the "+
			"optimum at %g, %.2f× at %g. The bound with a perfect prior after %.0f days of history is %.2f×, before the "+
			"first pass is counted.\n", 1/lo, lo, def, c.LagMeanH/co.LagMeanH, b,
			cold[def][lo].LagMeanH/cold[freshOpt][lo].LagMeanH, lo, x.SeenDays, x.Ratio)
	}
	d, do := drift[def][b], drift[freshOpt][b]
	if do.LagMeanH > 0 && do.FirstPushShare > 0 {
		q := v.Population.DormantShare
		rest := do.LagMeanH - do.FirstPushShare*do.FirstPushLagH
		// A policy that polls the quiet share q of the fleet with a share s of its budget
		// waits q/(s·B)/2 days for a first push after a change, and leaves the rest of
		// the budget to the others: mean ≥ rest/(1 − s) + share·12·q/(s·B) hours.
		f := do.FirstPushShare * 12 * q / b
		lower := (math.Sqrt(rest) + math.Sqrt(f)) * (math.Sqrt(rest) + math.Sqrt(f))
		p99 := freshGoalP99 * do.LagP99H / 24
		need := q * (1 - 0.01/do.FirstPushShare) / (b * p99)
		fmt.Fprintf(&md, "- **Drift.** %.1f%% of the commits come in a repo's first push after it changed rate; no "+
			"policy can know of the change before it polls after that push. The optimum, which knows, mirrors them in "+
			"%.1f h on average; `%s` in %.1f h. The arithmetic: a policy that spends a share s of its polls on the quiet "+
			"half of the fleet (%.0f%% of repos are dormant at any time) waits q/(2·s·B) days for such a push and leaves "+
			"the optimum's other %.2f h to 1 − s of the budget, so its mean is at least %.2f/(1 − s) + %.3f·12·%.2f/(s·%g) "+
			"hours, smallest at (√%.2f + √%.2f)² = **%.2f h = %.2f× the optimum**: the goal of %.2f is out of reach "+
			"at any budget (the ratio does not depend on B). `%s` is at %.2f×, having learned %.1f%% changes a month "+
			"(the simulation draws %.0f%%; changes between two dormant states cannot be seen). The p99 goal asks that "+
			"at most 1%% of commits wait over %.1f h; with %.1f%% of commits in first pushes that means polling every "+
			"quiet repo at least every %.1f h·(1 − 1%%/%.1f%%)⁻¹, i.e. s ≥ %.2f of the budget on quiet repos alone — "+
			"%s.\n",
			100*do.FirstPushShare, do.FirstPushLagH, def, d.FirstPushLagH, 100*q, rest, rest, do.FirstPushShare, q, b,
			rest, f, lower, lower/do.LagMeanH, freshGoals["drift"], def, d.LagMeanH/do.LagMeanH,
			100*d.LearnedHazardPerMonth, 100*v.Setup.DriftPerMonth, 24*p99, 100*do.FirstPushShare, 24*p99,
			100*do.FirstPushShare, need, p99Verdict(need))
	}
	fmt.Fprintf(&md, "- **The tail.** `%s` polls every repo at least as often as one pushing once in 27 years (1e-4 a "+
		"day), so no wait grows without bound, and a slow repo at least for 2e-3 pushes a day times the chance that "+
		"it pushes at least once in 2,000 days (the tail guard, about 1%% of the mean); its p99 is %.2f× the "+
		"optimum's in the stationary section at %g (`rate` %.2f×, `cbrt` %.2f×). The p99 is set by slow repos that a "+
		"worker cannot tell from dormant ones: a stronger guard shortens it, by taking polls from the busy repos that set "+
		"the mean.\n",
		def, ours.LagP99H/opt.LagP99H, b, runs["rate"][b].LagP99H/opt.LagP99H, runs["cbrt"][b].LagP99H/opt.LagP99H)
	uni := runs["uniform"][b]
	fmt.Fprintf(&md, "- Against the earlier policies at %g: `%s` %.2f h, `rate` %.2f h, `cbrt` %.2f h, uniform %.2f h "+
		"(the optimum %.2f h; uniform ÷ optimum = %.2f, the most any policy could gain here: for periodic polls it is "+
		"E[λ]/E[√λ]² over all repos, e^(σ²/4)/0.5 = %.2f for σ = %.2f with half the repos dormant).\n",
		b, def, ours.LagMeanH, runs["rate"][b].LagMeanH, runs["cbrt"][b].LagMeanH, uni.LagMeanH, opt.LagMeanH,
		uni.LagMeanH/opt.LagMeanH, math.Exp(v.Population.Sigma*v.Population.Sigma/4)/(1-v.Population.DormantShare), v.Population.Sigma)
	md.WriteString("- Software Heritage's policy is built for a different job (archiving billions of origins, where " +
		"a visit is expensive and a day's delay is fine): its intervals are whole days, so at these budgets it " +
		"behaves like round-robin.\n")
	md.WriteString("- Freshness (share of repos up to date) is above 98% for every policy because half the repos " +
		"never change; the lag columns are the ones that separate the policies.\n\n")
	return md.String()
}

// p99Verdict says what spending the share need of the budget on quiet repos leaves.
func p99Verdict(need float64) string {
	if need >= 1 {
		return "more than the whole budget"
	}
	return fmt.Sprintf("leaving %.0f%% of the polls for every other repo, so the mean would be at least the optimum's "+
		"other lag ÷ %.2f", 100*(1-need), 1-need)
}
