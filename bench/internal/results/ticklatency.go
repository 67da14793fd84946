package results

// TickLatency is bench/results/ticklatency.json: the wall-clock latency of one
// coordinator tick (coordinator.Tick, the code the Lambda runs) against the number of
// repos, workers and changes, beside a naive coordinator that reads every repo each tick.
type TickLatency struct {
	Meta  Meta   `json:"meta"`
	Seed  uint64 `json:"seed"`
	Store string `json:"store"` // the backend of Cells, e.g. "bbolt (NoSync, temp dir)"
	// Repos and Workers are the grid that was run; Cells holds one entry per pair.
	Repos   []int `json:"repos"`
	Workers []int `json:"workers"`
	// NotRun lists grid points left out and why (e.g. 1M repos over the time budget).
	NotRun []string      `json:"not_run,omitempty"`
	Cells  []TickCell    `json:"cells"`
	Dynamo *TickDynamo   `json:"dynamo,omitempty"`
	Notes  []string      `json:"notes,omitempty"` // how the run was set up, for the report
	Kinds  []ChangeKind  `json:"kinds"`           // the change kinds of TickCell.Changes
	Setup  []SetupTiming `json:"setup,omitempty"` // untimed-part costs, for the curious
	// BulkAdd: each fleet's setup seen as a bulk add (every repo pending at once, assigned
	// by the coordinator's own ticks in its batches), on every store.
	BulkAdd []TickBulkAdd `json:"bulk_add,omitempty"`
	// RestartBacklog: a worker restarted with a large outbox backlog, heartbeating while
	// it catches up, on each store measured.
	RestartBacklog []RestartBacklog `json:"restart_backlog,omitempty"`
	// TickBudgetS is the coordinator's budget for a tick's repo work, in seconds (its
	// Config.Budget; the runs have no context deadline).
	TickBudgetS float64 `json:"tick_budget_s,omitempty"`
}

// TickBulkAdd is one bulk add: Repos pending repos and Workers new workers at once, ticked
// until the fleet settled.
type TickBulkAdd struct {
	Store   string `json:"store"` // "bbolt", "DynamoDB Local"
	Repos   int    `json:"repos"`
	Workers int    `json:"workers"`
	// TicksUntilAssigned counts the ticks until no repo was pending; Ticks until the fleet
	// settled (outboxes acked and trimmed, nothing left to write).
	TicksUntilAssigned int     `json:"ticks_until_assigned"`
	Ticks              int     `json:"ticks"`
	SlowestTickMs      float64 `json:"slowest_tick_ms"`
	// TicksCut counts the ticks that stopped their repo work at a cap or the deadline
	// (Report.Cut); the work resumed next tick.
	TicksCut    int     `json:"ticks_cut"`
	PeakHeapMiB float64 `json:"peak_heap_mib"` // largest Go heap seen during a tick
	Seconds     float64 `json:"seconds"`       // wall clock, heartbeats included
}

// ChangeKind names and explains one kind of change a tick decides.
type ChangeKind struct {
	Name        string `json:"name"` // "add", "delete"
	Description string `json:"description"`
}

// TickCell is one (repos, workers) point of the grid.
type TickCell struct {
	Repos   int `json:"repos"`
	Workers int `json:"workers"`
	// Quiet: ticks where nothing changed (also the k = 0 point of every change kind).
	Quiet Latency `json:"quiet"`
	// QuietWorkerReads is the share of the quiet ticks that read the worker records
	// (heartbeats flow between them; the workers are read when a silence could reach a
	// threshold, not at every heartbeat).
	QuietWorkerReads float64 `json:"quiet_worker_reads"`
	// Changes: ticks deciding exactly K changes of one kind.
	Changes []ChangeLatency `json:"changes"`
	// Join and Death: the ticks that admit a new worker, and those that declare a silent
	// worker dead; both move about Repos/Workers repos.
	Join  Membership `json:"join"`
	Death Membership `json:"death"`
	// Baselines: a naive tick (the same Tick, but reading every repo instead of the
	// indexes) and a bare full scan of the repo table.
	NaiveQuiet Latency `json:"naive_quiet"`
	FullScan   Latency `json:"full_scan"`
}

// Latency summarises the wall-clock durations of repeated operations.
type Latency struct {
	Samples int     `json:"samples"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MeanMs  float64 `json:"mean_ms"`
	MaxMs   float64 `json:"max_ms"`
	// ReposRead is the mean number of repo records the tick read from the store for its
	// own work (scans, the needs-decision index, clean-up); SweepRead those the
	// anti-entropy sweep read in the same ticks (ADR 25), apart.
	ReposRead float64 `json:"repos_read"`
	SweepRead float64 `json:"sweep_read,omitempty"`
	// Writes is the mean number of Apply calls per tick (election write not counted).
	Writes float64 `json:"writes"`
	// PeakHeapMiB is the largest Go heap (live and not yet collected objects) seen while
	// any of the ticks ran, sampled every millisecond.
	PeakHeapMiB float64 `json:"peak_heap_mib,omitempty"`
}

// ChangeLatency is the latency of ticks that each decide K changes of Kind.
type ChangeLatency struct {
	Kind string `json:"kind"`
	K    int    `json:"k"`
	Latency
	// Decisions is the mean number of repos the tick assigned or deleted (checked = K).
	Decisions float64 `json:"decisions"`
}

// Membership is the cost of joins or deaths. A sample is one change: from the tick that
// changes the ring to the one that finishes its moves (one tick, unless the change
// moves more than a tick's caps or deadline allow). Its time, reads and writes are its
// ticks' summed.
type Membership struct {
	Latency
	Moved float64 `json:"moved"` // mean repos moved per change
	// UsPerMovedP50 is the median over samples of the change's time / repos moved, in µs.
	UsPerMovedP50 float64 `json:"us_per_moved_p50"`
	// Ticks is the mean number of ticks a change took, SlowestTickMs the slowest of them.
	Ticks         float64 `json:"ticks,omitempty"`
	SlowestTickMs float64 `json:"slowest_tick_ms,omitempty"`
}

// TickDynamo is the smaller grid run on DynamoDB Local, if it was.
type TickDynamo struct {
	Skipped string     `json:"skipped,omitempty"` // why it did not run
	Cells   []TickCell `json:"cells,omitempty"`
}

// SetupTiming is how long preparing one grid point took (not measured latency).
type SetupTiming struct {
	Store   string  `json:"store"`
	Repos   int     `json:"repos"`
	Workers int     `json:"workers"`
	Seconds float64 `json:"seconds"`
}

// RestartBacklog is one restart of a worker whose outbox holds Entries entries it has
// not applied: its Heartbeat calls, back to back, until it acked them all (or the run's
// cap). Each entry is an add of a repo the worker does not hold, the costly kind (a repo
// read each). A heartbeat is sent at the start of each call, so the longest call is about
// the longest gap between two heartbeats; LongestGapS is that gap as the store saw it.
type RestartBacklog struct {
	Store        string  `json:"store"`
	Entries      int     `json:"entries"`
	HeartbeatS   float64 `json:"heartbeat_s"` // the worker's heartbeat interval
	Heartbeats   int     `json:"heartbeats"`  // calls made
	LongestCallS float64 `json:"longest_call_s"`
	FirstCallS   float64 `json:"first_call_s"`
	// NextHeartbeatS is the time from the restarted process's first call to the first
	// heartbeat the store accepted from it; LongestGapS the longest time between two
	// heartbeats the store accepted, calls back to back. On the worker's own schedule a
	// heartbeat follows the last one after max(interval, LongestGapS).
	NextHeartbeatS   float64 `json:"next_heartbeat_s"`
	LongestGapS      float64 `json:"longest_heartbeat_gap_s"`
	Applied          int     `json:"applied"`            // entries acked at the end
	CaughtUp         bool    `json:"caught_up"`          // all of them
	EntriesPerSecond float64 `json:"entries_per_second"` // while catching up
	Seconds          float64 `json:"seconds"`
}
