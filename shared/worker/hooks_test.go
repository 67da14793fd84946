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
		if got := (&RepoState{Hook: c.hook}).Stretch(View{Now: now, HookLoss: HookLoss{}}); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%+v: stretch %v, want %v", c.hook, got, c.want)
		}
		if got := (&RepoState{Hook: c.hook}).Stretch(View{Now: now, FeedCovered: true}); got != FeedStretch {
			t.Errorf("covered by a feed, %+v: stretch %v, want %v", c.hook, got, FeedStretch)
		}
	}
	// A host that loses a quarter of its hooks: its repos are polled at half their rate.
	quarter := HookLoss{Lost: 98, Announced: 102} // Share() = (98+2)/(200+200) = 0.25
	if got := (&RepoState{Hook: HookState{At: now}}).Stretch(View{Now: now, HookLoss: quarter}); math.Abs(got-2) > 1e-9 {
		t.Errorf("a quarter lost: stretch %v, want 2", got)
	}
	// A poll that finds a push first unhooks the repo and counts as lost; a hook's fetch
	// counts as announced.
	h := HookState{At: now}
	if f := h.Fetched(HookedOwn, true); !h.Hooked(now) || f != HookAnnounced {
		t.Fatalf("after a hook's fetch: %+v, found %v", h, f)
	}
	if f := h.Fetched(HookedOwn, false); h.Hooked(now) || f != HookLost {
		t.Fatalf("after a poll found a push first: %+v, found %v", h, f)
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
		if k%10 != 0 { // one push in ten found by a poll first
			l.Count(HookAnnounced)
		} else {
			l.Count(HookLost)
		}
	}
	if s := l.Share(); s < 0.08 || s > 0.1 {
		t.Fatalf("a tenth lost over 2000 pushes: estimated %v", s)
	}
	var good HookLoss
	for range 5000 {
		good.Count(HookAnnounced)
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
	w.repos["h"], w.repos["s"] = &repoEntry{RepoState: RepoState{Phase: Queued}}, &repoEntry{RepoState: RepoState{Phase: Queued}}
	st := &memSignals{sig: store.Signals{Hook: []string{"h"}, Sync: []string{"s"}}}
	if asked, dropped, err := w.TakeSignals(t.Context(), st); err != nil || asked != 2 || dropped != 0 {
		t.Fatalf("asked %d dropped %d err %v", asked, dropped, err)
	}
	if w.repos["h"].Hook.At.IsZero() || !w.repos["s"].Hook.At.IsZero() {
		t.Fatalf("hookAt: hook signal %v, sync signal %v; want only the hook's set", w.repos["h"].Hook.At, w.repos["s"].Hook.At)
	}
	if len(st.removed.Hook) != 1 || len(st.removed.Sync) != 1 {
		t.Fatalf("removed %+v, want what was read", st.removed)
	}
}
