package events

import (
	"fmt"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

func moved(n int) []fetch.RefUpdate {
	out := make([]fetch.RefUpdate, n)
	for i := range out {
		out[i] = fetch.RefUpdate{Name: fmt.Sprintf("refs/tags/t%04d", i), Old: fetch.ZeroHash, New: fmt.Sprintf("%040x", i+1)}
	}
	return out
}

type sinkFunc func(Event)

func (f sinkFunc) Offer(e Event) { f(e) }

func TestPublishNumbersKeepsAndFansOut(t *testing.T) {
	clk := clock.NewVirtual(time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC))
	var sunk []uint64
	h := NewHub(Config{Backlog: 3, FirstID: 10, Clock: clk, Sinks: []Sink{sinkFunc(func(e Event) { sunk = append(sunk, e.ID) })}})
	if _, ok := h.Publish("r", "u", nil); ok {
		t.Fatal("a sync that moved nothing was published")
	}
	if _, ok := h.Last(); ok {
		t.Fatal("Last before any event")
	}
	sub, res := h.Subscribe(0, false)
	if res.Missed || len(res.Events) != 0 {
		t.Fatalf("a fresh subscription got %+v", res)
	}
	for i := range 5 {
		ev, ok := h.Publish("r", "u", moved(1))
		if !ok || ev.ID != uint64(10+i) || !ev.At.Equal(clk.Now()) {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	for i := range 5 {
		if ev := <-sub.C(); ev.ID != uint64(10+i) || ev.Refs[0].Old != fetch.ZeroHash {
			t.Fatalf("subscriber got %+v", ev)
		}
	}
	if fmt.Sprint(sunk) != "[10 11 12 13 14]" {
		t.Fatalf("sink got %v", sunk)
	}
	if last, ok := h.Last(); !ok || last != 14 {
		t.Fatalf("Last = %d %v", last, ok)
	}

	ids := func(es []Event) string {
		var out []uint64
		for _, e := range es {
			out = append(out, e.ID)
		}
		return fmt.Sprint(out)
	}
	// The backlog holds 12..14.
	for _, c := range []struct {
		last   uint64
		want   string
		missed bool
	}{
		{14, "[]", false},
		{13, "[14]", false},
		{11, "[12 13 14]", false},
		{10, "[12 13 14]", true}, // 11 rolled out
		{3, "[12 13 14]", true},  // an id of an earlier run
		{99, "[12 13 14]", true}, // never handed out here
	} {
		s, r := h.Subscribe(c.last, true)
		if ids(r.Events) != c.want || r.Missed != c.missed {
			t.Errorf("resume after %d: %s missed=%v, want %s missed=%v", c.last, ids(r.Events), r.Missed, c.want, c.missed)
		}
		s.Close()
		s.Close()
	}
	if h.Subscribers() != 1 {
		t.Fatalf("%d subscribers, want 1", h.Subscribers())
	}
}

func TestLaggingSubscriberIsDropped(t *testing.T) {
	h := NewHub(Config{SubscriberBuffer: 2, FirstID: 1})
	slow, _ := h.Subscribe(0, false)
	fast, _ := h.Subscribe(0, false)
	for range 3 {
		h.Publish("r", "u", moved(1))
		<-fast.C()
	}
	// slow read nothing: after two buffered events the third dropped it.
	n := 0
	for range slow.C() {
		n++
	}
	if n != 2 || !slow.Lagged() || fast.Lagged() {
		t.Fatalf("slow got %d events, lagged=%v; fast lagged=%v", n, slow.Lagged(), fast.Lagged())
	}
	if c := h.Counts(); c.Published != 3 || c.SubscribersDropped != 1 || h.Subscribers() != 1 {
		t.Fatalf("counts %+v, %d subscribers", c, h.Subscribers())
	}
}

func TestManyRefsAreTruncated(t *testing.T) {
	h := NewHub(Config{MaxRefs: 10})
	ev, _ := h.Publish("r", "u", moved(25))
	if len(ev.Refs) != 10 || !ev.Truncated || ev.RefCount != 25 {
		t.Fatalf("%d refs, truncated=%v, ref_count=%d", len(ev.Refs), ev.Truncated, ev.RefCount)
	}
	ev, _ = h.Publish("r", "u", moved(10))
	if len(ev.Refs) != 10 || ev.Truncated || ev.RefCount != 0 {
		t.Fatalf("%d refs, truncated=%v, ref_count=%d", len(ev.Refs), ev.Truncated, ev.RefCount)
	}
}

func TestFirstIDFollowsTheClock(t *testing.T) {
	start := time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)
	a := NewHub(Config{Clock: clock.NewVirtual(start)})
	ev, _ := a.Publish("r", "u", moved(1))
	b := NewHub(Config{Clock: clock.NewVirtual(start.Add(time.Second))})
	ev2, _ := b.Publish("r", "u", moved(1))
	if ev.ID != uint64(start.UnixMicro()) || ev2.ID <= ev.ID {
		t.Fatalf("ids %d then, after a restart, %d", ev.ID, ev2.ID)
	}
}

// The backlog holds at most BacklogRefs refs: big events push the oldest out early.
func TestBacklogIsBoundedByRefs(t *testing.T) {
	h := NewHub(Config{Backlog: 10, BacklogRefs: 25, FirstID: 1})
	for range 3 {
		h.Publish("r", "u", moved(10))
	}
	_, r := h.Subscribe(0, true)
	if len(r.Events) != 2 || r.Events[0].ID != 2 || !r.Missed {
		t.Fatalf("backlog %d events from %d, missed=%v; want 2 and 3", len(r.Events), r.Events[0].ID, r.Missed)
	}
	for range 10 {
		h.Publish("r", "u", moved(1))
	}
	if _, r := h.Subscribe(3, true); len(r.Events) != 10 || r.Events[0].ID != 4 || r.Missed {
		t.Fatalf("after small events: %d events, missed=%v", len(r.Events), r.Missed)
	}
}
