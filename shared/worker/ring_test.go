package worker

import (
	"context"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

func TestPollStretch(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		hook HookState
		want float64
	}{
		{HookState{}, 1},                                     // never sent a hook
		{HookState{At: now}, HookStretch},                    // a hook just now
		{HookState{At: now.Add(-HookMemory)}, HookStretch},   // at the edge of the memory
		{HookState{At: now.Add(-HookMemory - time.Hour)}, 1}, // hooks stopped long ago
		{HookState{At: now, Lost: true}, 1},                  // a poll found a push before its hook
	} {
		if got := PollStretch(c.hook, nil, now, false, AssumedHookLoss); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%+v: stretch %v, want %v", c.hook, got, c.want)
		}
		if got := PollStretch(c.hook, nil, now, true, AssumedHookLoss); got != FeedStretch {
			t.Errorf("covered by a feed, %+v: stretch %v, want %v", c.hook, got, FeedStretch)
		}
	}
	// A host that loses a quarter of its hooks: its repos are polled at half their rate.
	if got := PollStretch(HookState{At: now}, nil, now, false, 0.25); got != 2 {
		t.Errorf("a quarter lost: stretch %v, want 2", got)
	}
	// A poll that finds a push first unhooks the repo and counts as lost; a hook's fetch
	// counts as announced.
	var loss HookLoss
	h := HookState{At: now}
	if f := h.Fetched(HookedOwn, true, &loss); !h.Hooked(now) || loss.Announced != 1 || f != HookAnnounced {
		t.Fatalf("after a hook's fetch: %+v, %+v, found %v", h, loss, f)
	}
	if f := h.Fetched(HookedOwn, false, &loss); h.Hooked(now) || loss.Lost != 1 || f != HookLost {
		t.Fatalf("after a poll found a push first: %+v, %+v, found %v", h, loss, f)
	}
}

func TestStretchFollowsTheLoss(t *testing.T) {
	if got := StretchForLoss(AssumedHookLoss); math.Abs(got-HookStretch) > 1e-9 {
		t.Fatalf("assumed loss: stretch %v, HookStretch %v", got, HookStretch)
	}
	for loss, want := range map[float64]float64{0: FeedStretch, 1e-6: FeedStretch, 0.04: 5, 1: 1, 2: 1} {
		if got := StretchForLoss(loss); math.Abs(got-want) > 1e-9 {
			t.Errorf("loss %v: stretch %v, want %v", loss, got, want)
		}
	}
	// Counting: no pushes seen is the assumption; a host's own counts take over.
	var l HookLoss
	if l.Share() != AssumedHookLoss {
		t.Fatalf("nothing seen: loss %v", l.Share())
	}
	for k := range 2000 {
		l.Saw(k%10 != 0) // one push in ten found by a poll first
	}
	if s := l.Share(); s < 0.08 || s > 0.1 {
		t.Fatalf("a tenth lost over 2000 pushes: estimated %v", s)
	}
	var good HookLoss
	for range 5000 {
		good.Saw(true)
	}
	if s := good.Share(); s > 0.001 || StretchForLoss(s) < 30 {
		t.Fatalf("no hook lost in 5000: estimated %v, stretch %v", s, StretchForLoss(s))
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
	if w.repos["h"].hook.At.IsZero() || !w.repos["s"].hook.At.IsZero() {
		t.Fatalf("hookAt: hook signal %v, sync signal %v; want only the hook's set", w.repos["h"].hook.At, w.repos["s"].hook.At)
	}
	if len(st.removed.Hook) != 1 || len(st.removed.Sync) != 1 {
		t.Fatalf("removed %+v, want what was read", st.removed)
	}
}
