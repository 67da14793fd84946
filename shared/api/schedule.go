package api

import (
	"context"
	"fmt"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// schedule is, for one request, what the repos' workers know of their polls beyond the
// store (a poll that finds nothing writes only at the checkpoint): when each was last
// checked and when it is polled next. Locally the workers are asked in process
// (Config.LastChecked, Config.NextPoll); with Config.HeartbeatChecks (the API Lambda,
// which holds no worker) the workers' records are read once per request and their
// heartbeats answer. A nil *schedule knows nothing beyond the store.
type schedule struct {
	lastChecked, nextPoll func(id string) (time.Time, bool)
	// From the heartbeats: each worker's latest unwritten checks, and its record.
	checks  map[string]time.Time
	workers map[string]store.Worker
	now     time.Time
}

// schedule builds the request's schedule. ws, if not nil, are the workers already read
// by the caller.
func (s *server) schedule(ctx context.Context, ws []store.Worker) (*schedule, error) {
	sc := &schedule{lastChecked: s.cfg.LastChecked, nextPoll: s.cfg.NextPoll, now: s.cfg.Clock.Now()}
	if !s.cfg.HeartbeatChecks {
		return sc, nil
	}
	if ws == nil {
		var err error
		if ws, err = s.cfg.Store.ListWorkers(ctx); err != nil {
			return nil, fmt.Errorf("list workers: %w", err)
		}
	}
	sc.checks, sc.workers = map[string]time.Time{}, make(map[string]store.Worker, len(ws))
	for _, w := range ws {
		sc.workers[w.ID] = w
		for _, c := range w.Checks {
			if c.At.After(sc.checks[c.RepoID]) {
				sc.checks[c.RepoID] = c.At
			}
		}
	}
	return sc, nil
}

// LastChecked is the repo's last poll, changed or not: the later of the stored last
// fetch and what its worker knows.
func (sc *schedule) LastChecked(r store.Repo) time.Time {
	at := r.LastFetchAt
	if sc == nil {
		return at
	}
	if sc.lastChecked != nil {
		if t, ok := sc.lastChecked(r.ID); ok && t.After(at) {
			at = t
		}
	}
	if t := sc.checks[r.ID]; t.After(at) {
		at = t
	}
	return at
}

// NextPoll estimates the repo's next poll. In process its worker answers from its
// queue. From the heartbeats it is an estimate: the repo's last check plus the time its
// owner takes to go through its queue once (queue length ÷ fetch rate), now if that is
// past; false for a repo with no owner, none polled yet, or an owner that has not
// fetched yet.
func (sc *schedule) NextPoll(r store.Repo) (time.Time, bool) {
	if sc == nil {
		return time.Time{}, false
	}
	if sc.nextPoll != nil {
		return sc.nextPoll(r.ID)
	}
	if r.Owner == "" || r.State == store.RepoDeleting {
		return time.Time{}, false
	}
	w, ok := sc.workers[r.Owner]
	last := sc.LastChecked(r)
	if !ok || w.FetchRate <= 0 || last.IsZero() {
		return time.Time{}, false
	}
	at := last.Add(time.Duration(float64(w.QueueLen) / w.FetchRate * float64(time.Second)))
	if at.Before(sc.now) {
		at = sc.now
	}
	return at, true
}
