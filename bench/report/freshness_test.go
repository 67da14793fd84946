package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

func freshFixture() results.Freshness {
	v := results.Freshness{
		Meta:  results.Meta{Date: "2026-11-22T00:00:00Z"},
		Setup: results.FreshnessSetup{Repos: 1000, WarmupDays: 10, WindowDays: 30, DrainDays: 5, MinIntervalMin: 5, Budgets: []float64{0.5, 2}},
		Population: results.FreshnessPopulation{DormantShare: 0.5, Sigma: 1.6, TopFraction: 0.025, TargetTopShare: 0.5,
			TargetMonthly: 0.13, MeasuredTopShare: 0.517, MeasuredMonthly: 0.1312, WindowCommits: 12345},
		Optimum: []results.FreshnessAnalytic{{Budget: 0.5, LagMeanH: 6.05}, {Budget: 2, LagMeanH: 1.51}},
	}
	lag := map[string]float64{"uniform": 24, "swh": 23, "cbrt": 10.4, "rate": 6.5, "optimum": 6.1}
	for _, name := range []string{"uniform", "swh", "cbrt", "rate", "optimum"} {
		v.Policies = append(v.Policies, results.FreshnessPolicyDoc{Name: name, Description: "about " + name})
		for _, b := range v.Setup.Budgets {
			v.Runs = append(v.Runs, results.FreshnessRun{Policy: name, Budget: b, LagMeanH: lag[name] * 0.5 / b,
				LagP99H: 4 * lag[name], Freshness: 0.99, DormantPolls: 0.17})
		}
	}
	v.Setup.DriftPerMonth, v.Setup.DriftBudgets = 0.1, []float64{2}
	v.Drift = []results.FreshnessRun{{Policy: "cbrt", Budget: 2, LagMeanH: 3.2}, {Policy: "rate", Budget: 2, LagMeanH: 2.5}}
	return v
}

func TestFreshnessSectionShowsTheJSONsNumbers(t *testing.T) {
	dir := t.TempDir()
	if err := results.Write(dir, "freshness", freshFixture()); err != nil {
		t.Fatal(err)
	}
	md, _, err := freshnessSection(&Report{Results: dir, Out: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## 1. Freshness",
		"| 0.5 | 1.07 ✅ | 3.69 ❌ | 1.60 ✅ | 3.54 ✅ | 3.93 |", // 6.5/6.1, 24/6.5, 10.4/6.5, 23/6.5, 24/6.1
		"| **`rate` (ours)** | 6.50 | 1.07 |",
		"| `uniform` | 24.00 | 6.00 |",
		"51.7%", "12,345", "13.1%",
		"plots/freshness-lag-mean.svg",
		"every month 10% of the repos",
		"| 2 | `cbrt` | 3.20 | 1.28 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "plots", "freshness-lag-p99.svg")); err != nil {
		t.Fatalf("p99 chart not written: %v", err)
	}
}

func TestFreshnessSectionRefusesMissingRuns(t *testing.T) {
	v := freshFixture()
	v.Runs = v.Runs[1:]
	dir := t.TempDir()
	if err := results.Write(dir, "freshness", v); err != nil {
		t.Fatal(err)
	}
	if _, _, err := freshnessSection(&Report{Results: dir, Out: dir}); err == nil {
		t.Fatal("a missing run was not reported")
	}
}
