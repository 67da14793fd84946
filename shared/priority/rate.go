package priority

import (
	"math"
	"time"
)

// HalfLife is how fast old observations fade from a repo's Stats: a repo that wakes up
// or goes quiet is re-learned within a few half-lives.
const HalfLife = 30 * 24 * time.Hour

// Stats is what the polls of a repo have seen. The first three are the Rate policy's:
// polls and changes, with older polls weighing less (each halves every HalfLife). The
// others are the Bayes policy's: pushes counted from the commits the fetches brought
// and the first clone's history, before and in the current window (see Fold).
type Stats struct {
	Polls   float64 `json:"n,omitempty"` // successful polls
	Changes float64 `json:"x,omitempty"` // polls that found something new
	Seconds float64 `json:"t,omitempty"` // time covered by those polls

	Events     float64 `json:"e,omitempty"`  // pushes seen before the current window (decayed)
	Exposure   float64 `json:"s,omitempty"`  // seconds those cover (decayed alike)
	WinEvents  float64 `json:"we,omitempty"` // pushes seen in the current window
	WinSeconds float64 `json:"ws,omitempty"` // seconds the current window covers so far
	WinQuiet   float64 `json:"wq,omitempty"` // seconds of the current window since its last push
	// Root: the first clone's history reached the repo's first commit, which the prior
	// weighs apart (Prior.Classes).
	Root bool `json:"r,omitempty"`
	// Young: the first commit Root reached was under YoungAge old at the first clone.
	Young bool `json:"y,omitempty"`
	// Made: the making of the repo Root reached (its first run of work) held at least
	// MadePushes pushes.
	Made bool `json:"m,omitempty"`
	// Belief is the Bayes policy's belief about the repo's current rate as of its last
	// poll (filtered forward: Belief).
	Belief Belief `json:"b,omitzero"`
}

// Observe folds in one successful poll that came interval after the previous one.
func (s Stats) Observe(interval time.Duration, changed bool) Stats {
	s.observe(interval, changed)
	return s
}

func (s *Stats) observe(interval time.Duration, changed bool) {
	if interval < 0 {
		interval = 0
	}
	keep := math.Exp2(-interval.Seconds() / HalfLife.Seconds())
	s.Polls = s.Polls*keep + 1
	s.Changes *= keep
	if changed {
		s.Changes++
	}
	s.Seconds = s.Seconds*keep + interval.Seconds()
}

// Rate estimates the repo's changes per second. quiet is how long the repo is known to
// have had no new commit (now − newest commit; zero if unknown).
//
// With polls seeing X changes out of n, Cho & Garcia-Molina's estimator of the changes
// per poll interval is −ln((n − X + 0.5)/(n + 0.5)); it corrects for the several
// changes a single poll can hide. When the polls saw little, the rate is taken as half a
// change over the longest quiet stretch known, so a repo silent for years is polled
// rarely but never dropped.
func (s Stats) Rate(quiet time.Duration) float64 {
	exposure := max(s.Seconds, quiet.Seconds(), minExposure.Seconds())
	floor := 0.5 / exposure
	if s.Polls <= 0 || s.Changes <= 0 || s.Seconds <= 0 {
		return floor
	}
	perInterval := -math.Log((s.Polls - s.Changes + 0.5) / (s.Polls + 0.5))
	return max(perInterval*s.Polls/s.Seconds, floor)
}

// minExposure bounds the estimate for a repo seen only briefly: half a change a day.
const minExposure = 24 * time.Hour

// unknownQuiet is assumed for a repo with no commit at all (empty, or history not read):
// as if it had been quiet for a month.
const unknownQuiet = 30 * 24 * time.Hour

// unknownRate is assumed for a repo not cloned yet: a change a month.
const unknownRate = 1.0 / (30 * 86400)

// Rate is the change-rate-aware policy. A fixed poll budget minimises the mean time from
// an upstream commit to the mirror (commit-weighted) when each repo is polled at a
// frequency proportional to the square root of its change rate: with periodic polls at
// frequency f a commit waits 1/(2f) on average, and minimising Σ λ/f under Σ f = budget
// gives f ∝ √λ. In the queue's virtual time that is a step of 1/√λ.
type Rate struct{}

// Name identifies the policy in configuration.
func (Rate) Name() string { return "rate" }

// Next steps the repo by 1/√(estimated changes per day), scaled up by failures.
func (Rate) Next(in Input) float64 {
	if !in.Cloned {
		return in.Old + float64(in.CloneFailCnt+1)*step(unknownRate)
	}
	quiet := unknownQuiet
	if !in.LastCommitAt.IsZero() {
		quiet = max(in.Now.Sub(in.LastCommitAt), 0)
	}
	return in.Old + float64(in.FetchFailCnt+1)*step(in.Stats.Rate(quiet))
}

// step is 1/√(changes per day): a repo changing daily steps 1, one changing every 100
// days steps 10.
func step(perSecond float64) float64 { return 1 / math.Sqrt(perSecond*86400) }
