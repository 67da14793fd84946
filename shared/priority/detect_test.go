package priority

import (
	"math"
	"testing"
	"time"
)

// TestAQuietThePaceMakesUnlikelySettlesTheWindow: a window is settled at its last push
// when the repo's pace up to that push would have made more than log(1/surprising)
// pushes in the quiet since; the quiet goes on as the silence that follows.
func TestAQuietThePaceMakesUnlikelySettlesTheWindow(t *testing.T) {
	const day = 86400.0
	for _, c := range []struct {
		name                    string
		events, exposure        float64 // before the window
		winN, winSecs, winQuiet float64
		want                    bool
	}{
		{"no pushes in the window", 100, 100 * day, 0, 5 * day, 0, false},
		{"no quiet", 100, 100 * day, 3, 3 * day, 0, false},
		{"a push a day, quiet four days", 100, 100 * day, 3, 7 * day, 4 * day, false},
		{"a push a day, quiet five days", 100, 100 * day, 3, 8 * day, 5 * day, true},
		{"ten a day, quiet half a day", 1000, 100 * day, 10, 1.5 * day, 0.5 * day, true},
		{"ten a day, quiet a quarter day", 1000, 100 * day, 10, 1.25 * day, 0.25 * day, false},
		{"a push a week, quiet a fortnight", 14, 98 * day, 1, 13 * day, 12 * day, false},
		{"a single push is no pace", 0, 0, 1, 13 * day, 12.9 * day, false},
		{"too short a time for a pace", 0, 0, 5, 0.5 * day, 0.3 * day, false},
	} {
		s := Stats{Events: c.events, Exposure: c.exposure, WinEvents: c.winN, WinSeconds: c.winSecs, WinQuiet: c.winQuiet}
		if got := s.quietSurprises(); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestFoldSettlesAWindowAtASurprisingQuiet: the poll that makes the quiet surprising
// settles the window at its last push: the pushes join the evidence over the time up
// to that push, and the quiet is the new window's silence.
func TestFoldSettlesAWindowAtASurprisingQuiet(t *testing.T) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.1 / 30}
	s := Stats{Events: 100, Exposure: 100 * 86400}
	now := t0
	// A push a day for three days, the last an hour before its poll.
	for k := range 3 {
		s = Fold(s, Poll{Prev: now, Now: now.Add(24 * time.Hour), Changed: true, Commits: []time.Time{now.Add(23 * time.Hour)}}, prior)
		now = now.Add(24 * time.Hour)
		if s.WinEvents != float64(k+1) || s.WinQuiet != 3600 {
			t.Fatalf("poll %d: %+v", k, s)
		}
	}
	for k := range 5 {
		s = Fold(s, Poll{Prev: now, Now: now.Add(24 * time.Hour)}, prior)
		now = now.Add(24 * time.Hour)
		if k < 3 && (s.WinEvents != 3 || s.WinQuiet != float64(k+1)*86400+3600) {
			t.Fatalf("quiet day %d: %+v", k, s)
		}
	}
	// Settled at the fifth quiet day (5 pushes expected): the quiet is the silence.
	quiet := 5*86400.0 + 3600
	keep := math.Exp2(-8 * 86400 / OldHalfLife.Seconds()) // the older evidence fades over the window
	if s.WinEvents != 0 || s.WinQuiet != 0 || s.WinSeconds != quiet || math.Abs(s.Events-(100*keep+3)) > 1e-9 ||
		math.Abs(s.Exposure-(100*86400*keep+3*86400-3600)) > 1e-3 {
		t.Fatalf("after five quiet days: %+v", s)
	}
}

// TestARepoThatGoesQuietIsBelievedQuietAtOnce: a repo kept at its pace for a year
// whose polls then find no push where several were due is believed at a fraction of
// its pace within days; one whose polls find what its pace makes likely keeps its rate.
func TestARepoThatGoesQuietIsBelievedQuietAtOnce(t *testing.T) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.1 / 30}
	year := 365 * 24 * time.Hour
	for _, c := range []struct {
		name           string
		every          int           // polls of 6 h per push in the first year
		then           int           // polls of 6 h per push after it (0: none)
		after          time.Duration // how long after
		minGot, maxGot float64       // the rate believed then, over the year's
	}{
		{"a push a day, then none, a week on", 4, 0, 7 * 24 * time.Hour, 0, 0.25},
		{"four a day, then none, two days on", 1, 0, 48 * time.Hour, 0, 0.25},
		{"a push a day, kept, a week on", 4, 4, 7 * 24 * time.Hour, 0.7, 1.4},
		{"a push a day, then none, a day on", 4, 0, 24 * time.Hour, 0.5, 1.1},
		{"a push a week, then none, a week on", 28, 0, 7 * 24 * time.Hour, 0.5, 1.1},
	} {
		s, now := steady(Stats{}, t0, year, 6*time.Hour, c.every, prior)
		before := prior.Rate(s)
		s, _ = steady(s, now, c.after, 6*time.Hour, c.then, prior)
		if got := prior.Rate(s) / before; got < c.minGot || got > c.maxGot {
			t.Errorf("%s: %.3g pushes/day, %.2f× the %.3g before; want %.2g–%.2g×", c.name, prior.Rate(s), got, before, c.minGot, c.maxGot)
		}
	}
}
