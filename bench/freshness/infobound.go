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
// the newest — and shrinking thin bins toward coarser ones, and those toward the
// repo's own rate (the busiest repos' bins are empty in any draw). A policy that knew
// that table and polled at f ∝ √E[λ | its bin] would have the ratio returned. Binning
// loses a little information, so the true bound is at most this; trainDraws draws of
// the population make the table fine enough that fewer draws barely move it.

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
	newest float64 // the repo's newest commit, listed or older than the listing; −Inf: none
}

func clonedEvidence(life RepoLife) cloneEvidence {
	times, since, root := historyAt(life, 0, 0)
	// The newest commit's age shows whether the listing holds a commit or not, as the
	// worker reads it (fetch.Result.LastCommitAt).
	return cloneEvidence{root: root, pushes: priority.Sessions(times), since: since, newest: life.Newest}
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
// coarse bin's, itself shrunk toward the repo's own rate (own). The draws leave the
// bins of the busiest repos thin or empty, and there the bins say little: shrunk toward
// the population's mean, a repo whose history shows thousands of pushes was estimated
// at that mean and polled as rarely as a typical repo (ADR 17).
func (t *rateTable) estimate(e evidence) float64 {
	const shrink = 5
	c := t.coarse[e.key(false)]
	ec := (c.sum + shrink*t.own(e)) / (c.n + shrink)
	f := t.fine[e.key(true)]
	return (f.sum + shrink*ec) / (f.n + shrink)
}

// own is the repo's own rate: the mean of its posterior under an exponential prior of
// the population's mean rate, from its pushes over the days they span. Never 0, so that
// no repo goes unpolled for want of a bin.
func (t *rateTable) own(e evidence) float64 {
	return (float64(e.pushes) + 1) / (max(e.span, 0) + 1/t.mean)
}

// infoBound is the bound at day for the upstream up (the draw of the population the
// table t was not learned from), over the pushes it made in w, at each budget (polls per
// repo per day); opt is the closed-form optimum's mean and p99 lag of the same window at
// a budget, which the ratios are over. With signal charges given, it also returns the
// bound of each signal (after the plain one's, in order): polls find the pushes the
// signal misses, with the budget its fetches leave.
func infoBound(t *rateTable, up Upstream, day float64, w window, budgets []float64, opt optimumLags, charges ...signalCharge) []results.FreshnessBound {
	est := make([]float64, len(up))
	for i, l := range up {
		est[i] = t.estimate(evidenceAt(l, day))
	}
	g := func(exp float64, missed func(int) float64) []float64 {
		out := make([]float64, len(up))
		for i, e := range est {
			m := 1.0
			if missed != nil {
				m = missed(i)
			}
			if m > 0 {
				out[i] = math.Pow(m*e, exp)
			}
		}
		return out
	}
	var out []results.FreshnessBound
	for _, c := range append([]signalCharge{{}}, charges...) {
		sq := g(0.5, c.missed)
		var sf, sdorm float64
		for i, l := range up {
			sf += sq[i]
			if l.RateAt(day) == 0 {
				sdorm += sq[i]
			}
		}
		for _, b := range budgets {
			polls := b * float64(len(up))
			fetches := c.fetchesPerDay(w)
			mean, p99 := lagOver(up, w, staticFreq(sq, polls-fetches), c.missed, c.delay, w.To)
			om, op := opt(b)
			x := results.FreshnessBound{Section: c.section, Evidence: "all", Budget: b, SeenDays: fetch.HistoryWindow.Hours()/24 + day,
				LagMeanH: mean, Ratio: mean / om, DormantPolls: sdorm / sf, SignalFetchShare: fetches / polls}
			if c.missed == nil {
				x.P99 = p99 / op
				_, p04 := lagOver(up, w, staticFreq(g(0.4, nil), polls), nil, 0, w.To)
				x.P99Exp04 = p04 / op
			}
			out = append(out, x)
		}
	}
	return out
}

// optimumLags is the closed-form optimum's mean and p99 lag (hours) of a window at a
// budget (polls per repo per day).
type optimumLags func(budget float64) (meanH, p99H float64)
