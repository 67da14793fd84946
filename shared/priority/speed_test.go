package priority

import (
	"math"
	"testing"
	"time"
)

// A silence is cut into steps that halve towards the present and add up to it: the
// first is the repo's own, the others those of the silence rounded down to the grid,
// kept with the prior; each step's decays are the exponentials.
func TestASilenceIsCutIntoHalvingSteps(t *testing.T) {
	for _, days := range []float64{0.004, 0.4, 1, 3, 90, 2000, 40000, 1e6} {
		var s silence
		s.cut(days)
		tl := s.sh
		steps := []float64{s.step0}
		factors := []belief{s.f0}
		for j := 1; j < silenceSteps; j++ {
			steps = append(steps, tl.step[j])
			factors = append(factors, tl.f[j])
		}
		total := 0.0
		for j, step := range steps {
			total += step
			if j > 0 && j < silenceSteps-1 && math.Abs(step/steps[j+1]-2) > 1e-12 && j < silenceSteps-2 {
				t.Errorf("days %g: step %d is %g, the next %g", days, j, step, steps[j+1])
			}
			for k, r := range gridRates {
				want := math.Exp(-r * step)
				got := factors[j][k]
				if want < minDecay {
					if got != 0 {
						t.Errorf("days %g step %d rate %g: decay %g, want 0 below %g", days, j, r, got, minDecay)
					}
					continue
				}
				if math.Abs(got-want) > 1e-9*want {
					t.Errorf("days %g step %d rate %g: decay %g, want %g", days, j, r, got, want)
				}
			}
		}
		if math.Abs(total-days) > 1e-9*days || steps[silenceSteps-1] != steps[silenceSteps-2] || steps[0] < days/2 || steps[0] > 0.52*days {
			t.Errorf("days %g: steps %v add up to %g", days, steps, total)
		}
	}
}

func TestScoresWeighEachHazardAsItsOwnPosterior(t *testing.T) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.01 / 30}
	for _, e := range []evidence{{oldN: 12, oldT: 800, winT: 40}, {oldN: 3, oldT: 200, winN: 2, winT: 15}, {oldT: 3000}} {
		var l likelihoods
		likelihoodsOf(e, &l)
		var w weighed
		prior.weigh(&l, &w)
		for _, perMonth := range hazards {
			q := *prior
			q.Hazard = perMonth / 30
			want, wc := q.posterior(e)
			got, gc := prior.judge(&l, &w, perMonth/30)
			if got != want || gc != wc {
				t.Errorf("%+v at %g a month: %v %v, want %v %v", e, perMonth, got.mean(), gc, want.mean(), wc)
			}
		}
	}
}

func BenchmarkPosteriorSilence(b *testing.B) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.01 / 30}
	s := Stats{Events: 12, Exposure: 800 * 86400, WinSeconds: 40 * 86400}
	for b.Loop() {
		prior.guarded(s)
	}
}

func BenchmarkScoresAdd(b *testing.B) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.01 / 30}
	s := Stats{Events: 12, Exposure: 800 * 86400, WinSeconds: 40 * 86400}
	p := Poll{Prev: t0, Now: t0.Add(48 * time.Hour)}
	var sc Scores
	for b.Loop() {
		sc.Add(prior, s, p)
	}
}

// A view holds every candidate hazard's posterior and the prior's own: each is the
// posterior judge gives at that hazard, and what a decision reads of it (dot) is read
// off the same belief.
func TestAViewIsEveryHazardsPosterior(t *testing.T) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.02 / 30}
	for _, e := range []evidence{{oldN: 12, oldT: 800, winT: 40}, {oldN: 3, oldT: 200, winN: 2, winT: 15}, {oldT: 3000},
		{oldT: 3000, winT: 4000}, {oldN: 500, oldT: 300, winT: 90}, {winT: 0.01}} {
		var v view
		prior.viewOf(e, &v)
		hs := prior.viewHazardsPerDay()
		for h, hz := range hs {
			q := *prior
			q.Hazard = hz
			want, wc := q.posterior(e)
			got, gc := v.belief(h)
			for k := range gridSize {
				if math.Abs(got[k]-want[k]) > 1e-12+1e-9*want[k] {
					t.Fatalf("%+v at %g a day, rate %g: %g, want %g", e, hz, gridRates[k], got[k], want[k])
				}
			}
			if math.Abs(gc-wc) > 1e-9 {
				t.Fatalf("%+v at %g a day: changed %g, want %g", e, hz, gc, wc)
			}
			if m := v.dot(h, &gridBelief); math.Abs(m-want.mean()) > 1e-9*want.mean() {
				t.Fatalf("%+v at %g a day: mean %g, want %g", e, hz, m, want.mean())
			}
		}
	}
}

// A Memo changes no result: a score with one is what it is without, and what a memo
// keeps of other stats or another prior is not read.
func TestAMemoIsOnlyASaving(t *testing.T) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.01 / 30}
	other := &Prior{Weights: logNormal(0.3, math.Log(0.05), 1.2), Hazard: 0.1 / 30}
	kept := &Prior{Weights: logNormal(0.4, math.Log(0.01), 1.4), Hazard: 0.03 / 30, Classes: true}
	kept.ClassWeights = [classes]belief{kept.Weights, logNormal(0.8, math.Log(0.001), 1), kept.Weights, kept.Weights, kept.Weights}
	kept.withTails()
	copied := *kept
	var m Memo
	s := Stats{Events: 12, Exposure: 800 * 86400, WinSeconds: 40 * 86400}
	grown, longer := s, s
	grown.WinSeconds, longer.WinSeconds = 41*86400, 45*86400
	root := longer
	root.Root = true
	for k, c := range []struct {
		p *Prior
		s Stats
	}{{prior, s}, {prior, s}, {other, s}, {other, Stats{Events: 1, Exposure: 30 * 86400, WinEvents: 2, WinSeconds: 86400}}, {prior, s},
		// A silence that grows, under a prior that keeps its tails, a copy of it, and a
		// class of its own.
		{kept, s}, {kept, grown}, {&copied, longer}, {kept, longer}, {kept, root}, {prior, root}} {
		p := Poll{Prev: t0, Now: t0.Add(36 * time.Hour), Changed: k%2 == 0}
		var with, without Scores
		with.AddWith(c.p, c.s.Evidence(), p, &m)
		without.Add(c.p, c.s, p)
		if with != without {
			t.Fatalf("step %d: scores %v with a memo, %v without", k, with, without)
		}
	}
}

// The view of a silence that grows at every poll: computed anew from the memo's
// likelihoods and its belief before the silence, at every hazard.
func BenchmarkViewSilence(b *testing.B) {
	prior := (&Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.01 / 30}).withTails()
	var (
		m Memo
		v view
	)
	s := Stats{Events: 12, Exposure: 800 * 86400, WinSeconds: 40 * 86400}
	for i := 0; b.Loop(); i++ {
		s.WinSeconds = float64(40*24+i%1000) * 3600
		prior.view(evidenceOf(&s), &m, &v)
	}
}

// A score of a poll whose stats the memo already holds the likelihoods of.
func BenchmarkScoresAddWith(b *testing.B) {
	prior := (&Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.01 / 30}).withTails()
	var m Memo
	s := Stats{Events: 12, Exposure: 800 * 86400, WinSeconds: 40 * 86400}
	p := Poll{Prev: t0, Now: t0.Add(48 * time.Hour)}
	var sc Scores
	for b.Loop() {
		sc.AddWith(prior, s.Evidence(), p, &m)
	}
}

// As a worker polls: each poll's score on the stats before it, from the repo's memo,
// and a fit of the stats after it, also from the memo; the prior changes on the way.
// With the memo, every score and fit is what it is without.
func TestAMemoServesEachPollsScore(t *testing.T) {
	priors := []*Prior{
		(&Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.01 / 30}).withTails(),
		(&Prior{Weights: logNormal(0.3, math.Log(0.05), 1.2), Hazard: 0.1 / 30}).withTails(),
	}
	var m Memo
	s := Stats{Events: 12, Exposure: 800 * 86400, WinSeconds: 40 * 86400}
	now := t0
	for k := range 40 {
		prior := priors[k/15%2]
		before := s
		p := Poll{Prev: now, Now: now.Add(36 * time.Hour), Changed: k%7 == 3}
		if p.Changed {
			p.Commits = []time.Time{p.Now.Add(-time.Hour)}
		}
		s, now = Fold(s, p, prior), p.Now
		var with, without Scores
		with.AddWith(prior, before.Evidence(), p, &m)
		without.Add(prior, before, p)
		if with != without {
			t.Fatalf("poll %d: scores %v with a memo, %v without", k, with, without)
		}
		if k%5 == 4 {
			fitWith := FitWith([]Stats{s}, []*Memo{&m}, prior, now, &with)
			fit := Fit([]Stats{s}, prior, now, &without)
			if fitWith.Weights != fit.Weights || fitWith.ClassWeights != fit.ClassWeights || fitWith.Hazard != fit.Hazard {
				t.Fatalf("poll %d: fit with a memo %+v, without %+v", k, fitWith.Weights, fit.Weights)
			}
		}
	}
}

// BenchmarkFilterPoll is one poll's filter: a few days' quiet, then a push.
func BenchmarkFilterPoll(b *testing.B) {
	p := DefaultPrior()
	sp := splitOf(&p.Weights, &p.Weights, &p.Weights)
	push := []time.Time{day0.Add(days(2.5))}
	for b.Loop() {
		p.filter(&sp, &p.Weights, day0, day0.Add(days(3)), push, true)
		p.filter(&sp, &p.Weights, day0, day0.Add(days(5)), nil, false)
	}
}
