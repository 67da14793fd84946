package main

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/priority"
)

// epoch anchors the simulation's days to wall-clock time for the production policies.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(day float64) time.Time { return epoch.Add(time.Duration(day * 86400 * float64(time.Second))) }

// seen is what a poll of a repo learned, as a worker would know it.
type seen struct {
	now        float64 // day of the poll
	changed    bool
	lastCommit float64 // day of the newest upstream commit (negative: before the run)
	stats      priority.Stats
}

// scheduler decides each repo's next priority in the worker's virtual-time queue.
type scheduler interface {
	name() string
	// start is the repo's first priority.
	start(i int, rng *rand.Rand) float64
	// next is the priority after a poll; ok=false means never poll it again.
	next(i int, old float64, s seen) (p float64, ok bool)
}

func schedulers(pop Population, rng *rand.Rand) []func() scheduler {
	return []func() scheduler{
		func() scheduler { return uniform{} },
		func() scheduler { return newSWH(len(pop.Rates), rng) },
		func() scheduler { return production{priority.Cbrt{}, pop} },
		func() scheduler { return production{priority.Rate{}, pop} },
		func() scheduler { return optimum{pop} },
	}
}

// uniform polls every repo in turn: plain round-robin.
type uniform struct{}

func (uniform) name() string                                    { return "uniform" }
func (uniform) start(_ int, rng *rand.Rand) float64             { return rng.Float64() }
func (uniform) next(_ int, old float64, _ seen) (float64, bool) { return old + 1, true }

// production runs one of the worker's own policies (priority.Cbrt, priority.Rate).
type production struct {
	p   priority.Policy
	pop Population
}

func (s production) name() string { return s.p.Name() }

func (s production) start(i int, rng *rand.Rand) float64 {
	first, _ := s.next(i, 0, seen{now: 0, lastCommit: -s.pop.Quiet[i]})
	return rng.Float64() * first
}

func (s production) next(_ int, old float64, o seen) (float64, bool) {
	return s.p.Next(priority.Input{Old: old, Cloned: true, LastCommitAt: at(o.lastCommit),
		Changed: o.changed, Stats: o.stats, Now: at(o.now)}), true
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

// optimum knows every repo's true rate and polls it periodically at a frequency
// proportional to √λ; repos that never change are never polled again.
type optimum struct{ pop Population }

func (optimum) name() string { return "optimum" }

func (s optimum) start(i int, rng *rand.Rand) float64 {
	if s.pop.Rates[i] == 0 {
		return rng.Float64()
	}
	return rng.Float64() / math.Sqrt(s.pop.Rates[i])
}

func (s optimum) next(i int, old float64, _ seen) (float64, bool) {
	if s.pop.Rates[i] == 0 {
		return 0, false
	}
	return old + 1/math.Sqrt(s.pop.Rates[i]), true
}

// analyticOptimum is the mean lag in days of the optimum: (Σ√λ)² / (2·R·Σλ), R the
// total polls per day.
func analyticOptimum(pop Population, pollsPerDay float64) float64 {
	var sq, sum float64
	for _, r := range pop.Rates {
		sq += math.Sqrt(r)
		sum += r
	}
	return sq * sq / (2 * pollsPerDay * sum)
}
