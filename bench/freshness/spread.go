package main

import (
	"math"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// The goals: the default policy's mean lag over the bound of its section, its p99 over
// the optimum's. Each is read against one reference, computed the same way as the
// figure it divides: a bound in closed form over the window's pushes (the policy's
// simulated lag over the same pushes), or the bound that clones blind simulated in the
// cold start (the policy's simulated lag beside it). They are set at goalBudget and
// reported at every budget.
var (
	boundGoals = []struct {
		section, evidence string
		target            float64
	}{
		{"runs", results.EvidenceCloned, 1.03}, {"runs_realistic", results.EvidenceCloned, 1.03},
		{"coldstart", results.EvidenceCloned, 1.03}, {"coldstart_realistic", results.EvidenceCloned, 1.03},
		{"drift", results.EvidenceFiltered, 1.05}, {"drift_realistic", results.EvidenceFiltered, 1.05},
		{"hooks30", results.EvidenceCloned, 1.03}, {"hooks60", results.EvidenceCloned, 1.05}, {"feed", results.EvidenceCloned, 1.04},
		{"hooks30_drift", results.EvidenceFiltered, 1.10}, {"hooks60_drift", results.EvidenceFiltered, 1.10}, {"feed_drift", results.EvidenceFiltered, 1.10},
	}
	p99Goals  = []string{"runs", "coldstart", "runs_realistic", "coldstart_realistic"}
	p99Target = 1.2
)

// goalBudget is the budget the goals are set at, polls per repo per day.
const goalBudget = 0.5

// boundName names a bound as a goal's reference.
func boundName(section, evidence string) string {
	what := "all evidence"
	switch evidence {
	case results.EvidenceFiltered, "":
		what = "push times under the true model"
	case results.EvidenceRates:
		what = "every rate"
	}
	how := "closed form"
	simulated := false
	switch evidence {
	case results.EvidenceCloned, results.EvidenceFiltered:
		how, simulated = "run as a policy that clones blind, simulated", true
	}
	if k := sectionIndex(section); k >= 0 {
		switch {
		case signalSections[k].Period > 0:
			what += " and the feed's coverage"
		case simulated:
			what += " and the coverage its hooks have shown"
		default:
			what += " and the hooks' coverage"
		}
	}
	return "bound of " + section + ": " + what + "; " + how
}

// goals are one seed's figures against the goals, each over that seed's own reference
// (their spread is set by withSpread).
func goals(res results.Freshness) []results.FreshnessGoal {
	var out []results.FreshnessGoal
	rows := func(section, policy string, budget float64) (results.FreshnessRun, bool) {
		sec := res.Section(section)
		if sec == nil {
			return results.FreshnessRun{}, false
		}
		for _, r := range *sec {
			if r.Policy == policy && r.Budget == budget {
				return r, true
			}
		}
		return results.FreshnessRun{}, false
	}
	def := defaultPolicy().Name()
	for _, b := range res.Setup.Budgets {
		for _, g := range boundGoals {
			ours, ok1 := rows(g.section, def, b)
			x, ok2 := res.BoundOf(g.section, g.evidence, b)
			if !ok1 || !ok2 || x.LagMeanH <= 0 {
				continue
			}
			out = append(out, results.FreshnessGoal{Goal: "mean / bound", Section: g.section, Of: boundName(g.section, g.evidence),
				Budget: b, Target: g.target, Value: ours.LagMeanH / x.LagMeanH, Bound: 1})
		}
		for _, sec := range p99Goals {
			ours, ok1 := rows(sec, def, b)
			opt, ok2 := res.OptimumOf(sec, "optimum", b)
			if !ok1 || !ok2 || opt.LagP99H <= 0 {
				continue
			}
			g := results.FreshnessGoal{Goal: "p99 / optimum's p99", Section: sec, Of: "optimum of " + sec + "; closed form", Budget: b,
				Target: p99Target, Value: ours.LagP99H / opt.LagP99H}
			if x, ok := res.BoundOf(sec, "all", b); ok && x.P99 > 0 {
				g.Bound = min(x.P99, x.P99Exp04)
			}
			out = append(out, g)
		}
	}
	return out
}

// withSpread is the first seed's results with the spread over all seeds' on every row,
// bound, optimum and goal. A figure missing from a seed is left out of its spread.
func withSpread(all []results.Freshness) results.Freshness {
	res := all[0]
	for k := range res.Goals {
		g := &res.Goals[k]
		var xs []float64
		for _, o := range all {
			for _, h := range o.Goals {
				if h.Goal == g.Goal && h.Section == g.Section && h.Of == g.Of && h.Budget == g.Budget {
					xs = append(xs, h.Value)
				}
			}
		}
		g.Spread, g.Seeds, g.PerSeed = stat(xs), len(xs), xs
		g.Met, g.MetMean = g.Spread.Max <= g.Target, g.Spread.Mean <= g.Target
	}
	if len(all) < 2 {
		return res
	}
	for _, name := range results.Sections {
		sec := res.Section(name)
		// Copy the rows: the first seed's slices are shared with all[0].
		*sec = append([]results.FreshnessRun(nil), *sec...)
		for k := range *sec {
			r := &(*sec)[k]
			var mean, p99, dormant []float64
			for _, o := range all {
				for _, q := range *o.Section(name) {
					if q.Policy == r.Policy && q.Budget == r.Budget {
						mean, p99, dormant = append(mean, q.LagMeanH), append(p99, q.LagP99H), append(dormant, q.DormantPolls)
					}
				}
			}
			r.Spread = &results.FreshnessRunSpread{Seeds: len(mean), LagMeanH: stat(mean), LagP99H: stat(p99), DormantPolls: stat(dormant)}
		}
	}
	res.Bound = append([]results.FreshnessBound(nil), res.Bound...)
	for k := range res.Bound {
		x := &res.Bound[k]
		var xs []float64
		for _, o := range all {
			if y, ok := o.BoundOf(x.Section, x.Evidence, x.Budget); ok {
				xs = append(xs, y.Ratio)
			}
		}
		st := stat(xs)
		x.Spread = &st
	}
	res.Optimum = append([]results.FreshnessAnalytic(nil), res.Optimum...)
	for k := range res.Optimum {
		a := &res.Optimum[k]
		var xs []float64
		for _, o := range all {
			if b, ok := o.OptimumOf(a.Section, a.Policy, a.Budget); ok {
				xs = append(xs, b.LagMeanH)
			}
		}
		st := stat(xs)
		a.Spread = &st
	}
	return res
}

// stat is the mean, sample standard deviation and extremes of xs.
func stat(xs []float64) results.FreshnessStat {
	if len(xs) == 0 {
		return results.FreshnessStat{}
	}
	s := results.FreshnessStat{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range xs {
		s.Mean += x / float64(len(xs))
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
	}
	if len(xs) > 1 {
		for _, x := range xs {
			s.SD += (x - s.Mean) * (x - s.Mean)
		}
		s.SD = math.Sqrt(s.SD / float64(len(xs)-1))
	}
	return s
}
