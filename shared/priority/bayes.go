package priority

import "math"

// Bayes is the empirical-Bayes change-rate policy. A repo's current rate of pushes is
// estimated from what its fetches brought (bursts of new commits, by their times), the
// history its first clone showed, and the fleet's prior (Input.Prior): a repo known
// little of starts at the fleet's best guess, and one whose recent pushes contradict its
// past (a dormant repo waking up) is believed to have changed as soon as a poll sees it.
// The step is 1/√rate, as for Rate (f ∝ √λ minimises the mean lag for a fixed budget),
// with the rate held above MinRate so that no repo's wait grows without bound.
type Bayes struct{}

// Name identifies the policy in configuration.
func (Bayes) Name() string { return "bayes" }

// MinRate is the least rate a repo is polled for, in pushes per day: the tail guard.
const MinRate = 1e-4

// Next steps the repo by 1/√(expected pushes per day), scaled up by failures.
func (Bayes) Next(in Input) float64 {
	prior := in.Prior
	if prior == nil {
		prior = DefaultPrior()
	}
	if !in.Cloned {
		// A first clone comes before any poll: it is what tells a repo's rate (its
		// history), and a repo not cloned has no mirror at all. A failed one waits a step
		// of a typical repo per failure.
		return in.Old + float64(in.CloneFailCnt)*stepDays(prior.Mean())
	}
	return in.Old + float64(in.FetchFailCnt+1)*stepDays(prior.Rate(in.Stats))
}

// stepDays is 1/√(changes per day), with the rate floored at MinRate.
func stepDays(perDay float64) float64 { return 1 / math.Sqrt(max(perDay, MinRate)) }
