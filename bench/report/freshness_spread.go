package main

import (
	"fmt"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// freshGoalSpreadRow is one goal with its figure over the seeds run.
type freshGoalSpreadRow struct {
	Goal, Section, Of string
	Budget, Target    float64
	Value             float64 // the first seed's
	Bound             float64 // the section's bound in the goal's units, when the goal has one (0: none)
	Spread            string  // "mean ± sd (min–max)" over the seeds
	Met               string  // every seed, and the mean
	Seeds             int
}

// freshGoalSpreadRows reads the goals freshness.json records (none before they were).
func freshGoalSpreadRows(v results.Freshness) []freshGoalSpreadRow {
	var rows []freshGoalSpreadRow
	for _, g := range v.Goals {
		r := freshGoalSpreadRow{Goal: g.Goal, Section: g.Section, Of: g.Of, Budget: g.Budget, Target: g.Target, Value: g.Value, Bound: g.Bound,
			Seeds: g.Seeds, Spread: spreadText(g.Spread, g.Seeds)}
		switch {
		case g.Met:
			r.Met = "✅ every seed"
		case g.MetMean:
			r.Met = "✅ on average, ❌ " + fmt.Sprintf("at worst %.3f", g.Spread.Max)
		default:
			r.Met = "❌"
		}
		rows = append(rows, r)
	}
	return rows
}

// spreadText is a figure over n seeds: mean ± sd (min–max); just the value for one.
func spreadText(s results.FreshnessStat, n int) string {
	if n < 2 {
		return fmt.Sprintf("%.3f", s.Mean)
	}
	return fmt.Sprintf("%.3f ± %.3f (%.3f–%.3f)", s.Mean, s.SD, s.Min, s.Max)
}
