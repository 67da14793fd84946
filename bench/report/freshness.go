package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/plot"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// The goals of the freshness benchmark are the results' own (results.FreshnessGoal:
// each names its reference); the p99 goal is also read by the arithmetic of the drift
// section's tail.
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

// freshRealisticSections are the sections of the realistic population, if it was run.
func freshRealisticSections(v results.Freshness) []freshSection {
	if v.PopulationRealistic == nil {
		return nil
	}
	out := []freshSection{
		{"runs_realistic", fmt.Sprintf("Realistic population, stationary (days %g–%g)", v.Setup.WarmupDays, v.Setup.WarmupDays+v.Setup.WindowDays), v.Setup.Budgets, indexRuns(v.RunsRealistic)},
		{"coldstart_realistic", fmt.Sprintf("Realistic population, cold start (days 0–%g)", v.Setup.ColdStartDays), v.Setup.Budgets, indexRuns(v.ColdStartRealistic)},
	}
	if len(v.DriftRealistic) > 0 {
		out = append(out, freshSection{"drift_realistic", fmt.Sprintf("Realistic population, drift (%.0f%% of repos a month)", 100*v.Setup.DriftPerMonth), v.Setup.DriftBudgets, indexRuns(v.DriftRealistic)})
	}
	return out
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
	simulated := freshClosedFormOptimum(&v)
	secs := freshSections(v)
	real := freshRealisticSections(v)
	// Every section has the default policy and the optimum; the policies it is compared
	// with are simulated where the results say (a table shows "—" elsewhere).
	for _, s := range append(slices.Clone(secs), real...) {
		for _, n := range []string{def, freshOpt} {
			for _, b := range s.budgets {
				if _, ok := s.runs[n][b]; !ok {
					return "", v.Meta, fmt.Errorf("freshness: no %s run of %s at budget %g", s.key, n, b)
				}
			}
		}
	}
	chart, err := freshChart(r, v, secs[0].runs)
	if err != nil {
		return "", v.Meta, err
	}
	type section struct {
		Key, Title string
		Budgets    []float64
		Rows       []freshRow
		ClosedForm bool
		Closed     []string
	}
	var sections []section
	for _, s := range append(slices.Clone(secs), real...) {
		sections = append(sections, section{Key: s.key, Title: s.title, Budgets: s.budgets,
			Rows: freshSectionRows(v, s, def), ClosedForm: len(simulated[s.key]) > 0, Closed: freshSimulatedOptimum(s, simulated[s.key])})
	}
	var costs *results.FreshnessCosts
	if v.Costs.Policy != "" {
		costs = &v.Costs
	}
	signals, err := freshSignalRows(v, def)
	if err != nil {
		return "", v.Meta, err
	}
	var detail *freshDetailFigures
	if b := 0.5; slices.Contains(v.Setup.Budgets, b) {
		detail = freshDetail(v, secs[0], def, b)
	}
	// The study over seeds runs at a smaller scale in a file of its own; without it, the
	// goals come from freshness.json if it was run over seeds.
	// Decoded into a value of its own: decoding into a copy of v would write its
	// bounds and rows over v's (the slices share their arrays).
	var seeds results.Freshness
	if err := r.Load("freshness_seeds", &seeds); errors.Is(err, fs.ErrNotExist) {
		seeds = v
	} else if err != nil {
		return "", v.Meta, err
	}
	md, err := render("freshness", struct {
		V            results.Freshness
		Default      string
		HistoryYears float64
		GoalTable    []freshGoalTableRow
		Sections     []section
		Detail       *freshDetailFigures
		Chart        string
		Costs        *results.FreshnessCosts
		Explain      []string
		Signals      []freshSignalRow
		Bounds       []freshBoundRow
		GoalSpread   []freshGoalSpreadRow
		Seeds        results.Freshness
	}{v, def, v.Setup.HistoryWindowDays / 365, freshGoalTable(seeds, v), sections, detail, chart, costs,
		freshExplain(v, secs, def), signals, freshBoundRows(v, def), freshGoalSpreadRows(seeds), seeds})
	return md, v.Meta, err
}

// freshPolicyName is how a table names a policy: bold for the default, with "(default)"
// where the table says so.
type freshPolicyName struct {
	Name          string
	Bold, Default bool
}

func freshPolicy(name string, bold, def bool) freshPolicyName {
	return freshPolicyName{Name: name, Bold: bold, Default: def}
}

// freshGoalTableRow is one goal as the issue states it: its section, its target and the
// reference it divides by, the mean over the seeds and each seed's figure (against
// that seed's own reference), and the other budgets' figures.
type freshGoalTableRow struct {
	Section, Goal, Of, Mean, PerSeed, Met, Others string
}

// goalBudget is the budget the goals are set at; the others are reported beside them.
const goalBudget = 0.5

// freshGoalTable is the goals of the study over seeds (seeds) at goalBudget (at every
// budget it ran, if not that one), with the other budgets' figures beside each: their
// mean over the seeds where the study ran them, else the fleet's results' (v, one seed).
func freshGoalTable(seeds, v results.Freshness) []freshGoalTableRow {
	atGoal := slices.ContainsFunc(seeds.Goals, func(g results.FreshnessGoal) bool { return g.Budget == goalBudget })
	var rows []freshGoalTableRow
	for _, g := range seeds.Goals {
		if atGoal && g.Budget != goalBudget {
			continue
		}
		r := freshGoalTableRow{Section: g.Section, Goal: fmt.Sprintf("≤ %g× (%s, %g polls/repo/day)", g.Target, g.Goal, g.Budget), Of: g.Of,
			Mean: fmt.Sprintf("%.3f", g.Spread.Mean)}
		if g.Seeds < 2 {
			r.Mean = fmt.Sprintf("%.3f (one seed)", g.Value)
		}
		var per []string
		for _, x := range g.PerSeed {
			per = append(per, fmt.Sprintf("%.3f", x))
		}
		r.PerSeed = strings.Join(per, ", ")
		if r.PerSeed == "" {
			r.PerSeed = "—"
		}
		switch {
		case g.MetMean:
			r.Met = "✅"
		default:
			r.Met = "❌"
		}
		r.Others = otherBudgets(g, seeds.Goals, true)
		if r.Others == "" {
			r.Others = otherBudgets(g, v.Goals, false)
		}
		if r.Others == "" {
			r.Others = "—"
		}
		rows = append(rows, r)
	}
	return rows
}

// otherBudgets lists goal g's figures at the budgets of gs other than its own: the
// mean over the seeds (mean), or the value.
func otherBudgets(g results.FreshnessGoal, gs []results.FreshnessGoal, mean bool) string {
	var others []string
	for _, o := range gs {
		if o.Section == g.Section && o.Goal == g.Goal && o.Budget != g.Budget {
			x := o.Value
			if mean && o.Seeds > 1 {
				x = o.Spread.Mean
			}
			others = append(others, fmt.Sprintf("%g: %s", o.Budget, mark(x, x <= o.Target)))
		}
	}
	return strings.Join(others, "; ")
}

// mark formats a ratio with whether its goal is met.
func mark(v float64, ok bool) string {
	if ok {
		return fmt.Sprintf("%.2f ✅", v)
	}
	return fmt.Sprintf("%.2f ❌", v)
}

type freshRow struct {
	Policy freshPolicyName
	Cells  []string
}

// freshClosedFormOptimum makes the closed-form optimum (results.FreshnessAnalytic) the
// optimum row of every section it covers: the one reference every "× the optimum"
// figure divides by, as the bounds' figures do. It returns the simulated optimum's runs
// it replaced, by section and budget (where the optimum was simulated).
func freshClosedFormOptimum(v *results.Freshness) map[string]map[float64]results.FreshnessRun {
	sim := map[string]map[float64]results.FreshnessRun{}
	for _, a := range v.Optimum {
		if a.Policy != freshOpt && a.Policy != "" {
			continue
		}
		sec := v.Section(a.Section)
		if sec == nil {
			continue
		}
		k := slices.IndexFunc(*sec, func(x results.FreshnessRun) bool { return x.Policy == freshOpt && x.Budget == a.Budget })
		if k < 0 {
			*sec = append(*sec, results.FreshnessRun{Policy: freshOpt, Budget: a.Budget})
			k = len(*sec) - 1
		} else {
			if sim[a.Section] == nil {
				sim[a.Section] = map[float64]results.FreshnessRun{}
			}
			sim[a.Section][a.Budget] = (*sec)[k]
		}
		(*sec)[k].LagMeanH = a.LagMeanH
		if a.LagP99H > 0 {
			(*sec)[k].LagP99H = a.LagP99H
		}
	}
	return sim
}

// freshSectionRows are every policy's mean and p99 lag at every budget of a section
// ("—" where it was not simulated).
func freshSectionRows(v results.Freshness, s freshSection, def string) []freshRow {
	var rows []freshRow
	for _, d := range v.Policies {
		row := freshRow{Policy: freshPolicy(d.Name, d.Name == def, false)}
		for _, b := range s.budgets {
			x, ok := s.runs[d.Name][b]
			if o := s.runs[freshOpt][b]; ok {
				row.Cells = append(row.Cells, fmt.Sprintf("%.2f (%.2f)", x.LagMeanH, x.LagMeanH/o.LagMeanH))
			} else {
				row.Cells = append(row.Cells, "—")
			}
		}
		for _, b := range s.budgets {
			x, ok := s.runs[d.Name][b]
			if o := s.runs[freshOpt][b]; ok {
				row.Cells = append(row.Cells, fmt.Sprintf("%.1f (%.2f)", x.LagP99H, x.LagP99H/o.LagP99H))
			} else {
				row.Cells = append(row.Cells, "—")
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// freshSimulatedOptimum is the simulated optimum's mean lag at each budget (over the
// closed form, the section's optimum row), where it was simulated.
func freshSimulatedOptimum(s freshSection, sim map[float64]results.FreshnessRun) []string {
	var cells []string
	for _, b := range s.budgets {
		if x, ok := sim[b]; ok {
			cells = append(cells, fmt.Sprintf("%.2f (%.2f)", x.LagMeanH, x.LagMeanH/s.runs[freshOpt][b].LagMeanH))
		} else {
			cells = append(cells, "—")
		}
	}
	return cells
}

// freshDetailFigures is every figure of one budget of a section.
type freshDetailFigures struct {
	Budget     float64
	FleetPolls int
	Rows       []struct {
		Policy  freshPolicyName
		X       results.FreshnessRun
		OverOpt float64
	}
}

func freshDetail(v results.Freshness, s freshSection, def string, b float64) *freshDetailFigures {
	f := &freshDetailFigures{Budget: b, FleetPolls: int(math.Round(b * float64(v.Setup.Repos)))}
	opt := s.runs[freshOpt][b].LagMeanH
	for _, d := range v.Policies {
		x := s.runs[d.Name][b]
		f.Rows = append(f.Rows, struct {
			Policy  freshPolicyName
			X       results.FreshnessRun
			OverOpt float64
		}{freshPolicy(d.Name, d.Name == def, d.Name == def), x, x.LagMeanH / opt})
	}
	return f
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

// freshExplain reads the figures, with the arithmetic behind each goal not met: one
// list item each (the template adds the items that need no figures).
func freshExplain(v results.Freshness, secs []freshSection, def string) []string {
	var md []string
	b := 0.5
	if !slices.Contains(v.Setup.Budgets, b) {
		b = v.Setup.Budgets[0]
	}
	runs, cold, drift := secs[0].runs, secs[1].runs, secs[2].runs
	ours, opt := runs[def][b], runs[freshOpt][b]
	if x, ok := v.BoundOf("runs", "", b); ok {
		md = append(md, fmt.Sprintf("**Stationary.** `%s` is at %.2f× the optimum at %g polls/repo/day; it spends %.1f%% of "+
			"its polls on repos that never change (the optimum none), which alone costs 1/(1 − %.3f) = %.2f×. Those polls "+
			"are not waste a worker could avoid: a repo silent for a few years is, to anything but the optimum, as likely "+
			"a slow repo as a dead one. The bound: a policy that knew the population's true prior and the exact number of "+
			"pushes of every repo over the %.0f days it could have seen (history and polls), allocating f ∝ √E[λ | pushes], "+
			"would be at **%.2f×** the optimum, with %.1f%% of its polls on dormant repos; `%s` is %s that "+
			"bound (estimating the prior, counting pushes from commit times, allowing for changes of behaviour).",
			def, ours.LagMeanH/opt.LagMeanH, b, 100*ours.DormantPolls, ours.DormantPolls, 1/(1-ours.DormantPolls),
			x.SeenDays, x.Ratio, 100*x.DormantPolls, def,
			againstBound(ours.LagMeanH/opt.LagMeanH/x.Ratio)))
	}
	if x, ok := v.BoundOf("coldstart", "", b); ok {
		c, co := cold[def][b], cold[freshOpt][b]
		lo := v.Setup.Budgets[0]
		md = append(md, fmt.Sprintf("**Cold start.** A new fleet must clone every repo before it knows anything of it; at B polls "+
			"per repo per day that takes at least 1/B days (%g days at %g), while the optimum polls a busy repo within its "+
			"short period from the first hour. `%s` clones first (a clone tells a repo's history) and is at %.2f× the "+
			"optimum at %g, %.2f× at %g. The bound with a perfect prior after %.0f days of history is %.2f×, before the "+
			"first pass is counted.", 1/lo, lo, def, c.LagMeanH/co.LagMeanH, b,
			cold[def][lo].LagMeanH/cold[freshOpt][lo].LagMeanH, lo, x.SeenDays, x.Ratio))
		all, ok1 := v.BoundOf("coldstart", "all", b)
		blind, ok2 := v.BoundOf("coldstart", results.EvidenceCloned, b)
		if ok1 && ok2 && co.LagMeanH > 0 {
			md[len(md)-1] += fmt.Sprintf(" With everything a first clone shows, the static bound is %.2f×; run as a policy "+
				"that clones every repo blind, as the worker does, it is %.2f× at %g, and `%s` is at %.3f× that.",
				all.Ratio, blind.Ratio, b, def, c.LagMeanH/co.LagMeanH/blind.Ratio)
		}
		real := indexRuns(v.ColdStartRealistic)
		if st := v.Setup; st.NewStepExp > 0 && co.LagP99H > 0 && real[freshOpt][b].LagP99H > 0 {
			md[len(md)-1] += fmt.Sprintf(" Its tail is set by slow active repos that a first clone's history makes "+
				"look dormant, so in a repo's first %g days of polls `%s` steps it by rate^−%g, flatter than √: the cold "+
				"start's p99 is %.2f× the optimum's at %g, %.2f× in the realistic population.", st.NewSpanDays, def,
				st.NewStepExp, c.LagP99H/co.LagP99H, b, real[def][b].LagP99H/real[freshOpt][b].LagP99H)
		}
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
		md = append(md, fmt.Sprintf("**Drift.** %.1f%% of the commits come in a repo's first push after it changed rate; no "+
			"policy can know of the change before it polls after that push. The optimum, which knows, mirrors them in "+
			"%.1f h on average; `%s` in %.1f h. The arithmetic: a policy that spends a share s of its polls on the quiet "+
			"half of the fleet (%.0f%% of repos are dormant at any time) waits q/(2·s·B) days for such a push and leaves "+
			"the optimum's other %.2f h to 1 − s of the budget, so its mean is at least %.2f/(1 − s) + %.3f·12·%.2f/(s·%g) "+
			"hours, smallest at (√%.2f + √%.2f)² = **%.2f h = %.2f× the optimum** at any budget (the ratio does not "+
			"depend on B). `%s` is at %.2f×, having learned %.1f%% changes a month "+
			"(the simulation draws %.0f%%; changes between two dormant states cannot be seen). The p99 goal asks that "+
			"at most 1%% of commits wait over %.1f h; with %.1f%% of commits in first pushes that means polling every "+
			"quiet repo at least every %.1f h·(1 − 1%%/%.1f%%)⁻¹, i.e. s ≥ %.2f of the budget on quiet repos alone — "+
			"%s.",
			100*do.FirstPushShare, do.FirstPushLagH, def, d.FirstPushLagH, 100*q, rest, rest, do.FirstPushShare, q, b,
			rest, f, lower, lower/do.LagMeanH, def, d.LagMeanH/do.LagMeanH,
			100*d.LearnedHazardPerMonth, 100*v.Setup.DriftPerMonth, 24*p99, 100*do.FirstPushShare, 24*p99,
			100*do.FirstPushShare, need, p99Verdict(need)))
		if x, ok := v.BoundOf("drift", "", b); ok {
			md = append(md, fmt.Sprintf("**Drift, measured bound.** A policy that knew the true model (the population's prior, "+
				"and that a repo draws a new rate from it %.0f%% of months) and the exact time of every push, its belief "+
				"filtered forward from the first clone, allocating f ∝ √E[λ | pushes], would be at **%.2f×** the "+
				"optimum, with %.1f%% of its polls on repos that are dormant (a repo that woke up and has not pushed yet "+
				"looks like the silent many; the same filter without changes gives the stationary bound). `%s` is at "+
				"%.2f× at %g, %s that bound, spending %.1f%% of its polls on dormant repos.",
				100*v.Setup.DriftPerMonth, x.Ratio, 100*x.DormantPolls, def, d.LagMeanH/do.LagMeanH, b,
				againstBound(d.LagMeanH/do.LagMeanH/x.Ratio), 100*d.DormantPolls))
		}
	}
	st := v.Setup
	md = append(md, fmt.Sprintf("**The tail.** `%s` polls every repo at least as often as one pushing once in %.0f years (%g a "+
		"day), so no wait grows without bound, and a slow repo at least for %g pushes a day times the chance that "+
		"it pushes at least once in %.0f days (the tail guard); its p99 is %.2f× the optimum's in the stationary "+
		"section at %g (`rate` %.2f×, `cbrt` %.2f×). The p99 is set by slow repos that a worker cannot tell from "+
		"dormant ones: the guard polls them for the chance that they are active, with polls taken from the busy repos "+
		"that set the mean.",
		def, 1/st.MinRate/365, st.MinRate, st.GuardRate, 4/st.GuardRate, ours.LagP99H/opt.LagP99H, b,
		runs["rate"][b].LagP99H/opt.LagP99H, runs["cbrt"][b].LagP99H/opt.LagP99H))
	uni := runs["uniform"][b]
	md = append(md, fmt.Sprintf("Against the earlier policies at %g: `%s` %.2f h, `rate` %.2f h, `cbrt` %.2f h, uniform %.2f h "+
		"(the optimum %.2f h; uniform ÷ optimum = %.2f, the most any policy could gain here: for periodic polls it is "+
		"E[λ]/E[√λ]² over all repos, e^(σ²/4)/0.5 = %.2f for σ = %.2f with half the repos dormant).",
		b, def, ours.LagMeanH, runs["rate"][b].LagMeanH, runs["cbrt"][b].LagMeanH, uni.LagMeanH, opt.LagMeanH,
		uni.LagMeanH/opt.LagMeanH, math.Exp(v.Population.Sigma*v.Population.Sigma/4)/(1-v.Population.DormantShare), v.Population.Sigma))
	return md
}

// p99Verdict says what spending the share need of the budget on quiet repos leaves.
func p99Verdict(need float64) string {
	if need >= 1 {
		return "more than the whole budget"
	}
	return fmt.Sprintf("leaving %.0f%% of the polls for every other repo, so the mean would be at least the optimum's "+
		"other lag ÷ %.2f", 100*(1-need), 1-need)
}

// againstBound says where a policy at ratio times a static bound stands: above it, or
// below it (a policy learns from its own polls as it goes, which a static allocation
// does not).
func againstBound(ratio float64) string {
	if ratio < 1 {
		return fmt.Sprintf("%.1f%% below", 100*(1-ratio))
	}
	return fmt.Sprintf("%.1f%% above", 100*(ratio-1))
}
