package api

import (
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// From heartbeats: the last check is the later of the record's and the worker's; the
// next poll is the last check plus the owner's round of its queue, not before now.
func TestScheduleFromHeartbeats(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	w := store.Worker{ID: "w1", QueueLen: 600, FetchRate: 2, // a round of 5 minutes
		Checks: []store.Check{{RepoID: "aaaa", At: now.Add(-time.Minute)}}}
	sc := &schedule{now: now, workers: map[string]store.Worker{"w1": w}, checks: map[string]time.Time{"aaaa": now.Add(-time.Minute)}}

	polled := store.Repo{ID: "aaaa", Owner: "w1", LastFetchAt: now.Add(-time.Hour)}
	if got := sc.LastChecked(polled); !got.Equal(now.Add(-time.Minute)) {
		t.Errorf("LastChecked = %v, want the heartbeat's %v", got, now.Add(-time.Minute))
	}
	if at, ok := sc.NextPoll(polled); !ok || !at.Equal(now.Add(4*time.Minute)) {
		t.Errorf("NextPoll = %v %v, want a round of the queue after the check", at, ok)
	}
	// Polled long ago and not in the heartbeat: the record's time; the round is over, so now.
	old := store.Repo{ID: "bbbb", Owner: "w1", LastFetchAt: now.Add(-time.Hour)}
	if got := sc.LastChecked(old); !got.Equal(old.LastFetchAt) {
		t.Errorf("LastChecked = %v, want the record's", got)
	}
	if at, ok := sc.NextPoll(old); !ok || !at.Equal(now) {
		t.Errorf("NextPoll = %v %v, want now", at, ok)
	}
	for _, r := range []store.Repo{
		{ID: "c", LastFetchAt: now},                                         // no owner
		{ID: "d", Owner: "w2", LastFetchAt: now},                            // owner unknown
		{ID: "e", Owner: "w1"},                                              // never polled
		{ID: "f", Owner: "w1", LastFetchAt: now, State: store.RepoDeleting}, // going
	} {
		if at, ok := sc.NextPoll(r); ok {
			t.Errorf("NextPoll(%+v) = %v, want none", r, at)
		}
	}
	var none *schedule
	if got := none.LastChecked(polled); !got.Equal(polled.LastFetchAt) {
		t.Errorf("nil schedule: LastChecked = %v", got)
	}
}
