package httpguard

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// ClientAddr is the address a request's per-client limits are counted against: the
// peer's, or, when the peer is a trusted proxy (the load balancer), the nearest address
// in X-Forwarded-For that is not one (each proxy appends the address it got the request
// from, so what lies left of the first untrusted one is the client's say). Every
// per-client cap of the process (git front, hooks, event streams) counts by it.
func ClientAddr(r *http.Request, trusted []netip.Prefix) string {
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

// CheckOrigin accepts a CORS origin as a browser sends it in Origin:
// http(s)://host[:port] with nothing after it, or "*" (any).
func CheckOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(strings.TrimRight(o, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("origin %q: want scheme://host[:port] (as a browser sends it in Origin), or *", o)
	}
	return nil
}

// Refusal is why a Limiter did not admit a request.
type Refusal int

const (
	Admitted   Refusal = iota
	ClientBusy         // the client has PerClient requests running (and its queue is full, or the wait ran out)
	KeyBusy            // the key (a repo) has PerKey running
	ServerBusy         // Total are running
)

// PoolLimits are a Limiter's bounds. A request that cannot run at once waits, in a queue of
// at most QueuePerClient of its client's requests and QueueTotal in all, up to the
// wait its caller gives; one past the queue is refused at once. This is Gitaly's
// concurrency limiter: a burst from one CI runner or NAT is served a few at a time
// rather than refused, and no client can queue more than its share.
type PoolLimits struct {
	Total          int // requests running at once; required
	PerClient      int // of one client; 0: no per-client bound
	PerKey         int // of one key (Acquire's key); 0: no per-key bound
	QueuePerClient int // requests of one client waiting; 0: none wait (refused at once)
	QueueTotal     int // requests waiting in all; 0: QueuePerClient × 16, at least Total
}

// Limiter admits requests within PoolLimits. Safe for concurrent use.
type Limiter struct {
	l PoolLimits

	mu      sync.Mutex
	running int
	waiting int
	clients map[string]*clientUse
	keys    map[string]int
	freed   chan struct{} // closed and replaced whenever a place frees up
}

type clientUse struct{ running, waiting int }

// NewLimiter returns a limiter within l.
func NewLimiter(l PoolLimits) *Limiter {
	if l.Total <= 0 {
		l.Total = 1
	}
	if l.QueueTotal <= 0 {
		l.QueueTotal = max(l.QueuePerClient*16, l.Total)
	}
	return &Limiter{l: l, clients: map[string]*clientUse{}, keys: map[string]int{}, freed: make(chan struct{})}
}

// Limits are the limiter's bounds.
func (l *Limiter) Limits() PoolLimits { return l.l }

// Acquire takes a place for client (and key, if the limiter bounds keys; "" for none),
// waiting at most wait in the client's queue while none is free. On Admitted the caller
// must call release once; otherwise it says what was full when the request gave up.
func (l *Limiter) Acquire(ctx context.Context, client, key string, wait time.Duration) (release func(), why Refusal) {
	l.mu.Lock()
	why = l.tryLocked(client, key)
	if why == Admitted {
		l.mu.Unlock()
		return l.releaser(client, key), Admitted
	}
	c := l.clientLocked(client)
	if wait <= 0 || c.waiting >= l.l.QueuePerClient || l.waiting >= l.l.QueueTotal {
		l.dropIdleLocked(client, c)
		l.mu.Unlock()
		return nil, why
	}
	c.waiting++
	l.waiting++
	freed := l.freed
	l.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-freed:
		case <-t.C:
			return nil, l.leave(client, key)
		case <-ctx.Done():
			return nil, l.leave(client, key)
		}
		l.mu.Lock()
		if why = l.tryLocked(client, key); why == Admitted {
			c := l.clients[client]
			c.waiting--
			l.waiting--
			l.mu.Unlock()
			return l.releaser(client, key), Admitted
		}
		freed = l.freed
		l.mu.Unlock()
	}
}

// leave takes a waiter out of the queue after it gave up, and says what was full.
func (l *Limiter) leave(client, key string) Refusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.clients[client]
	c.waiting--
	l.waiting--
	why := l.blockedLocked(client, key)
	l.dropIdleLocked(client, c)
	return why
}

func (l *Limiter) clientLocked(client string) *clientUse {
	c := l.clients[client]
	if c == nil {
		c = &clientUse{}
		l.clients[client] = c
	}
	return c
}

func (l *Limiter) dropIdleLocked(client string, c *clientUse) {
	if c.running <= 0 && c.waiting <= 0 {
		delete(l.clients, client)
	}
}

// blockedLocked is what keeps a request of client for key from running now.
func (l *Limiter) blockedLocked(client, key string) Refusal {
	if c := l.clients[client]; l.l.PerClient > 0 && c != nil && c.running >= l.l.PerClient {
		return ClientBusy
	}
	if l.l.PerKey > 0 && key != "" && l.keys[key] >= l.l.PerKey {
		return KeyBusy
	}
	if l.running >= l.l.Total {
		return ServerBusy
	}
	return Admitted
}

func (l *Limiter) tryLocked(client, key string) Refusal {
	if why := l.blockedLocked(client, key); why != Admitted {
		return why
	}
	l.running++
	l.clientLocked(client).running++
	if l.l.PerKey > 0 && key != "" {
		l.keys[key]++
	}
	return Admitted
}

func (l *Limiter) releaser(client, key string) func() {
	var once sync.Once
	return func() { once.Do(func() { l.release(client, key) }) }
}

func (l *Limiter) release(client, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running--
	if c := l.clients[client]; c != nil {
		c.running--
		l.dropIdleLocked(client, c)
	}
	if l.l.PerKey > 0 && key != "" {
		if l.keys[key]--; l.keys[key] <= 0 {
			delete(l.keys, key)
		}
	}
	close(l.freed)
	l.freed = make(chan struct{})
}

// InUse is how many requests run and wait now, in all and for client.
func (l *Limiter) InUse(client string) (running, waiting, clientRunning, clientWaiting int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.clients[client]; c != nil {
		clientRunning, clientWaiting = c.running, c.waiting
	}
	return l.running, l.waiting, clientRunning, clientWaiting
}
