package results

// Events is bench/results/events.json: the event-driven paths of issue 21.
type Events struct {
	Meta Meta       `json:"meta"`
	SSE  *EventsSSE `json:"sse,omitempty"`
}

// EventsSSE is the outgoing side: from a ref moving in a mirror to the mirror.updated
// event read by a client of GET /v1/events, on a local fleet.
type EventsSSE struct {
	Repos   int `json:"repos"`
	Pushes  int `json:"pushes"`
	Workers int `json:"workers"`
	// RefToEventMs: from the mirror's ref file being written (its mtime) to the event
	// parsed by the SSE client. PublishToEventMs: from the event's "at" (stamped when
	// the hub published it) to the same moment: the hub and the stream alone.
	RefToEventMs     EventLatencyMs `json:"ref_to_event_ms"`
	PublishToEventMs EventLatencyMs `json:"publish_to_event_ms"`
	GoalMs           float64        `json:"goal_ms"` // the goal for RefToEventMs
	Notes            []string       `json:"notes,omitempty"`
}

// EventLatencyMs summarizes latencies in milliseconds.
type EventLatencyMs struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}
