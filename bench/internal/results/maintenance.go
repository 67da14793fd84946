package results

// Maintenance is bench/maintenance's result: what polls, fetches, maintenance and a
// served clone read of a mirror that is out of the page cache, per git step and per
// file, and how many mirrors a worker maintains per CPU-second.
type Maintenance struct {
	Meta       Meta   `json:"meta"`
	GitVersion string `json:"git_version"`
	// PageCache says how reads were seen: "mincore" (the files were evicted from the
	// page cache before each measured step, and what came back was read).
	PageCache string          `json:"page_cache"`
	Repo      MaintenanceRepo `json:"repo"`
	// Scenarios, in the order run: no-change poll and sync, maintenance of an
	// unchanged mirror, fetch of a small change, maintenance of the changed mirror,
	// the scrub, and clones served with and without a bitmap.
	Scenarios  []MaintenanceScenario `json:"scenarios"`
	Throughput MaintenanceThroughput `json:"throughput"`
	Schedule   MaintenanceSchedule   `json:"schedule"`
	// NewerGit says what newer git versions change in these steps (from git's release
	// notes and documentation).
	NewerGit []string `json:"newer_git"`
	Notes    []string `json:"notes"`
}

// MaintenanceRepo is the generated mirror the scenarios read.
type MaintenanceRepo struct {
	PackBytes  int64 `json:"pack_bytes"` // its packs after the first maintenance
	Commits    int   `json:"commits"`
	Refs       int   `json:"refs"`
	SmallPacks int   `json:"small_packs"` // changes fetched (one go-git pack each) before the changed maintenance
}

// MaintenanceScenario is one operation on the evicted mirror.
type MaintenanceScenario struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// GitRuns are the git processes started (maintenance steps, or the upload-pack of
	// a clone); 0 for go-git's fetches and for skipped maintenance.
	GitRuns int `json:"git_runs"`
	// ReadBytes are the bytes of files that existed before the operation found in the
	// page cache after it (whole pages, with the kernel's read-ahead): what it read.
	// With Steps, the sum of the steps' (each measured from an evicted cache).
	ReadBytes int64 `json:"read_bytes"`
	// OldPackReadBytes are the part of ReadBytes from the pack files (.pack) that
	// predate the change: the cold data that should stay unread.
	OldPackReadBytes int64   `json:"old_pack_read_bytes"`
	OldPackBytes     int64   `json:"old_pack_bytes"` // their size
	CPUSeconds       float64 `json:"cpu_seconds"`    // user+system, this process and its children
	WallSeconds      float64 `json:"wall_seconds"`
	// Files are what was read, per file (only files with bytes read).
	Files []MaintenanceFile `json:"files,omitempty"`
	Steps []MaintenanceStep `json:"steps,omitempty"`
}

// MaintenanceStep is one git step of a maintenance run, measured on its own (the
// mirror evicted just before it).
type MaintenanceStep struct {
	Name             string            `json:"name"`
	Command          string            `json:"command"`
	ReadBytes        int64             `json:"read_bytes"`
	OldPackReadBytes int64             `json:"old_pack_read_bytes"`
	CPUSeconds       float64           `json:"cpu_seconds"`
	WallSeconds      float64           `json:"wall_seconds"`
	Files            []MaintenanceFile `json:"files,omitempty"`
	// Why says why the step reads what it reads.
	Why string `json:"why"`
}

// MaintenanceFile is the bytes read of one file of the mirror.
type MaintenanceFile struct {
	Path    string `json:"path"` // relative to the mirror
	Size    int64  `json:"size"`
	Read    int64  `json:"read"`
	OldPack bool   `json:"old_pack,omitempty"`
}

// MaintenanceThroughput is how many mirrors one CPU-second maintains.
type MaintenanceThroughput struct {
	UnchangedRuns         int     `json:"unchanged_runs"`
	UnchangedCPUSeconds   float64 `json:"unchanged_cpu_seconds"` // per mirror
	UnchangedPerCPUSecond float64 `json:"unchanged_per_cpu_second"`
	ChangedRuns           int     `json:"changed_runs"`
	ChangedCPUSeconds     float64 `json:"changed_cpu_seconds"` // per mirror
	ChangedPerCPUSecond   float64 `json:"changed_per_cpu_second"`
	ScrubCPUSeconds       float64 `json:"scrub_cpu_seconds"` // per mirror of Repo's size
	ScrubPerCPUSecond     float64 `json:"scrub_per_cpu_second"`
	// OldDailyCPUSeconds is what every mirror cost every day before (the whole run on
	// an unchanged mirror: repack with bitmap, commit-graph), per mirror.
	OldDailyCPUSeconds float64 `json:"old_daily_cpu_seconds"`
}

// MaintenanceSchedule checks that maintenance keeps up with a fleet: each mirror
// considered daily, the changed ones maintained, a scrub per ScrubDays.
type MaintenanceSchedule struct {
	Repos            int     `json:"repos"`
	Workers          int     `json:"workers"`     // the stack's maxWorkers (infra/props.go)
	WorkerVCPU       float64 `json:"worker_vcpu"` // a worker task's vCPU (WorkerCPU / 1024)
	ChangedShare     float64 `json:"changed_share"`
	ScrubDays        float64 `json:"scrub_days"`
	UnchangedPerDay  float64 `json:"unchanged_per_day"`
	ChangedPerDay    float64 `json:"changed_per_day"`
	ScrubsPerDay     float64 `json:"scrubs_per_day"`
	CPUSecondsPerDay float64 `json:"cpu_seconds_per_day"` // maintenance, all workers
	// CapacityCPUSecondsPerDay is Workers × WorkerVCPU × 86400.
	CapacityCPUSecondsPerDay float64 `json:"capacity_cpu_seconds_per_day"`
	Share                    float64 `json:"share"` // CPUSecondsPerDay / capacity
	// OldCPUSecondsPerDay is the same fleet with the whole run on every mirror daily.
	OldCPUSecondsPerDay float64 `json:"old_cpu_seconds_per_day"`
	OldShare            float64 `json:"old_share"`
}
