package results

// Placement is placement.json: how evenly each placement scheme spreads the keys over the
// workers, how many keys one join or one leave moves, and what a lookup costs.
type Placement struct {
	Meta    Meta              `json:"meta"`
	Keys    int               `json:"keys"`    // keys placed per run
	Workers []int             `json:"workers"` // worker counts measured, ascending
	Params  PlacementParams   `json:"params"`
	Goal    PlacementGoal     `json:"goal"`
	Schemes []string          `json:"schemes"` // in the order the report shows them
	Noise   []PlacementNoise  `json:"noise"`   // one per worker count
	Runs    []PlacementResult `json:"runs"`    // one per scheme and worker count
}

// PlacementParams are the settings the schemes were measured with.
type PlacementParams struct {
	VNodes     int     `json:"vnodes"`      // virtual nodes per worker of plain-160 and bounded-loads
	LoadFactor float64 `json:"load_factor"` // bounded-loads capacity: ceil(c·keys/workers)
	MemMethod  string  `json:"mem_method"`  // how MemBytes was obtained
	LookupRuns int     `json:"lookup_runs"` // LookupNs is the fastest of this many testing.Benchmark runs
}

// PlacementGoal is the target for our ring ("ours").
type PlacementGoal struct {
	Scheme     string  `json:"scheme"`
	PeakMean   float64 `json:"peak_mean"`   // at most this peak/mean load
	MovedRatio float64 `json:"moved_ratio"` // at most this many times the ideal movement
}

// PlacementNoise is the balance a perfectly uniform random placement of the same number
// of keys gets: the floor that sampling noise puts under every hash-based scheme.
type PlacementNoise struct {
	Workers     int     `json:"workers"`
	Trials      int     `json:"trials"`
	PeakMean    float64 `json:"peak_mean"`     // mean over the trials
	PeakMeanMax float64 `json:"peak_mean_max"` // worst trial
	PeakMeanMin float64 `json:"peak_mean_min"` // best trial
	MeanKeys    float64 `json:"mean_keys"`     // keys per worker
}

// PlacementResult is one scheme at one worker count.
type PlacementResult struct {
	Scheme  string `json:"scheme"`
	Workers int    `json:"workers"`

	PeakMean float64 `json:"peak_mean"` // most keys on one worker / mean keys per worker
	// SharePeakMean is the largest share of the hash space times the worker count: the
	// balance without key-sampling noise. 0 where a scheme has no arcs to measure.
	SharePeakMean float64 `json:"share_peak_mean,omitempty"`
	// KeySetsPeakMean is the mean peak/mean over other key sets of the same size (fresh
	// uniform hashes, PlacementNoise.Trials of them), which separates the scheme's own
	// imbalance from the draw of this key set. 0 where not measured (schemes without arcs).
	KeySetsPeakMean float64 `json:"key_sets_peak_mean,omitempty"`

	JoinMoved int     `json:"join_moved"` // keys whose owner changed when one worker joined
	JoinIdeal float64 `json:"join_ideal"` // keys/(workers+1)
	JoinRatio float64 `json:"join_ratio"` // JoinMoved / JoinIdeal
	JoinStray int     `json:"join_stray"` // moved keys that did not go to the newcomer

	Leaver     string  `json:"leaver"`      // the worker that left
	LeaveMoved int     `json:"leave_moved"` // keys whose owner changed when it left
	LeaveIdeal int     `json:"leave_ideal"` // the keys it owned
	LeaveRatio float64 `json:"leave_ratio"` // LeaveMoved / LeaveIdeal
	LeaveStray int     `json:"leave_stray"` // moved keys that the leaver did not own

	LookupNs     float64 `json:"lookup_ns"`     // ns per lookup of a precomputed key hash
	LookupAllocs int64   `json:"lookup_allocs"` // allocations per lookup
	MemBytes     int64   `json:"mem_bytes"`     // size of the structure (see PlacementParams.MemMethod)
	Tokens       int     `json:"tokens,omitempty"`
	Note         string  `json:"note,omitempty"` // how the scheme deviates from the common procedure
}
