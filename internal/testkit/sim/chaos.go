package sim

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// ChaosOptions shape a Chaos run; zero fields take the defaults.
type ChaosOptions struct {
	Repos int    // repos at the start; default 120
	Seed  uint64 // of the run's choices (the Sim has its own); default 5
	// Throttle, if set, makes the store refuse that share of the fleet's calls (the
	// checks must read through Config.CheckStore); Rate is the share during the chaos,
	// default 0.25. Operator actions (adds, deletes) run unthrottled, as a client that
	// retries until they land.
	Throttle func(rate float64)
	Rate     float64
}

// ChaosResult is what a Chaos run did and found.
type ChaosResult struct {
	Rounds int
	// Kills counts the workers killed at each stage of a sync, "<stage>/clone" or
	// "<stage>/fetch"; every one of the ten is hit at least once.
	Kills              map[string]int
	Restarts           int
	CoordinatorCrashes int            // coordinator writes that failed as a crash would
	StoreErrors        map[string]int // store errors the fleet rode out, by where
	Repos              int            // repos at the end
	Added, Deleted     int            // by the run, during the chaos
	// What the end state should not have: repos lost, deleted repos still stored, and
	// repos not mirrored (or not ok) after the fleet settled.
	Lost, LeftOver, NotMirrored []string
	TempsLeft                   int // temp files killed syncs left (removed at restart)
}

// Chaos kills workers at every stage of a clone and of a fetch, in turn, and the
// coordinator at one of its next writes each round, while repos are added and deleted
// and (with Throttle) the store refuses a share of its calls; it restarts the dead,
// inside the grace (the worker resumes its record) or after it (a new incarnation).
// Then, with the store healthy again, it lets the fleet settle and polls every repo
// again, and reports what is lost, left over or not mirrored. The invariants that
// hold at every instant (one leader per term, no mirror going back, no repo fetched
// twice at once, no repo held at its epoch by anyone but its owner) are checked after
// every step: a break is the returned error, as is a fleet that does not settle.
//
// Use a Sim with TolerateStoreErrors, at least two workers, and a grace of minutes.
func (s *Sim) Chaos(o ChaosOptions) (ChaosResult, error) {
	if o.Repos <= 0 {
		o.Repos = 120
	}
	if o.Seed == 0 {
		o.Seed = 5
	}
	if o.Rate <= 0 {
		o.Rate = 0.25
	}
	throttle := o.Throttle
	if throttle == nil {
		throttle = func(float64) {}
	}
	res := ChaosResult{Kills: s.Kills, StoreErrors: s.StoreErrors}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed+3))
	if err := s.AddRepos(o.Repos, 48*time.Hour); err != nil {
		return res, err
	}
	if err := s.settle(10 * time.Minute); err != nil {
		return res, err
	}
	want, err := s.ids()
	if err != nil {
		return res, err
	}

	type point struct {
		stage Stage
		clone bool
	}
	var points []point
	for _, st := range Stages {
		points = append(points, point{st, true}, point{st, false})
	}
	key := func(p point) string {
		if p.clone {
			return string(p.stage) + "/clone"
		}
		return string(p.stage) + "/fetch"
	}
	for round := 0; len(s.Kills) < len(points) || round < 3*len(points); round++ {
		if round > 6*len(points) {
			return res, fmt.Errorf("after %d rounds, workers were killed only at %v", round, s.Kills)
		}
		p := points[round%len(points)]
		if s.Kills[key(p)] > 0 && len(s.Kills) < len(points) {
			continue // every point first
		}
		res.Rounds++
		var live []*Node
		for _, n := range s.Nodes {
			if !n.killed {
				live = append(live, n)
			}
		}
		victim := live[rng.IntN(len(live))]
		throttle(0)
		if p.clone { // new repos, so there are clones to be killed in
			before, err := s.ids()
			if err != nil {
				return res, err
			}
			if err := s.AddRepos(6, 48*time.Hour); err != nil {
				return res, err
			}
			after, err := s.ids()
			if err != nil {
				return res, err
			}
			for id := range after {
				if !before[id] {
					want[id] = true
					res.Added++
				}
			}
		}
		if rng.IntN(3) == 0 {
			ids := slices.Sorted(maps.Keys(want))
			id := ids[rng.IntN(len(ids))]
			if err := s.Store.RequestDelete(s.ctx, id); err != nil {
				return res, err
			}
			delete(want, id)
			res.Deleted++
		}
		throttle(o.Rate)
		s.KillAt(victim, p.stage, p.clone)
		s.Store.FailApplyAt(1 + round%4) // the coordinator dies at one of its next writes
		if _, err := s.RunUntil(5*time.Minute, func() bool { return victim.killed }); err != nil {
			return res, err
		}
		if !victim.killed {
			s.Disarm(victim) // it had no such sync to do in time
			continue
		}
		down := 20 * time.Second
		if rng.IntN(2) == 0 {
			down = 3 * time.Minute
		}
		if err := s.RunFor(down); err != nil {
			return res, err
		}
		s.Restart(victim)
	}

	throttle(0)
	s.Store.FailApplyAt(0)
	for _, n := range s.Nodes {
		s.Restart(n)
	}
	if err := s.settle(20 * time.Minute); err != nil {
		return res, err
	}
	if err := s.RunFor(10 * time.Minute); err != nil { // every repo polled again since
		return res, err
	}
	got, err := s.AllRepos()
	if err != nil {
		return res, err
	}
	res.Repos = len(got)
	for id := range want {
		r, ok := got[id]
		if !ok {
			res.Lost = append(res.Lost, id)
			continue
		}
		if _, mirrored := s.Storage.Mirrored(r.URL); !mirrored || r.State != store.RepoOK {
			res.NotMirrored = append(res.NotMirrored, fmt.Sprintf("%s (%s, %s)", id, r.State, r.LastError))
		}
	}
	for id := range got {
		if !want[id] {
			res.LeftOver = append(res.LeftOver, id)
		}
	}
	for _, n := range s.Nodes {
		res.Restarts += n.Restarts
	}
	res.CoordinatorCrashes = s.Store.Injected()
	res.TempsLeft = s.Storage.TempsLeft
	slices.Sort(res.Lost)
	slices.Sort(res.LeftOver)
	slices.Sort(res.NotMirrored)
	return res, errors.Join(s.Settled(), s.Check())
}

// settle runs until the fleet has converged.
func (s *Sim) settle(within time.Duration) error {
	ok, err := s.RunUntil(within, func() bool { return s.Settled() == nil })
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("the fleet did not settle within %s: %w", within, s.Settled())
	}
	return nil
}

// ids is the set of stored repo ids.
func (s *Sim) ids() (map[string]bool, error) {
	rs, err := s.AllRepos()
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(rs))
	for id := range rs {
		out[id] = true
	}
	return out, nil
}
