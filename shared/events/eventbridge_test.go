package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/eventbridgefake"
	"github.com/mirrorfleet/mirrorfleet/shared/events"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
)

func eventuallyTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func refUpdates(n, nameLen int) []fetch.RefUpdate {
	out := make([]fetch.RefUpdate, n)
	for i := range out {
		name := fmt.Sprintf("refs/tags/%0*d", nameLen, i)
		out[i] = fetch.RefUpdate{Name: name, Old: fetch.ZeroHash, New: strings.Repeat("c", 40)}
	}
	return out
}

func runPublisher(t *testing.T, cfg events.EventBridgeConfig) *events.EventBridge {
	t.Helper()
	p := events.NewEventBridge(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// The real SDK client against the fake: events arrive in batches of at most 10, on the
// bus, with source mirrorfleet and detail-type mirror.updated and the event as the
// detail; entries the service failed (FailedEntryCount) and calls that failed are
// tried again until they land.
func TestEventBridgePublishesAndRetries(t *testing.T) {
	fake := eventbridgefake.New("mirrorfleet-events")
	defer fake.Close()
	var c metrics.Tally
	p := runPublisher(t, events.EventBridgeConfig{Client: fake.Client(func(o *eventbridge.Options) { o.RetryMaxAttempts = 1 }),
		Bus: "arn:aws:events:us-east-1:000000000000:event-bus/mirrorfleet-events", Backoff: time.Millisecond, Metrics: &c})
	hub := events.NewHub(events.Config{FirstID: 1, Sinks: []events.Sink{p}})
	fake.FailEntries(3, "ThrottlingException")
	fake.FailCalls(1, "InternalException")
	const n = 25
	for i := range n {
		hub.Publish(fmt.Sprintf("%016x", i), fmt.Sprintf("https://example.com/r%d.git", i), refUpdates(2, 4))
	}
	eventuallyTrue(t, "all entries accepted", func() bool { return len(fake.Entries()) == n })
	seen := map[string]bool{}
	for _, e := range fake.Entries() {
		var ev events.Event
		if err := json.Unmarshal([]byte(e.Detail), &ev); err != nil {
			t.Fatal(err)
		}
		if e.Source != "mirrorfleet" || e.DetailType != "mirror.updated" || !strings.HasSuffix(e.Bus, "/mirrorfleet-events") ||
			len(ev.Refs) != 2 || e.Time.IsZero() {
			t.Fatalf("entry %+v", e)
		}
		if seen[ev.RepoID] {
			t.Fatalf("%s delivered twice", ev.RepoID)
		}
		seen[ev.RepoID] = true
	}
	if calls := fake.Calls(); calls < 3+1 || calls > n {
		t.Fatalf("%d calls for %d entries: want batches of up to 10 and the retries", calls, n)
	}
	eventuallyTrue(t, "counted", func() bool { return c.Total("EventsDelivered/eventbridge") == n })
	if r := c.Total("EventsRetried/eventbridge"); r < 3+1 {
		t.Fatalf("%v retries counted, want at least 4", r)
	}
	if d := c.Total("EventsDropped/eventbridge"); d != 0 {
		t.Fatalf("%v dropped", d)
	}
}

// A push of thousands of long refs fits the 256 KB entry by keeping fewer refs and
// saying so; the fake (which checks the size) accepts it.
func TestEventBridgeTruncatesLargeEvents(t *testing.T) {
	hub := events.NewHub(events.Config{FirstID: 1})
	ev, _ := hub.Publish("0123456789abcdef", "https://example.com/big.git", refUpdates(5000, 200))
	e, size := events.Entry(ev, "b")
	if size > events.MaxEntryBytes {
		t.Fatalf("entry of %d bytes", size)
	}
	var got events.Event
	if err := json.Unmarshal([]byte(aws.ToString(e.Detail)), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Truncated || got.RefCount != 5000 || len(got.Refs) == 0 || len(got.Refs) >= 1000 {
		t.Fatalf("truncated=%v ref_count=%d refs=%d", got.Truncated, got.RefCount, len(got.Refs))
	}

	fake := eventbridgefake.New("b")
	defer fake.Close()
	p := runPublisher(t, events.EventBridgeConfig{Client: fake.Client(), Bus: "b"})
	p.Offer(ev)
	p.Offer(ev) // two of ~250 KB: one call each
	eventuallyTrue(t, "both accepted", func() bool { return len(fake.Entries()) == 2 })
	if fake.Calls() != 2 {
		t.Fatalf("%d calls, want 2", fake.Calls())
	}
}

// The queue bounds what waits: past it events are dropped and counted, and so are
// entries whose attempts are spent.
func TestEventBridgeDropsAreCounted(t *testing.T) {
	fake := eventbridgefake.New("b")
	defer fake.Close()
	var c metrics.Tally
	p := events.NewEventBridge(events.EventBridgeConfig{Client: fake.Client(func(o *eventbridge.Options) { o.RetryMaxAttempts = 1 }),
		Bus: "b", Queue: 2, Attempts: 2, Backoff: time.Millisecond, Metrics: &c})
	hub := events.NewHub(events.Config{FirstID: 1, Sinks: []events.Sink{p}})
	for range 5 {
		hub.Publish("0123456789abcdef", "https://example.com/a.git", refUpdates(1, 4))
	}
	if d := c.Total("EventsDropped/eventbridge"); d != 3 {
		t.Fatalf("%v dropped with a queue of 2, want 3", d)
	}
	fake.FailEntries(2, "InternalFailure") // both queued entries, first try
	fake.FailEntries(1, "InternalFailure") // the first again: its attempts are spent
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	eventuallyTrue(t, "one delivered, one dropped", func() bool {
		return c.Total("EventsDelivered/eventbridge") == 1 && c.Total("EventsDropped/eventbridge") == 4
	})
	if len(fake.Entries()) != 1 {
		t.Fatalf("%d entries accepted", len(fake.Entries()))
	}
}

// The queue is bounded by bytes too: entries of up to 256 KB make a count alone no bound.
func TestEventBridgeQueueBytes(t *testing.T) {
	var c metrics.Tally
	p := events.NewEventBridge(events.EventBridgeConfig{Client: nil, Bus: "b", QueueBytes: 300 << 10, Metrics: &c})
	hub := events.NewHub(events.Config{FirstID: 1, Sinks: []events.Sink{p}})
	for range 3 {
		hub.Publish("0123456789abcdef", "https://example.com/a.git", refUpdates(900, 200)) // ~200 KB each
	}
	if p.Pending() != 1 || c.Total("EventsDropped/eventbridge") != 2 {
		t.Fatalf("%d pending, %v dropped; want 1 and 2", p.Pending(), c.Total("EventsDropped/eventbridge"))
	}
}
