package results

// Events is bench/results/events.json: the event-driven paths of issue 21.
type Events struct {
	Meta  Meta         `json:"meta"`
	SSE   *EventsSSE   `json:"sse,omitempty"`
	Hooks *EventsHooks `json:"hooks,omitempty"`
	// AWSHook is written by the functions e2e tier (TestHookReachesTheOwningWorker with
	// MIRRORFLEET_AWS_HOOK_RESULTS set), not by bench/events, which keeps it.
	AWSHook *EventsAWSHook `json:"aws_hook,omitempty"`
}

// EventsAWSHook is the AWS fast path (ADR 21): from a signed push webhook invoking the
// API Lambda bootstrap to the owning worker's mirror holding the commit, through the
// worker's signal item, with no coordinator tick in between.
type EventsAWSHook struct {
	Pushes          int       `json:"pushes"`
	HookToFetchedMs []float64 `json:"hook_to_fetched_ms"` // each push's, in order of size
	MedianMs        float64   `json:"median_ms"`
	MaxMs           float64   `json:"max_ms"`
	SyncToFetchedMs float64   `json:"sync_to_fetched_ms"` // one POST /v1/repos/{id}/sync
	HeartbeatMs     float64   `json:"heartbeat_ms"`       // the worker's heartbeat interval (the goal)
	SignalEveryMs   float64   `json:"signal_every_ms"`    // how often the worker reads its signals
	Notes           []string  `json:"notes,omitempty"`
}

// EventsHooks is the incoming side: from a forge's push webhook (or a sync request) to
// the fleet serving the pushed commit, on a local fleet that polls at the same time.
type EventsHooks struct {
	Repos       int `json:"repos"`        // mirrored by the fleet
	HookedRepos int `json:"hooked_repos"` // the pushes go to these
	Pushes      int `json:"pushes"`       // each followed by a hook
	Syncs       int `json:"syncs"`        // pushes followed by a sync request instead
	Workers     int `json:"workers"`
	// Interleaved: the sync pushes were spread among the hook pushes (both meet the same
	// fleet); false in older results, where the syncs came after all the hooks.
	Interleaved bool `json:"interleaved,omitempty"`
	// HookToServedMs: from the hook's POST to `git ls-remote` of the clone URL showing
	// the commit. SyncToServedMs: the same from POST /v1/repos/{id}/sync.
	HookToServedMs EventLatencyMs `json:"hook_to_served_ms"`
	SyncToServedMs EventLatencyMs `json:"sync_to_served_ms"`
	GoalP50Ms      float64        `json:"goal_p50_ms"`
	GoalP99Ms      float64        `json:"goal_p99_ms"`
	Notes          []string       `json:"notes,omitempty"`
}

// EventsSSE is the outgoing side: from a ref moving in a mirror to the mirror.updated
// event read by a client of GET /v1/events, on a local fleet.
type EventsSSE struct {
	Repos   int `json:"repos"`
	Pushes  int `json:"pushes"`
	Workers int `json:"workers"`
	// RefToEventMs: from the mirror's ref update (the rename that puts the new ref in
	// place, when readers see it) to the event parsed by the SSE client. Results from
	// before ref_write_to_event_ms measured from the ref file's write instead.
	// RefWriteToEventMs: from the ref file's write (its mtime: a temp file, fsynced
	// before the rename) to the same moment. PublishToEventMs: from the event's "at"
	// (stamped when the hub published it) to the same moment: the hub and the stream.
	RefToEventMs      EventLatencyMs  `json:"ref_to_event_ms"`
	RefWriteToEventMs *EventLatencyMs `json:"ref_write_to_event_ms,omitempty"`
	PublishToEventMs  EventLatencyMs  `json:"publish_to_event_ms"`
	GoalMs            float64         `json:"goal_ms"` // the goal for RefToEventMs
	Notes             []string        `json:"notes,omitempty"`
}

// EventLatencyMs summarizes latencies in milliseconds.
type EventLatencyMs struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}
