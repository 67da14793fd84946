package priority

import (
	"math"
	"testing"
	"time"
)

const day = 24 * time.Hour

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func TestRateFollowsChoGarciaMolina(t *testing.T) {
	// 3 changes seen in 10 daily polls: −ln((10 − 3 + 0.5)/(10 + 0.5)) = ln 1.4 ≈ 0.33647
	// changes a day, more than the naive 0.3 because a poll can hide several changes.
	s := Stats{Polls: 10, Changes: 3, Seconds: (10 * day).Seconds()}
	near(t, "changes per day", s.Rate(0)*86400, 0.3364722366212129)
	// The step is 1/√(changes per day): 1/√0.33647 ≈ 1.72395.
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	got := Rate{}.Next(Input{Old: 2, Cloned: true, LastCommitAt: now.Add(-day), Stats: s, Now: now})
	near(t, "Next", got, 2+1.7239528450594181)
}

func TestObserveHalvesWeightsAfterAHalfLife(t *testing.T) {
	s := Stats{Polls: 8, Changes: 4, Seconds: 1000}
	got := s.Observe(HalfLife, false)
	want := Stats{Polls: 4 + 1, Changes: 2, Seconds: 500 + HalfLife.Seconds()}
	near(t, "polls", got.Polls, want.Polls)
	near(t, "changes", got.Changes, want.Changes)
	near(t, "seconds", got.Seconds, want.Seconds)
	near(t, "changes after a changed poll", s.Observe(HalfLife, true).Changes, 3)
	// Two half-lives in one poll: a quarter.
	near(t, "polls after two half-lives", s.Observe(2*HalfLife, false).Polls, 2+1)
}

func TestQuietRepoGetsTheFloor(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	// No change seen: half a change over the longest quiet stretch known.
	polled := Stats{Polls: 5, Seconds: (10 * day).Seconds()}
	near(t, "rate, polls the longest", polled.Rate(3*day), 0.5/(10*day).Seconds())
	near(t, "rate, quiet the longest", polled.Rate(30*day), 0.5/(30*day).Seconds())
	near(t, "rate of a repo seen briefly", Stats{Polls: 1, Seconds: 60}.Rate(0), 0.5/86400)
	near(t, "rate with nothing known", Stats{}.Rate(0), 0.5/86400)
	// Changes too few to beat the floor still get it.
	faint := Stats{Polls: 1000, Changes: 0.001, Seconds: 1e6}
	near(t, "rate of faint changes", faint.Rate(0), 0.5/1e6)

	// Silent for 200 days: 1/400 changes a day, a step of √400 = 20.
	got := Rate{}.Next(Input{Old: 1, Cloned: true, LastCommitAt: now.Add(-200 * day), Now: now})
	near(t, "step of a repo quiet for 200 days", got-1, 20)
	longer := Rate{}.Next(Input{Old: 1, Cloned: true, LastCommitAt: now.Add(-800 * day), Now: now})
	near(t, "step of a repo quiet for 800 days", longer-1, 40)
	// No commit at all (an empty repo): as if quiet for a month, not polled flat out.
	empty := Rate{}.Next(Input{Old: 1, Cloned: true, Now: now})
	near(t, "step of an empty repo", empty-1, math.Sqrt(60))
}

func TestHotterRepoStepsLess(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	step := func(changes float64) float64 {
		s := Stats{Polls: 20, Changes: changes, Seconds: (20 * day).Seconds()}
		return Rate{}.Next(Input{Cloned: true, LastCommitAt: now.Add(-time.Hour), Stats: s, Now: now})
	}
	prev := math.Inf(1)
	for _, x := range []float64{0, 1, 5, 10, 19, 20} {
		got := step(x)
		if !(got < prev) || got <= 0 {
			t.Fatalf("%v changes in 20 polls: step %v, after %v for fewer", x, got, prev)
		}
		prev = got
	}
}

func TestFailuresScaleTheRateStep(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	// Not cloned: a change a month is assumed, a step of √30 per attempt.
	near(t, "first clone", Rate{}.Next(Input{Old: 1, Now: now}), 1+math.Sqrt(30))
	near(t, "after 2 failed clones", Rate{}.Next(Input{Old: 1, CloneFailCnt: 2, Now: now}), 1+3*math.Sqrt(30))
	in := Input{Cloned: true, LastCommitAt: now.Add(-10 * day), Stats: Stats{Polls: 10, Changes: 3, Seconds: (10 * day).Seconds()}, Now: now}
	base := Rate{}.Next(in)
	in.FetchFailCnt = 2
	near(t, "after 2 failed fetches", Rate{}.Next(in), 3*base)
	in.CloneFailCnt = 4 // ignored once cloned
	near(t, "clone failures once cloned", Rate{}.Next(in), 3*base)
}

func TestRateIsSafeWithDegenerateIntervals(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	zero := Stats{}.Observe(0, true).Observe(0, true)
	if zero.Polls != 2 || zero.Changes != 2 || zero.Seconds != 0 {
		t.Fatalf("two polls in no time: %+v", zero)
	}
	if neg := (Stats{Polls: 3, Changes: 1, Seconds: 100}).Observe(-time.Hour, false); neg != (Stats{Polls: 4, Changes: 1, Seconds: 100}) {
		t.Fatalf("a negative interval counts as zero: got %+v", neg)
	}
	for _, s := range []Stats{
		zero,
		Stats{}.Observe(-day, false),
		{Polls: 5, Changes: 5, Seconds: 1}, // every poll changed
		{Polls: 1e-9, Changes: 1e-9, Seconds: 1e-9},
	} {
		for _, commit := range []time.Time{{}, now, now.Add(time.Hour), now.Add(-time.Second)} {
			r := s.Rate(max(now.Sub(commit), 0))
			got := Rate{}.Next(Input{Old: 7, Cloned: true, LastCommitAt: commit, Stats: s, Now: now})
			if math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 || math.IsNaN(got) || math.IsInf(got, 0) || got <= 7 {
				t.Fatalf("stats %+v, commit %v: rate %v, next %v", s, commit, r, got)
			}
		}
	}
}
