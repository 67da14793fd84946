// Package events tells the world which mirrors moved: every sync that changed refs
// becomes a mirror.updated event, numbered, kept in a bounded backlog (for clients that
// resume) and fanned out to the stream's subscribers (SSE) and to sinks (outgoing
// webhooks, EventBridge). Publishing never blocks: a subscriber that falls behind is
// dropped, a sink queues what it can and counts what it cannot.
package events

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// Type is the event type of every event: the SSE event name, the webhook's
// X-Mirrorfleet-Event header and EventBridge's detail-type.
const Type = "mirror.updated"

// Defaults.
const (
	DefaultBacklog = 4096 // events kept for Last-Event-ID resumes
	// DefaultBacklogRefs bounds the refs the backlog holds in all (about 150 bytes
	// each): 4096 events of 1000 refs would be half a gigabyte. Past it, the oldest
	// events leave the backlog early.
	DefaultBacklogRefs = 100_000
	// DefaultMaxRefs bounds the refs one event lists; a sync that moved more sets
	// Truncated and RefCount (a mass tag import is no reason for a megabyte event).
	// 1000 refs of ordinary names keep an event well under EventBridge's 256 KB.
	DefaultMaxRefs = 1000
	// DefaultSubscriberBuffer is how many events a subscriber may lag behind before it
	// is dropped.
	DefaultSubscriberBuffer = 256
)

// Ref is one ref a sync moved: Old is fetch.ZeroHash for a created ref, New for a
// deleted one.
type Ref struct {
	Name string `json:"name"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// Event is one mirror.updated event. Its JSON is the event's data (SSE), body
// (webhook) and detail (EventBridge); the id travels beside it (SSE id:, a header,
// the detail's envelope).
type Event struct {
	ID     uint64    `json:"-"`
	RepoID string    `json:"repo_id"`
	URL    string    `json:"url"`
	Refs   []Ref     `json:"refs"`
	At     time.Time `json:"at"`
	// Truncated says Refs lists only the first refs (by name) of RefCount.
	Truncated bool `json:"truncated,omitempty"`
	RefCount  int  `json:"ref_count,omitempty"`
}

// Sink takes events for delivery elsewhere. Offer must not block: it queues the
// event or drops it (and counts the drop).
type Sink interface {
	Offer(Event)
}

// Config configures a Hub; zero fields take the defaults.
type Config struct {
	Backlog          int
	BacklogRefs      int
	MaxRefs          int
	SubscriberBuffer int
	Clock            clock.Clock
	// FirstID is the id of the first event. Zero: the start time in microseconds, so
	// a restarted fleet numbers above everything it handed out before (events come
	// far slower than a million a second) and a client resuming across a restart is
	// told it missed events rather than handed other events under ids it saw.
	FirstID uint64
	Sinks   []Sink
	// Metrics, if set, counts the events published and the streams dropped for lagging.
	Metrics Recorder
}

// Recorder takes metric samples: metrics.Prometheus and metrics.EMF are both one.
type Recorder interface {
	Record(...metrics.Sample) error
}

// Hub numbers events, keeps the backlog and fans out. Safe for concurrent use.
type Hub struct {
	cfg   Config
	first uint64

	mu      sync.Mutex
	next    uint64
	backlog []Event // ring: backlog[(head+i)%len] for i < n, oldest first
	head, n int
	refs    int // refs in the backlog
	subs    map[*Subscription]struct{}
	counts  Counts
	closed  bool
}

// Counts are the hub's running totals.
type Counts struct {
	Published          uint64
	SubscribersDropped uint64
}

// NewHub returns a hub.
func NewHub(cfg Config) *Hub {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = DefaultBacklog
	}
	if cfg.MaxRefs <= 0 {
		cfg.MaxRefs = DefaultMaxRefs
	}
	if cfg.BacklogRefs <= 0 {
		cfg.BacklogRefs = DefaultBacklogRefs
	}
	if cfg.SubscriberBuffer <= 0 {
		cfg.SubscriberBuffer = DefaultSubscriberBuffer
	}
	first := cfg.FirstID
	if first == 0 {
		first = uint64(cfg.Clock.Now().UnixMicro())
	}
	return &Hub{cfg: cfg, first: first, next: first, backlog: make([]Event, cfg.Backlog), subs: map[*Subscription]struct{}{}}
}

// Publish makes an event of a sync that moved refs and hands it on; a sync that moved
// none publishes nothing (ok false). It never blocks on a subscriber or a sink.
func (h *Hub) Publish(repoID, url string, moved []fetch.RefUpdate) (Event, bool) {
	if len(moved) == 0 {
		return Event{}, false
	}
	refs := moved
	ev := Event{RepoID: repoID, URL: url}
	if len(refs) > h.cfg.MaxRefs {
		refs = refs[:h.cfg.MaxRefs]
		ev.Truncated, ev.RefCount = true, len(moved)
	}
	ev.Refs = make([]Ref, len(refs))
	for i, r := range refs {
		ev.Refs[i] = Ref{Name: r.Name, Old: r.Old, New: r.New}
	}

	h.mu.Lock()
	ev.ID = h.next
	h.next++
	ev.At = h.cfg.Clock.Now().UTC()
	for h.n > 0 && (h.n == len(h.backlog) || h.refs+len(ev.Refs) > h.cfg.BacklogRefs) {
		h.refs -= len(h.backlog[h.head].Refs)
		h.backlog[h.head] = Event{}
		h.head = (h.head + 1) % len(h.backlog)
		h.n--
	}
	h.backlog[(h.head+h.n)%len(h.backlog)] = ev
	h.n++
	h.refs += len(ev.Refs)
	h.counts.Published++
	lagging := 0
	for s := range h.subs {
		select {
		case s.ch <- ev:
		default:
			// Behind by a whole buffer: cut it loose rather than hold memory for it.
			h.dropLocked(s, true)
			lagging++
		}
	}
	h.mu.Unlock()
	if h.cfg.Metrics != nil {
		_ = h.cfg.Metrics.Record(append(metrics.EventDelivery(metrics.SinkSSE, metrics.EventsDropped, lagging), metrics.EventPublished())...)
	}
	for _, k := range h.cfg.Sinks {
		k.Offer(ev)
	}
	return ev, true
}

// Counts returns the running totals.
func (h *Hub) Counts() Counts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts
}

// Last is the id of the newest event; ok is false before the first.
func (h *Hub) Last() (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.next - 1, h.next > h.first
}

// Subscription is one subscriber of the stream.
type Subscription struct {
	h      *Hub
	ch     chan Event
	lagged bool
	closed bool
}

// Resume is what a subscriber resuming after an id gets from the backlog.
type Resume struct {
	Events []Event // the backlog after the id, oldest first
	// Missed says events after the id are no longer in the backlog (it rolled over,
	// the fleet restarted, or the id was never handed out here): the client should
	// re-read what it cares about.
	Missed bool
}

// Subscribe registers a subscriber. With resume, the events after lastID that the
// backlog still holds come back with it, and whether some are missing; the
// subscription then carries every event after those, none twice.
func (h *Hub) Subscribe(lastID uint64, resume bool) (*Subscription, Resume) {
	s := &Subscription{h: h, ch: make(chan Event, h.cfg.SubscriberBuffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		s.closed = true
		close(s.ch)
		return s, Resume{}
	}
	var r Resume
	if resume {
		oldest := h.next - uint64(h.n) // id of the oldest event kept (next when none)
		switch {
		case lastID >= h.next, lastID+1 < oldest:
			r.Missed = true
			for i := range h.n {
				r.Events = append(r.Events, h.backlog[(h.head+i)%len(h.backlog)])
			}
		default:
			for i := int(lastID + 1 - oldest); i < h.n; i++ {
				r.Events = append(r.Events, h.backlog[(h.head+i)%len(h.backlog)])
			}
		}
	}
	h.subs[s] = struct{}{}
	return s, r
}

// C carries the events; it is closed when the subscriber is dropped for lagging
// (Lagged) or closed.
func (s *Subscription) C() <-chan Event { return s.ch }

// Lagged reports whether the hub dropped the subscription because it fell behind.
func (s *Subscription) Lagged() bool {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return s.lagged
}

// Close unsubscribes; safe to call more than once.
func (s *Subscription) Close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	s.h.dropLocked(s, false)
}

func (h *Hub) dropLocked(s *Subscription, lagged bool) {
	if s.closed {
		return
	}
	s.closed, s.lagged = true, lagged
	if lagged {
		h.counts.SubscribersDropped++
	}
	delete(h.subs, s)
	close(s.ch)
}

// Close ends every subscription (their channels close, not Lagged) and refuses new
// ones: a server shutting down ends its streams, which never go idle by themselves.
// Publishing goes on, to the backlog and the sinks.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		h.dropLocked(s, false)
	}
}

// Subscribers is the number of live subscriptions.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Mirror publishes every sync of the wrapped Mirrorer that moved refs. The event is
// the sync's: a repo that moved to another worker while it was fetched still changed.
type Mirror struct {
	worker.Mirrorer
	Hub *Hub
}

// Sync runs the sync and publishes what it moved.
func (m Mirror) Sync(ctx context.Context, t fetch.Target) (fetch.Result, error) {
	res, err := m.Mirrorer.Sync(ctx, t)
	if err == nil {
		m.Hub.Publish(t.ID, t.URL, res.Refs)
	}
	return res, err
}

// Maintain forwards to the wrapped Mirrorer, which must be a worker.Maintainer.
func (m Mirror) Maintain(ctx context.Context, t fetch.Target, req fetch.MaintainRequest) (fetch.Maintenance, error) {
	mt, ok := m.Mirrorer.(worker.Maintainer)
	if !ok {
		return fetch.Maintenance{}, fmt.Errorf("%T cannot maintain mirrors", m.Mirrorer)
	}
	return mt.Maintain(ctx, t, req)
}
