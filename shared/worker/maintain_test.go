package worker

import (
	"fmt"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
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

// Scrub slots spread the fleet's full runs evenly over ScrubEvery, at another phase
// than the maintenance slots; for one repo, the slot start moves on by ScrubEvery.
func TestScrubSlotsSpread(t *testing.T) {
	c := Config{ScrubEvery: 90 * 24 * time.Hour}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	const n, buckets = 9000, 90
	var count [buckets]int
	for i := range n {
		id := fmt.Sprintf("%016x", i*7919)
		s := c.scrubSince(now, id)
		if s.After(now) || !now.Before(s.Add(c.ScrubEvery)) {
			t.Fatalf("scrub slot %v does not hold now %v", s, now)
		}
		count[now.Sub(s)/(c.ScrubEvery/buckets)]++
		if next := c.scrubSince(now.Add(c.ScrubEvery), id); !next.Equal(s.Add(c.ScrubEvery)) {
			t.Fatalf("next scrub slot %v, want %v", next, s.Add(c.ScrubEvery))
		}
	}
	for d, k := range count {
		if k < n/buckets*6/10 || k > n/buckets*14/10 {
			t.Fatalf("day %d of the period holds %d of %d scrubs, want about %d", d, k, n, n/buckets)
		}
	}
	r := &repoEntry{RepoState: RepoState{Phase: Queued, Rec: store.Repo{ID: "x"}}, phase: maintPhase("x", 24*time.Hour)}
	c.MaintainEvery = 24 * time.Hour
	if due, req := c.maintDue(now, r); !due || req.Fsck || !req.ScrubSince.Equal(c.scrubSince(now, "x")) {
		t.Fatalf("maintDue: %v %+v; want the repo's scrub slot in the request", due, req)
	}
}

// A mirror nothing was fetched into since its last maintenance (the same refs digest)
// is not due at its slot: not even its fingerprint is read. It is due again when its
// refs move, when its scrub period begins anew, and when the worker does not know
// what its last maintenance saw (a repo it took over, or any after a restart).
func TestMaintDueByRefs(t *testing.T) {
	c := Config{MaintainEvery: 24 * time.Hour, ScrubEvery: 90 * 24 * time.Hour, MaintainPacks: 16, MaintainGap: time.Hour}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	ph := maintPhase("x", c.MaintainEvery)
	maintained := now.Add(-24 * time.Hour)
	r := &repoEntry{RepoState: RepoState{Phase: Queued, Rec: store.Repo{ID: "x", RefsDigest: "aa"}}, phase: ph, maintRefs: "aa", maintAt: maintained,
		maintSlot: slotStart(maintained, ph, c.MaintainEvery)}
	scrub := c.scrubSince(now, "x")
	if !scrub.Before(maintained) {
		// The scrub period began between the two: pick a day whose period began before.
		now = scrub.Add(48 * time.Hour)
		maintained = now.Add(-24 * time.Hour)
		r.maintAt, r.maintSlot = maintained, slotStart(maintained, ph, c.MaintainEvery)
	}
	if due, _ := c.maintDue(now, r); due {
		t.Fatal("an unchanged mirror is due at its slot")
	}
	r.Rec.RefsDigest = "bb"
	if due, req := c.maintDue(now, r); !due || req.Fsck {
		t.Fatalf("a mirror whose refs moved: due %v %+v", due, req)
	}
	r.Rec.RefsDigest, r.maintRefs = "aa", ""
	if due, _ := c.maintDue(now, r); !due {
		t.Fatal("a mirror whose last maintenance the worker does not know is not due")
	}
	r.maintRefs = "aa"
	next := c.scrubSince(now, "x").Add(c.ScrubEvery)
	if due, req := c.maintDue(next.Add(time.Hour), r); !due || !req.ScrubSince.Equal(next) {
		t.Fatalf("a new scrub period: due %v %+v", due, req)
	}
	r.packs = 20
	if due, req := c.maintDue(now, r); !due || req.ScrubChangedOnly {
		t.Fatalf("a mirror with packs past the threshold: due %v %+v", due, req)
	}
	// The scrub policy goes with every request.
	c.ScrubChangedOnly = true
	if due, req := c.maintDue(now, r); !due || !req.ScrubChangedOnly {
		t.Fatalf("scrub of changed mirrors only: due %v %+v", due, req)
	}
}
