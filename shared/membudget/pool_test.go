package membudget

import (
	"context"
	"sync"
	"testing"
)

// Many fetches reserving and growing at once all finish, and what they hold together
// exceeds the budget at most by one growth while the others wait holding their starts.
func TestPoolConcurrentFetchesAllFinish(t *testing.T) {
	p := NewPool(100)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.Reserve(t.Context(), 10)
			if err != nil {
				t.Error(err)
				return
			}
			defer r.Release()
			if err := r.Grow(t.Context(), int64(20+i%4*20)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	s := p.Stats()
	if s.Reserved != 0 || s.Waiting != 0 || s.Running != 0 {
		t.Fatalf("after all: %+v", s)
	}
	if bound := int64(80 + 39*10); s.Peak > bound {
		t.Fatalf("peak %d over %d", s.Peak, bound)
	}
}

// A wait ends with its context, holding nothing new; the others go on.
func TestPoolWaitEndsWithContext(t *testing.T) {
	p := NewPool(100)
	hold, _ := p.Reserve(t.Context(), 100)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Reserve(ctx, 10); err == nil {
		t.Fatal("reserve past its context")
	}
	if err := hold.Grow(ctx, 150); err != nil {
		t.Fatalf("the only reservation's growth must be granted: %v", err)
	}
	if s := p.Stats(); s.Waiting != 0 || s.Reserved != 150 {
		t.Fatalf("%+v", s)
	}
	hold.Release()
	if s := p.Stats(); s.Reserved != 0 {
		t.Fatalf("%+v", s)
	}
}
