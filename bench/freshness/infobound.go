package main

import (
	"math"
	"sort"

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
	return clonedEvidence(life).at(life, day)
}

// cloneEvidence is what a first clone shows of a repo, whenever it is made: its history
// at day 0, the pushes since are counted on top (at).
type cloneEvidence struct {
	root   bool
	pushes int
	since  float64 // where the history begins (day)
	newest float64 // its newest commit; −Inf when it lists none
}

func clonedEvidence(life RepoLife) cloneEvidence {
	times, since, root := historyAt(life, 0, 0)
	c := cloneEvidence{root: root, pushes: priority.Sessions(times), since: since, newest: math.Inf(-1)}
	if len(times) > 0 {
		c.newest = life.Newest
	}
	return c
}

// at is the evidence at day (≥ 0): the clone's, and the exact pushes made since day 0.
func (c cloneEvidence) at(life RepoLife, day float64) evidence {
	k := sort.Search(len(life.Pushes), func(j int) bool { return life.Pushes[j].At > day })
	e := evidence{root: c.root, pushes: c.pushes + k, span: day - c.since, quiet: day - c.since}
	newest := c.newest
	if k > 0 {
		newest = life.Pushes[k-1].At
	}
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

// rateTable is E[λ | evidence] at one day for a population's true model, learned from
// independent draws of it in fine bins shrunk toward coarser ones.
type rateTable struct {
	fine, coarse map[[4]int]binSum
	mean         float64
}

// learnTable learns the table at day for the population draw makes (draw(seed) is the
// upstream of a population drawn with seed, up to day at least) from trainDraws draws
// other than the one of evalSeed.
func learnTable(draw func(seed uint64) Upstream, evalSeed uint64, day float64) *rateTable {
	t := &rateTable{fine: map[[4]int]binSum{}, coarse: map[[4]int]binSum{}}
	var all binSum
	for k := range trainDraws {
		for _, l := range draw(evalSeed ^ (uint64(k)+1)*0x9e3779b97f4a7c15) {
			e, r := evidenceAt(l, day), l.RateAt(day)
			f, c := t.fine[e.key(true)], t.coarse[e.key(false)]
			f.sum, f.n, c.sum, c.n = f.sum+r, f.n+1, c.sum+r, c.n+1
			t.fine[e.key(true)], t.coarse[e.key(false)] = f, c
			all.sum, all.n = all.sum+r, all.n+1
		}
	}
	t.mean = all.sum / all.n
	return t
}

// estimate is E[λ | e]: the fine bin's mean, shrunk by shrink pseudo-counts toward the
// coarse bin's, itself shrunk toward the population's mean.
func (t *rateTable) estimate(e evidence) float64 {
	const shrink = 5
	c := t.coarse[e.key(false)]
	ec := (c.sum + shrink*t.mean) / (c.n + shrink)
	f := t.fine[e.key(true)]
	return (f.sum + shrink*ec) / (f.n + shrink)
}

// infoBound is the bound at day for the upstream up (the draw of the population the
// table t was not learned from). With signals given, it also returns the bound of each
// (after the plain one, in order): signals[k](i) is the share of repo i's pushes that
// polls must find (signalBound); every ratio is over the poll-only optimum.
func infoBound(t *rateTable, up Upstream, day float64, signals ...func(i int) float64) []results.FreshnessBound {
	est := make([]float64, len(up))
	rates := make([]float64, len(up))
	for i, l := range up {
		rates[i], est[i] = l.RateAt(day), t.estimate(evidenceAt(l, day))
	}
	optP99 := staticP99(rates, nil, func(i int) float64 { return math.Sqrt(rates[i]) })
	var out []results.FreshnessBound
	for _, missed := range append([]func(int) float64{nil}, signals...) {
		m := func(i int) float64 {
			if missed == nil {
				return 1
			}
			return missed(i)
		}
		var sf, slf, ssq, sdorm float64
		for i, r := range rates {
			ssq += math.Sqrt(r)
			if m(i) == 0 {
				continue // a signal that misses nothing: no polls, no lag from them
			}
			f := math.Sqrt(m(i) * est[i])
			sf += f
			if r == 0 {
				sdorm += f
				continue
			}
			slf += m(i) * r / f
		}
		x := results.FreshnessBound{Evidence: "all", SeenDays: fetch.HistoryWindow.Hours()/24 + day, Ratio: sf * slf / (ssq * ssq), DormantPolls: sdorm / sf}
		if missed == nil {
			x.P99 = staticP99(rates, m, func(i int) float64 { return math.Sqrt(est[i]) }) / optP99
			x.P99Exp04 = staticP99(rates, m, func(i int) float64 { return math.Pow(est[i], 0.4) }) / optP99
		}
		out = append(out, x)
	}
	return out
}

// staticP99 is the p99 of the lag of the commits when repo i is polled periodically at a
// frequency ∝ g(i) (one poll a day for all repos together: the figure is in those units,
// so only ratios mean anything) and its pushes come at rates[i], of which polls must find
// the share missed(i) (all when missed is nil): a missed push waits a uniform share of
// the period, the others nothing.
func staticP99(rates []float64, missed func(int) float64, g func(int) float64) float64 {
	m := func(i int) float64 {
		if missed == nil {
			return 1
		}
		return missed(i)
	}
	total, sum := 0.0, 0.0
	period := make([]float64, len(rates))
	for i := range rates {
		if m(i) > 0 {
			total += g(i)
		}
		sum += rates[i]
	}
	hi := 0.0
	for i := range rates {
		if gi := g(i); gi > 0 && m(i) > 0 {
			period[i] = total / gi
			hi = max(hi, period[i])
		}
	}
	// The share of commits still waiting at x falls as x grows: bisect for 1%.
	late := func(x float64) float64 {
		s := 0.0
		for i, r := range rates {
			if r > 0 && period[i] > x {
				s += r * m(i) * (1 - x/period[i])
			}
		}
		return s / sum
	}
	lo := 0.0
	for range 60 {
		mid := (lo + hi) / 2
		if late(mid) > 0.01 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}
