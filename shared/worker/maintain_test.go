package worker

import (
	"fmt"
	"testing"
	"time"
)

// Phases spread repos evenly over the interval: no hour of the day holds much more
// than its share of the fleet's maintenance.
func TestMaintPhaseSpreads(t *testing.T) {
	const n, buckets = 24000, 24
	every := 24 * time.Hour
	var count [buckets]int
	for i := range n {
		ph := maintPhase(fmt.Sprintf("%016x", i*7919), every)
		if ph < 0 || ph >= every {
			t.Fatalf("phase %v outside [0, %v)", ph, every)
		}
		count[ph/(every/buckets)]++
	}
	for h, c := range count {
		if c < n/buckets*8/10 || c > n/buckets*12/10 {
			t.Fatalf("hour %d holds %d of %d repos, want about %d: %v", h, c, n, n/buckets, count)
		}
	}
	if maintPhase("a", every) != maintPhase("a", every) || maintPhase("a", every) == maintPhase("b", every) {
		t.Fatal("phase is not a function of the id")
	}
}

func TestSlotStart(t *testing.T) {
	every, ph := 24*time.Hour, 5*time.Hour+17*time.Minute
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range []time.Duration{0, time.Hour, 5*time.Hour + 17*time.Minute, 5*time.Hour + 18*time.Minute, 30 * time.Hour, 1000 * time.Hour} {
		now := base.Add(d)
		s := slotStart(now, ph, every)
		if s.After(now) || !now.Before(s.Add(every)) {
			t.Fatalf("slotStart(%v) = %v: not the slot holding now", now, s)
		}
		if off := (s.Sub(base)%every + every) % every; off != ph {
			t.Fatalf("slotStart(%v) = %v: offset %v, want the phase %v", now, s, off, ph)
		}
		if got := slotStart(now.Add(every), ph, every); !got.Equal(s.Add(every)) {
			t.Fatalf("next interval's slot %v, want %v", got, s.Add(every))
		}
	}
}
