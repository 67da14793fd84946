package priority

import (
	"math"
	"time"
)

// Bayes is the empirical-Bayes change-rate policy. A repo's current rate of pushes is
// estimated from what its fetches brought (bursts of new commits, by their times), the
// history its first clone showed, and the fleet's prior (Input.Prior): a repo known
// little of starts at the fleet's best guess, and its belief (Belief) is filtered at
// each poll, so one whose recent pushes contradict its past (a dormant repo waking up)
// is believed to have changed as soon as a poll sees it.
// The step is 1/√rate, as for Rate (f ∝ √λ minimises the mean lag for a fixed budget),
// raised by the tail guard (MinRate, GuardRate) so that no repo's wait grows without
// bound and slow repos that are probably active are not starved; in a repo's first
// weeks of polls it is flatter (NewSpan, NewExp).
type Bayes struct{}

// Name identifies the policy in configuration.
func (Bayes) Name() string { return "bayes" }

// ReadsBelief is true: Bayes decides on the repo's filtered belief.
func (Bayes) ReadsBelief() bool { return true }

// The tail guard. MinRate is the least rate any repo is polled for, in pushes per day,
// so no wait grows without bound: a push in 270 years, a tenth of the grid's slowest
// active rate. A higher floor spends on the dormant repos the polls that the hazard of
// waking, which the fleet learns, already gives them (ADR 17 and bench/REPORT.md, section
// 1, have the figures). GuardRate keeps the probably-active slow repos, which set the
// tail, from being starved by the doubt a silence casts on them: a repo polled for rate
// λ is polled at least for GuardRate·P(λ ≥ GuardRate/4), a push in 200 days times the
// chance that it pushes at least once in 800.
const (
	MinRate   = 1e-5
	GuardRate = 5e-3
)

// A repo's first weeks after its clone. Its rate is then known only from the history
// the clone showed, and the belief is at its widest: the p99 of a cold start is made of
// slow active repos believed dormant, their rate underrated several times over. While a
// repo's polls cover less than NewSpan (Stats.Seconds, which decays with HalfLife: about
// its first seven weeks), its step is rate^−NewExp, flatter than √, so the slow repos are
// polled more (the two steps agree at a push a day). After NewSpan, √ (the mean's
// optimum) is back, so a fleet that has run a while pays nothing for it. What it gains
// in the cold start's p99 and costs in its mean: ADR 17 and bench/REPORT.md, section 1.
const (
	NewSpan = 30 * 24 * time.Hour
	NewExp  = 0.46
)

// Next steps the repo by 1/√(expected pushes per day) (rate^−NewExp while it is new),
// scaled up by failures.
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
	var rate float64
	if in.Stats.Belief.IsZero() { // stats kept before beliefs were, until their next poll
		rate = prior.guarded(in.Stats)
	} else {
		rate = in.Stats.Belief.rate(prior.weightsOf(classOf(&in.Stats)), &prior.Weights)
	}
	step := stepDays(rate)
	if in.Stats.Seconds < NewSpan.Seconds() {
		step = newStepDays(rate)
	}
	return in.Old + float64(in.FetchFailCnt+1)*step
}

// guarded is the rate a cloned repo without a belief is polled for: its windowed
// posterior's expected rate, raised by the tail guard.
func (p *Prior) guarded(s Stats) float64 {
	var scratch view
	v := p.view(evidenceOf(&s), nil, &scratch)
	return max(v.dot(ownHazard, &gridBelief), GuardRate*v.dot(ownHazard, &activeRates))
}

// stepDays is 1/√(changes per day), with the rate floored at MinRate.
func stepDays(perDay float64) float64 { return 1 / math.Sqrt(max(perDay, MinRate)) }

// newStepDays is a new repo's step: (changes per day)^−NewExp, floored alike.
func newStepDays(perDay float64) float64 { return math.Pow(max(perDay, MinRate), -NewExp) }
