package worker

import (
	"testing"
	"time"
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
