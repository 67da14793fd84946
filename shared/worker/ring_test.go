package worker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

func TestPollStretch(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		hookAt time.Time
		want   float64
	}{
		{time.Time{}, 1},                      // never sent a hook
		{now, HookStretch},                    // a hook just now
		{now.Add(-HookMemory), HookStretch},   // at the edge of the memory
		{now.Add(-HookMemory - time.Hour), 1}, // hooks stopped: polled as before
	} {
		if got := pollStretch(c.hookAt, now, false); got != c.want {
			t.Errorf("hook at %v: stretch %v, want %v", c.hookAt, got, c.want)
		}
		if got := pollStretch(c.hookAt, now, true); got != FeedStretch {
			t.Errorf("covered by a feed, hook at %v: stretch %v, want %v", c.hookAt, got, FeedStretch)
		}
	}
}

// memSignals is a signal store holding one worker's signals in memory.
type memSignals struct{ sig, removed store.Signals }

func (m *memSignals) GetSignals(context.Context, string) (store.Signals, error) { return m.sig, nil }
func (m *memSignals) RemoveSignals(_ context.Context, _ string, s store.Signals) error {
	m.removed = s
	return nil
}

// A hook's signal marks the repo as one whose forge sends hooks (its polls stretch); a
// sync's does not.
func TestSignalsKeepHookAndSyncApart(t *testing.T) {
	w := New(Config{}, nil, nil, nil, clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), slog.New(slog.DiscardHandler))
	w.id = "w1"
	w.repos["h"], w.repos["s"] = &repoState{}, &repoState{}
	st := &memSignals{sig: store.Signals{Hook: []string{"h"}, Sync: []string{"s"}}}
	if rung, dropped, err := w.TakeSignals(t.Context(), st); err != nil || rung != 2 || dropped != 0 {
		t.Fatalf("rung %d dropped %d err %v", rung, dropped, err)
	}
	if w.repos["h"].hookAt.IsZero() || !w.repos["s"].hookAt.IsZero() {
		t.Fatalf("hookAt: hook signal %v, sync signal %v; want only the hook's set", w.repos["h"].hookAt, w.repos["s"].hookAt)
	}
	if len(st.removed.Hook) != 1 || len(st.removed.Sync) != 1 {
		t.Fatalf("removed %+v, want what was read", st.removed)
	}
}
