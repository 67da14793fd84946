// Package priority decides when a repo is fetched next. A worker keeps its repos in a
// min-priority queue; after each fetch the policy computes the repo's next priority
// (smaller = sooner). The values are a virtual time that only grows, so a repo that
// changes often takes small steps and comes round again soon.
package priority

import (
	"math"
	"time"
)

// StepSeconds is the seed's step: 30 days.
const StepSeconds = 2592000

// Step is cbrt(StepSeconds), the increment applied to repos with nothing to go on.
var Step = math.Cbrt(StepSeconds)

// Input is what a policy knows about a repo after a fetch attempt.
type Input struct {
	Old          float64   // the repo's current priority
	Cloned       bool      // a mirror exists
	CloneFailCnt int       // consecutive failed clones
	FetchFailCnt int       // consecutive failed fetches
	LastCommitAt time.Time // newest upstream commit seen; zero if none
	Changed      bool      // the last fetch brought something new
	Stats        Stats     // what the polls have seen so far, this one included
	Prior        *Prior    // what the fleet's repos say of rates; nil: DefaultPrior
	Now          time.Time
}

// Policy computes the next priority of a repo.
type Policy interface {
	Name() string
	Next(in Input) float64
}

// Cbrt is the seed's cube-root policy, exactly:
//
//	not cloned                       → old + (clone_fail+1)·STEP
//	no commits, or now ≤ last_commit → old + (fetch_fail+1)·STEP
//	otherwise                        → old + cbrt(now − last_commit)  (seconds)
type Cbrt struct{}

// Name identifies the policy in configuration.
func (Cbrt) Name() string { return "cbrt" }

// Next applies the cube-root formula.
func (Cbrt) Next(in Input) float64 {
	if !in.Cloned {
		return in.Old + float64(in.CloneFailCnt+1)*Step
	}
	if in.LastCommitAt.IsZero() || !in.Now.After(in.LastCommitAt) {
		return in.Old + float64(in.FetchFailCnt+1)*Step
	}
	return in.Old + math.Cbrt(in.Now.Sub(in.LastCommitAt).Seconds())
}

// ByName returns the policy called name, or false. "" is the default, bayes; rate and
// the seed's cbrt stay selectable.
func ByName(name string) (Policy, bool) {
	switch name {
	case "", "bayes":
		return Bayes{}, true
	case "rate":
		return Rate{}, true
	case "cbrt":
		return Cbrt{}, true
	}
	return nil, false
}

// Names lists the policies ByName knows, the default first.
func Names() []string { return []string{"bayes", "rate", "cbrt"} }
