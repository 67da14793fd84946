package main

import (
	"math"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// The goals (issues: freshness past polling; event-driven): the default policy's mean
// lag over the information bound of its section, its p99 over the optimum's, and with
// change signals its mean over the poll-only optimum at signalGoalBudget.
var (
	boundGoals = []struct {
		section, bound, evidence string
		target                   float64
	}{
		{"runs", "runs", "all", 1.03}, {"coldstart", "coldstart", "all", 1.05}, {"drift", "drift", "", 1.05},
		{"runs_realistic", "runs_realistic", "all", 1.03}, {"coldstart_realistic", "coldstart_realistic", "all", 1.05},
		{"drift_realistic", "drift_realistic", "", 1.05},
		// The cold start also against the bound that clones blind, as every mirror must.
		{"coldstart", "coldstart", results.EvidenceCloned, 1.05}, {"coldstart_realistic", "coldstart_realistic", results.EvidenceCloned, 1.05},
	}
	p99Goals   = []string{"runs", "coldstart", "runs_realistic", "coldstart_realistic"}
	p99Target  = 1.2
	signalGoal = map[string]float64{"hooks30": 0.6, "hooks60": 0.25, "hooks30_drift": 0.85, "hooks60_drift": 0.3, "feed": 0.15, "feed_drift": 0.15}
)

const signalGoalBudget = 0.5

// goals are one seed's figures against the goals (their spread is set by withSpread).
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
			opt, ok2 := rows(g.section, "optimum", b)
			x, ok3 := res.BoundOf(g.bound, g.evidence, b)
			if !ok1 || !ok2 || !ok3 || opt.LagMeanH <= 0 || x.Ratio <= 0 {
				continue
			}
			of := "bound of " + g.bound
			switch g.evidence {
			case "all":
				of += " (all evidence)"
			case results.EvidenceCloned:
				of += " (all evidence, cloning blind)"
			}
			out = append(out, results.FreshnessGoal{Goal: "mean / bound", Section: g.section, Of: of, Budget: b, Target: g.target,
				Value: ours.LagMeanH / opt.LagMeanH / x.Ratio})
		}
		for _, sec := range p99Goals {
			ours, ok1 := rows(sec, def, b)
			opt, ok2 := rows(sec, "optimum", b)
			if !ok1 || !ok2 || opt.LagP99H <= 0 {
				continue
			}
			g := results.FreshnessGoal{Goal: "p99 / optimum's p99", Section: sec, Of: "optimum of " + sec, Budget: b,
				Target: p99Target, Value: ours.LagP99H / opt.LagP99H}
			if x, ok := res.BoundOf(sec, "all", b); ok && x.P99 > 0 {
				g.Bound = min(x.P99, x.P99Exp04)
			}
			out = append(out, g)
		}
	}
	for _, s := range res.Setup.Signals {
		target, ok := signalGoal[s.Section]
		if !ok {
			continue
		}
		base := "runs"
		if s.Drift {
			base = "drift"
		}
		ours, ok1 := rows(s.Section, def, signalGoalBudget)
		poll, ok2 := rows(base, "optimum", signalGoalBudget)
		if !ok1 || !ok2 || poll.LagMeanH <= 0 {
			continue
		}
		g := results.FreshnessGoal{Goal: "mean / poll-only optimum", Section: s.Section, Of: "optimum of " + base,
			Budget: signalGoalBudget, Target: target, Value: ours.LagMeanH / poll.LagMeanH}
		for _, x := range res.Bound {
			if x.Section == s.Section {
				g.Bound = x.Ratio + ours.SignallingCommitShare*s.DelayDays()*24/poll.LagMeanH
			}
		}
		out = append(out, g)
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
		g.Spread, g.Seeds = stat(xs), len(xs)
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
			for _, b := range o.Optimum {
				if b.Budget == a.Budget {
					xs = append(xs, b.LagMeanH)
				}
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
