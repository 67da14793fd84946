package serve

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// limiter bounds the requests a front answers at once, per client, per repo and in
// all. A request past the repo or total bound waits up to its wait for a place, then
// is refused: the caller answers 429 (the repo is busy) or 503 (the server is). A
// client past its own bound is refused at once (429): its other requests hold places
// already, and a queue of them would hold connections too.
type limiter struct {
	perClient, perRepo, total int

	mu      sync.Mutex
	running int
	repos   map[string]int
	clients map[string]int
	freed   chan struct{} // closed and replaced whenever a place frees up
}

type refusal int

const (
	admitted refusal = iota
	repoBusy
	serverBusy
	clientBusy
)

func newLimiter(perClient, perRepo, total int) *limiter {
	return &limiter{perClient: perClient, perRepo: perRepo, total: total,
		repos: map[string]int{}, clients: map[string]int{}, freed: make(chan struct{})}
}

// acquire takes a place for client and repo, waiting at most wait. On admitted the
// caller must call the returned release once.
func (l *limiter) acquire(ctx context.Context, client, repo string, wait time.Duration) (func(), refusal) {
	var timeout <-chan time.Time
	for {
		l.mu.Lock()
		why := l.tryLocked(client, repo)
		freed := l.freed
		l.mu.Unlock()
		if why == admitted {
			return func() { l.release(client, repo) }, admitted
		}
		if timeout == nil {
			if wait <= 0 || why == clientBusy {
				return nil, why
			}
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-freed:
		case <-timeout:
			return nil, why
		case <-ctx.Done():
			return nil, why
		}
	}
}

func (l *limiter) tryLocked(client, repo string) refusal {
	if l.clients[client] >= l.perClient {
		return clientBusy
	}
	if l.repos[repo] >= l.perRepo {
		return repoBusy
	}
	if l.running >= l.total {
		return serverBusy
	}
	l.running++
	l.repos[repo]++
	l.clients[client]++
	return admitted
}

func (l *limiter) release(client, repo string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running--
	if l.clients[client]--; l.clients[client] <= 0 {
		delete(l.clients, client)
	}
	if l.repos[repo]--; l.repos[repo] <= 0 {
		delete(l.repos, repo)
	}
	close(l.freed)
	l.freed = make(chan struct{})
}

// clientAddr is the address a request's limits are counted against: the peer's, or,
// when the peer is a trusted proxy (the load balancer), the nearest address in
// X-Forwarded-For that is not one (each proxy appends the address it got the
// request from, so what lies left of the first untrusted one is the client's say).
func clientAddr(r *http.Request, trusted []netip.Prefix) string {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	addr := peer.Addr().Unmap()
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	if !isTrusted(addr) {
		return addr.String()
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // not an address: trust nothing further left
		}
		if a = a.Unmap(); !isTrusted(a) {
			return a.String()
		}
		addr = a
	}
	return addr.String()
}
