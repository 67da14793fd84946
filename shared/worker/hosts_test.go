package worker

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// schedule is a worker's pop loop over a plain queue, without a worker: the hosts
// gate each pop, closed hosts park their repos, openings requeue them.
type schedule struct {
	q   *Queue
	h   *hosts
	seq uint64
	url map[string]string
}

func newSchedule(h *hosts) *schedule { return &schedule{q: NewQueue(), h: h, url: map[string]string{}} }

func (s *schedule) add(id, host string, prio float64) {
	s.url[id] = host
	s.q.Push(id, prio, time.Time{})
}

func (s *schedule) requeue(id string, prio float64) { s.q.Push(id, prio, time.Time{}) }

// next is Worker.Next's loop.
func (s *schedule) next(now time.Time) (string, bool) {
	s.h.release(now, s.requeue)
	for {
		id, prio, ok := s.q.Pop(now)
		if !ok {
			return "", false
		}
		if s.h.admit(s.url[id], now) {
			return id, true
		}
		s.seq++
		s.h.park(s.url[id], id, prio, s.seq, now)
	}
}

// drain starts every fetch it can at now.
func (s *schedule) drain(now time.Time) []string {
	var out []string
	for {
		id, ok := s.next(now)
		if !ok {
			return out
		}
		out = append(out, id)
	}
}

func TestHostConcurrency(t *testing.T) {
	s := newSchedule(newHosts(3, -1, 1, time.Minute))
	for i := range 100 {
		s.add(fmt.Sprintf("big%03d", i), "forge.example", float64(i))
	}
	for i := range 2 {
		s.add(fmt.Sprintf("small%d", i), "other.example", 50.5+float64(i))
	}
	started := s.drain(t0)
	if want := []string{"big000", "big001", "big002", "small0", "small1"}; fmt.Sprint(started) != fmt.Sprint(want) {
		t.Fatalf("started %v, want %v", started, want)
	}
	if got := s.h.parkedLen() + s.q.Len(); got != 97 {
		t.Fatalf("%d repos waiting, want 97", got)
	}
	// One fetch of the forge ends: exactly one more of it starts, the best waiting.
	s.h.done("forge.example", t0, s.requeue)
	if got := s.drain(t0); fmt.Sprint(got) != "[big003]" {
		t.Fatalf("after one fetch ended: started %v, want [big003]", got)
	}
	// Every repo goes through, in priority order, three at a time.
	var order []string
	for range 200 {
		s.h.done("forge.example", t0, s.requeue)
		order = append(order, s.drain(t0)...)
	}
	if len(order) != 96 || order[0] != "big004" || order[95] != "big099" {
		t.Fatalf("%d started later, first %v last %v", len(order), order[:1], order[len(order)-1:])
	}
}

func TestHostRateBudget(t *testing.T) {
	s := newSchedule(newHosts(-1, 2, 4, time.Minute)) // 2 starts a second, 4 at once
	for i := range 100 {
		s.add(fmt.Sprintf("r%03d", i), "forge.example", float64(i))
	}
	if got := len(s.drain(t0)); got != 4 {
		t.Fatalf("burst: %d starts, want 4", got)
	}
	if got := len(s.drain(t0.Add(400 * time.Millisecond))); got != 0 {
		t.Fatalf("%d starts 0.4 s later, want 0 (a token every 0.5 s)", got)
	}
	if at, ok := s.h.nextOpen(); !ok || !at.Equal(t0.Add(500*time.Millisecond)) {
		t.Fatalf("host opens at %v (%v), want t0+500ms", at, ok)
	}
	total := 4
	for sec := 1; sec <= 10; sec++ {
		total += len(s.drain(t0.Add(time.Duration(sec) * time.Second)))
	}
	if total != 4+20 {
		t.Fatalf("%d starts in 10 s, want 24 (burst 4 + 2 a second)", total)
	}
}

func TestHostPauseIsHostWide(t *testing.T) {
	s := newSchedule(newHosts(4, -1, 1, time.Minute))
	for i := range 10 {
		s.add(fmt.Sprintf("f%d", i), "forge.example", float64(i))
		s.add(fmt.Sprintf("o%d", i), "other.example", float64(i)+0.5)
	}
	started := s.drain(t0)
	if len(started) != 8 {
		t.Fatalf("started %v", started)
	}
	// One repo of the forge answers 429 with Retry-After: 10 minutes. The other three
	// fetches of the forge end normally.
	s.h.pauseHost("forge.example", t0, 10*time.Minute)
	for range 4 {
		s.h.done("forge.example", t0, s.requeue)
		s.h.done("other.example", t0, s.requeue)
	}
	for _, now := range []time.Time{t0, t0.Add(5 * time.Minute), t0.Add(10*time.Minute - time.Second)} {
		for _, id := range s.drain(now) {
			if id[0] == 'f' {
				t.Fatalf("forge repo %s started at %v, during the host's pause", id, now.Sub(t0))
			}
			s.h.done("other.example", now, s.requeue)
		}
	}
	if at, ok := s.h.nextOpen(); !ok || !at.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("forge opens at %v, want t0+10m", at)
	}
	after := s.drain(t0.Add(10 * time.Minute))
	if fmt.Sprint(after) != "[f4 f5 f6 f7]" {
		t.Fatalf("after the pause: %v, want the next four forge repos", after)
	}
	// Without Retry-After, the default pause.
	s.h.pauseHost("other.example", t0.Add(10*time.Minute), 0)
	if at := s.h.gate("other.example").until; !at.Equal(t0.Add(11 * time.Minute)) {
		t.Fatalf("default pause until %v", at)
	}
}

// TestHostClosedWithManyReposIsCheap: a host paused with 100,000 repos parks each once;
// pops while it is closed cost nothing more, and it drains at its concurrency after.
func TestHostClosedWithManyReposIsCheap(t *testing.T) {
	s := newSchedule(newHosts(4, -1, 1, time.Minute))
	for i := range 100_000 {
		s.add(fmt.Sprintf("r%06d", i), "forge.example", float64(i))
	}
	s.h.pauseHost("forge.example", t0, time.Hour)
	if got := s.drain(t0); len(got) != 0 {
		t.Fatalf("%d started during the pause", len(got))
	}
	if s.h.parkedLen() != 100_000 || s.q.Len() != 0 {
		t.Fatalf("parked %d, queued %d", s.h.parkedLen(), s.q.Len())
	}
	for m := 1; m < 60; m++ { // a pop a minute: nothing moves
		if got := s.drain(t0.Add(time.Duration(m) * time.Minute)); len(got) != 0 {
			t.Fatal("started during the pause")
		}
		if s.q.Len() != 0 {
			t.Fatalf("%d repos back in the queue during the pause", s.q.Len())
		}
	}
	s.h.release(t0.Add(time.Hour), s.requeue)
	if s.q.Len() != 4 {
		t.Fatalf("the host opened with room for 4 and %d repos were requeued", s.q.Len())
	}
	got := s.drain(t0.Add(time.Hour))
	if fmt.Sprint(got) != "[r000000 r000001 r000002 r000003]" || s.q.Len() != 0 || s.h.parkedLen() != 99_996 {
		t.Fatalf("after the pause: %v, %d requeued, %d parked", got, s.q.Len(), s.h.parkedLen())
	}
}

func TestHostUnpark(t *testing.T) {
	h := newHosts(1, -1, 1, time.Minute)
	if !h.admit("a", t0) {
		t.Fatal("first fetch refused")
	}
	h.park("a", "x", 1, 1, t0)
	h.park("a", "y", 2, 2, t0)
	if !h.unpark("x") || h.unpark("x") || h.parkedLen() != 1 {
		t.Fatal("unpark")
	}
	var back []string
	h.done("a", t0, func(id string, _ float64) { back = append(back, id) })
	if fmt.Sprint(back) != "[y]" || h.parkedLen() != 0 {
		t.Fatalf("requeued %v", back)
	}
	if !h.admit("a", t0) {
		t.Fatal("host not open after done")
	}
	h.done("a", t0, func(string, float64) {})
	if len(h.gates) != 0 {
		t.Fatalf("idle gates kept: %v", h.gates)
	}
}

// TestHostPauseOutlivesItsLastFetch: the 429 of the host's only fetch pauses the host;
// nothing in flight or parked must not make the pause be forgotten.
func TestHostPauseOutlivesItsLastFetch(t *testing.T) {
	h := newHosts(4, -1, 1, time.Minute)
	if !h.admit("forge", t0) {
		t.Fatal("first fetch refused")
	}
	h.pauseHost("forge", t0, 2*time.Minute)
	h.done("forge", t0, func(string, float64) {})
	for _, d := range []time.Duration{0, time.Minute, 2*time.Minute - time.Second} {
		if h.admit("forge", t0.Add(d)) {
			t.Fatalf("a fetch started %v into a 2-minute pause", d)
		}
	}
	if !h.admit("forge", t0.Add(2*time.Minute)) {
		t.Fatal("no fetch after the pause")
	}
	h.done("forge", t0.Add(2*time.Minute), func(string, float64) {})
	if len(h.gates) != 0 {
		t.Fatalf("gate kept after its pause: %v", h.gates)
	}
}
