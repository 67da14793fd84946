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

// statsBlind is a policy that says it reads no stats: a reference that knows the pushes.
type statsBlind struct{ priority.Rate }

func (statsBlind) ReadsStats() bool { return false }

// A policy that reads no stats gets none; every other policy's polls are folded.
func TestStatsOnlyForAPolicyThatReadsThem(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clone := priority.Poll{Now: now, Changed: true, Commits: []time.Time{now.Add(-48 * time.Hour)}}
	for _, c := range []struct {
		p    priority.Policy
		kept bool
	}{{statsBlind{}, false}, {priority.Rate{}, true}, {priority.Bayes{}, true}} {
		var s priority.Stats
		fold(c.p, &s, clone, nil)
		fold(c.p, &s, priority.Poll{Prev: now, Now: now.Add(time.Hour)}, nil)
		if kept := s != (priority.Stats{}); kept != c.kept {
			t.Errorf("policy %T: stats kept %v, want %v", c.p, kept, c.kept)
		}
	}
}
