package worker

import (
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/priority"
)

// statsBlind is a policy that says it reads no stats: a reference that knows the pushes.
type statsBlind struct{ priority.Rate }

func (statsBlind) ReadsStats() bool { return false }

// A worker keeps the repos' beliefs only for a policy that reads them, and their stats
// for every policy but one that reads none.
func TestAWorkerKeepsWhatItsPolicyReads(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clone := priority.Poll{Now: now, Changed: true, Commits: []time.Time{now.Add(-48 * time.Hour)}}
	for _, c := range []struct {
		p             priority.Policy
		stats, belief bool
	}{{priority.Bayes{}, true, true}, {priority.Rate{}, true, false}, {priority.Cbrt{}, true, false}, {statsBlind{}, false, false}} {
		var s priority.Stats
		fold(c.p, &s, clone, nil)
		fold(c.p, &s, priority.Poll{Prev: now, Now: now.Add(time.Hour)}, nil)
		if stats, belief := s != (priority.Stats{}), !s.Belief.IsZero(); stats != c.stats || belief != c.belief {
			t.Errorf("policy %T: stats kept %v, belief kept %v; want %v, %v", c.p, stats, belief, c.stats, c.belief)
		}
	}
}
