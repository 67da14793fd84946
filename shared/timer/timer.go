// Package timer is the delayed-task seam (ADR 3): a named one-shot timer whose later
// Set replaces the earlier one. On AWS it is EventBridge Scheduler; here it is in-process.
package timer

import (
	"container/heap"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
)

// Firing is a timer that came due.
type Firing struct {
	Name    string
	At      time.Time
	Payload []byte
}

// Local is the in-process Timer. Due timers are taken with Due (simulated time) or
// delivered by Run (real time). Delivery is at-most-once here; handlers are written
// for at-least-once anyway, as on Scheduler.
type Local struct {
	mu      sync.Mutex
	current map[string]*item // the live item per name
	queue   itemHeap         // may hold replaced items; skipped when popped (lazy delete)
	seq     uint64
	wake    chan struct{}
}

type item struct {
	Firing
	seq   uint64 // insertion order: equal times fire in the order they were set
	index int
}

// NewLocal returns an empty in-process timer.
func NewLocal() *Local {
	return &Local{current: map[string]*item{}, wake: make(chan struct{}, 1)}
}

// Set arms name to fire at at with payload, replacing any earlier timer of that name.
func (l *Local) Set(_ context.Context, name string, at time.Time, payload []byte) error {
	l.mu.Lock()
	l.seq++
	it := &item{Firing: Firing{Name: name, At: at, Payload: append([]byte(nil), payload...)}, seq: l.seq}
	l.current[name] = it
	heap.Push(&l.queue, it)
	l.mu.Unlock()
	l.poke()
	return nil
}

// Cancel disarms name; cancelling an unknown name is not an error.
func (l *Local) Cancel(_ context.Context, name string) error {
	l.mu.Lock()
	delete(l.current, name)
	l.mu.Unlock()
	l.poke()
	return nil
}

// Pending returns the armed timers, soonest first (for tests and the status page).
func (l *Local) Pending() []Firing {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Firing, 0, len(l.current))
	for _, it := range l.current {
		out = append(out, it.Firing)
	}
	slices.SortFunc(out, func(a, b Firing) int { return a.At.Compare(b.At) })
	return out
}

// Due removes and returns every live timer due at or before now, in firing order.
func (l *Local) Due(now time.Time) []Firing {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Firing
	for l.queue.Len() > 0 {
		it := l.queue[0]
		if l.current[it.Name] != it { // replaced or cancelled
			heap.Pop(&l.queue)
			continue
		}
		if it.At.After(now) {
			break
		}
		heap.Pop(&l.queue)
		delete(l.current, it.Name)
		out = append(out, it.Firing)
	}
	return out
}

// next returns when the earliest live timer is due.
func (l *Local) next() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.queue.Len() > 0 {
		it := l.queue[0]
		if l.current[it.Name] != it {
			heap.Pop(&l.queue)
			continue
		}
		return it.At, true
	}
	return time.Time{}, false
}

func (l *Local) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run delivers due timers to fire in real time until ctx ends. One goroutine and one
// time.Timer serve all names; each wake-up re-reads the earliest deadline, so a Set or
// Cancel never races a stale Reset.
func (l *Local) Run(ctx context.Context, clk clock.Clock, fire func(context.Context, Firing)) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		for _, f := range l.Due(clk.Now()) {
			fire(ctx, f)
		}
		wait := time.Hour
		if at, ok := l.next(); ok {
			wait = max(at.Sub(clk.Now()), 0)
		}
		t.Reset(wait) // Go ≥1.23: Reset on an unfired timer needs no drain
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		case <-t.C:
		}
	}
}

type itemHeap []*item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if !h[i].At.Equal(h[j].At) {
		return h[i].At.Before(h[j].At)
	}
	return h[i].seq < h[j].seq
}
func (h itemHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *itemHeap) Push(x any)   { it := x.(*item); it.index = len(*h); *h = append(*h, it) }
func (h *itemHeap) Pop() any {
	old := *h
	n := len(old)
	it := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return it
}
