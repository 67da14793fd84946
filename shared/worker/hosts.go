package worker

import (
	"container/heap"
	"math"
	"net/url"
	"strings"
	"time"
)

// Per-host politeness. A worker may own thousands of repos on one forge; without a
// limit per upstream host its fetchers would all hit that one host at once, and a
// 429 for one repo would not stop the next. hosts gates fetch starts per host:
//
//   - at most Concurrency fetches of one host at a time;
//   - a token bucket of Rate starts per second (Burst at once);
//   - after a 429/503 (or a Retry-After), no start before the host's pause ends:
//     host-wide, for every repo of the host, not only the one that was refused.
//
// A repo popped from the queue while its host is closed is parked on the host (in
// priority order) instead of being skipped over again and again; it goes back to the
// queue when the host opens: a fetch of the host ends, or its pause or next token
// time passes. Each repo moves at most once per opening, so a closed host with 100,000
// repos costs O(log n) per pop, not a scan. Pure logic: the caller passes the time.
type hosts struct {
	concurrency int     // <=0: no limit
	rate        float64 // starts per second; <=0: no limit
	burst       float64
	pause       time.Duration // after a 429/503 without Retry-After

	gates  map[string]*gate
	parked map[string]*parkItem // repo id -> where it is parked
	timed  openHeap             // closed hosts with parked repos, by when they open
}

type gate struct {
	host     string
	inFlight int
	tokens   float64
	tokensAt time.Time
	until    time.Time // paused until (Retry-After)
	parked   parkHeap
	timedAt  time.Time // its entry in hosts.timed (zero: none)
	timedIdx int
}

type parkItem struct {
	id       string
	priority float64
	seq      uint64
	g        *gate
	index    int
}

func newHosts(concurrency int, rate, burst float64, pause time.Duration) *hosts {
	if burst < 1 {
		burst = 1
	}
	return &hosts{concurrency: concurrency, rate: rate, burst: burst, pause: pause,
		gates: map[string]*gate{}, parked: map[string]*parkItem{}}
}

// hostOf is the host (and port) a repo URL reaches, lower-cased.
func hostOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return rawURL
	}
	return strings.ToLower(u.Host)
}

func (h *hosts) gate(host string) *gate {
	g, ok := h.gates[host]
	if !ok {
		g = &gate{host: host, tokens: h.burst, timedIdx: -1}
		h.gates[host] = g
	}
	return g
}

// refill tops up g's tokens to now.
func (h *hosts) refill(g *gate, now time.Time) {
	if h.rate <= 0 || !now.After(g.tokensAt) {
		return
	}
	if !g.tokensAt.IsZero() {
		g.tokens = math.Min(h.burst, g.tokens+now.Sub(g.tokensAt).Seconds()*h.rate)
	}
	g.tokensAt = now
}

// opensAt is when g may start a fetch, ignoring its concurrency (zero: now). A pause
// that is over is forgotten here.
func (h *hosts) opensAt(g *gate, now time.Time) time.Time {
	at := time.Time{}
	if g.until.After(now) {
		at = g.until
	} else {
		g.until = time.Time{}
	}
	if h.rate > 0 && g.tokens < 1 {
		t := now.Add(time.Duration((1 - g.tokens) / h.rate * float64(time.Second)))
		if t.After(at) {
			at = t
		}
	}
	return at
}

// admit starts a fetch of host at now if the host is open, and reports whether it did.
func (h *hosts) admit(host string, now time.Time) bool {
	g := h.gate(host)
	h.refill(g, now)
	if h.concurrency > 0 && g.inFlight >= h.concurrency {
		return false
	}
	if !h.opensAt(g, now).IsZero() {
		return false
	}
	g.inFlight++
	if h.rate > 0 {
		g.tokens--
	}
	if len(g.parked) > 0 {
		h.schedule(g, now)
	}
	return true
}

// park holds repo id (popped at priority) until host opens.
func (h *hosts) park(host, id string, priority float64, seq uint64, now time.Time) {
	g := h.gate(host)
	it := &parkItem{id: id, priority: priority, seq: seq, g: g}
	heap.Push(&g.parked, it)
	h.parked[id] = it
	h.schedule(g, now)
}

// schedule keeps this true of every host with parked repos: it is in the timed heap,
// at the time it opens (now if it is open), unless it is full, closed only by its
// concurrency, in which case the end of one of its fetches (done) opens it.
func (h *hosts) schedule(g *gate, now time.Time) {
	at := h.opensAt(g, now)
	full := h.concurrency > 0 && g.inFlight >= h.concurrency
	if len(g.parked) == 0 || full && at.IsZero() {
		if g.timedIdx >= 0 {
			heap.Remove(&h.timed, g.timedIdx)
		}
		return
	}
	if at.IsZero() {
		at = now
	}
	g.timedAt = at
	if g.timedIdx >= 0 {
		heap.Fix(&h.timed, g.timedIdx)
	} else {
		heap.Push(&h.timed, g)
	}
}

// unpark drops id from wherever it is parked; false if it was not.
func (h *hosts) unpark(id string) bool {
	it, ok := h.parked[id]
	if !ok {
		return false
	}
	delete(h.parked, id)
	heap.Remove(&it.g.parked, it.index)
	h.tidy(it.g)
	return true
}

// done ends a fetch of host; repos parked on it go back through requeue while it has
// room.
func (h *hosts) done(host string, now time.Time, requeue func(id string, priority float64)) {
	g := h.gate(host)
	if g.inFlight > 0 {
		g.inFlight--
	}
	h.open(g, now, requeue)
}

// pauseHost closes host after a 429/503: for its Retry-After if it gave one, else for
// the default pause.
func (h *hosts) pauseHost(host string, now time.Time, retryAfter time.Duration) {
	g := h.gate(host)
	if retryAfter <= 0 {
		retryAfter = h.pause
	}
	until := now.Add(retryAfter)
	if until.After(g.until) {
		g.until = until
	}
	h.schedule(g, now)
}

// release requeues the repos of every host whose pause or token wait is over, as many
// as each could start now. Each host is opened once per call: one still open with
// repos parked is filed again for the next call, by which time the repos requeued now
// have been started (or parked again), so no call moves more than a host's room.
func (h *hosts) release(now time.Time, requeue func(id string, priority float64)) {
	var due []*gate
	for len(h.timed) > 0 && !h.timed[0].timedAt.After(now) {
		due = append(due, heap.Pop(&h.timed).(*gate))
	}
	for _, g := range due {
		h.open(g, now, requeue)
	}
}

// open requeues as many of g's parked repos as g could start now, best first, and
// schedules the rest.
func (h *hosts) open(g *gate, now time.Time, requeue func(id string, priority float64)) {
	h.refill(g, now)
	if h.opensAt(g, now).IsZero() {
		room := len(g.parked)
		if h.concurrency > 0 {
			room = min(room, h.concurrency-g.inFlight)
		}
		if h.rate > 0 {
			room = min(room, int(g.tokens))
		}
		for range max(room, 0) {
			it := heap.Pop(&g.parked).(*parkItem)
			delete(h.parked, it.id)
			requeue(it.id, it.priority)
		}
	}
	h.schedule(g, now)
	h.tidy(g)
}

// tidy forgets a gate that holds nothing: no fetch, no parked repo, no pause (a pause
// must outlive the host's last fetch: it is what keeps the next one from starting).
func (h *hosts) tidy(g *gate) {
	if g.inFlight == 0 && len(g.parked) == 0 && g.timedIdx < 0 && g.until.IsZero() && (h.rate <= 0 || g.tokens >= h.burst) {
		delete(h.gates, g.host)
	}
}

// parkedLen is how many repos are parked.
func (h *hosts) parkedLen() int { return len(h.parked) }

// nextOpen is when the next closed host with parked repos opens by time (ok=false:
// none does).
func (h *hosts) nextOpen() (time.Time, bool) {
	if len(h.timed) == 0 {
		return time.Time{}, false
	}
	return h.timed[0].timedAt, true
}

type parkHeap []*parkItem

func (p parkHeap) Len() int { return len(p) }
func (p parkHeap) Less(i, j int) bool {
	if p[i].priority != p[j].priority {
		return p[i].priority < p[j].priority
	}
	return p[i].seq < p[j].seq
}
func (p parkHeap) Swap(i, j int) { p[i], p[j] = p[j], p[i]; p[i].index = i; p[j].index = j }
func (p *parkHeap) Push(x any)   { it := x.(*parkItem); it.index = len(*p); *p = append(*p, it) }
func (p *parkHeap) Pop() any {
	old := *p
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*p = old[:len(old)-1]
	it.index = -1
	return it
}

type openHeap []*gate

func (o openHeap) Len() int           { return len(o) }
func (o openHeap) Less(i, j int) bool { return o[i].timedAt.Before(o[j].timedAt) }
func (o openHeap) Swap(i, j int)      { o[i], o[j] = o[j], o[i]; o[i].timedIdx = i; o[j].timedIdx = j }
func (o *openHeap) Push(x any)        { g := x.(*gate); g.timedIdx = len(*o); *o = append(*o, g) }
func (o *openHeap) Pop() any {
	old := *o
	g := old[len(old)-1]
	old[len(old)-1] = nil
	*o = old[:len(old)-1]
	g.timedIdx = -1
	return g
}
