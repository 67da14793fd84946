package main

import (
	"math"
	"math/rand/v2"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// The information bounds run as policies. A bound in closed form (infoBound, driftBound)
// allocates each repo one poll frequency for the whole window from what could be known
// at its middle; a policy must decide at each poll from what it knows then, and its
// queue, its pacing and its first clones cost it lag a static allocation does not pay.
// So each goal reads the default policy against its section's bound run as a policy in
// the same simulation, over the same pushes: it clones every repo blind, as any mirror
// must, at the default policy's pacing, then polls each at f ∝ √E[λ | what the bound
// knows], and with a signal it knows which repos the signal covers and polls them for
// the pushes the signal misses (coverageAware: not the worker's fall-back).

// boundPolicy names the information bounds run as policies; their runs are bounds, not
// rows of a section.
const boundPolicy = "bound"

// coverageAware is a scheduler that knows which repos a section's signal covers and
// allocates their polls itself; the worker's fall-back (worker.PollStretch) is not
// applied to its steps.
type coverageAware interface {
	knowsCoverage()
}

// informed is the all-evidence bound run as a policy (results.EvidenceCloned): it polls
// each repo at f ∝ √(missed·E[λ | evidence]), from the table of its population's true
// model learned at the measured day nearest the poll. Its evidence is the first clone's
// and the exact pushes up to the poll; missed (nil: every push) is the share of a repo's
// pushes its section's signal leaves to polls.
type informed struct {
	up     Upstream
	tables []dayTable
	missed func(i int) float64
	clone  []cloneEvidence // each repo's first clone, on first use
}

// dayTable is a rate table and the day it was learned at; table learns it on first use.
type dayTable struct {
	day   float64
	table func() *rateTable
}

func (*informed) name() string { return boundPolicy }

func (*informed) knowsCoverage() {}

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
	r := near.table().estimate(s.clone[i].at(s.up[i], o.now)) * share(s.missed, i)
	if r <= 0 {
		return 0, false // every push is signalled: no polls
	}
	return old + 1/math.Sqrt(r), true
}

// share is missed(i), 1 when missed is nil.
func share(missed func(int) float64, i int) float64 {
	if missed == nil {
		return 1
	}
	return missed(i)
}

// filtered is the drift bound run as a policy ("push times, cloned"): each repo's
// belief is filtered forward under the true model (the population's prior, and that a
// repo draws a new rate from it perMonth times a month) from the exact time of every
// push, as driftBound does, up to each poll; it polls the repo at
// f ∝ √(missed·E[λ | belief]). The beliefs' means (means) depend on the upstream alone,
// so the runs at every budget and with every signal share them.
type filtered struct {
	up     Upstream
	means  func() *filterMeans
	missed func(i int) float64
}

func (*filtered) name() string { return boundPolicy }

func (*filtered) knowsCoverage() {}

func (*filtered) start(int, *rand.Rand) float64 { return 0 }

func (*filtered) cloneStep() float64 { return production{defaultPolicy()}.cloneStep() }

func (s *filtered) next(i int, old float64, o seen) (float64, bool) {
	r := s.means().at(i, o.now) * share(s.missed, i)
	if r <= 0 {
		return 0, false
	}
	return old + 1/math.Sqrt(r), true
}

// filterMeans is every repo's expected rate under its filtered belief at each step of
// filterStep days, up to end.
type filterMeans struct {
	steps int
	mean  [][]float32
}

// newFilterMeans filters every repo of up to end (beliefFilter).
func newFilterMeans(pop Population, up Upstream, perMonth, end float64, rng *rand.Rand) *filterMeans {
	f := newBeliefFilter(pop, up, perMonth, rng)
	m := &filterMeans{steps: int(math.Ceil(end/filterStep)) + 1, mean: make([][]float32, len(up))}
	for i := range up {
		m.mean[i] = make([]float32, m.steps)
		for k := range m.steps {
			m.mean[i][k] = float32(f.mean(i, float64(k)*filterStep))
		}
	}
	return m
}

// at is repo i's expected rate at day: its belief's at the first step not before it.
func (m *filterMeans) at(i int, day float64) float64 {
	k := min(max(int(math.Ceil(day/filterStep)), 0), m.steps-1)
	return float64(m.mean[i][k])
}

// filterGrid is the log-normal on a grid of filterRates rates, and the dormant point
// (index filterRates).
const filterRates = 48

// filterStep is the days per step of a filtered belief.
const filterStep = 0.25

// beliefFilter is every repo's belief under the true model of a drifting population,
// filtered forward from day 0 from the exact time of every push (driftBound's filter):
// the belief at day 0 from the counts a first clone's history shows (drawn at the repo's
// first rate), then each step's decays, pushes and chance of drawing a new rate.
type beliefFilter struct {
	up                  Upstream
	rate, weight, decay [filterRates + 1]float64
	rho                 float64
	b                   [][filterRates + 1]float64
	now                 []float64 // each belief's day
	next                []int     // each repo's first push not filtered yet
}

func newBeliefFilter(pop Population, up Upstream, perMonth float64, rng *rand.Rand) *beliefFilter {
	const k = filterRates
	f := &beliefFilter{up: up, b: make([][k + 1]float64, len(up)), now: make([]float64, len(up)), next: make([]int, len(up))}
	r, wt := activeGrid(pop, k, 4)
	copy(f.rate[:], r)
	copy(f.weight[:], wt)
	f.weight[k] = targets.Dormant
	for j := range f.rate {
		f.decay[j] = math.Exp(-f.rate[j] * filterStep)
	}
	f.rho = -math.Expm1(-perMonth / 30 * filterStep)
	window := fetch.HistoryWindow.Hours() / 24
	for i := range up {
		// The belief at day 0, from the history a first clone lists.
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

// advance filters repo i's belief to day.
func (f *beliefFilter) advance(i int, day float64) {
	b, l := &f.b[i], f.up[i]
	for ; f.now[i] < day; f.now[i] += filterStep {
		pushes := 0
		for f.next[i] < len(l.Pushes) && l.Pushes[f.next[i]].At < f.now[i]+filterStep {
			pushes++
			f.next[i]++
		}
		sum := 0.0
		for j := range b {
			b[j] *= f.decay[j]
			if pushes > 0 {
				b[j] *= math.Pow(f.rate[j], float64(pushes))
			}
			sum += b[j]
		}
		// Normalised, then a change draws from the weights.
		keep := 1 - f.rho
		if sum > 0 {
			keep /= sum
		}
		for j := range b {
			b[j] = keep*b[j] + f.rho*f.weight[j]
		}
	}
}

// mean is repo i's expected rate at day (not before its belief's day).
func (f *beliefFilter) mean(i int, day float64) float64 {
	f.advance(i, day)
	m := 0.0
	for j, w := range f.b[i] {
		m += w * f.rate[j]
	}
	return m
}
