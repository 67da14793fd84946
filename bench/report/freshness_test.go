package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

func freshFixture() results.Freshness {
	v := results.Freshness{
		Meta: results.Meta{Date: "2026-11-22T00:00:00Z"},
		Setup: results.FreshnessSetup{Repos: 1000, WarmupDays: 10, WindowDays: 30, DrainDays: 5, MinIntervalMin: 5,
			Budgets: []float64{0.5, 2}, DriftPerMonth: 0.1, DriftBudgets: []float64{0.5, 2}, ColdStartDays: 30,
			Batch:             results.FreshnessBatch{MeanCommits: 2, NewestDelayMin: 20, GapMin: 30, Sigma: 1.5, BranchShare: 0.1, BranchDelayDays: 2},
			HistoryWindowDays: 1825, MaxHistoryCommits: 1000, MaxNewCommits: 1000, MinRate: 1e-4, GuardRate: 5e-3},
		Population: results.FreshnessPopulation{DormantShare: 0.5, Sigma: 1.6, TopFraction: 0.025, TargetTopShare: 0.5,
			TargetMonthly: 0.13, MeasuredTopShare: 0.517, MeasuredMonthly: 0.1312, WindowCommits: 12345},
		Optimum: []results.FreshnessAnalytic{{Budget: 0.5, LagMeanH: 6.05}, {Budget: 2, LagMeanH: 1.51}},
		Bound:   []results.FreshnessBound{{Section: "coldstart", SeenDays: 1840, Ratio: 1.16, DormantPolls: 0.09}, {Section: "runs", SeenDays: 2235, Ratio: 1.12, DormantPolls: 0.067}, {Section: "drift", SeenDays: 2235, Ratio: 1.81, DormantPolls: 0.305}},
		Costs: results.FreshnessCosts{Policy: "bayes", BytesPerRepo: 612, ReposMeasured: 10000, NextNs: 1500, FoldNs: 2500, FitMs: 80,
			Walks: []results.FreshnessWalk{{Repo: "medium", Commits: 2097, Refs: 50, NewCommits: 3, NewWalkMs: 0.4, HistoryListed: 1000, HistoryMs: 21, FullWalkMs: 44}}},
	}
	lag := map[string]float64{"uniform": 24, "swh": 23, "cbrt": 10.4, "rate": 8.5, "bayes": 6.5, "optimum": 6.1}
	for _, name := range []string{"uniform", "swh", "cbrt", "rate", "bayes", "optimum"} {
		v.Policies = append(v.Policies, results.FreshnessPolicyDoc{Name: name, Description: "about " + name, Uses: "knows " + name, Default: name == "bayes"})
		for _, b := range v.Setup.Budgets {
			run := results.FreshnessRun{Policy: name, Budget: b, LagMeanH: lag[name] * 0.5 / b, LagP99H: 4 * lag[name], Freshness: 0.99, DormantPolls: 0.1, Default: name == "bayes"}
			v.Runs = append(v.Runs, run)
			run.LagMeanH *= 1.3
			v.ColdStart = append(v.ColdStart, run)
			run.LagMeanH = lag[name] * 2 / b
			run.FirstPushShare, run.FirstPushLagH = 0.08, 40
			if name == "optimum" {
				run.LagMeanH, run.FirstPushLagH = 7.6*0.5/b, 13
			}
			v.Drift = append(v.Drift, run)
		}
	}
	return v
}

func TestFreshnessSectionShowsTheJSONsNumbers(t *testing.T) {
	dir := t.TempDir()
	md := renderFreshness(t, dir, freshFixture())
	for _, want := range []string{
		"## 1. Freshness",
		"| **`bayes` (default)** | about bayes | knows bayes |",
		"| **`bayes`** | 6.50 (1.07) | 1.62 (1.07) |",
		"| **`bayes` (default)** | 6.50 | 1.07 |",
		"51.7%", "12,345", "13.1%",
		"plots/freshness-lag-mean.svg",
		"**612 B**",
		"| medium | 2,097 | 50 | 3 | 0.40 | 1,000 | 21.0 | 44.0 |",
		"would be at **1.12×** the optimum",
		"8.0% of the commits come in a repo's first push",
		"would be at **1.81×** the optimum, with 30.5% of its polls",
		"once in 27 years (0.0001 a day)", "at least for 0.005 pushes a day times the chance that it pushes at least once in 800 days",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "plots", "freshness-lag-p99.svg")); err != nil {
		t.Fatalf("p99 chart not written: %v", err)
	}
}

func TestFreshnessSectionRefusesMissingRunsAndAnUnmarkedDefault(t *testing.T) {
	for name, spoil := range map[string]func(*results.Freshness){
		"missing run":    func(v *results.Freshness) { v.Runs = withoutRun(v.Runs, "bayes", 0.5) },
		"missing drift":  func(v *results.Freshness) { v.Drift = v.Drift[:len(v.Drift)-1] },
		"missing cold":   func(v *results.Freshness) { v.ColdStart = withoutRun(v.ColdStart, "optimum", 2) },
		"no default":     func(v *results.Freshness) { v.Policies[4].Default = false },
		"no rate policy": func(v *results.Freshness) { v.Policies = append(v.Policies[:3], v.Policies[4:]...) },
	} {
		v := freshFixture()
		spoil(&v)
		dir := t.TempDir()
		if _, err := freshnessFrom(t, dir, v); err == nil {
			t.Errorf("%s: not reported", name)
		}
	}
}

func TestFreshnessSignalSectionsReadTheirRows(t *testing.T) {
	v := freshFixture()
	v.Setup.HookStretch, v.Setup.FeedStretch, v.Setup.OrgMeanRepos = 10, 100, 4
	v.Setup.OwnerLevelShare, v.Setup.OwnerRepos = 0.5, 2
	v.Setup.Signals = []results.FreshnessSignal{
		{Section: "hooks30", Kind: "hooks", Share: 0.3, DelayMinS: 1, DelayMaxS: 10, Loss: 0.01},
		{Section: "feed_drift", Kind: "feed", Share: 0.7, PeriodMin: 5, Drift: true},
	}
	for _, b := range v.Setup.Budgets {
		// hooks30 at 0.5: 3.05 h over the stationary optimum's 6.1 h = 0.50, the optimum
		// that knows the rates and the coverage 0.40;
		// feed_drift at 0.5: 1.52 h over the drift optimum's 7.6 h = 0.20.
		v.Hooks30 = append(v.Hooks30, results.FreshnessRun{Policy: "bayes", Budget: b, LagMeanH: 3.05 * 0.5 / b, SignallingCommitShare: 0.31})
		v.Bound = append(v.Bound, results.FreshnessBound{Section: "hooks30", Evidence: results.EvidenceRates, Budget: b, Ratio: 0.4})
		v.FeedDrift = append(v.FeedDrift, results.FreshnessRun{Policy: "bayes", Budget: b, LagMeanH: 1.52 * 0.5 / b})
	}
	// Their goals, over their bounds, at 0.5.
	v.Goals = append(v.Goals, results.FreshnessGoal{Goal: "mean / bound", Section: "hooks30", Budget: 0.5, Target: 1.03, Value: 1.02},
		results.FreshnessGoal{Goal: "mean / bound", Section: "feed_drift", Budget: 0.5, Target: 1.1, Value: 1.2})
	dir := t.TempDir()
	md := renderFreshness(t, dir, v)
	wantAll(t, md,
		"| hooks30 | 30% of repos, 1–10 s, 1% lost | 0.5 | 3.05 | 0.50 | 1.02 ✅ (≤ 1.03× its bound) | 0.40 | 31% |",
		"| hooks30 | 30% of repos, 1–10 s, 1% lost | 2 | 0.76 | 0.50 | — |",
		"| feed_drift | 70% of repos, probed every 5 min | 0.5 | 1.52 | 0.20 | 1.20 ❌ (≤ 1.1× its bound) |",
		"(10× before anything is counted)",
		"A share 0.5 of the hooked organizations set one hook on the organization",
		"once hooks of 2 of its repos came",
	)
	// A section listed in the setup without its rows is an error, not an empty table.
	v.FeedDrift = nil
	if _, err := freshnessFrom(t, dir, v); err == nil {
		t.Error("a signal section without rows was reported")
	}
}

func TestFreshnessRealisticSections(t *testing.T) {
	v := freshFixture()
	p := v.Population
	p.Realism = &results.FreshnessRealism{YoungShare: 1.0 / 3, MaxAgeDays: 6205, DormantLifeMedianDays: 9.9, DormantCommitsMedian: 6,
		MeasuredYoungShare: 0.17, ActiveRootShare: 0.86, DormantRootShare: 0.78, DormantYearLongShare: 0.03, DormantMedianCommits: 5, ActiveMedianCommits: 6}
	v.PopulationRealistic = &p
	for _, r := range v.Runs {
		r.LagMeanH *= 1.1
		v.RunsRealistic = append(v.RunsRealistic, r)
		if r.Policy == "bayes" {
			r.LagP99H *= 1.2
		}
		v.ColdStartRealistic = append(v.ColdStartRealistic, r)
	}
	v.Setup.NewStepExp, v.Setup.NewSpanDays = 0.45, 30
	v.DriftRealistic = slices.Clone(v.Drift)
	v.Bound = append(v.Bound, results.FreshnessBound{Section: "runs_realistic", Evidence: "all", SeenDays: 2235, Ratio: 1.05, DormantPolls: 0.08, P99: 1.22, P99Exp04: 1.04})
	dir := t.TempDir()
	md := renderFreshness(t, dir, v)
	wantAll(t, md,
		"**Realistic population, stationary (days 10–40)**",
		"**Realistic population, drift (10% of repos a month)**",
		"reaches the root commit for 86% of active and 78% of dormant repos",
		"| **`bayes`** | 7.15 (1.07) |",
		// 7.15 / 6.71 = 1.066 over the optimum, / 1.05 = 1.015 over the bound
		"| runs_realistic | push counts, span, silence, root reached | 1.050 | 8.0% | 1.22 / 1.04 | 1.066 (0.5) | 1.015 |",
		"| runs | push counts | 1.120 | 6.7% | — | 1.066 (0.5) | 0.951 |",
		// cold start p99 26/24.4; realistic 26·1.2/24.4
		"in a repo's first 30 days of polls `bayes` steps it by rate^−0.45, flatter than √: the cold start's p99 is 1.07× the optimum's at 0.5, 1.28× in the realistic population.",
	)
	// A policy the default is compared with may be simulated in some sections only: "—"
	// elsewhere. A realistic section missing the default policy's run is an error.
	v.RunsRealistic = withoutRun(v.RunsRealistic, "cbrt", 0.5)
	if md, err := freshnessFrom(t, dir, v); err != nil || !strings.Contains(md, "| `cbrt` | — |") {
		t.Errorf("a comparison not simulated in a section is not shown as such (err %v)", err)
	}
	v.RunsRealistic = withoutRun(v.RunsRealistic, "bayes", 0.5)
	if _, err := freshnessFrom(t, dir, v); err == nil {
		t.Error("a realistic section with the default's run missing was reported")
	}
}

// withoutRun is rs without policy's run at budget.
func withoutRun(rs []results.FreshnessRun, policy string, budget float64) []results.FreshnessRun {
	return slices.DeleteFunc(slices.Clone(rs), func(r results.FreshnessRun) bool { return r.Policy == policy && r.Budget == budget })
}

func TestFreshnessGoalsOverTheSeeds(t *testing.T) {
	v := freshFixture()
	v.Setup.Seed, v.Setup.Seeds = 1, []uint64{1, 2, 3}
	v.Goals = []results.FreshnessGoal{
		{Goal: "mean / bound", Section: "runs", Of: "bound of runs (all evidence)", Budget: 0.5, Target: 1.03, Value: 1.02, Seeds: 3,
			Spread: results.FreshnessStat{Mean: 1.025, SD: 0.004, Min: 1.02, Max: 1.031}, MetMean: true, PerSeed: []float64{1.02, 1.024, 1.031}},
		{Goal: "mean / bound", Section: "runs", Of: "bound of runs (all evidence)", Budget: 1, Target: 1.03, Value: 1.04, Seeds: 1,
			Spread: results.FreshnessStat{Mean: 1.04, Min: 1.04, Max: 1.04}, PerSeed: []float64{1.04}},
		{Goal: "mean / poll-only optimum", Section: "feed", Of: "optimum of runs", Budget: 0.5, Target: 0.15, Value: 0.12, Bound: 0.097, Seeds: 3,
			Spread: results.FreshnessStat{Mean: 0.121, SD: 0.002, Min: 0.119, Max: 0.123}, Met: true, MetMean: true},
		{Goal: "mean / bound", Section: "drift", Of: "bound of drift", Budget: 0.5, Target: 1.05, Value: 1.2, Seeds: 3,
			Spread: results.FreshnessStat{Mean: 1.21, SD: 0.01, Min: 1.2, Max: 1.22}},
	}
	dir := t.TempDir()
	md := renderFreshness(t, dir, v)
	wantAll(t, md,
		fmt.Sprintf("(3 seeds: 1, 2, 3; %d repos; the tables above are seed 1's)", v.Setup.Repos),
		"| mean / bound | runs | bound of runs (all evidence) | 0.5 | ≤ 1.03 | 1 | 1.020 | 1.025 ± 0.004 (1.020–1.031) | ✅ on average, ❌ at worst 1.031 |",
		"| mean / poll-only optimum | feed | optimum of runs | 0.5 | ≤ 0.15 | 0.097 | 0.120 | 0.121 ± 0.002 (0.119–0.123) | ✅ every seed |",
		"| mean / bound | drift | bound of drift | 0.5 | ≤ 1.05 | 1 | 1.200 | 1.210 ± 0.010 (1.200–1.220) | ❌ |",
		// The goals as the issue states them: the mean over the seeds, each seed's, the
		// other budgets'.
		"| section | goal | reference | mean | per seed | met | other budgets |",
		"| runs | ≤ 1.03× (mean / bound, 0.5 polls/repo/day) | bound of runs (all evidence) | 1.025 | 1.020, 1.024, 1.031 | ✅ | 1: 1.04 ❌ |",
		"| drift | ≤ 1.05× (mean / bound, 0.5 polls/repo/day) | bound of drift | 1.210 | — | ❌ | — |",
	)
	// The goals are set at 0.5 polls a day: another budget is beside them, not a row.
	if strings.Contains(md, "| runs | ≤ 1.03× (mean / bound, 1 polls/repo/day)") {
		t.Errorf("a goal row at another budget than the goals':\n%s", md)
	}
	// The study over seeds in a file of its own, at a smaller scale: its goals, said so.
	small := v
	small.Setup.Repos = v.Setup.Repos / 5
	small.Goals = small.Goals[2:3]
	small.Bound = slices.Clone(v.Bound)
	for k := range small.Bound {
		small.Bound[k].Ratio = 1.5 // the smaller fleet's bounds are its own
	}
	v.Setup.Seeds, v.Goals = nil, nil
	if err := results.Write(dir, "freshness_seeds", small); err != nil {
		t.Fatal(err)
	}
	md = renderFreshness(t, dir, v)
	if want := fmt.Sprintf("(3 seeds: 1, 2, 3; %d repos, a smaller fleet than the tables above", small.Setup.Repos); !strings.Contains(md, want) ||
		!strings.Contains(md, "| mean / poll-only optimum | feed |") || strings.Contains(md, "| mean / bound | drift | bound of drift |") {
		t.Errorf("the seeds file's goals not reported as such:\n%s", md)
	}
	if !strings.Contains(md, "| runs | push counts | 1.120 |") || strings.Contains(md, "| 1.500 |") {
		t.Errorf("the bounds of the tables above are not freshness.json's:\n%s", md)
	}
	if err := os.Remove(filepath.Join(dir, "freshness_seeds.json")); err != nil {
		t.Fatal(err)
	}
	// Results written before goals were recorded have no such table.
	v.Goals = nil
	if md, err := freshnessFrom(t, dir, v); err != nil || strings.Contains(md, "Every goal over the seeds") {
		t.Errorf("a table of goals without goals (err %v)", err)
	}
}

// freshnessFrom writes v as dir's freshness.json and renders the section from it.
func freshnessFrom(t *testing.T, dir string, v results.Freshness) (string, error) {
	t.Helper()
	if err := results.Write(dir, "freshness", v); err != nil {
		t.Fatal(err)
	}
	md, _, err := freshnessSection(&Report{Results: dir, Out: dir})
	return md, err
}

// renderFreshness is freshnessFrom for results that must render.
func renderFreshness(t *testing.T, dir string, v results.Freshness) string {
	t.Helper()
	md, err := freshnessFrom(t, dir, v)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// wantAll fails for each of wants that md lacks.
func wantAll(t *testing.T, md string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestFreshnessDividesByTheClosedFormOptimum: a section's figures are over its
// closed-form optimum, the one reference of the bounds too; the simulated optimum is
// shown beside it, over the same reference.
func TestFreshnessDividesByTheClosedFormOptimum(t *testing.T) {
	v := freshFixture()
	v.Optimum = []results.FreshnessAnalytic{{Section: "runs", Policy: "optimum", Budget: 0.5, LagMeanH: 6.5, LagP99H: 26},
		{Section: "runs", Policy: "optimum", Budget: 2, LagMeanH: 1.625, LagP99H: 6.5},
		{Section: "runs_realistic", Policy: "optimum", Budget: 0.5, LagMeanH: 6.5, LagP99H: 26},
		{Section: "runs_realistic", Policy: "optimum", Budget: 2, LagMeanH: 1.625, LagP99H: 6.5}}
	v.RunsRealistic = withoutRun(withoutRun(v.RunsRealistic, "optimum", 0.5), "optimum", 2)
	md, err := freshnessFrom(t, t.TempDir(), v)
	if err != nil {
		t.Fatal(err)
	}
	// bayes 6.5 h over the closed form's 6.5; the simulated optimum's 6.1 over it.
	wantAll(t, md, "| **`bayes`** | 6.50 (1.00) |", "| optimum, simulated (the optimum row is its closed form, (Σ√λ)²/(2·B·N·Σλ) over the window's pushes) | 6.10 (0.94) |")
}

func TestOtherBudgetsAreMeansOverTheSeeds(t *testing.T) {
	g := results.FreshnessGoal{Goal: "mean / bound", Section: "drift", Budget: 0.5, Target: 1.05}
	gs := []results.FreshnessGoal{g,
		{Goal: "mean / bound", Section: "drift", Budget: 1, Target: 1.05, Value: 1.2, Seeds: 5, Spread: results.FreshnessStat{Mean: 1.04}},
		{Goal: "mean / bound", Section: "drift", Budget: 2, Target: 1.05, Value: 1.1, Seeds: 1, Spread: results.FreshnessStat{Mean: 1.1}},
		{Goal: "mean / bound", Section: "runs", Budget: 1, Target: 1.03, Value: 1.0, Seeds: 5, Spread: results.FreshnessStat{Mean: 1.0}},
	}
	if got, want := otherBudgets(g, gs, true), "1: 1.04 ✅; 2: 1.10 ❌"; got != want {
		t.Errorf("over the seeds: %q, want %q", got, want)
	}
	if got, want := otherBudgets(g, gs, false), "1: 1.20 ❌; 2: 1.10 ❌"; got != want {
		t.Errorf("one seed's: %q, want %q", got, want)
	}
}
