package main

import (
	"fmt"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// Goals of the serving benchmark (issue: serve the mirrors).
const (
	serveCloneGoal      = 1.1 // cold clone wall time, front ÷ http-backend
	serveConcurrentGoal = 0.2 // concurrent identical clones, server CPU, front ÷ http-backend
)

// serveSection renders serve.json: cloning through the fleet's git front against
// plain git http-backend on the same mirror.
func serveSection(r *Report) (string, results.Meta, error) {
	var v results.Serve
	if err := r.Load("serve", &v); err != nil {
		return "", results.Meta{}, err
	}
	if len(v.States) == 0 {
		return "", v.Meta, fmt.Errorf("serve: no states")
	}
	type row struct {
		Name string
		P    results.ServePair
		Hits string
	}
	type state struct {
		results.ServeState
		CloneMet, ConcurrentMet string
		Rows                    []row
	}
	var states []state
	for _, s := range v.States {
		st := state{ServeState: s, CloneMet: serveMet(s.Clone.WallRatio, serveCloneGoal),
			ConcurrentMet: serveMet(s.Concurrent.CPURatio, serveConcurrentGoal)}
		for _, r := range []row{
			{Name: fmt.Sprintf("cold full clone (median of %d)", s.Clone.Front.Runs), P: s.Clone},
			{Name: fmt.Sprintf("%d identical clones at once", v.Clients), P: s.Concurrent},
			{Name: "fetch after a small change", P: s.Fetch},
			{Name: fmt.Sprintf("shallow clone, depth 1 (median of %d)", s.Shallow.Front.Runs), P: s.Shallow},
		} {
			r.Hits = serveHits(r.P.Front)
			st.Rows = append(st.Rows, r)
		}
		states = append(states, st)
	}
	md, err := render("serve", struct {
		V                         results.Serve
		States                    []state
		CloneGoal, ConcurrentGoal float64
		Slow                      *serveSlow
	}{v, states, serveCloneGoal, serveConcurrentGoal, newServeSlow(v)})
	return md, v.Meta, err
}

// serveSlowGoal: an operation beside one slow client making the identical request,
// over its time alone (issue 23).
const serveSlowGoal = 1.1

// serveSlow is the slow-client part with its goal checked; nil without it.
type serveSlow struct {
	State, Rate string
	Runs        int
	Goal        float64
	Rows        []serveSlowRow
}

type serveSlowRow struct {
	results.ServeSlowOp
	Met string
}

func newServeSlow(v results.Serve) *serveSlow {
	if v.Slow == nil {
		return nil
	}
	s := &serveSlow{State: v.States[len(v.States)-1].Name, Rate: hBytes(int64(v.Slow.RateBytesPerSecond)),
		Runs: v.Slow.Runs, Goal: serveSlowGoal}
	for _, op := range []results.ServeSlowOp{v.Slow.Clone, v.Slow.Fetch} {
		s.Rows = append(s.Rows, serveSlowRow{op, serveMet(op.Ratio, serveSlowGoal)})
	}
	return s
}

// serveHits is "hits / packs (ratio)" for the front; a dash without packs.
func serveHits(f results.ServeRun) string {
	n := f.CacheHits + f.CacheMisses
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf("%d / %d (%s)", f.CacheHits, n, fcPct(float64(f.CacheHits)/float64(n)))
}

func serveMet(x, goal float64) string {
	if x > 0 && x <= goal {
		return "meets"
	}
	return "misses"
}

// serveHeadline is the serving line of the report's headlines.
func serveHeadline(v results.Serve) string {
	var parts []string
	for _, s := range v.States {
		parts = append(parts, fmt.Sprintf("%s: cold clone %s the time, %d concurrent clones %s the server CPU",
			s.Name, fcRatio(s.Clone.WallRatio), v.Clients, fcRatio(s.Concurrent.CPURatio)))
	}
	return fmt.Sprintf("- **Serving, fleet front ÷ git http-backend (goals ≤ %.1f× time, ≤ %.1f× CPU):** %s.\n",
		serveCloneGoal, serveConcurrentGoal, strings.Join(parts, "; "))
}
