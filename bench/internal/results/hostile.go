package results

// Hostile is bench/results/hostile.json: what hostile upstreams, a hostile list and
// hostile clients did to a fleet, and what the chaos runs of the simulation found.
type Hostile struct {
	Meta Meta `json:"meta"`
	// Limits are the limits in force, name and value as the flags spell them.
	Limits    []HostileLimit  `json:"limits"`
	Upstreams []HostileAttack `json:"upstreams"`
	List      HostileList     `json:"list"`
	Clients   []HostileAttack `json:"clients"`
	Chaos     []HostileChaos  `json:"chaos"`
	// Serving is hostile clients of the git front (issue 23); nil in results from
	// before it.
	Serving *HostileServing `json:"serving,omitempty"`
	Notes   []string        `json:"notes,omitempty"`
}

// HostileServing is hostile clients against `mirrorfleet serve` with default limits
// (a fresh front process and an empty cache for each scenario).
type HostileServing struct {
	MirrorBytes int64 `json:"mirror_bytes"` // pack bytes of the mirror served
	// PeakFrontRSSMiB is the front process's peak resident set (VmHWM) over every
	// scenario; the git processes it runs are not in it.
	PeakFrontRSSMiB float64        `json:"peak_front_rss_mib"`
	Scenarios       []HostileServe `json:"scenarios"`
}

// HostileServe is one serving scenario and what came of it.
type HostileServe struct {
	Name    string  `json:"name"`
	What    string  `json:"what"`
	Sent    int     `json:"sent"`             // requests or connections
	Refused int     `json:"refused"`          // answered 429 or 503
	Outcome string  `json:"outcome"`          // what the scenario checks, in words
	Detail  string  `json:"detail,omitempty"` // the honest client's view
	Seconds float64 `json:"seconds"`
	// FrontRSSPeakMiB is the front process's VmHWM at the scenario's end.
	FrontRSSPeakMiB float64 `json:"front_rss_peak_mib"`
	// GitProcessesAfter is the git processes (upload-pack, the hook, pack-objects)
	// of the front still running 5 s after the clients left; -1: not counted.
	GitProcessesAfter int `json:"git_processes_after"`
	// Cache files: the most seen on disk during the scenario (sampled) and the
	// entry bound in force; 0 when not looked at.
	CacheFilesPeak  int `json:"cache_files_peak,omitempty"`
	CacheEntryBound int `json:"cache_entry_bound,omitempty"`
}

// HostileLimit is one limit in force during the attacks.
type HostileLimit struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// HostileAttack is one attack and what came of it.
type HostileAttack struct {
	Name string `json:"name"`
	What string `json:"what"`
	// Refused: the attack was refused or cut as it should be (the outcome is a
	// classified error, a 4xx, or connections the server closed).
	Refused bool    `json:"refused"`
	Outcome string  `json:"outcome"`          // the error kind or the HTTP status
	Detail  string  `json:"detail,omitempty"` // the message, cut
	Seconds float64 `json:"seconds"`          // until refused (or done)
	// HeapPeakMiB is the Go heap's peak during the attack (whole process: the fleet,
	// and the attacker, which runs in it); RSSPeakMiB the resident set's, when the
	// kernel lets the peak be reset per attack (0 otherwise).
	HeapPeakMiB float64 `json:"heap_peak_mib"`
	RSSPeakMiB  float64 `json:"rss_peak_mib,omitempty"`
	// For client attacks: requests or connections sent, and how many the server
	// refused or closed.
	Sent    int `json:"sent,omitempty"`
	Handled int `json:"handled,omitempty"`
}

// HostileList is a list repository of bad lines, synced once.
type HostileList struct {
	Bytes       int64   `json:"bytes"`      // of the list file
	PackBytes   int64   `json:"pack_bytes"` // of the list repository as fetched
	Lines       int     `json:"lines"`      // in the list
	BadLines    int     `json:"bad_lines"`  // counted
	Kept        int     `json:"kept"`       // kept for the status
	Applied     int     `json:"applied"`    // good URLs added
	Seconds     float64 `json:"seconds"`    // of the sync
	HeapPeakMiB float64 `json:"heap_peak_mib"`
	RSSPeakMiB  float64 `json:"rss_peak_mib,omitempty"`
}

// HostileChaos is one chaos run of the simulation (sim.Chaos).
type HostileChaos struct {
	Store              string         `json:"store"`
	ClockSkewSeconds   float64        `json:"clock_skew_seconds"`
	Rounds             int            `json:"rounds"`
	Kills              map[string]int `json:"kills"` // by stage: "<stage>/clone|fetch"
	Restarts           int            `json:"restarts"`
	CoordinatorCrashes int            `json:"coordinator_crashes"`
	StoreCalls         int            `json:"store_calls,omitempty"`
	Throttled          int            `json:"throttled,omitempty"`
	StoreErrors        map[string]int `json:"store_errors"` // reached the fleet's code, by where
	Repos              int            `json:"repos"`
	Added              int            `json:"added"`
	Deleted            int            `json:"deleted"`
	Lost               int            `json:"lost"`
	LeftOver           int            `json:"left_over"`
	NotMirrored        int            `json:"not_mirrored"`
	Violations         string         `json:"violations,omitempty"` // an invariant broken, "" when none
	Seconds            float64        `json:"seconds"`
}
