package results

// Serve is bench/results/serve.json: cloning one generated mirror through the fleet's
// git front (`mirrorfleet serve`: upload-pack behind the front, with the pack cache)
// against plain `git http-backend` on the same directory, each server in a process of
// its own whose CPU (with every git process it ran) and memory are measured.
type Serve struct {
	Meta       Meta      `json:"meta"`
	GitVersion string    `json:"git_version"`
	Repo       ServeRepo `json:"repo"`
	// Clients is how many identical clones run at once in the concurrent test.
	Clients int `json:"clients"`
	// CloneRuns is how many cold clones each server served (medians).
	CloneRuns int     `json:"clone_runs"`
	LoadStart float64 `json:"load_start"` // 1-minute load average at the start
	LoadEnd   float64 `json:"load_end"`
	// States are the mirror as the fetcher leaves it ("unmaintained": go-git's packs,
	// no bitmap) and after maintenance ("maintained": repacked, with a bitmap).
	States []ServeState `json:"states"`
	// Slow is the maintained mirror served to one client reading at a trickle while
	// identical requests run (issue 23); nil in results from before it.
	Slow  *ServeSlow `json:"slow,omitempty"`
	Notes []string   `json:"notes"`
}

// ServeSlow is each operation's time alone and beside one slow client making the
// identical request through the front (a fresh front and an empty cache each time).
type ServeSlow struct {
	RateBytesPerSecond int         `json:"rate_bytes_per_second"` // the slow client's reading
	Runs               int         `json:"runs"`                  // of each operation, alone and beside it
	Clone              ServeSlowOp `json:"clone"`
	Fetch              ServeSlowOp `json:"fetch"`
}

// ServeSlowOp is one operation alone and beside the slow client (medians).
type ServeSlowOp struct {
	What            string    `json:"what"`
	ResponseBytes   int64     `json:"response_bytes"` // what one client receives
	AloneSeconds    float64   `json:"alone_seconds"`
	AloneAll        []float64 `json:"alone_seconds_all"`
	WithSlowSeconds float64   `json:"with_slow_seconds"`
	WithSlowAll     []float64 `json:"with_slow_seconds_all"`
	Ratio           float64   `json:"ratio"` // with the slow client ÷ alone
	// SlowBytes is what the slow client had received when the operation finished.
	SlowBytes int64 `json:"slow_bytes"`
}

// ServeRepo describes the generated mirror.
type ServeRepo struct {
	PackBytes       int64   `json:"pack_bytes"`
	Commits         int     `json:"commits"`
	Refs            int     `json:"refs"`
	GenerateSeconds float64 `json:"generate_seconds"`
}

// ServeState is every measurement on one state of the mirror.
type ServeState struct {
	Name   string `json:"name"`   // unmaintained, maintained
	Packs  int    `json:"packs"`  // pack files in the mirror
	Bitmap bool   `json:"bitmap"` // a (multi-)pack bitmap exists
	// Clone is one cold full clone (`git clone --mirror`), the pack cache empty.
	Clone ServePair `json:"clone"`
	// Concurrent is Clients identical clones at once, the pack cache empty at the start.
	Concurrent ServePair `json:"concurrent"`
	// Fetch is `git fetch` in an up-to-date clone after a small upstream change.
	Fetch ServePair `json:"fetch"`
	// Shallow is `git clone --depth 1`.
	Shallow ServePair `json:"shallow"`
}

// ServePair is one operation against both servers, and the front's ratios over
// http-backend (below 1: the front is cheaper).
type ServePair struct {
	Front     ServeRun `json:"front"`
	Backend   ServeRun `json:"backend"`
	WallRatio float64  `json:"wall_ratio"`
	CPURatio  float64  `json:"cpu_ratio"`
}

// ServeRun is what one server did for one operation (medians over the runs).
type ServeRun struct {
	Server      string    `json:"server"`
	Runs        int       `json:"runs"`
	WallSeconds float64   `json:"wall_seconds"` // client's view: until the last clone finished
	WallAll     []float64 `json:"wall_seconds_all"`
	// ServerCPUSeconds is user + system time of the server process and every process
	// it ran (upload-pack, pack-objects, the hook), over the operation.
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
	// PeakServerRSSBytes is the peak of the server's process tree's summed resident
	// sets, sampled every 10 ms.
	PeakServerRSSBytes int64 `json:"peak_server_rss_bytes"`
	// The pack cache (front only): packs served from it and generated, and the bytes
	// it holds afterwards (all written during the operation: it starts empty).
	CacheHits      int   `json:"cache_hits"`
	CacheMisses    int   `json:"cache_misses"`
	CacheDiskBytes int64 `json:"cache_disk_bytes"`
}
