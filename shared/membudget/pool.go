package membudget

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// Pool is an Admission shared by goroutines: Reserve and Grow wait, within their
// context, until granted. The in-process workers of one fleet share one Pool (one
// process, one memory).
type Pool struct {
	mu    sync.Mutex
	a     Admission
	ready map[uint64]chan struct{} // waiting requests, closed when granted
	peak  int64
}

// NewPool returns a pool of budget bytes (<= 0: unlimited).
func NewPool(budget int64) *Pool {
	return &Pool{a: Admission{Budget: budget}, ready: map[uint64]chan struct{}{}}
}

// Stats are a pool's figures for metrics.
type Stats struct {
	Budget   int64 // 0: none
	Reserved int64 // held by running fetches
	Peak     int64 // largest Reserved so far
	Running  int   // reservations granted
	Waiting  int   // requests waiting (new ones and growths)
}

// Stats returns the pool's current figures.
func (p *Pool) Stats() Stats {
	if p == nil {
		return Stats{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Budget: max(p.a.Budget, 0), Reserved: p.a.reserved, Peak: p.peak, Running: p.a.Running(), Waiting: p.a.Waiting()}
}

// Budget is the pool's budget in bytes (0: none).
func (p *Pool) Budget() int64 {
	if p == nil {
		return 0
	}
	return max(p.a.Budget, 0)
}

// Reservation is memory held by one fetch. Release it when the fetch ends.
type Reservation struct {
	p  *Pool
	id uint64
}

// Reserve waits until bytes are granted or ctx ends (then it returns ctx's error and
// holds nothing). A nil pool grants everything.
func (p *Pool) Reserve(ctx context.Context, bytes int64) (*Reservation, error) {
	if p == nil {
		return &Reservation{}, nil
	}
	p.mu.Lock()
	id, granted := p.a.Request(bytes)
	r := &Reservation{p: p, id: id}
	ch := p.wakeLocked(granted, id)
	p.mu.Unlock()
	if ch == nil {
		return r, nil
	}
	if err := p.wait(ctx, id, ch); err != nil {
		r.Release()
		return nil, err
	}
	return r, nil
}

// Grow waits until the reservation holds bytes in all (no-op if it holds as much
// already) or ctx ends (then it keeps what it held).
func (r *Reservation) Grow(ctx context.Context, bytes int64) error {
	p := r.p
	if p == nil {
		return nil
	}
	p.mu.Lock()
	ok, granted := p.a.Grow(r.id, bytes)
	var ch chan struct{}
	if !ok {
		ch = make(chan struct{})
		p.ready[r.id] = ch
	}
	p.wakeLocked(granted, 0)
	p.mu.Unlock()
	if ch == nil {
		return nil
	}
	return p.wait(ctx, r.id, ch)
}

// Held is what the reservation holds now.
func (r *Reservation) Held() int64 {
	if r == nil || r.p == nil {
		return 0
	}
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	return r.p.a.Held(r.id)
}

// Release gives the memory back (and withdraws a waiting growth). Safe to call twice.
func (r *Reservation) Release() {
	if r == nil || r.p == nil {
		return
	}
	p := r.p
	p.mu.Lock()
	delete(p.ready, r.id)
	p.wakeLocked(p.a.Release(r.id), 0)
	p.mu.Unlock()
	r.p = nil
}

// wait blocks until ch is closed or ctx ends; on ctx's end the waiting request is
// withdrawn (a grant that raced with it stands: the caller releases it).
func (p *Pool) wait(ctx context.Context, id uint64, ch chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-ch:
		return nil // granted meanwhile
	default:
	}
	delete(p.ready, id)
	// Withdraw the request only: a growth's reservation keeps what it held (Reserve
	// releases its own).
	p.wakeLocked(p.a.Withdraw(id), 0)
	return ctx.Err()
}

// wakeLocked signals the granted waiters and returns a fresh channel for self when
// self is still waiting (nil when granted or 0).
func (p *Pool) wakeLocked(granted []uint64, self uint64) chan struct{} {
	p.peak = max(p.peak, p.a.reserved)
	selfGranted := false
	for _, id := range granted {
		if id == self {
			selfGranted = true
			continue
		}
		if ch, ok := p.ready[id]; ok {
			close(ch)
			delete(p.ready, id)
		}
	}
	if self == 0 || selfGranted {
		return nil
	}
	ch := make(chan struct{})
	p.ready[self] = ch
	return ch
}

// Fetch is a fetch's reservation: what it holds, and what it came to need.
type Fetch struct {
	*Reservation
	need atomic.Int64
}

// Need is what the fetch itself came to need: ForPack of its pack header's object
// count, or its base when no pack came (so a repo's next estimate does not ratchet up
// on what an earlier fetch needed).
func (f *Fetch) Need() int64 { return f.need.Load() }

// Admit reserves start bytes for a fetch (waiting within ctx) and returns a context
// for the fetch whose pack header grows the reservation to ForPack(base, objects,
// perObject)
// (fetch.WithPackObjects), waiting again if the budget is taken. base is the start
// estimate without what earlier fetches of the repo needed. Release the Fetch when
// the fetch ends.
func (p *Pool) Admit(ctx context.Context, start, base, perObject int64) (context.Context, *Fetch, error) {
	res, err := p.Reserve(ctx, start)
	if err != nil {
		return ctx, nil, err
	}
	f := &Fetch{Reservation: res}
	f.need.Store(base)
	ctx = fetch.WithPackObjects(ctx, func(ctx context.Context, objects int64) error {
		n := ForPack(base, objects, perObject)
		f.need.Store(n)
		if n <= res.Held() {
			return nil
		}
		return res.Grow(ctx, n)
	})
	return ctx, f, nil
}
