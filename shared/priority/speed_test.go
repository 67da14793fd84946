package priority

import (
	"math"
	"testing"
	"time"
)

func TestDecaysAreTheExponentials(t *testing.T) {
	for _, days := range []float64{0.001, 0.4, 3, 90, 2000, 40000} {
		var w silenceWalk
		w.steps(days)
		for j, step := range w.step {
			for k, r := range gridRates {
				want := math.Exp(-r * step)
				got := w.factor[j][k]
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
		if w.step[silenceSteps-1] != w.step[silenceSteps-2] || math.Abs(w.step[0]-days/2) > 1e-12*days {
			t.Errorf("days %g: steps %v", days, w.step)
		}
	}
}

func TestScoresWeighEachHazardAsItsOwnPosterior(t *testing.T) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.01 / 30}
	for _, e := range []evidence{{oldN: 12, oldT: 800, winT: 40}, {oldN: 3, oldT: 200, winN: 2, winT: 15}, {oldT: 3000}} {
		var w weighed
		prior.weighAll(e, &w)
		for _, perMonth := range hazards {
			q := *prior
			q.Hazard = perMonth / 30
			want, wc := q.posterior(e)
			got, gc := prior.judge(&w, perMonth/30)
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
