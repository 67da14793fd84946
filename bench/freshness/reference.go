package main

import (
	"math"
)

// The closed forms every figure of a window is read against. A policy's lag is measured
// over the pushes the window saw; the optimum's and a bound's are computed over the same
// pushes: a push found by periodic polls of its repo, at a phase the push does not know,
// waits a uniform share of the period, so its expected lag is half the period. Each
// figure is then the lag those pushes would have under the allocation, not under the
// population's expected rates, and the realized pushes' noise is common to the policy
// and its references.

// pollFreq is a repo's poll frequency at a day, in polls per day; 0: not polled.
type pollFreq func(i int, day float64) float64

// lagOver is the mean and p99 lag, in hours, of the commits of the pushes made in w,
// each found by the poll its repo's frequency gives (freq), as a share missed(i) of
// them (nil: all); the others a signal announces, delay days after the push. A push
// of a repo not polled waits for the end of the run (end).
func lagOver(up Upstream, w window, freq pollFreq, missed func(int) float64, delay, end float64) (meanH, p99H float64) {
	type wait struct{ period, commits, missed float64 }
	var waits []wait
	total, sum := 0.0, 0.0
	for i, l := range up {
		m := 1.0
		if missed != nil {
			m = missed(i)
		}
		for _, p := range pushesIn(l, w) {
			c := float64(len(p.Authored))
			f := 0.0
			if m > 0 {
				f = freq(i, p.At)
			}
			x := wait{period: math.Inf(1), commits: c, missed: m}
			switch {
			case m == 0:
			case f > 0:
				x.period = 1 / f
				sum += c * m * x.period / 2
			default:
				sum += c * m * (end - p.At) // never polled: it waits to the end
			}
			sum += c * (1 - m) * delay
			total += c
			waits = append(waits, x)
		}
	}
	if total == 0 {
		return 0, 0
	}
	// The share of commits still waiting at x falls as x grows: bisect for 1%.
	late := func(x float64) float64 {
		s := 0.0
		for _, v := range waits {
			if v.period > x {
				s += v.commits * v.missed * (1 - x/v.period)
			}
			if delay > x {
				s += v.commits * (1 - v.missed)
			}
		}
		return s / total
	}
	lo, hi := 0.0, delay
	for _, v := range waits {
		if !math.IsInf(v.period, 1) {
			hi = max(hi, v.period)
		}
	}
	for range 60 {
		mid := (lo + hi) / 2
		if late(mid) > 0.01 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return sum / total * 24, (lo + hi) / 2 * 24
}

// pushesIn are the pushes of l made in w.
func pushesIn(l RepoLife, w window) []Push {
	return l.Pushes[l.pushedBefore(w.From):l.pushedBefore(w.To)]
}

// optimumAlloc is the optimum's allocation over w: each repo polled at a frequency
// ∝ λ^exp of its rate at the time (exp ½: the optimum; 0.4: optimum04), the sum taken
// on a grid of quarter days, so that it follows a drifting population. With missed set
// (a signal's, signalCharge), a repo is polled for the share of its pushes the signal
// misses: ∝ (missed·λ)^exp.
type optimumAlloc struct {
	up     Upstream
	w      window
	exp    float64
	missed func(int) float64
	sum    []float64 // Σ (missed·λ)^exp over the repos, per cell
}

const allocCell = 0.25 // days

func newOptimumAlloc(up Upstream, w window, exp float64, missed func(int) float64) optimumAlloc {
	n := int(math.Ceil((w.To - w.From) / allocCell))
	a := optimumAlloc{up: up, w: w, exp: exp, missed: missed, sum: make([]float64, max(n, 1))}
	for i, l := range up {
		m := a.share(i)
		if m == 0 {
			continue
		}
		k := 0 // the regime at the cell's middle: cells and regimes both in time order
		for c := range a.sum {
			t := w.From + (float64(c)+0.5)*allocCell
			for k+1 < len(l.Regimes) && l.Regimes[k+1].From <= t {
				k++
			}
			if r := l.Regimes[k].Rate; r > 0 && l.Regimes[k].From <= t {
				a.sum[c] += a.pow(m * r)
			}
		}
	}
	return a
}

// share is the share of repo i's pushes polls must find.
func (a optimumAlloc) share(i int) float64 {
	if a.missed == nil {
		return 1
	}
	return a.missed(i)
}

func (a optimumAlloc) pow(r float64) float64 {
	if a.exp == 0.5 {
		return math.Sqrt(r)
	}
	return math.Pow(r, a.exp)
}

// freq is the allocation of pollsPerDay.
func (a optimumAlloc) freq(pollsPerDay float64) pollFreq {
	return func(i int, day float64) float64 {
		r := a.up[i].RateAt(day) * a.share(i)
		if r == 0 {
			return 0
		}
		c := min(max(int((day-a.w.From)/allocCell), 0), len(a.sum)-1)
		return pollsPerDay * a.pow(r) / a.sum[c]
	}
}

// lag is its mean and p99 lag (hours) over the pushes made in w at pollsPerDay.
func (a optimumAlloc) lag(pollsPerDay float64) (meanH, p99H float64) {
	return lagOver(a.up, a.w, a.freq(pollsPerDay), nil, 0, a.w.To)
}

// staticFreq is a static allocation of pollsPerDay: repo i at a frequency ∝ g[i] (0:
// not polled).
func staticFreq(g []float64, pollsPerDay float64) pollFreq {
	sum := 0.0
	for _, v := range g {
		sum += v
	}
	return func(i int, _ float64) float64 {
		if sum == 0 {
			return 0
		}
		return pollsPerDay * g[i] / sum
	}
}
