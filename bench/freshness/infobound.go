package main

import (
	"math"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
)

// The information bound with everything a mirror sees. bound and driftBound give a
// policy the exact push counts and the true model, and nothing else; a first clone also
// shows whether the history reaches the repo's first commit (and so its age), and how
// long the repo has been quiet. No closed form covers all of that for both populations,
// so this bound learns E[λ | evidence] from independent draws of the same population
// (the true model, drawn again with other seeds) by binning the evidence finely —
// whether the root was reached, the pushes seen, the span they cover, the silence since
// the newest — and shrinking thin bins toward coarser ones. A policy that knew that
// table and polled at f ∝ √E[λ | its bin] would have the ratio returned. Binning loses a
// little information, so the true bound is at most this; with trainDraws draws of the
// population the table is fine enough that halving the draws moves it by under 1%.

// evidence is what a mirror knows of a repo at a day: its first clone's listing and
// every push since, as the fetches showed them.
type evidence struct {
	root        bool
	pushes      int
	span, quiet float64 // days
}

// evidenceAt is the evidence of repo life at day (≥ 0): the first clone's history at
// day 0, sessions of commits as the worker counts them, and the exact pushes since.
func evidenceAt(life RepoLife, day float64) evidence {
	times, since, root := historyAt(life, 0, 0)
	e := evidence{root: root, pushes: priority.Sessions(times), span: day - since}
	newest := math.Inf(-1)
	if len(times) > 0 {
		newest = life.Newest
	}
	for _, p := range life.Pushes {
		if p.At > day {
			break
		}
		e.pushes++
		newest = p.At
	}
	e.quiet = e.span
	if !math.IsInf(newest, -1) {
		e.quiet = day - newest
	}
	return e
}

// key bins evidence: fine (with the silence) or coarse (without it).
func (e evidence) key(fine bool) [4]int {
	lg := func(x float64, steps float64) int { return int(math.Floor(math.Log2(1+max(x, 0)) * steps)) }
	k := [4]int{0, min(lg(float64(e.pushes), 2), 40), min(lg(e.span, 2), 40), -1}
	if e.root {
		k[0] = 1
	}
	if fine {
		k[3] = min(lg(e.quiet, 2), 40)
	}
	return k
}

// trainDraws is how many independent draws of the population the table learns from.
const trainDraws = 8

type binSum struct{ sum, n float64 }

// infoBound is the bound at day for the population draw makes (draw(seed) is the
// upstream of a population drawn with seed, up to day at least), evaluated on the draw
// of evalSeed and learned from trainDraws others. With signals given, it also returns
// the bound of each (after the plain one, in order): signals[k](i) is the share of repo
// i's pushes that polls must find (signalBound); every ratio is over the poll-only
// optimum.
func infoBound(draw func(seed uint64) Upstream, evalSeed uint64, day float64, signals ...func(i int) float64) []results.FreshnessBound {
	fine, coarse := map[[4]int]binSum{}, map[[4]int]binSum{}
	var all binSum
	for k := range trainDraws {
		for _, l := range draw(evalSeed ^ (uint64(k)+1)*0x9e3779b97f4a7c15) {
			e, r := evidenceAt(l, day), l.RateAt(day)
			f, c := fine[e.key(true)], coarse[e.key(false)]
			f.sum, f.n, c.sum, c.n = f.sum+r, f.n+1, c.sum+r, c.n+1
			fine[e.key(true)], coarse[e.key(false)] = f, c
			all.sum, all.n = all.sum+r, all.n+1
		}
	}
	const shrink = 5 // pseudo-counts toward the coarser bin
	mean := all.sum / all.n
	estimate := func(e evidence) float64 {
		c := coarse[e.key(false)]
		ec := (c.sum + shrink*mean) / (c.n + shrink)
		f := fine[e.key(true)]
		return (f.sum + shrink*ec) / (f.n + shrink)
	}
	up := draw(evalSeed)
	var out []results.FreshnessBound
	for _, missed := range append([]func(int) float64{nil}, signals...) {
		var sf, slf, ssq, sdorm float64
		for i, l := range up {
			r, m := l.RateAt(day), 1.0
			if missed != nil {
				m = missed(i)
			}
			ssq += math.Sqrt(r)
			if m == 0 {
				continue // a signal that misses nothing: no polls, no lag from them
			}
			f := math.Sqrt(m * estimate(evidenceAt(l, day)))
			sf += f
			if r == 0 {
				sdorm += f
				continue
			}
			slf += m * r / f
		}
		out = append(out, results.FreshnessBound{Evidence: "all", SeenDays: fetch.HistoryWindow.Hours()/24 + day, Ratio: sf * slf / (ssq * ssq), DormantPolls: sdorm / sf})
	}
	return out
}
