package main

import (
	"log/slog"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
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
	up := pop.NewUpstream(7, 120, 0, batch, targets)
	d := describe(pop, up, 0, 120)
	if math.Abs(d.MeasuredMonthly-0.13) > 0.01 {
		t.Errorf("share of repos changing in 30 days = %.3f, want 0.13 ± 0.01", d.MeasuredMonthly)
	}
	if math.Abs(d.MeasuredTopShare-0.5) > 0.06 {
		t.Errorf("top 2.5%% of repos made %.3f of the commits, want 0.5 ± 0.06", d.MeasuredTopShare)
	}
	for i, q := range pop.Quiet {
		if pop.Rates[i] == 0 && (q < 365 || up[i].Newest > -365) {
			t.Fatalf("dormant repo %d last changed %.0f days ago (newest commit %.0f), want at least a year", i, q, up[i].Newest)
		}
	}
}

// TestQuietDoesNotTellActiveFromDormant: how long a repo has been quiet when the run
// starts does not say by itself whether it is active or dormant. Both kinds are quiet up
// to ten years, and no length of quiet is shared by many repos: a cap on the active
// repos' quiet put every slow repo quiet for longer on one day no dormant repo was at,
// so a long silence, which a real fleet reads as dormancy, was a sure sign of activity.
func TestQuietDoesNotTellActiveFromDormant(t *testing.T) {
	pop := NewPopulation(20000, 7, targets)
	var longActive, longDormant int
	seen := map[float64]int{}
	for i, q := range pop.Quiet {
		if q >= maxQuietDays {
			t.Fatalf("repo %d quiet %.0f days, want under %.0f", i, q, maxQuietDays)
		}
		if seen[q]++; seen[q] > 1 {
			t.Fatalf("more than one repo quiet exactly %v days", q)
		}
		if q > 8*365 {
			if pop.Rates[i] > 0 {
				longActive++
			} else {
				longDormant++
			}
		}
	}
	if longActive == 0 || longDormant < longActive {
		t.Errorf("quiet for over eight years: %d active repos, %d dormant; want both, mostly dormant", longActive, longDormant)
	}
}

func TestUpstreamIsTheSameForEveryReaderAndHidesPushTimes(t *testing.T) {
	pop := NewPopulation(500, 3, targets)
	a, b := pop.NewUpstream(3, 100, 0, batch, targets), pop.NewUpstream(3, 100, 0, batch, targets)
	commits, multi, delayed := 0, 0, 0
	for i := range a {
		if len(a[i].Pushes) != len(b[i].Pushes) || len(a[i].Past) != len(b[i].Past) {
			t.Fatalf("repo %d: %d vs %d pushes", i, len(a[i].Pushes), len(b[i].Pushes))
		}
		for k, p := range a[i].Pushes {
			q := b[i].Pushes[k]
			if p.At != q.At || len(p.Authored) != len(q.Authored) || p.At < 0 || p.At >= 100 || (k > 0 && p.At < a[i].Pushes[k-1].At) {
				t.Fatalf("repo %d push %d: %+v / %+v", i, k, p, q)
			}
			for j, au := range p.Authored {
				if au >= p.At || au != q.Authored[j] || (j > 0 && au > p.Authored[j-1]) {
					t.Fatalf("repo %d push %d: commit %d authored at %v, push at %v", i, k, j, au, p.At)
				}
				if p.At-au > 1.0/24 {
					delayed++
				}
			}
			commits += len(p.Authored)
			if len(p.Authored) > 1 {
				multi++
			}
		}
	}
	// Pushes carry batches, and commits are authored well before some pushes.
	if multi == 0 || delayed == 0 || commits == 0 {
		t.Fatalf("%d commits, %d pushes of several commits, %d commits authored over an hour before their push", commits, multi, delayed)
	}
}

func TestAPollSeesCommitTimesWithinTheMirrorsBounds(t *testing.T) {
	life := RepoLife{Pushes: []Push{{At: 10, Authored: []float64{9.9, 9.5}}, {At: 20, Authored: []float64{19}}}}
	// A fetch lists the commits' author times, not the pushes'.
	got := newCommits(life.Pushes)
	if len(got) != 3 || !got[0].Equal(at(9.9)) || !got[2].Equal(at(19)) {
		t.Fatalf("new commits %v", got)
	}
	// A first clone lists the history back to the window, from its newest commit.
	life.Past = []float64{-1, -2000, -3000}
	times, since, root := historyAt(life, 1, 15)
	window := fetch.HistoryWindow.Hours() / 24
	if len(times) != 3 || since != 15-window || root {
		t.Fatalf("history: %v since %v root %v; want 3 commits since %v", times, since, root, 15-window)
	}
	// ... or to the first commit when the repo is younger than the window.
	life.Past, life.Born = []float64{-1, -30}, true
	if _, since, root := historyAt(life, 2, 25); since != -30 || !root {
		t.Fatalf("young repo's history since %v (root %v), want -30", since, root)
	}
	// ... or to the mirror's bound.
	life = RepoLife{}
	for k := range fetch.MaxHistoryCommits + 10 {
		life.Past = append(life.Past, -float64(k)/100)
	}
	times, since, _ = historyAt(life, 0, 0)
	if len(times) != fetch.MaxHistoryCommits || since != life.Past[fetch.MaxHistoryCommits-1] {
		t.Fatalf("capped history: %d commits since %v", len(times), since)
	}
}

func TestMeterAccountsLagStalenessAndAge(t *testing.T) {
	m := meter{ws: 10, we: 20}
	// A push before the window, mirrored inside it: no lag sample, stale from 10 to 12.
	if m.push(Push{At: 5, Authored: []float64{4}}, 12) {
		t.Fatal("push before the window counted")
	}
	m.stale(5, 12)
	// A push of two commits inside, mirrored 3 days later: two lag samples.
	if !m.push(Push{At: 12, Authored: []float64{11, 10}}, 15) {
		t.Fatal("push inside the window not counted")
	}
	m.stale(12, 15)
	// A push inside, mirrored after the window: stale only up to its end.
	m.push(Push{At: 19, Authored: []float64{18}}, 25)
	m.stale(19, 25)
	if len(m.lags) != 3 || m.lags[0] != 3 || m.lags[1] != 3 || m.lags[2] != 6 {
		t.Fatalf("lags %v, want [3 3 6]", m.lags)
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
	cfg := runConfig{Budget: 0.5, End: 90, Windows: []window{{20, 80}}}
	up := pop.NewUpstream(11, cfg.End, 0, batch, targets)
	r := run(pop, up, uniform{}, cfg, rand.New(rand.NewPCG(1, 2)))[0]
	// Every repo comes round every 2 days, so a push waits 1 day = 24 h on average.
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
	cfg := runConfig{Budget: 1, End: 170, Windows: []window{{30, 150}}}
	up := pop.NewUpstream(5, cfg.End, 0, batch, targets)
	r := run(pop, up, optimum{up: up}, cfg, rand.New(rand.NewPCG(1, 2)))[0]
	want, _ := newOptimumAlloc(up, cfg.Windows[0], 0.5, nil).lag(cfg.Budget * 3000)
	if math.Abs(r.LagMeanH-want)/want > 0.04 {
		t.Fatalf("simulated optimum %.2f h, closed form %.2f h", r.LagMeanH, want)
	}
	if r.DormantPolls > 0.01 {
		t.Fatalf("optimum spent %.3f of its polls on dormant repos", r.DormantPolls)
	}
	// Over the expected pushes, the closed form is (Σ√λ)²/(2·R·Σλ).
	var sq, sum float64
	for _, r := range pop.Rates {
		sq += math.Sqrt(r)
		sum += r
	}
	if expected := sq * sq / (2 * cfg.Budget * 3000 * sum) * 24; math.Abs(want-expected)/expected > 0.05 {
		t.Fatalf("closed form over the window's pushes %.2f h, over the expected ones %.2f h", want, expected)
	}
}

// The optimum of a drifting population follows each repo's rate as it changes: its lag
// is the closed form's over the same pushes, each waiting half the period of its repo's
// rate when it was pushed. A repo that stops is polled once more, for what it pushed
// before (and no more).
func TestDriftingOptimumFollowsEachRepoAtOnce(t *testing.T) {
	pop := NewPopulation(3000, 5, targets)
	cfg := runConfig{Budget: 1, End: 200, Windows: []window{{60, 180}}}
	up := pop.NewUpstream(5, cfg.End, 0.1, batch, targets)
	r := run(pop, up, optimum{up: up}, cfg, rand.New(rand.NewPCG(1, 2)))[0]
	if r.DormantPolls > 0.01 || r.Censored != 0 {
		t.Fatalf("drifting optimum spent %.3f of its polls on dormant repos, %d commits never fetched", r.DormantPolls, r.Censored)
	}
	want, _ := newOptimumAlloc(up, cfg.Windows[0], 0.5, nil).lag(cfg.Budget * 3000)
	if math.Abs(r.LagMeanH-want)/want > 0.04 || r.Commits == 0 {
		t.Fatalf("drifting optimum's lag %.2f h, closed form %.2f h", r.LagMeanH, want)
	}
}

func TestTheDefaultPolicyClonesEveryRepoFirst(t *testing.T) {
	pop := NewPopulation(2000, 13, targets)
	cfg := runConfig{Budget: 1, End: 40, Windows: []window{{0, 30}}}
	up := pop.NewUpstream(13, cfg.End, 0, batch, targets)
	r := run(pop, up, production{defaultPolicy()}, cfg, rand.New(rand.NewPCG(1, 2)))[0]
	// The first 2,000 polls (the first day) clone every repo; what they bring is then
	// mirrored at the clone, so no push waits more than the first pass and the policy's
	// own schedule after it.
	if r.Censored != 0 || r.Commits == 0 || r.LagMeanH <= 0 {
		t.Fatalf("coldstart: %+v", r)
	}
	uni := run(pop, up, uniform{}, cfg, rand.New(rand.NewPCG(1, 2)))[0]
	if !(r.LagMeanH < uni.LagMeanH/2) {
		t.Fatalf("default policy's coldstart lag %.2f h, uniform's %.2f h", r.LagMeanH, uni.LagMeanH)
	}
	if r.LearnedHazardPerMonth <= 0 || r.LearnedDormantShare <= 0 {
		t.Fatalf("nothing learned: %+v", r)
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
	steady, drift := pop.NewUpstream(9, 400, 0, batch, targets), pop.NewUpstream(9, 400, 0.1, batch, targets)
	d := describe(pop, drift, 300, 390)
	if math.Abs(d.MeasuredMonthly-0.13) > 0.02 {
		t.Errorf("with drift, share of repos changing in 30 days = %.3f, want 0.13 ± 0.02", d.MeasuredMonthly)
	}
	// Late in the run many repos that were dormant at the start push, and some busy ones stop.
	woke, slept := 0, 0
	for i, r := range pop.Rates {
		late := 0
		for _, p := range drift[i].Pushes {
			if p.At >= 300 {
				late++
			}
		}
		if r == 0 && late > 0 {
			woke++
		}
		if r > 0 && len(steady[i].Pushes) > 20 && late == 0 {
			slept++
		}
		if got := drift[i].RateAt(350); (got == 0) != (drift[i].Regimes[len(drift[i].Regimes)-1].Rate == 0) && drift[i].Regimes[len(drift[i].Regimes)-1].From <= 350 {
			t.Fatalf("repo %d: RateAt(350) = %v, regimes %+v", i, got, drift[i].Regimes)
		}
	}
	if woke < 100 || slept == 0 {
		t.Fatalf("drift woke %d dormant repos and stopped %d busy ones", woke, slept)
	}
}

func TestCostsAreMeasuredOnARealWorkerAndRealMirrors(t *testing.T) {
	if _, err := gittest.BackendPath(); err != nil {
		t.Skipf("git http-backend not available: %v", err)
	}
	ctx := t.Context()
	b, err := workerBytesPerRepo(ctx, 300)
	if err != nil {
		t.Fatal(err)
	}
	// A record with its URL and stats, a queue entry and map slots: some hundreds of bytes.
	if b < 200 || b > 20000 {
		t.Fatalf("%.0f bytes per repo", b)
	}
	walks, err := measureWalks(ctx, slog.New(slog.DiscardHandler), []walkRepo{{"tiny", 60, 20, 3}})
	if err != nil {
		t.Fatal(err)
	}
	w := walks[0]
	// 60 commits on main and 2 release branches of one; the push brought 3 commits on
	// main and a branch of 2; the history (after the push) lists all 67.
	if w.NewCommits != 5 || w.Commits != 67 || w.HistoryListed != 67 || w.Refs != 1+2+3 || w.NewWalkMs <= 0 || w.FullWalkMs <= 0 {
		t.Fatalf("walks %+v", w)
	}
}

// The drift bound's filter, run on an upstream that never changes rate, is the
// stationary bound (computed another way); with drift the bound is well above it, and
// the silent repos take a larger share of the polls.
func TestDriftBoundAgreesWithTheStationaryOne(t *testing.T) {
	pop := NewPopulation(3000, 5, targets)
	w := window{40, 60}
	up := pop.NewUpstream(5, 61, 0, batch, targets)
	opt := func(b float64) (float64, float64) { return newOptimumAlloc(up, w, 0.5, nil).lag(b * 3000) }
	steady := driftBound(pop, up, 1e-6, w, []float64{1}, opt, rand.New(rand.NewPCG(5, 1)))[0]
	want := bound(pop, up, 50, w, []float64{1}, opt, 2, rand.New(rand.NewPCG(5, 2)))[0]
	if math.Abs(steady.Ratio/want.Ratio-1) > 0.03 || math.Abs(steady.DormantPolls-want.DormantPolls) > 0.01 {
		t.Fatalf("filtered bound without changes %.3f (dormant %.3f), stationary bound %.3f (dormant %.3f)",
			steady.Ratio, steady.DormantPolls, want.Ratio, want.DormantPolls)
	}
	dup := pop.NewUpstream(5, 61, 0.1, batch, targets)
	dopt := func(b float64) (float64, float64) { return newOptimumAlloc(dup, w, 0.5, nil).lag(b * 3000) }
	drifting := driftBound(pop, dup, 0.1, w, []float64{1}, dopt, rand.New(rand.NewPCG(5, 1)))[0]
	if drifting.Ratio < steady.Ratio*1.2 || drifting.DormantPolls < 2*steady.DormantPolls {
		t.Fatalf("bound with drift %.3f (dormant %.3f), without %.3f (dormant %.3f): drift should cost",
			drifting.Ratio, drifting.DormantPolls, steady.Ratio, steady.DormantPolls)
	}
	// The ratio is the lag over the closed-form optimum's at the same budget.
	if m, _ := dopt(1); math.Abs(drifting.LagMeanH/m-drifting.Ratio) > 1e-12 {
		t.Fatalf("bound %.3f h, ratio %.4f, optimum %.3f h", drifting.LagMeanH, drifting.Ratio, m)
	}
	t.Logf("bound %.3f without drift (stationary %.3f), %.3f with", steady.Ratio, want.Ratio, drifting.Ratio)
}

// On the realistic population the filter reads a young repo's counts over its age: with
// drift its bound is above 1 and above the same filter's without changes.
func TestRealisticDriftBound(t *testing.T) {
	pop := NewRealisticPopulation(3000, 5, targets, realism)
	w := window{40, 60}
	ratio := func(perMonth float64) float64 {
		up := pop.NewUpstream(5, 61, perMonth, batch, targets)
		opt := func(b float64) (float64, float64) { return newOptimumAlloc(up, w, 0.5, nil).lag(b * 3000) }
		return driftBound(pop, up, max(perMonth, 1e-6), w, []float64{1}, opt, rand.New(rand.NewPCG(5, 1)))[0].Ratio
	}
	steady, drifting := ratio(0), ratio(0.1)
	if steady < 1 || drifting < steady*1.2 || math.IsNaN(drifting) {
		t.Fatalf("realistic bound %.3f with drift, %.3f without", drifting, steady)
	}
	t.Logf("realistic: bound %.3f without drift, %.3f with", steady, drifting)
}

// A run ends once every push made in a window is mirrored, well before its drain is
// over, and every figure is what the whole drain gives: what comes after changes
// nothing it measures.
func TestARunEndsOnceEveryMeasuredPushIsMirrored(t *testing.T) {
	pop := NewPopulation(1500, 17, targets)
	cfg := runConfig{Budget: 1, End: 160, Windows: []window{{60, 100}, {0, 30}}}
	for _, drift := range []float64{0, 0.1} {
		up := pop.NewUpstream(17, cfg.End, drift, batch, targets)
		for _, s := range []scheduler{production{defaultPolicy()}, uniform{}} {
			short, ended := runTo(pop, up, s, cfg, rand.New(rand.NewPCG(1, 2)), false)
			full, _ := runTo(pop, up, s, cfg, rand.New(rand.NewPCG(1, 2)), true)
			if !(ended < cfg.End) || ended < 100 {
				t.Fatalf("%s, drift %v: ended on day %v of %v, the last window ending on day 100", s.name(), drift, ended, cfg.End)
			}
			if !reflect.DeepEqual(short, full) {
				t.Fatalf("%s, drift %v: ended on day %v: %+v; with the whole drain: %+v", s.name(), drift, ended, short, full)
			}
			if short[0].Commits == 0 || short[0].Censored != 0 {
				t.Fatalf("%s, drift %v: %+v", s.name(), drift, short[0])
			}
		}
	}
}
