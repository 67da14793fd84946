package main

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestPopulationMatchesTheTargets(t *testing.T) {
	pop := NewPopulation(20000, 7, targets)
	dormant := 0
	for _, r := range pop.Rates {
		if r == 0 {
			dormant++
		}
	}
	if got := float64(dormant) / 20000; math.Abs(got-0.5) > 1e-9 {
		t.Fatalf("dormant share %v, want 0.5", got)
	}
	commits := pop.Commits(7, 120)
	d := describe(pop, commits, 0, 120)
	if math.Abs(d.MeasuredMonthly-0.13) > 0.01 {
		t.Errorf("share of repos changing in 30 days = %.3f, want 0.13 ± 0.01", d.MeasuredMonthly)
	}
	if math.Abs(d.MeasuredTopShare-0.5) > 0.06 {
		t.Errorf("top 2.5%% of repos made %.3f of the commits, want 0.5 ± 0.06", d.MeasuredTopShare)
	}
	for i, q := range pop.Quiet {
		if pop.Rates[i] == 0 && q < 365 {
			t.Fatalf("dormant repo %d last changed %.0f days ago, want at least a year", i, q)
		}
	}
}

func TestCommitsAreTheSameForEveryReader(t *testing.T) {
	pop := NewPopulation(500, 3, targets)
	a, b := pop.Commits(3, 100), pop.Commits(3, 100)
	for i := range a {
		if len(a[i]) != len(b[i]) {
			t.Fatalf("repo %d: %d vs %d commits", i, len(a[i]), len(b[i]))
		}
		for k := range a[i] {
			if a[i][k] != b[i][k] || a[i][k] < 0 || a[i][k] >= 100 || (k > 0 && a[i][k] < a[i][k-1]) {
				t.Fatalf("repo %d commit %d: %v / %v", i, k, a[i][k], b[i][k])
			}
		}
	}
}

func TestMeterAccountsLagStalenessAndAge(t *testing.T) {
	m := meter{ws: 10, we: 20}
	// A commit before the window, mirrored inside it: no lag sample, stale from 10 to 12.
	if m.commit(5, 12) {
		t.Fatal("commit before the window counted")
	}
	m.stale(5, 12)
	// A commit inside, mirrored 3 days later.
	if !m.commit(12, 15) {
		t.Fatal("commit inside the window not counted")
	}
	m.stale(12, 15)
	// A commit inside, mirrored after the window: stale only up to its end.
	m.commit(19, 25)
	m.stale(19, 25)
	if len(m.lags) != 2 || m.lags[0] != 3 || m.lags[1] != 6 {
		t.Fatalf("lags %v, want [3 6]", m.lags)
	}
	if want := 2.0 + 3 + 1; math.Abs(m.staleDays-want) > 1e-12 {
		t.Fatalf("stale days %v, want %v", m.staleDays, want)
	}
	// Age: ∫10..12 (t−5) = 12, ∫12..15 (t−12) = 4.5, ∫19..20 (t−19) = 0.5.
	if want := 12 + 4.5 + 0.5; math.Abs(m.ageDays-want) > 1e-12 {
		t.Fatalf("age integral %v, want %v", m.ageDays, want)
	}
}

func TestUniformLagIsHalfTheCycle(t *testing.T) {
	pop := NewPopulation(2000, 11, targets)
	cfg := runConfig{Budget: 0.5, Warmup: 20, Window: 60, Drain: 10, MinInterval: 0}
	commits := pop.Commits(11, cfg.Warmup+cfg.Window+cfg.Drain)
	r := run(pop, commits, uniform{}, cfg, rand.New(rand.NewPCG(1, 2)))
	// Every repo comes round every 2 days, so a commit waits 1 day = 24 h on average.
	if math.Abs(r.LagMeanH-24)/24 > 0.1 {
		t.Fatalf("uniform mean lag %.2f h, want 24 h ± 10%%", r.LagMeanH)
	}
	if math.Abs(r.DormantPolls-0.5) > 0.01 {
		t.Fatalf("uniform spent %.3f of its polls on dormant repos, want 0.5", r.DormantPolls)
	}
	if r.Censored != 0 || r.Commits == 0 {
		t.Fatalf("commits %d, censored %d", r.Commits, r.Censored)
	}
}

func TestSimulatedOptimumMatchesTheClosedForm(t *testing.T) {
	pop := NewPopulation(3000, 5, targets)
	cfg := runConfig{Budget: 1, Warmup: 30, Window: 120, Drain: 20, MinInterval: 0}
	commits := pop.Commits(5, cfg.Warmup+cfg.Window+cfg.Drain)
	r := run(pop, commits, optimum{pop}, cfg, rand.New(rand.NewPCG(1, 2)))
	want := analyticOptimum(pop, cfg.Budget*3000) * 24
	if math.Abs(r.LagMeanH-want)/want > 0.15 {
		t.Fatalf("simulated optimum %.2f h, closed form %.2f h", r.LagMeanH, want)
	}
	if r.DormantPolls > 0.01 {
		t.Fatalf("optimum spent %.3f of its polls on dormant repos", r.DormantPolls)
	}
}

func TestSWHIntervals(t *testing.T) {
	want := map[int]float64{0: 1, 1: 1, 2: 2, 4: 2, 5: 4, 6: 16, 10: 4096}
	for o, d := range want {
		if got := swhDays(o); got != d {
			t.Errorf("offset %d: %v days, want %v", o, got, d)
		}
	}
	s := newSWH(1, rand.New(rand.NewPCG(1, 1)))
	s.next(0, 0, seen{changed: true})
	if s.offset[0] != 2 {
		t.Fatalf("after a change the offset is %d, want 2", s.offset[0])
	}
	for range 20 {
		s.next(0, 0, seen{})
	}
	if s.offset[0] != 10 {
		t.Fatalf("offset climbs to %d, want the cap 10", s.offset[0])
	}
}

func TestParseBudgets(t *testing.T) {
	if b, err := parseBudgets("0.5, 2"); err != nil || len(b) != 2 || b[1] != 2 {
		t.Fatalf("parseBudgets = %v, %v", b, err)
	}
	for _, bad := range []string{"", "x", "0", "-1"} {
		if _, err := parseBudgets(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDriftKeepsTheShapeButChangesTheRepos(t *testing.T) {
	pop := NewPopulation(20000, 9, targets)
	steady, drift := pop.Commits(9, 400), pop.DriftingCommits(9, 400, 0.1, targets)
	d := describe(pop, drift, 300, 390)
	if math.Abs(d.MeasuredMonthly-0.13) > 0.02 {
		t.Errorf("with drift, share of repos changing in 30 days = %.3f, want 0.13 ± 0.02", d.MeasuredMonthly)
	}
	// Late in the run many repos that were dormant at the start commit, and some busy ones stop.
	woke, slept := 0, 0
	for i, r := range pop.Rates {
		late := 0
		for _, c := range drift[i] {
			if c >= 300 {
				late++
			}
		}
		if r == 0 && late > 0 {
			woke++
		}
		if r > 0 && len(steady[i]) > 20 && late == 0 {
			slept++
		}
	}
	if woke < 100 || slept == 0 {
		t.Fatalf("drift woke %d dormant repos and stopped %d busy ones", woke, slept)
	}
}
