package main

import (
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

func TestEventsSSESection(t *testing.T) {
	s := results.EventsSSE{Repos: 50, Pushes: 200, Workers: 3, GoalMs: 100,
		RefToEventMs:     results.EventLatencyMs{P50: 10.57, P90: 35.51, P99: 101.85, Max: 250.22, Mean: 18.16},
		PublishToEventMs: results.EventLatencyMs{P50: 0.47, P90: 6.39, P99: 26.21, Max: 52.51, Mean: 2.33},
		Notes:            []string{"one push at a time"}}
	r := &Report{Results: t.TempDir(), Out: t.TempDir()}
	if err := results.Write(r.Results, "events", results.Events{Meta: results.Meta{Date: "2026-11-28T07:09:38Z"}, SSE: &s}); err != nil {
		t.Fatal(err)
	}
	md, meta, err := eventsSection(r)
	if err != nil || meta.Date != "2026-11-28T07:09:38Z" {
		t.Fatal(err, meta)
	}
	for _, want := range []string{"## 9. Events", "3 workers and 50 repos", "200 pushes",
		"| ref written → event read | 10.6 | 35.5 | 102 | 250 | 18.2 |",
		"| publish → event read | 0.470 | 6.39 | 26.2 | 52.5 | 2.33 |",
		"Met at the median (10.6 ms), not at the p99 (102 ms).", "- one push at a time"} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in:\n%s", want, md)
		}
	}
	// Newer runs measure from the ref's rename and give the file's write beside it.
	s.RefWriteToEventMs = &results.EventLatencyMs{P50: 14.2, P90: 40, P99: 190.5, Max: 300, Mean: 25}
	md, _ = eventsSSE(s)
	for _, want := range []string{"From a ref update in a mirror (the rename that puts the new ref in place",
		"| ref update → event read | 10.6 | 35.5 | 102 | 250 | 18.2 |",
		"| ref file written (before its fsync and rename) → event read | 14.2 | 40.0 | 190 | 300 | 25.0 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| ref written → event read |") {
		t.Error("the older row is still there")
	}
	s.RefToEventMs.P99 = 80
	if md, _ := eventsSSE(s); !strings.Contains(md, "Met: the p99 is 80.0 ms.") {
		t.Errorf("goal met: %s", md)
	}
	s.RefToEventMs.P50 = 120
	if md, _ := eventsSSE(s); !strings.Contains(md, "Not met: the median is 120 ms.") {
		t.Errorf("goal missed: %s", md)
	}
	if _, err := eventsSSE(results.EventsSSE{}); err == nil {
		t.Error("an empty run rendered")
	}
}

func TestEventsHooksSection(t *testing.T) {
	h := results.EventsHooks{Repos: 1000, HookedRepos: 50, Pushes: 200, Syncs: 50, Workers: 3, GoalP50Ms: 1000, GoalP99Ms: 3000,
		HookToServedMs: results.EventLatencyMs{P50: 371, P90: 500, P99: 717, Max: 900, Mean: 400},
		SyncToServedMs: results.EventLatencyMs{P50: 431, P90: 600, P99: 3500, Max: 4000, Mean: 500}}
	md, err := eventsHooks(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mirroring 1,000 repos", "Hook: p50 371 ms ✅, p99 717 ms ✅", "Sync: p50 431 ms ✅, p99 3500 ms ❌",
		"| hook → served | 371 | 500 | 717 | 900 | 400 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in:\n%s", want, md)
		}
	}
	if strings.Contains(md, "spread evenly") || !strings.Contains(md, "then 50 pushes followed by `repos sync`") {
		t.Error("an older run is described as interleaved")
	}
	h.Interleaved = true
	if md, _ := eventsHooks(h); !strings.Contains(md, "among them, spread evenly, 50 more pushes followed by `repos sync`") {
		t.Errorf("interleaved run not described: %s", md)
	}
	if _, err := eventsHooks(results.EventsHooks{}); err == nil {
		t.Error("an empty hook run rendered")
	}
}

func TestEventsAWSHookSection(t *testing.T) {
	h := results.EventsAWSHook{Pushes: 5, HookToFetchedMs: []float64{531, 700, 865, 900, 2075}, MedianMs: 865, MaxMs: 2075,
		SyncToFetchedMs: 813, HeartbeatMs: 10000, SignalEveryMs: 1000, Notes: []string{"e2e tier"}}
	r := &Report{Results: t.TempDir(), Out: t.TempDir()}
	if err := results.Write(r.Results, "events", results.Events{Meta: results.Meta{Date: "2026-11-28T07:09:38Z"}, AWSHook: &h}); err != nil {
		t.Fatal(err)
	}
	md, _, err := eventsSection(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Events in on AWS", "5 pushes: median 865 ms, max 2075 ms", "one `repos sync`: 813 ms",
		"every 1000 ms", "within one heartbeat (10000 ms) ✅", "- e2e tier"} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in:\n%s", want, md)
		}
	}
	h.MaxMs = 12000
	if md, _ := eventsAWSHook(h); !strings.Contains(md, "❌") {
		t.Errorf("a push past the heartbeat: %s", md)
	}
	if _, err := eventsAWSHook(results.EventsAWSHook{}); err == nil {
		t.Error("an empty run rendered")
	}
}
