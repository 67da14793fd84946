package worker

import (
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/priority"
)

// A worker keeps the repos' beliefs only for a policy that reads them.
func TestBeliefsOnlyForAPolicyThatReadsThem(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clone := priority.Poll{Now: now, Changed: true, Commits: []time.Time{now.Add(-48 * time.Hour)}}
	for _, c := range []struct {
		p    priority.Policy
		kept bool
	}{{priority.Bayes{}, true}, {priority.Rate{}, false}, {priority.Cbrt{}, false}} {
		var s priority.Stats
		fold(c.p, &s, clone, nil)
		fold(c.p, &s, priority.Poll{Prev: now, Now: now.Add(time.Hour)}, nil)
		if kept := !s.Belief.IsZero(); kept != c.kept {
			t.Errorf("policy %s: belief kept %v, want %v", c.p.Name(), kept, c.kept)
		}
	}
}
