package results

// FetchCost is bench/results/fetchcost.json: go-git, through the Mirrorer the workers
// run, against the git CLI, on the same generated repositories served by the same
// local `git http-backend` over smart HTTP. Every operation ran in a child process of
// the benchmark, and its memory is that child's rusage.
type FetchCost struct {
	Meta         Meta   `json:"meta"`
	GitVersion   string `json:"git_version"`   // `git --version` of the CLI and of the server
	GoGitVersion string `json:"gogit_version"` // the go-git module version built in
	// PollSeconds is how long each back-to-back poll loop ran.
	PollSeconds float64         `json:"poll_seconds"`
	Worker      FetchCostWorker `json:"worker"`
	// LoadStart and LoadEnd are the 1-minute load averages when the run started and
	// ended: above Meta.Cores, other work competed for the CPU and inflated wall times.
	LoadStart float64         `json:"load_start"`
	LoadEnd   float64         `json:"load_end"`
	Sizes     []FetchCostSize `json:"sizes"`
	// Burst is the burst section (absent from runs before it existed).
	Burst *FetchCostBurst `json:"burst,omitempty"`
	// Notes say what a reader must know to read the figures (sizes capped, caveats).
	Notes []string `json:"notes"`
}

// FetchCostWorker is the production worker the figures are read against.
type FetchCostWorker struct {
	Fetchers           int     `json:"fetchers"`             // concurrent fetches (worker.DefaultConfig)
	MinIntervalSeconds float64 `json:"min_interval_seconds"` // a repo is polled at most this often
	TaskVCPU           float64 `json:"task_vcpu"`            // the default Fargate task (infra Props.Defaults)
	TaskMemoryMiB      int     `json:"task_memory_mib"`
}

// FetchCostSize is every measurement on one generated repository.
type FetchCostSize struct {
	Name        string        `json:"name"`         // small, medium, large
	TargetBytes int64         `json:"target_bytes"` // the pack size asked of the generator
	Repo        FetchCostRepo `json:"repo"`
	// Clone is the initial mirror: Mirrorer.Sync of a new repo against
	// `git clone --mirror`.
	Clone FetchCostPair `json:"clone"`
	// Fetch is the sync after a small upstream change (one commit, three files):
	// Mirrorer.Sync against `git fetch --prune` in the CLI's mirror.
	Fetch FetchCostPair  `json:"fetch"`
	Polls FetchCostPolls `json:"polls"`
}

// FetchCostRepo describes a generated upstream repository.
type FetchCostRepo struct {
	Commits         int     `json:"commits"`
	TextFiles       int     `json:"text_files"`   // text files of the first commit
	BinaryBytes     int64   `json:"binary_bytes"` // incompressible asset bytes over the history
	Objects         int     `json:"objects"`
	Refs            int     `json:"refs"`
	PackBytes       int64   `json:"pack_bytes"` // the served repository's pack files
	GenerateSeconds float64 `json:"generate_seconds"`
}

// FetchCostRun is one side of one operation. Times and memory are medians over Runs.
type FetchCostRun struct {
	Command        string    `json:"command"`
	Runs           int       `json:"runs"`
	WallSeconds    float64   `json:"wall_seconds"`
	WallSecondsAll []float64 `json:"wall_seconds_all"`
	CPUSeconds     float64   `json:"cpu_seconds"` // user + system, child processes included
	// MaxRSSBytes is ru_maxrss: the largest single process of the operation.
	MaxRSSBytes int64 `json:"max_rss_bytes"`
	// TreeRSSBytes is the peak sum over the operation's live processes, sampled every
	// 10 ms (git runs several processes at once; go-git one).
	TreeRSSBytes int64 `json:"tree_rss_bytes"`
	// DiskBytes is the resulting mirror's allocated size (as du counts); ApparentBytes
	// the sum of its file sizes; PackBytes the part in pack files.
	DiskBytes     int64 `json:"disk_bytes"`
	ApparentBytes int64 `json:"apparent_bytes"`
	PackBytes     int64 `json:"pack_bytes"`
}

// FetchCostRatios are go-git's figures over the CLI's: above 1, go-git costs more.
type FetchCostRatios struct {
	Wall    float64 `json:"wall"`
	CPU     float64 `json:"cpu"`
	MaxRSS  float64 `json:"max_rss"`
	TreeRSS float64 `json:"tree_rss"`
	Disk    float64 `json:"disk"`
}

// FetchCostPair is one operation measured both ways.
type FetchCostPair struct {
	GoGit FetchCostRun    `json:"gogit"`
	CLI   FetchCostRun    `json:"cli"`
	Ratio FetchCostRatios `json:"ratio"`
}

// FetchCostPoll is one back-to-back loop of no-change polls by one worker.
type FetchCostPoll struct {
	Command   string  `json:"command"`
	Polls     int     `json:"polls"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	// CPUMillisPerPoll is the client's CPU time per poll (the server's is not in it).
	CPUMillisPerPoll float64 `json:"cpu_ms_per_poll"`
	// MaxRSSBytes: for go-git the one long-lived polling process; for the CLI the
	// largest of its per-poll processes.
	MaxRSSBytes int64 `json:"max_rss_bytes"`
}

// FetchCostPolls compares no-change polls: go-git's Mirrorer.Sync against
// `git fetch --prune` in the mirror and against `git ls-remote`. GoGitList is go-git's
// ref listing alone (Remote.List, no mirror opened): what Sync adds to it is the
// mirror's side of a poll.
type FetchCostPolls struct {
	GoGit     FetchCostPoll `json:"gogit"`
	GoGitList FetchCostPoll `json:"gogit_list"`
	GitFetch  FetchCostPoll `json:"git_fetch"`
	LsRemote  FetchCostPoll `json:"ls_remote"`
	// RateVs* are go-git's polls per second over the CLI's: above 1, go-git polls faster.
	RateVsFetch    float64 `json:"rate_vs_fetch"`
	RateVsLsRemote float64 `json:"rate_vs_ls_remote"`
	// CPUVs* are go-git's CPU per poll over the CLI's: above 1, go-git costs more.
	CPUVsFetch    float64 `json:"cpu_vs_fetch"`
	CPUVsLsRemote float64 `json:"cpu_vs_ls_remote"`
}

// FetchCostBurst is the burst section: several first mirrors of one large repository
// started at once in one process, as a worker starts them on a bulk import, with and
// without a memory budget (shared/membudget: each fetch reserves, waits, grows at its
// pack header).
type FetchCostBurst struct {
	Meta    Meta          `json:"meta"` // the burst may be run alone (-sections burst)
	Repo    FetchCostRepo `json:"repo"`
	Mirrors int           `json:"mirrors"` // first mirrors started at once
	// Budgeted ran with BudgetBytes; Unbudgeted with no budget.
	BudgetBytes int64             `json:"budget_bytes"`
	Budgeted    FetchCostBurstRun `json:"budgeted"`
	Unbudgeted  FetchCostBurstRun `json:"unbudgeted"`
	// TreeRSSOverBudget is the budgeted run's peak resident memory over the budget
	// (goal ≤ 1.25); TimeRatio its wall time over the unbudgeted run's (goal ≤ 1.5).
	TreeRSSOverBudget float64 `json:"tree_rss_over_budget"`
	TimeRatio         float64 `json:"time_ratio"`
}

// FetchCostBurstRun is one burst.
type FetchCostBurstRun struct {
	BudgetBytes     int64   `json:"budget_bytes"`     // 0: none
	GoMemLimitBytes int64   `json:"gomemlimit_bytes"` // the Go runtime's soft limit (0: none)
	Completed       int     `json:"completed"`        // mirrors made (each checked against the upstream's refs)
	WallSeconds     float64 `json:"wall_seconds"`
	CPUSeconds      float64 `json:"cpu_seconds"`
	MaxRSSBytes     int64   `json:"max_rss_bytes"`
	TreeRSSBytes    int64   `json:"tree_rss_bytes"`
	// PeakReservedBytes is the most the fetches held reserved at once; MaxWaiting the
	// most fetches waiting for memory at once (sampled every 10 ms).
	PeakReservedBytes int64 `json:"peak_reserved_bytes"`
	MaxWaiting        int   `json:"max_waiting"`
}
