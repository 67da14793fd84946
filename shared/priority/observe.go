package priority

import (
	"math"
	"slices"
	"time"
)

// Poll is what one successful sync of a repo saw, as the worker hands it to Fold.
type Poll struct {
	Prev    time.Time // the previous successful sync; zero for the first clone
	Now     time.Time
	Changed bool // the refs moved
	// Commits are the times (the later of author and committer time) of the commits
	// the sync brought: on a fetch those new to the mirror, on the first clone the
	// newest of the history, back to Since. The mirror bounds both walks.
	Commits []time.Time
	// Since, on the first clone, is where the history in Commits begins.
	Since time.Time
	// FromRoot, on the first clone, says the history reaches the repo's first commit
	// (at Since): its first Window is the making of the repo, not a sign of its rate.
	FromRoot bool
	// LastCommitAt is the repo's newest commit; on a first clone whose history window
	// holds no commit it tells how long the repo has been quiet.
	LastCommitAt time.Time
}

const (
	// Window is how long the evidence of a possible change of behaviour collects before
	// it is judged: kept as a change (the older evidence is dropped) or merged.
	Window = 14 * 24 * time.Hour
	// OldHalfLife is how fast evidence older than the window fades: slowly, as long as
	// a first clone's history reaches back, since judging each window is what drops the
	// evidence of a repo that changed; the fading only bounds the weight of a past
	// older than any history read.
	OldHalfLife = 5 * 365 * 24 * time.Hour
	// SessionGap separates pushes: commits closer in time than this are counted as one.
	SessionGap = 4 * time.Hour
	// maxQuiet bounds the quiet stretch a first clone counts as evidence.
	maxQuiet = 10 * 365 * 24 * time.Hour
)

// Fold adds what a poll saw to a repo's stats. Each poll adds its pushes (bursts of new
// commits) and the time it covers to the current window, and the poll and its outcome
// to the Rate policy's counts. When the window is full, prior judges whether the repo
// changed behaviour in it: if so the older evidence is dropped, else the window joins
// it. The first clone's history is folded in the same way, as if the repo had been
// polled every Window since the history's beginning (or since its last commit, for a
// repo quieter than that).
func Fold(s Stats, p Poll, prior *Prior) Stats {
	s.Fold(p, prior)
	return s
}

// Fold is Fold in place.
func (s *Stats) Fold(p Poll, prior *Prior) { s.fold(p, prior, true) }

// FoldEvidence is Fold for a policy that reads no belief (BeliefReader): the stats'
// belief is left out (unset), so a policy that reads one later starts it from the
// evidence.
func FoldEvidence(s Stats, p Poll, prior *Prior) Stats {
	s.FoldEvidence(p, prior)
	return s
}

// FoldEvidence is FoldEvidence in place.
func (s *Stats) FoldEvidence(p Poll, prior *Prior) { s.fold(p, prior, false) }

// BeliefReader is a policy whose decisions read a repo's belief (Stats.Belief), which
// Fold keeps and FoldEvidence does not.
type BeliefReader interface {
	ReadsBelief() bool
}

func (s *Stats) fold(p Poll, prior *Prior, filtered bool) {
	if !filtered {
		s.Belief = Belief{}
	}
	if prior == nil {
		prior = DefaultPrior()
	}
	if p.Prev.IsZero() {
		if s.Exposure > 0 || s.WinSeconds > 0 {
			return // a clone again (the mirror was lost): what the polls saw is worth more
		}
		s.history(p, prior)
		if filtered {
			sp := prior.started(s)
			s.Belief.set(&sp)
		}
		return
	}
	interval := max(p.Now.Sub(p.Prev), 0)
	s.upgrade()
	pushes := bursts(p.Commits)
	if filtered {
		// The belief is filtered over the poll; stats kept without one start it from
		// their evidence.
		sp := s.Belief.get()
		if s.Belief.IsZero() {
			sp = prior.started(s)
		}
		prior.filter(&sp, prior.weightsOf(classOf(s)), p.Prev, p.Now, pushes, p.Changed)
		s.Belief.set(&sp)
	}
	s.observe(interval, p.Changed)
	n := len(pushes)
	if p.Changed && n == 0 {
		n = 1 // refs moved without new commits (a tag, a reset): still a change to catch
	}
	s.window(float64(n), interval.Seconds(), quietAfter(p.Commits, p.Now, interval), prior)
}

// quietAfter is how much of a poll's interval came after its last push, as its commits
// tell (their newest; with none to tell, none of it).
func quietAfter(commits []time.Time, now time.Time, interval time.Duration) float64 {
	if len(commits) == 0 {
		return 0
	}
	return min(max(now.Sub(slices.MaxFunc(commits, time.Time.Compare)), 0), interval).Seconds()
}

// history replays a first clone's listing of the history through the windows.
func (s *Stats) history(p Poll, prior *Prior) {
	s.Root = p.FromRoot
	since := p.Now
	if !p.Since.IsZero() && p.Since.Before(p.Now) {
		since = p.Since
	}
	s.Young = p.FromRoot && p.Now.Sub(since) < YoungAge
	times := slices.Clone(p.Commits)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	if p.FromRoot {
		since = making(times, since)
		if since.After(p.Now) {
			since = p.Now
		}
	}
	if len(p.Commits) == 0 && !p.LastCommitAt.IsZero() && p.LastCommitAt.Before(since) {
		since = p.LastCommitAt // quiet since then
		if oldest := p.Now.Add(-maxQuiet); since.Before(oldest) {
			since = oldest
		}
	}
	k, _ := slices.BinarySearchFunc(times, since, func(t, since time.Time) int {
		if t.After(since) {
			return 1
		}
		return -1
	})
	s.Made = p.FromRoot && Sessions(times[:k]) >= MadePushes
	times = times[k:]
	for from := since; from.Before(p.Now); {
		to := from.Add(Window)
		if to.After(p.Now) {
			to = p.Now
		}
		n := 0
		for n < len(times) && (!times[n].After(to) || to.Equal(p.Now)) {
			n++
		}
		s.window(float64(Sessions(times[:n])), to.Sub(from).Seconds(), quietAfter(times[:n], to, to.Sub(from)), prior)
		times = times[n:]
		from = to
	}
}

// making is when the making of a repo whose first commit is at root ended, from the
// commit times of its history (in order): its first Window, and on while its pushes
// come less than a Window apart, for at most MaxMaking. A repo is mostly made in a run
// of work and then kept at its own pace or left; a fixed first Window counted the end
// of a longer run as the pushes of a repo that keeps going, and the dormant repos got
// far more polls than their history tells (ADR 17 has the figures). The cap keeps a
// busy young repo's evidence: past it, its pushes are its rate.
func making(times []time.Time, root time.Time) time.Time {
	end := root.Add(Window)
	for _, t := range times {
		if t.Sub(root) > MaxMaking || t.Sub(end) >= Window {
			break
		}
		if t.After(end) {
			end = t
		}
	}
	return end
}

// MaxMaking bounds the making of a repo (making).
const MaxMaking = 4 * Window

// MadePushes is how many pushes a making takes for the repo to be weighed as one
// worked on from the start (Stats.Made): a repo begun with a run of work and one begun
// with a commit or two are weighed apart, and the fleet learns how much that tells.
const MadePushes = 3

// window adds n pushes over seconds to the current window, the last of them quiet
// seconds before its end, and settles it once it is full and holds a push: judged a
// change of behaviour, it replaces the older evidence; else it joins it (which fades
// with OldHalfLife). A silence is never cut into windows: it grows until the next push,
// so a repo that went quiet is judged on the whole of it, and that push opens a window
// of its own, so a repo that wakes up is judged on what came after the silence.
//
// A repo that goes quiet is detected at once, not when a fortnight's window fills: a
// window whose quiet after its last push the repo's pace makes unlikely
// (quietSurprises) is settled at that push, and the quiet goes on as the silence that
// follows, which the posterior walks for a change.
func (s *Stats) window(n, seconds, quiet float64, prior *Prior) {
	if n > 0 && s.WinEvents == 0 && s.WinSeconds >= Window.Seconds() {
		s.settle(prior)
	}
	switch {
	case n > 0:
		s.WinQuiet = quiet
	case s.WinEvents > 0:
		s.WinQuiet += seconds
	}
	s.WinEvents += n
	s.WinSeconds += seconds
	if s.WinEvents > 0 && (s.WinSeconds >= Window.Seconds() || s.quietSurprises()) {
		s.settle(prior)
	}
}

// surprising is the chance below which a quiet is taken as a change of pace: a repo
// that kept its pace is as quiet once in a hundred times, and then only has its window
// settled early, which its posterior weighs as any other.
const surprising = 0.01

// minPaceSeconds is the least time a pace is read over (a day): a repo seen for less has
// no pace to surprise.
const minPaceSeconds = 86400

// quietSurprises reports whether the window's quiet after its last push is unlikely at
// the repo's pace: the pushes its evidence up to that push gives (less half a push, so
// that a push or two make little pace) would have made m in the quiet, and
// e^−m < surprising.
func (s *Stats) quietSurprises() bool {
	t := s.Exposure + s.WinSeconds - s.WinQuiet
	if s.WinQuiet <= 0 || t < minPaceSeconds {
		return false
	}
	return (s.Events+s.WinEvents-0.5)/t*s.WinQuiet > -math.Log(surprising)
}

// settle closes the window at its last push (judged, as window says), and the quiet
// after that push opens the next window, a silence.
func (s *Stats) settle(prior *Prior) {
	quiet := min(s.WinQuiet, s.WinSeconds)
	if s.WinEvents == 0 {
		quiet = 0
	}
	if _, changed := prior.posterior(evidenceOf(s)); changed > 0.5 {
		s.Events, s.Exposure = s.WinEvents, s.WinSeconds-quiet
	} else {
		keep := math.Exp2(-s.WinSeconds / OldHalfLife.Seconds())
		s.Events = s.Events*keep + s.WinEvents
		s.Exposure = s.Exposure*keep + s.WinSeconds - quiet
	}
	s.WinEvents, s.WinSeconds, s.WinQuiet = 0, quiet, 0
}

// Sessions counts the bursts in a set of commit times: commits less than SessionGap
// apart are one push. A push may carry commits authored over days, and two pushes an
// hour apart look like one, so it is an estimate; the allocation only needs rates up to
// a common factor, which this is on average.
func Sessions(times []time.Time) int { return len(bursts(times)) }

// bursts are the pushes commit times tell (Sessions), in order, each at its newest
// commit.
func bursts(times []time.Time) []time.Time {
	if len(times) == 0 {
		return nil
	}
	ts := times
	if !slices.IsSortedFunc(ts, time.Time.Compare) { // a fetch lists them in order, mostly
		ts = slices.Clone(times)
		slices.SortFunc(ts, time.Time.Compare)
	}
	out := []time.Time{ts[0]}
	for i := 1; i < len(ts); i++ {
		if ts[i].Sub(ts[i-1]) > SessionGap {
			out = append(out, ts[i])
		} else {
			out[len(out)-1] = ts[i]
		}
	}
	return out
}
