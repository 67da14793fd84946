package main

import (
	"math"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"math/rand/v2"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// epoch anchors the simulation's days to wall-clock time for the production policies.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(day float64) time.Time { return epoch.Add(time.Duration(day * 86400 * float64(time.Second))) }

// seen is what a poll of a repo learned, as a worker would know it.
type seen struct {
	now        float64 // day of the poll
	changed    bool
	lastCommit float64         // day of the newest upstream commit seen (negative: before the run; −Inf: none)
	stats      *priority.Stats // the repo's, read only; nil when the scheduler reads none
	prior      *priority.Prior // what the worker has learned of its repos
}

// scheduler decides each repo's next priority in the worker's virtual-time queue.
type scheduler interface {
	name() string
	// start is the repo's first priority (its first poll clones it).
	start(i int, rng *rand.Rand) float64
	// next is the priority after a poll; ok=false means never poll it again.
	next(i int, old float64, s seen) (p float64, ok bool)
}

// cloner is a scheduler whose new repos are queued as a worker queues them
// (worker.Queue.PushNew); its start is not used.
type cloner interface {
	cloneStep() float64
}

// commitsReader is a scheduler whose decisions read the commit times of a repo's polls
// (through the stats the worker folds them into, priority.Fold). For one that is not,
// the simulation leaves the times out of the polls after the first clone, so folding
// them costs little; the counts of polls are the same.
type commitsReader interface {
	readsCommits() bool
}

// rateFollower is a scheduler told when a repo's true rate changes (only the optimum).
type rateFollower interface {
	// rateChanged is the repo's new priority given the queue's front and its queued
	// priority (queued=false: not in the queue); ok=false leaves the queue as it is.
	rateChanged(i int, rate, front, queuedAt float64, queued bool, rng *rand.Rand) (p float64, ok bool)
}

func schedulers(up Upstream, rng *rand.Rand) []func() scheduler {
	return []func() scheduler{
		func() scheduler { return uniform{} },
		func() scheduler { return newSWH(len(up), rng) },
		func() scheduler { return production{priority.Cbrt{}} },
		func() scheduler { return production{priority.Rate{}} },
		func() scheduler { return production{priority.Bayes{}} },
		func() scheduler { return optimum{up: up} },
	}
}

// defaultPolicy is the policy a worker runs unless told otherwise.
func defaultPolicy() priority.Policy {
	p, _ := priority.ByName("")
	return p
}

// uniform polls every repo in turn: plain round-robin.
type uniform struct{}

func (uniform) name() string                                    { return "uniform" }
func (uniform) start(_ int, rng *rand.Rand) float64             { return rng.Float64() }
func (uniform) next(_ int, old float64, _ seen) (float64, bool) { return old + 1, true }

// production runs one of the worker's own policies (priority.Cbrt, Rate, Bayes) with
// the worker's inputs.
type production struct{ p priority.Policy }

func (s production) name() string { return s.p.Name() }

// readsCommits: Rate reads only the counts of polls (what the polls saw), Cbrt only the
// newest commit's time, which the fetch gives apart.
func (s production) readsCommits() bool {
	switch s.p.(type) {
	case priority.Rate, priority.Cbrt:
		return false
	}
	return true
}

// start is not used: production policies are cloners.
func (s production) start(int, *rand.Rand) float64 { return 0 }

func (s production) cloneStep() float64 { return worker.CloneStep(s.p, priority.DefaultPrior()) }

func (s production) next(_ int, old float64, o seen) (float64, bool) {
	return s.nextWith(old, o, o.stats)
}

// nextWith is next of a repo whose stats are stats.
func (s production) nextWith(old float64, o seen, stats *priority.Stats) (float64, bool) {
	in := priority.Input{Old: old, Cloned: true, Changed: o.changed, Stats: *stats, Prior: o.prior, Now: at(o.now)}
	if !math.IsInf(o.lastCommit, -1) {
		in.LastCommitAt = at(o.lastCommit)
	}
	return s.p.Next(in), true
}

// swh is Software Heritage's origin-visit policy: each origin has an offset (initially 4,
// 0…10) that drops by 2 after a visit that found changes and rises by 1 otherwise; the
// next queue position is the current one plus 1 day (offset 0–1), 2 days (2–4) or
// 4^(offset−4) days, with ±10 % random fudge.
type swh struct {
	offset []int
	rng    *rand.Rand
}

func newSWH(n int, rng *rand.Rand) *swh {
	s := &swh{offset: make([]int, n), rng: rng}
	for i := range s.offset {
		s.offset[i] = 4
	}
	return s
}

func (*swh) name() string { return "swh" }

func (s *swh) start(i int, rng *rand.Rand) float64 { return rng.Float64() * swhDays(s.offset[i]) }

func (s *swh) next(i int, old float64, o seen) (float64, bool) {
	if o.changed {
		s.offset[i] = max(0, s.offset[i]-2)
	} else {
		s.offset[i] = min(10, s.offset[i]+1)
	}
	return old + swhDays(s.offset[i])*(1+0.2*(s.rng.Float64()-0.5)), true
}

func swhDays(offset int) float64 {
	switch {
	case offset < 2:
		return 1
	case offset < 5:
		return 2
	}
	return math.Pow(4, float64(offset-4))
}

// optimum knows every repo's true current rate and polls it periodically at a
// frequency proportional to √λ; a repo that does not change is not polled until it
// starts to (then at a random phase of its new period, as if it had always had it, or
// at its poll already due if that comes first). A repo that stops keeps the poll it
// had due, which fetches what it pushed before it stopped, and is then left alone. Its
// closed form (optimumAlloc) is what the figures are read against; the simulation shows
// the two agree.
type optimum struct {
	up Upstream
}

func (optimum) name() string { return "optimum" }

// period is the polling period for rate r, in the queue's units.
func (optimum) period(r float64) float64 { return 1 / math.Sqrt(r) }

func (s optimum) start(i int, rng *rand.Rand) float64 {
	r := s.up[i].RateAt(0)
	if r == 0 {
		return rng.Float64() // cloned once, then left alone
	}
	return rng.Float64() * s.period(r)
}

func (s optimum) next(i int, old float64, o seen) (float64, bool) {
	r := s.up[i].RateAt(o.now)
	if r == 0 {
		return 0, false
	}
	return old + s.period(r), true
}

func (s optimum) rateChanged(_ int, rate, front, queuedAt float64, queued bool, rng *rand.Rand) (float64, bool) {
	if rate == 0 {
		return 0, false
	}
	p := front + rng.Float64()*s.period(rate)
	if queued && queuedAt <= p {
		return 0, false
	}
	return p, true
}

// bound is the mean lag, over the closed-form optimum's, of the best static allocation
// knowing the population's true prior and the exact number of pushes each repo made
// over the span a worker could have seen at day: the first clone's history window plus
// day. Dormant repos show only their silence since they were made. Each repo's count is
// drawn draws times, and polled at the mean of their allocations; the lag is over the
// pushes up made in w, at each budget.
func bound(pop Population, up Upstream, day float64, w window, budgets []float64, opt optimumLags, draws int, rng *rand.Rand) []results.FreshnessBound {
	const k = 400 // a fine grid of the true log-normal, and the dormant point
	grid, wt := activeGrid(pop, k, 5)
	dormant := targets.Dormant
	posterior := func(n int, t float64) float64 {
		top := math.Inf(-1)
		l := make([]float64, k)
		for j, r := range grid {
			l[j] = float64(n)*math.Log(r) - r*t
			top = max(top, l[j])
		}
		num, den := 0.0, 0.0
		if n == 0 {
			top = max(top, 0)
			den = dormant * math.Exp(-top)
		}
		for j, r := range grid {
			x := wt[j] * math.Exp(l[j]-top)
			num += x * r
			den += x
		}
		return num / den
	}
	window := fetch.HistoryWindow.Hours() / 24
	g := make([]float64, len(pop.Rates))
	var sf, sdorm float64
	for i, r := range pop.Rates {
		for range draws {
			t := window + day
			if r == 0 {
				t = pop.Quiet[i] + day
			}
			n := 0
			for x := rng.ExpFloat64(); x < r*t; x += rng.ExpFloat64() {
				n++
			}
			g[i] += math.Sqrt(posterior(n, t)) / float64(draws)
		}
		sf += g[i]
		if r == 0 {
			sdorm += g[i]
		}
	}
	var out []results.FreshnessBound
	for _, b := range budgets {
		mean, _ := lagOver(up, w, staticFreq(g, b*float64(len(up))), nil, 0, w.To)
		om, _ := opt(b)
		out = append(out, results.FreshnessBound{Budget: b, SeenDays: window + day, LagMeanH: mean, Ratio: mean / om, DormantPolls: sdorm / sf})
	}
	return out
}

// driftBound is bound for the drift section: the mean lag, over the closed-form
// optimum's, of the best allocation knowing the true model (the population's prior, that
// a repo draws a new rate from it perMonth times a month) and the exact time of every
// push, each day's allocation static, over the pushes made in w. Each repo's belief is
// filtered forward from day 0 (the history before it as in bound, counts drawn at the
// repo's first rate), so a repo that woke up is known as soon as it pushes, and one that
// has not pushed since it woke is, to anything but the optimum, one of the silent many.
//
// On the realistic population the same filter is a bound for a policy that knows the
// push counts (not the root, the age or the span): a repo's age is drawn independently
// of its rate, so the counts over the span its history covers are judged by the same
// prior; the span is the history window, or the repo's age when it is younger.
//
// It returns the bound at each budget, then, for each signal charge given, the bound
// with that signal (signalCharge: polls find the pushes it misses with the budget its
// fetches leave), all from the same filtered beliefs; the ratios stay over the poll-only
// optimum.
func driftBound(pop Population, up Upstream, perMonth float64, w window, budgets []float64, opt optimumLags, rng *rand.Rand, charges ...signalCharge) []results.FreshnessBound {
	window := fetch.HistoryWindow.Hours() / 24
	days := int(math.Ceil(w.To - w.From))
	f := newBeliefFilter(pop, up, perMonth, rng)
	// mean[i][d] is repo i's expected rate on day w.From+d, before that day's pushes.
	mean := make([][]float32, len(up))
	dormantAt := make([][]bool, len(up))
	for i, l := range up {
		mean[i] = make([]float32, days)
		dormantAt[i] = make([]bool, days)
		for d := range days {
			day := w.From + float64(d)
			mean[i][d] = float32(f.mean(i, day))
			dormantAt[i][d] = l.RateAt(day) == 0
		}
	}
	var out []results.FreshnessBound
	for _, c := range append([]signalCharge{{}}, charges...) {
		// Each day's allocation: f ∝ √(share missed · E[λ]).
		g := func(i, d int) float64 {
			m := 1.0
			if c.missed != nil {
				m = c.missed(i)
			}
			return math.Sqrt(m * float64(mean[i][d]))
		}
		sum := make([]float64, days)
		dorm := 0.0
		for d := range sum {
			sd := 0.0
			for i := range up {
				sum[d] += g(i, d)
				if dormantAt[i][d] {
					sd += g(i, d)
				}
			}
			dorm += sd / sum[d] / float64(days)
		}
		fetches := make([]float64, days)
		share := 0.0
		if c.fetches != nil {
			for d := range fetches {
				fetches[d] = c.fetches(w.From + float64(d) + 0.5)
			}
		}
		for _, b := range budgets {
			polls := b * float64(len(up))
			freq := func(i int, day float64) float64 {
				d := min(max(int(day-w.From), 0), days-1)
				return (polls - fetches[d]) * g(i, d) / sum[d]
			}
			m, _ := lagOver(up, w, freq, c.missed, c.delay, w.To)
			om, _ := opt(b)
			share = 0
			for _, f := range fetches {
				share += f / polls / float64(days)
			}
			out = append(out, results.FreshnessBound{Section: c.section, Budget: b, SeenDays: window + (w.From+w.To)/2,
				LagMeanH: m, Ratio: m / om, DormantPolls: dorm, SignalFetchShare: share})
		}
	}
	return out
}

// normalise scales b to sum to 1.
func normalise(b []float64) {
	s := 0.0
	for _, v := range b {
		s += v
	}
	if s > 0 {
		for j := range b {
			b[j] /= s
		}
	}
}

// activeGrid is the population's log-normal on k rates spread over ±width σ, with
// weights summing to the active share.
func activeGrid(pop Population, k int, width float64) (rates, weights []float64) {
	rates, weights = make([]float64, k), make([]float64, k)
	lo, hi := pop.Mu-width*pop.Sigma, pop.Mu+width*pop.Sigma
	sum := 0.0
	for j := range k {
		x := lo + (hi-lo)*float64(j)/float64(k-1)
		rates[j] = math.Exp(x)
		z := (x - pop.Mu) / pop.Sigma
		weights[j] = math.Exp(-z * z / 2)
		sum += weights[j]
	}
	for j := range weights {
		weights[j] *= (1 - targets.Dormant) / sum
	}
	return rates, weights
}
