package events

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
)

// Source is the EventBridge source of every event; the detail-type is Type.
const Source = "mirrorfleet"

// EventBridge's bounds: entries per PutEvents call, and bytes per entry and per call
// (Source + DetailType + Detail + Resources, and 14 for a Time).
const (
	MaxBatchEntries = 10
	MaxEntryBytes   = 256 * 1024
)

// EventBridge publisher defaults.
const (
	DefaultEventBridgeQueue      = 10000
	DefaultEventBridgeQueueBytes = 32 << 20 // entries reach 256 KB: the count alone bounds nothing
	DefaultEventBridgeAttempts   = 8
)

// PutEventsAPI is the part of the EventBridge client the publisher uses.
type PutEventsAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// EventBridgeConfig configures the publisher; zero fields take the defaults.
type EventBridgeConfig struct {
	Client PutEventsAPI
	Bus    string // the event bus's name or ARN
	Queue  int    // entries waiting; past it an event is dropped
	// QueueBytes bounds the entries waiting or being tried, by size.
	QueueBytes int
	Attempts   int           // tries per entry, then it is dropped
	Backoff    time.Duration // wait after a failed call; doubles, with jitter (DefaultWebhookBackoff)
	MaxWait    time.Duration // (DefaultWebhookMaxWait)
	Metrics    Recorder
	Log        *slog.Logger
}

// EventBridge publishes events to an event bus with PutEvents: up to 10 entries a
// call, each within 256 KB (an event whose refs do not fit keeps as many as fit and
// says truncated, with ref_count). Entries a call or the service failed are tried
// again, after a back-off, up to Attempts; what the queue cannot hold is dropped.
// Offer never blocks. Drops, retries and deliveries are counted.
type EventBridge struct {
	cfg     EventBridgeConfig
	q       chan pendingEntry
	pending atomic.Int64 // entries queued or being tried
	bytes   atomic.Int64 // their sizes
}

type pendingEntry struct {
	entry    types.PutEventsRequestEntry
	size     int
	id       uint64
	attempts int
}

// NewEventBridge returns the publisher; Run publishes.
func NewEventBridge(cfg EventBridgeConfig) *EventBridge {
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultEventBridgeQueue
	}
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = DefaultEventBridgeQueueBytes
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultEventBridgeAttempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultWebhookBackoff
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultWebhookMaxWait
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &EventBridge{cfg: cfg, q: make(chan pendingEntry, cfg.Queue)}
}

func (p *EventBridge) record(name string, n int) {
	if p.cfg.Metrics != nil {
		_ = p.cfg.Metrics.Record(metrics.EventDelivery(metrics.SinkEventBridge, name, n)...)
	}
}

// Offer queues ev; a full queue drops it (counted).
func (p *EventBridge) Offer(ev Event) {
	e, size := Entry(ev, p.cfg.Bus)
	if p.bytes.Add(int64(size)) > int64(p.cfg.QueueBytes) {
		p.bytes.Add(-int64(size))
		p.record(metrics.EventsDropped, 1)
		p.cfg.Log.Warn("eventbridge queue full (bytes): event dropped", "event_id", ev.ID, "repo", ev.RepoID)
		return
	}
	p.pending.Add(1)
	select {
	case p.q <- pendingEntry{entry: e, size: size, id: ev.ID}:
	default:
		p.pending.Add(-1)
		p.bytes.Add(-int64(size))
		p.record(metrics.EventsDropped, 1)
		p.cfg.Log.Warn("eventbridge queue full: event dropped", "event_id", ev.ID, "repo", ev.RepoID)
	}
}

// Entry is ev as a PutEvents entry on bus, and the entry's size as EventBridge counts
// it. Refs that would take the entry past MaxEntryBytes are left out (Truncated,
// RefCount).
func Entry(ev Event, bus string) (types.PutEventsRequestEntry, int) {
	detail, _ := json.Marshal(ev)
	size := func(d []byte) int { return len(Source) + len(Type) + len(d) + 14 }
	for size(detail) > MaxEntryBytes && len(ev.Refs) > 0 {
		if !ev.Truncated {
			ev.Truncated, ev.RefCount = true, len(ev.Refs)
		}
		// Cut in proportion, with a margin; the loop ends: Refs shrinks every time.
		keep := int(float64(len(ev.Refs)) * float64(MaxEntryBytes) / float64(size(detail)) * 0.95)
		ev.Refs = ev.Refs[:min(max(keep, 0), len(ev.Refs)-1)]
		detail, _ = json.Marshal(ev)
	}
	e := types.PutEventsRequestEntry{Source: aws.String(Source), DetailType: aws.String(Type),
		Detail: aws.String(string(detail)), Time: aws.Time(ev.At)}
	if bus != "" {
		e.EventBusName = aws.String(bus)
	}
	return e, size(detail)
}

// done forgets an entry delivered or dropped.
func (p *EventBridge) done(e pendingEntry) {
	p.pending.Add(-1)
	p.bytes.Add(-int64(e.size))
}

// Pending is the number of entries queued or being tried.
func (p *EventBridge) Pending() int { return int(p.pending.Load()) }

// Flush waits until nothing is pending or ctx ends (Run must be running).
func (p *EventBridge) Flush(ctx context.Context) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for p.Pending() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Run publishes until ctx ends.
func (p *EventBridge) Run(ctx context.Context) {
	var again []pendingEntry // failed entries, tried first
	failures := 0
	for {
		batch, ok := p.fill(ctx, &again)
		if !ok {
			return
		}
		failed := p.put(ctx, batch)
		if len(failed) == 0 {
			failures = 0
			continue
		}
		again = append(failed, again...)
		failures++
		t := time.NewTimer(Backoff(p.cfg.Backoff, p.cfg.MaxWait, failures, rand.Float64()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// fill takes a batch: the entries to try again first, then the queue (waiting for
// the first only when there is nothing else), up to MaxBatchEntries and MaxEntryBytes
// in all.
func (p *EventBridge) fill(ctx context.Context, again *[]pendingEntry) ([]pendingEntry, bool) {
	var batch []pendingEntry
	total := 0
	fits := func(e pendingEntry) bool {
		return len(batch) < MaxBatchEntries && (len(batch) == 0 || total+e.size <= MaxEntryBytes)
	}
	for len(*again) > 0 && fits((*again)[0]) {
		batch, total = append(batch, (*again)[0]), total+(*again)[0].size
		*again = (*again)[1:]
	}
	if len(batch) == 0 {
		select {
		case <-ctx.Done():
			return nil, false
		case e := <-p.q:
			batch, total = append(batch, e), e.size
		}
	}
	for len(batch) < MaxBatchEntries {
		select {
		case e := <-p.q:
			if !fits(e) {
				*again = append(*again, e) // next batch's first
				return batch, true
			}
			batch, total = append(batch, e), total+e.size
		default:
			return batch, true
		}
	}
	return batch, true
}

// put makes one PutEvents call and returns the entries to try again.
func (p *EventBridge) put(ctx context.Context, batch []pendingEntry) []pendingEntry {
	in := &eventbridge.PutEventsInput{Entries: make([]types.PutEventsRequestEntry, len(batch))}
	for i, e := range batch {
		in.Entries[i] = e.entry
	}
	out, err := p.cfg.Client.PutEvents(ctx, in)
	var failed []pendingEntry
	retry := func(e pendingEntry, why string) {
		e.attempts++
		if e.attempts >= p.cfg.Attempts {
			p.done(e)
			p.record(metrics.EventsDropped, 1)
			p.cfg.Log.Warn("eventbridge: event dropped", "event_id", e.id, "attempts", e.attempts, "err", why)
			return
		}
		p.record(metrics.EventsRetried, 1)
		failed = append(failed, e)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		p.cfg.Log.Warn("eventbridge: PutEvents failed", "entries", len(batch), "err", err)
		for _, e := range batch {
			retry(e, err.Error())
		}
		return failed
	}
	delivered := 0
	for i, e := range batch {
		if i >= len(out.Entries) {
			retry(e, "no result for the entry")
			continue
		}
		r := out.Entries[i]
		code := aws.ToString(r.ErrorCode)
		switch code {
		case "":
			delivered++
			p.done(e)
		case "ThrottlingException", "InternalFailure", "InternalException", "ServiceUnavailable":
			retry(e, code+": "+aws.ToString(r.ErrorMessage))
		default: // the entry itself is at fault: another try fails the same
			p.done(e)
			p.record(metrics.EventsDropped, 1)
			p.cfg.Log.Warn("eventbridge: entry refused", "event_id", e.id, "code", code, "message", aws.ToString(r.ErrorMessage))
		}
	}
	p.record(metrics.EventsDelivered, delivered)
	return failed
}
