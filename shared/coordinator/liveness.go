package coordinator

import (
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// liveness judges workers by the coordinator's clock alone (ADR 3):
// a worker is as fresh as the moment this coordinator first saw its heartbeat count at
// the value it has now. Worker timestamps are never compared with the coordinator's
// clock, so a worker whose clock is hours off is judged like any other, and a late
// heartbeat never moves anything back.
//
// What it remembers is a cache: lost on a restart, every worker counts as seen at the
// first tick after it (a death is then declared up to one grace late, never early). A
// silence already recorded with a suspect worker (Worker.SilentSince) survives restarts
// and other coordinators.
type liveness struct {
	mu   sync.Mutex
	seen map[string]sighting
	// Last observe's maps, cleared and refilled by the next: a tick at a thousand
	// workers would otherwise spend most of its time growing fresh maps.
	spare map[string]sighting
	out   map[string]time.Time
}

type sighting struct {
	started time.Time // the registration the count belongs to
	beats   uint64
	at      time.Time // on the coordinator's clock
}

// observe returns, for each worker, since when its count has not moved. The map is
// valid until the next observe.
func (l *liveness) observe(workers []store.Worker, now time.Time) map[string]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.seen
	l.seen, l.spare = refill(l.spare, len(workers)), old
	if l.out == nil {
		l.out = make(map[string]time.Time, len(workers))
	}
	clear(l.out)
	out := l.out
	for _, w := range workers {
		s, ok := old[w.ID]
		if !ok || s.beats != w.Beats || !s.started.Equal(w.StartedAt) {
			s = sighting{started: w.StartedAt, beats: w.Beats, at: now}
		}
		if !w.SilentSince.IsZero() && w.SilentBeats == w.Beats && w.SilentSince.Before(s.at) {
			s.at = w.SilentSince // recorded by a coordinator that saw it first
		}
		l.seen[w.ID] = s
		out[w.ID] = s.at
	}
	return out
}

// forget drops what was seen (a restarted coordinator).
func (l *liveness) forget() {
	l.mu.Lock()
	l.seen, l.spare, l.out = nil, nil, nil
	l.mu.Unlock()
}

// refill returns m emptied, or a new map when there is none.
func refill(m map[string]sighting, n int) map[string]sighting {
	if m == nil {
		return make(map[string]sighting, n)
	}
	clear(m)
	return m
}
