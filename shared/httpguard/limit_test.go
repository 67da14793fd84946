package httpguard_test

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
)

func TestClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct{ peer, xff, want string }{
		{"192.0.2.1:5000", "203.0.113.9", "192.0.2.1"}, // an untrusted peer's header is ignored
		{"10.1.2.3:5000", "203.0.113.9", "203.0.113.9"},
		{"10.1.2.3:5000", "1.1.1.1, 203.0.113.9, 10.9.9.9", "203.0.113.9"},
		{"10.1.2.3:5000", "", "10.1.2.3"},
		{"10.1.2.3:5000", "junk, 10.9.9.9", "10.9.9.9"},
		{"[::ffff:10.1.2.3]:5000", "203.0.113.9", "203.0.113.9"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := httpguard.ClientAddr(r, trusted); got != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q: %s, want %s", tc.peer, tc.xff, got, tc.want)
		}
	}
}

// TestLimiterQueuesPerClient: past its cap a client's requests wait in its own bounded
// queue and run as places free; one past the queue is refused at once, a waiter whose
// wait runs out is refused, and another client is not held up by the first one's queue.
func TestLimiterQueuesPerClient(t *testing.T) {
	l := httpguard.NewLimiter(httpguard.PoolLimits{Total: 10, PerClient: 2, QueuePerClient: 2})
	ctx := context.Background()
	var held []func()
	for range 2 {
		rel, why := l.Acquire(ctx, "a", "", time.Minute)
		if why != httpguard.Admitted {
			t.Fatalf("first two: %v", why)
		}
		held = append(held, rel)
	}
	// Two wait in a's queue.
	got := make(chan httpguard.Refusal, 2)
	var rels sync.WaitGroup
	for range 2 {
		rels.Add(1)
		go func() {
			defer rels.Done()
			rel, why := l.Acquire(ctx, "a", "", time.Minute)
			got <- why
			if rel != nil {
				rel()
			}
		}()
	}
	waitFor(t, func() bool { _, w, _, cw := l.InUse("a"); return w == 2 && cw == 2 })
	// The fifth is past the queue: refused at once, whatever the wait.
	start := time.Now()
	if _, why := l.Acquire(ctx, "a", "", time.Minute); why != httpguard.ClientBusy {
		t.Fatalf("past the queue: %v", why)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("a request past the queue waited")
	}
	// Another client runs at once.
	relB, why := l.Acquire(ctx, "b", "", 0)
	if why != httpguard.Admitted {
		t.Fatalf("another client: %v", why)
	}
	relB()
	// Places free: both waiters run.
	for _, rel := range held {
		rel()
	}
	for range 2 {
		if why := <-got; why != httpguard.Admitted {
			t.Fatalf("a waiter: %v", why)
		}
	}
	rels.Wait()
	if r, w, _, _ := l.InUse("a"); r != 0 || w != 0 {
		t.Fatalf("after all: %d running, %d waiting", r, w)
	}
	// A waiter whose wait ends is refused with what was full.
	rel1, _ := l.Acquire(ctx, "a", "", 0)
	rel2, _ := l.Acquire(ctx, "a", "", 0)
	if _, why := l.Acquire(ctx, "a", "", 20*time.Millisecond); why != httpguard.ClientBusy {
		t.Fatalf("wait ran out: %v", why)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, why := l.Acquire(cctx, "a", "", time.Minute); why != httpguard.ClientBusy {
		t.Fatalf("caller gone: %v", why)
	}
	rel1()
	rel2()
	rel2() // twice is once
	if r, w, _, _ := l.InUse("a"); r != 0 || w != 0 {
		t.Fatalf("after the refusals: %d running, %d waiting", r, w)
	}
}

// TestLimiterKeysAndTotal: the per-key and total bounds refuse with their own reason,
// and the total queue bounds waiters of every client together.
func TestLimiterKeysAndTotal(t *testing.T) {
	l := httpguard.NewLimiter(httpguard.PoolLimits{Total: 3, PerKey: 2, QueuePerClient: 4, QueueTotal: 1})
	ctx := context.Background()
	r1, _ := l.Acquire(ctx, "a", "repo", 0)
	r2, _ := l.Acquire(ctx, "b", "repo", 0)
	if _, why := l.Acquire(ctx, "c", "repo", 0); why != httpguard.KeyBusy {
		t.Fatalf("third of one repo: %v", why)
	}
	r3, why := l.Acquire(ctx, "c", "other", 0)
	if why != httpguard.Admitted {
		t.Fatal(why)
	}
	if _, why := l.Acquire(ctx, "d", "x", 0); why != httpguard.ServerBusy {
		t.Fatalf("past the total: %v", why)
	}
	done := make(chan httpguard.Refusal)
	go func() { rel, why := l.Acquire(ctx, "d", "x", time.Minute); done <- why; rel() }()
	waitFor(t, func() bool { _, w, _, _ := l.InUse("d"); return w == 1 })
	if _, why := l.Acquire(ctx, "e", "y", time.Minute); why != httpguard.ServerBusy {
		t.Fatalf("past the total queue: %v", why)
	}
	r3()
	if why := <-done; why != httpguard.Admitted {
		t.Fatalf("the waiter: %v", why)
	}
	r1()
	r2()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}
