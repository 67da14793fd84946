package sim_test

import (
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/sim"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
)

// pollTimes runs s for d and returns when each poll reached an upstream: a fetch of a
// repo already mirrored (a first clone is no poll; nothing here is asked for).
func pollTimes(t *testing.T, s *sim.Sim, d time.Duration) []time.Time {
	t.Helper()
	cloned := map[string]bool{}
	var polls []time.Time
	s.Storage.OnFetch = func(e sim.FetchEvent) {
		if cloned[e.URL] {
			polls = append(polls, e.Start)
		}
		cloned[e.URL] = true
	}
	if err := s.RunFor(d); err != nil {
		t.Fatal(err)
	}
	s.Storage.OnFetch = nil
	return polls
}

// busiestHour is the most polls in any hour of the run that starts at a poll.
func busiestHour(polls []time.Time) int {
	most := 0
	for i, at := range polls {
		n := 0
		for _, p := range polls[i:] {
			if p.Sub(at) >= time.Hour {
				break
			}
			n++
		}
		most = max(most, n)
	}
	return most
}

// A fleet given a poll budget polls its repos no more than the budget over any hour,
// from its first start (first clones not counted), and uses it: a budget of 24 polls per
// repo per day over 600 repos is 600 polls an hour, where the same fleet without a
// budget polls every repo each minute (its minimum interval). The first hour is the
// busiest: each worker's bucket starts full.
func TestFleetHoldsItsPollBudget(t *testing.T) {
	const repos, budget = 600, 24.0
	perHour := repos * budget / 24
	s := newSim(t, 3, func(c *sim.Config) {
		c.Coordinator.Warmup = coordinator.NoWarmup
		c.Worker.PollBudget = budget
	})
	if err := s.AddRepos(repos, 4*time.Hour); err != nil {
		t.Fatal(err)
	}
	const run = 90 * time.Minute
	polls := pollTimes(t, s, run)
	most := busiestHour(polls)
	t.Logf("budget %g polls a repo a day over %d repos (%.0f an hour): %d polls in %v, at most %d in an hour (%.3f× the budget)",
		budget, repos, perHour, len(polls), run, most, float64(most)/perHour)
	if float64(most) > 1.1*perHour {
		t.Errorf("%d polls in an hour, over 1.1× the budget's %.0f", most, perHour)
	}
	if float64(len(polls)) < 0.9*perHour*run.Hours() { // the budget is spent
		t.Errorf("%d polls in %v: the budget of %.0f an hour is not spent", len(polls), run, perHour)
	}

	// The same fleet without a budget: as fast as the minimum interval allows.
	free := newSim(t, 3, func(c *sim.Config) { c.Coordinator.Warmup = coordinator.NoWarmup })
	if err := free.AddRepos(repos, 4*time.Hour); err != nil {
		t.Fatal(err)
	}
	n := len(pollTimes(t, free, 10*time.Minute))
	t.Logf("without a budget: %d polls in 10 min", n)
	if float64(n) < 3*perHour {
		t.Errorf("without a budget the fleet polled %d times in 10 min, want far over the budget's %.0f an hour", n, perHour)
	}
}
