package main

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// The information bounds run as policies. A bound in closed form (infoBound, driftBound)
// allocates each repo one poll frequency for the whole window from what could be known
// at its middle; a policy must decide at each poll from what it knows then, and its
// queue, its pacing and its first clones cost it lag a static allocation does not pay.
// So each goal reads the default policy against its section's bound run as a policy in
// the same simulation, over the same pushes: it clones every repo blind, as any mirror
// must, at the default policy's pacing, then polls each at f ∝ √E[λ | what the bound
// knows], and with a signal it polls each repo for the pushes the signal misses, as far
// as what the signal has shown by then tells which repos it covers (coverageAware,
// coverage: not the worker's fall-back).

// boundPolicy names the information bounds run as policies; their runs are bounds, not
// rows of a section.
const boundPolicy = "bound"

// coverageAware is a scheduler that is told what a section's signal shows of the repos
// it covers and allocates their polls itself; the worker's fall-back
// (worker.PollStretch) is not applied to its steps.
type coverageAware interface {
	watch(c *coverage)
}

// informed is the all-evidence bound run as a policy (results.EvidenceCloned): it polls
// each repo at f ∝ √(missed·E[λ | evidence]), from the table of its population's true
// model learned at the measured day nearest the poll. Its evidence is the first clone's
// and the exact pushes up to the poll; cover (nil: no signal) tells the share of a
// repo's pushes its section's signal leaves to polls.
type informed struct {
	up     Upstream
	tables []dayTable
	cover  *coverage
	clone  []cloneEvidence // each repo's first clone, on first use
}

// dayTable is a rate table and the day it was learned at; table learns it on first use.
type dayTable struct {
	day   float64
	table func() *rateTable
}

func (*informed) name() string { return boundPolicy }

func (s *informed) watch(c *coverage) { s.cover = c }

func (*informed) start(int, *rand.Rand) float64 { return 0 }

func (*informed) cloneStep() float64 { return production{defaultPolicy()}.cloneStep() }

func (s *informed) next(i int, old float64, o seen) (float64, bool) {
	if s.clone == nil {
		s.clone = make([]cloneEvidence, len(s.up))
		for k, l := range s.up {
			s.clone[k] = clonedEvidence(l)
		}
	}
	near := s.tables[0]
	for _, t := range s.tables[1:] {
		if math.Abs(t.day-o.now) < math.Abs(near.day-o.now) {
			near = t
		}
	}
	r := near.table().estimate(s.clone[i].at(s.up[i], o.now)) * share(s.cover, i, o.now)
	if r <= 0 {
		return 0, false // every push is signalled: no polls
	}
	return old + 1/math.Sqrt(r), true
}

// share is the share of repo i's pushes at day that polls must find: all without a
// signal.
func share(c *coverage, i int, day float64) float64 {
	if c == nil {
		return 1
	}
	return c.missed(i, day)
}

// filtered is the drift bound run as a policy ("push times, cloned"): each repo's
// belief is filtered forward under the true model (the population's prior, and that a
// repo draws a new rate from it perMonth times a month) from the exact time of every
// push, as driftBound does, up to each poll and through the pushes that poll fetches,
// none after it; it polls the repo at f ∝ √(missed·E[λ | belief]), missed as its
// section's signal has shown (cover). The beliefs at day 0 (from) depend on the
// upstream alone, so the runs at every budget and with every signal share them; each
// run filters its own copy forward, to the times of its polls.
type filtered struct {
	up    Upstream
	from  func() *filterStart
	cover *coverage
	f     *beliefFilter // this run's, from the start on first use
}

func (*filtered) name() string { return boundPolicy }

func (s *filtered) watch(c *coverage) { s.cover = c }

func (*filtered) start(int, *rand.Rand) float64 { return 0 }

func (*filtered) cloneStep() float64 { return production{defaultPolicy()}.cloneStep() }

func (s *filtered) next(i int, old float64, o seen) (float64, bool) {
	if s.f == nil {
		s.f = s.from().filter()
	}
	r := s.f.mean(i, o.now) * share(s.cover, i, o.now)
	if r <= 0 {
		return 0, false
	}
	return old + 1/math.Sqrt(r), true
}

// filterRates is how many rates of the log-normal a filtered belief holds; the dormant
// point follows them (index filterRates).
const filterRates = 48

// filterStep is the days per step of a filtered belief.
const filterStep = 0.25

// filterStart is the true model of a drifting population and every repo's belief at
// day 0, from the counts a first clone's history shows (drawn at the repo's first
// rate): where a beliefFilter starts.
type filterStart struct {
	up           Upstream
	rate, weight [filterRates + 1]float64
	perDay       float64     // the chance per day of drawing a new rate
	whole        *beliefStep // a step of filterStep days
	b            [][filterRates + 1]float64
}

// beliefStep is what a step of a filtered belief applies, for its length: each rate's
// decay, the chance rho of drawing a new rate, and rho·weight.
type beliefStep struct {
	decay, rhoWeight [filterRates + 1]float64
	rho              float64
}

// stepOf is the step of days.
func (s *filterStart) stepOf(days float64) *beliefStep {
	st := new(beliefStep)
	for j, r := range s.rate {
		st.decay[j] = math.Exp(-r * days)
	}
	st.rho = -math.Expm1(-s.perDay * days)
	for j, w := range s.weight {
		st.rhoWeight[j] = st.rho * w
	}
	return st
}

// beliefFilter is every repo's belief under the true model of a drifting population,
// filtered forward from day 0 from the exact time of every push (driftBound's filter):
// each step's decays, pushes and chance of drawing a new rate.
type beliefFilter struct {
	*filterStart
	b    [][filterRates + 1]float64
	now  []float64 // each belief's day
	next []int     // each repo's first push not filtered yet
	// The steps shorter than filterStep, by their length. A belief is filtered to each
	// poll of its repo, and the polls keep to a grid of times, so the few lengths the
	// steps up to them take recur over and over.
	parts map[float64]*beliefStep
}

func newBeliefFilter(pop Population, up Upstream, perMonth float64, rng *rand.Rand) *beliefFilter {
	return newFilterStart(pop, up, perMonth, rng).filter()
}

func newFilterStart(pop Population, up Upstream, perMonth float64, rng *rand.Rand) *filterStart {
	const k = filterRates
	f := &filterStart{up: up, b: make([][k + 1]float64, len(up))}
	r, wt := activeGrid(pop, k, 4)
	copy(f.rate[:], r)
	copy(f.weight[:], wt)
	f.weight[k] = targets.Dormant
	f.perDay = perMonth / 30
	f.whole = f.stepOf(filterStep)
	window := fetch.HistoryWindow.Hours() / 24
	for i := range up {
		b := &f.b[i]
		n, t := 0, pop.Quiet[i]
		if r := pop.Rates[i]; r > 0 {
			t = window
			if pop.Age != nil {
				t = min(window, pop.Age[i]) // a young repo's history is all there is
			}
			for x := rng.ExpFloat64(); x < r*t; x += rng.ExpFloat64() {
				n++
			}
		}
		top := math.Inf(-1)
		for j := range b {
			if n > 0 && j == k {
				continue
			}
			b[j] = float64(n)*math.Log(max(f.rate[j], 1e-300)) - f.rate[j]*t
			top = max(top, b[j])
		}
		for j := range b {
			if n > 0 && j == k {
				b[j] = 0
			} else {
				b[j] = f.weight[j] * math.Exp(b[j]-top)
			}
		}
		normalise(b[:])
	}
	return f
}

// filter is a filter at day 0, its beliefs a copy of the start's.
func (s *filterStart) filter() *beliefFilter {
	return &beliefFilter{filterStart: s, b: slices.Clone(s.b), now: make([]float64, len(s.up)), next: make([]int, len(s.up)),
		parts: map[float64]*beliefStep{}}
}

// advance filters repo i's belief to day, through the pushes made by then: whole steps,
// then what is left of one.
func (f *beliefFilter) advance(i int, day float64) {
	l := f.up[i]
	b := &f.b[i]
	var end stepEnd
	for f.now[i]+filterStep <= day {
		pushes := 0
		for f.next[i] < len(l.Pushes) && l.Pushes[f.next[i]].At < f.now[i]+filterStep {
			pushes++
			f.next[i]++
		}
		end = f.step(b, f.whole, pushes, end)
		f.now[i] += filterStep
	}
	if f.now[i] < day {
		pushes := 0
		for f.next[i] < len(l.Pushes) && l.Pushes[f.next[i]].At <= day {
			pushes++
			f.next[i]++
		}
		days := day - f.now[i]
		part := f.parts[days]
		if part == nil {
			part = f.stepOf(days)
			f.parts[days] = part
		}
		end = f.step(b, part, pushes, end)
		f.now[i] = day
	}
	end.apply(b)
}

// stepEnd is the end of a step not yet applied to a belief b: b = keep·b + rho·weight
// (rhoWeight; nil: nothing pending). Each step applies the one before as it starts, so
// a run of steps reads and writes the belief once per step.
type stepEnd struct {
	keep      float64
	rhoWeight *[filterRates + 1]float64
}

func (e stepEnd) apply(b *[filterRates + 1]float64) {
	if e.rhoWeight == nil {
		return
	}
	for j := range b {
		b[j] = e.keep*b[j] + e.rhoWeight[j]
	}
}

// step moves belief b over one step st: the end of the step before (prev), its decays,
// its pushes; it returns its own end.
func (f *beliefFilter) step(b *[filterRates + 1]float64, st *beliefStep, pushes int, prev stepEnd) stepEnd {
	sum := 0.0
	if prev.rhoWeight != nil && pushes == 0 { // the common step, in one pass
		k, w := prev.keep, prev.rhoWeight
		for j := range b {
			x := (k*b[j] + w[j]) * st.decay[j]
			b[j] = x
			sum += x
		}
	} else {
		prev.apply(b)
		for j := range b {
			b[j] *= st.decay[j]
			if pushes > 0 {
				b[j] *= math.Pow(f.rate[j], float64(pushes))
			}
			sum += b[j]
		}
	}
	// Normalised, then a change draws from the weights.
	keep := 1 - st.rho
	if sum > 0 {
		keep /= sum
	}
	return stepEnd{keep, &st.rhoWeight}
}

// mean is repo i's expected rate at day (not before its belief's day), its pushes up to
// day filtered.
func (f *beliefFilter) mean(i int, day float64) float64 {
	f.advance(i, day)
	m := 0.0
	for j, w := range f.b[i] {
		m += w * f.rate[j]
	}
	return m
}
