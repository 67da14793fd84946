// Package deployenv is the environment contract between the CDK stack (infra/) and the
// binaries it deploys: the name of every variable, and, per component, the environment
// a deployment's settings turn into. The stack builds each function's and container's
// environment with Coordinator.Env, API.Env, Worker.Env and Serve.Env; the binaries
// read the same names (shared/cloud, shared/listsync); the end-to-end tests run the
// built Lambda binaries with what Env returns. A name is written once, here.
//
// The package imports nothing of the domain, so the CDK app links only this.
package deployenv

import (
	"errors"
	"maps"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Variables every binary reads.
const (
	Table             = "MIRRORFLEET_TABLE"               // DynamoDB table of the fleet's state
	Fleet             = "MIRRORFLEET_FLEET"               // Fleet dimension of the metrics
	LogLevel          = "MIRRORFLEET_LOG_LEVEL"           // debug, info, warn, error
	AllowPrivateHosts = "MIRRORFLEET_ALLOW_PRIVATE_HOSTS" // let repos on private addresses through the URL policy
	// CaseInsensitiveHosts: comma-separated hosts, besides github.com and gitlab.com,
	// whose repository paths are case-insensitive (one repo whatever the case).
	CaseInsensitiveHosts = "MIRRORFLEET_CASE_INSENSITIVE_HOSTS"
)

// Variables of the coordinator Lambda.
const (
	ScheduleGroup    = "MIRRORFLEET_SCHEDULE_GROUP"     // Scheduler group of the timers
	SchedulerRoleARN = "MIRRORFLEET_SCHEDULER_ROLE_ARN" // role Scheduler assumes to invoke the coordinator
	TimerDLQARN      = "MIRRORFLEET_TIMER_DLQ_ARN"      // SQS queue for undeliverable firings
	Grace            = "MIRRORFLEET_GRACE"              // silence before a worker's repos move
	Warmup           = "MIRRORFLEET_WARMUP"             // first-start wait; 0 = none
	SuspectAfter     = "MIRRORFLEET_SUSPECT_AFTER"      // silence before a worker is suspect
	Lease            = "MIRRORFLEET_LEASE"              // leadership lease; > the tick period
)

// Variables of the list sync (coordinator; the API reports its configuration).
const (
	ListRepo           = "MIRRORFLEET_LIST_REPO"            // list repository URL; empty: no list sync
	ListBranch         = "MIRRORFLEET_LIST_BRANCH"          // branch; empty: the repository's HEAD
	ListPath           = "MIRRORFLEET_LIST_PATH"            // comma-separated files or directories
	ListInterval       = "MIRRORFLEET_LIST_INTERVAL"        // Go duration, e.g. 5m
	ListPurgeThreshold = "MIRRORFLEET_LIST_PURGE_THRESHOLD" // percent, e.g. 5 or 5%
	ListDir            = "MIRRORFLEET_LIST_DIR"             // where the clone is kept
	ListMaxBytes       = "MIRRORFLEET_LIST_MAX_BYTES"       // bytes of the list files, in all
	ListMaxURLs        = "MIRRORFLEET_LIST_MAX_URLS"        // valid URLs in the list
)

// Variables of the API Lambda.
const (
	APIBasePath  = "MIRRORFLEET_API_BASE_PATH"  // path prefix API Gateway puts before the API's paths
	PublicReads  = "MIRRORFLEET_PUBLIC_READS"   // /v1 reads without an IAM identity
	CloneBaseURL = "MIRRORFLEET_CLONE_BASE_URL" // clone URL of a repo: <base>/git/<mirror path>
	// WebhookSecretARN names the Secrets Manager secret holding the forges' webhook
	// secret(s), read at cold start; never the value itself. Empty: hooks answer 403.
	WebhookSecretARN = "MIRRORFLEET_WEBHOOK_SECRET_ARN"
	// WebhookSecretTTL is how long the API uses a value it read of that secret before
	// reading it again: a rotated secret is in use within it. Go duration; default 5m.
	WebhookSecretTTL = "MIRRORFLEET_WEBHOOK_SECRET_TTL"
	// CORSOrigin: comma-separated origins whose pages may read /tunasync.json (CORS);
	// empty: none.
	CORSOrigin = "MIRRORFLEET_CORS_ORIGIN"
	// SiteAbbr and SiteName name the fleet as a mirror site in /mirrorz.json; without
	// SiteAbbr the route answers 404.
	SiteAbbr = "MIRRORFLEET_SITE_ABBR"
	SiteName = "MIRRORFLEET_SITE_NAME"
)

// Variables of the worker.
const (
	MirrorRoot      = "MIRRORFLEET_MIRROR_ROOT"      // shared mirror directory (EFS mount); also the server's
	Fetchers        = "MIRRORFLEET_FETCHERS"         // concurrent fetches
	MemoryBudget    = "MIRRORFLEET_MEMORY_BUDGET"    // memory the fetches may use together; default a share of the cgroup limit
	Heartbeat       = "MIRRORFLEET_HEARTBEAT"        // heartbeat interval
	MinInterval     = "MIRRORFLEET_MIN_INTERVAL"     // per-repo minimum poll interval
	PollBudget      = "MIRRORFLEET_POLL_BUDGET"      // polls per repo per day, averaged over the fleet; unset: none
	DiskQuota       = "MIRRORFLEET_DISK_QUOTA"       // bytes the mirrors may use; 0 = the file system's size (none on an elastic one)
	DiskUsage       = "MIRRORFLEET_DISK_USAGE"       // the file system and how used bytes are measured: walk, statfs or elastic
	WorkerID        = "MIRRORFLEET_WORKER_ID"        // default: the ECS task id, else hostname-pid
	Drain           = "MIRRORFLEET_DRAIN"            // on SIGTERM, how long in-flight fetches may finish
	MetricsInterval = "MIRRORFLEET_METRICS_INTERVAL" // how often EMF metrics are written
	Policy          = "MIRRORFLEET_POLICY"           // when a repo is polled next: bayes (default), rate or cbrt
	AliveFile       = "MIRRORFLEET_ALIVE_FILE"       // touched after each successful heartbeat (container health check)
	MaintainEvery   = "MIRRORFLEET_MAINTAIN_EVERY"   // each mirror is maintained once per this interval
	MaintainPacks   = "MIRRORFLEET_MAINTAIN_PACKS"   // a mirror with this many packs is maintained sooner
	ScrubEvery      = "MIRRORFLEET_SCRUB_EVERY"      // each mirror gets a full run (bitmap, connectivity check) once per this period
	ScrubChanged    = "MIRRORFLEET_SCRUB_CHANGED"    // true: a scrub slot scrubs a mirror only if it was written since its last scrub
	EventBus        = "MIRRORFLEET_EVENT_BUS"        // EventBridge bus (name or ARN) the mirror.updated events go to; empty: none
	Feeds           = "MIRRORFLEET_FEEDS"            // forge change feeds, KIND=URL,KIND=URL (ADR 28); empty: none
	FeedEvery       = "MIRRORFLEET_FEED_EVERY"       // how often each feed is probed
	ForgeTokensARN  = "MIRRORFLEET_FORGE_TOKENS_ARN" // Secrets Manager secret of the feeds' tokens, HOST=TOKEN lines; never the tokens

	// What one upstream can make a fetch receive (mirror.Limits) and politeness per
	// upstream host (worker.Config).
	MaxRefBytes     = "MIRRORFLEET_MAX_REF_BYTES"      // bytes of one ref advertisement
	MaxRefs         = "MIRRORFLEET_MAX_REFS"           // refs in one ref advertisement
	MaxPackBytes    = "MIRRORFLEET_MAX_PACK_BYTES"     // bytes one fetch may receive
	MaxPackBytesFor = "MIRRORFLEET_MAX_PACK_BYTES_FOR" // per repo: URL=SIZE,URL/=SIZE
	MaxPackObjects  = "MIRRORFLEET_MAX_PACK_OBJECTS"   // objects a pack may declare
	MaxObjectBytes  = "MIRRORFLEET_MAX_OBJECT_BYTES"   // bytes one pack object may declare
	MinRate         = "MIRRORFLEET_MIN_RATE"           // bytes a second; slower transfers are cut
	RateWindow      = "MIRRORFLEET_RATE_WINDOW"        // the window MIN_RATE is measured over
	HostConcurrency = "MIRRORFLEET_HOST_CONCURRENCY"   // fetches of one host at a time; -1: no limit
	HostRate        = "MIRRORFLEET_HOST_RATE"          // fetch starts a second on one host; -1: no limit
	HostPause       = "MIRRORFLEET_HOST_PAUSE"         // a host answering 429/503 without Retry-After is left alone this long
)

// Variables of the git server (`mirrorfleet serve`).
const (
	ServeListen    = "MIRRORFLEET_SERVE_LISTEN"     // listen address, default :8080
	PackCacheDir   = "MIRRORFLEET_PACK_CACHE_DIR"   // pack cache on local disk
	PackCacheBytes = "MIRRORFLEET_PACK_CACHE_BYTES" // its size bound
	TrustedProxy   = "MIRRORFLEET_TRUSTED_PROXY"    // proxies whose X-Forwarded-For names the client: CIDRs and TrustedCloudFront, comma-separated
	ServeToken     = "MIRRORFLEET_SERVE_TOKEN"      // optional read token
	// A client's requests past its share wait in a queue of this many (per client) for
	// up to this long (Go duration), then get 429.
	ServeQueuePerClient = "MIRRORFLEET_SERVE_QUEUE_PER_CLIENT"
	ServeQueueWait      = "MIRRORFLEET_SERVE_QUEUE_WAIT"
)

// TrustedCloudFront in TrustedProxy stands for CloudFront's origin-facing addresses, as
// AWS publishes them (ip-ranges.json, service CLOUDFRONT_ORIGIN_FACING): read when the
// server starts.
const TrustedCloudFront = "cloudfront"

// The image both ECS services run (cmd/pushimage builds it; the stack runs
// `mirrorfleet worker` and `mirrorfleet serve` from it).
const (
	ImageBinary = "/usr/local/bin/mirrorfleet" // the static binary, the entrypoint
	ImageUID    = "65532"                      // the nonroot user it runs as; the EFS access point's owner
)

// Disk usage modes (DiskUsage).
const (
	DiskUsageWalk   = "walk"   // under a quota, sum the file sizes under the mirror root (a local disk shared with other data)
	DiskUsageStatfs = "statfs" // under a quota, the file system's own used bytes (a file system holding only the mirrors)
	// DiskUsageElastic is a file system that grows with what it holds (EFS, whose statfs
	// reports exabytes free): no fleet-wide bound unless a quota is set, which is then
	// compared with the file system's own used bytes.
	DiskUsageElastic = "elastic"
)

// NoWarmup is how a zero warm-up is written: the coordinator reads "0" as none.
const NoWarmup = "0"

// Duration writes d as the readers parse it: Go duration syntax.
func Duration(d time.Duration) string { return d.String() }

// WarmupValue writes a warm-up: zero or less is none (NoWarmup), not "0s".
func WarmupValue(d time.Duration) string {
	if d <= 0 {
		return NoWarmup
	}
	return d.String()
}

// set adds name=value when value is not empty: an unset variable takes the binary's
// default, which is documented once, where it is read.
func set(m map[string]string, name, value string) {
	if value != "" {
		m[name] = value
	}
}

func dur(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return Duration(d)
}

func num(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// Common is what every component is told.
type Common struct {
	Table    string
	Fleet    string
	LogLevel string // "" = the binary's default (info)
	// CaseInsensitiveHosts are hosts, besides github.com and gitlab.com, whose
	// repository paths are case-insensitive; every component names repos the same way.
	CaseInsensitiveHosts []string
}

func (c Common) env() map[string]string {
	m := map[string]string{}
	set(m, Table, c.Table)
	set(m, Fleet, c.Fleet)
	set(m, LogLevel, c.LogLevel)
	set(m, CaseInsensitiveHosts, strings.Join(c.CaseInsensitiveHosts, ","))
	return m
}

// List is the list sync's configuration; Repo "" leaves it off.
type List struct {
	Repo, Branch string
	Paths        []string
	Interval     time.Duration
	// PurgeThreshold in percent; nil takes the default (5).
	PurgeThreshold *float64
	Dir            string
}

func (l List) env(m map[string]string) {
	if l.Repo == "" {
		return
	}
	set(m, ListRepo, l.Repo)
	set(m, ListBranch, l.Branch)
	set(m, ListPath, strings.Join(l.Paths, ","))
	set(m, ListInterval, dur(l.Interval))
	if l.PurgeThreshold != nil {
		m[ListPurgeThreshold] = strconv.FormatFloat(*l.PurgeThreshold, 'f', -1, 64)
	}
	set(m, ListDir, l.Dir)
}

// Coordinator is the coordinator Lambda's deployment.
type Coordinator struct {
	Common
	ScheduleGroup    string
	SchedulerRoleARN string
	TimerDLQARN      string
	Grace            time.Duration // 0: the default
	// Warmup is the first-start wait; zero (or less) means none, written as NoWarmup.
	Warmup time.Duration
	List   List
}

// Env is the coordinator's environment.
func (c Coordinator) Env() map[string]string {
	m := c.Common.env()
	set(m, ScheduleGroup, c.ScheduleGroup)
	set(m, SchedulerRoleARN, c.SchedulerRoleARN)
	set(m, TimerDLQARN, c.TimerDLQARN)
	set(m, Grace, dur(c.Grace))
	m[Warmup] = WarmupValue(c.Warmup)
	c.List.env(m)
	return m
}

// API is the API Lambda's deployment.
type API struct {
	Common
	PublicReads  bool
	CloneBaseURL string
	// List: GET /v1/list reports the list sync's configuration.
	List List
	// WebhookSecretARN is the secret of the webhooks (its ARN); "" = hooks off.
	WebhookSecretARN string
	// WebhookSecretTTL is how long a value read of it is used; 0 = the default.
	WebhookSecretTTL time.Duration
	// CORSOrigins may read /tunasync.json from their pages; none = no CORS.
	CORSOrigins []string
	// SiteAbbr and SiteName name the fleet in /mirrorz.json; "" SiteAbbr = off.
	SiteAbbr, SiteName string
}

// Env is the API's environment.
func (a API) Env() map[string]string {
	m := a.Common.env()
	m[PublicReads] = strconv.FormatBool(a.PublicReads)
	set(m, CloneBaseURL, a.CloneBaseURL)
	set(m, WebhookSecretARN, a.WebhookSecretARN)
	set(m, WebhookSecretTTL, dur(a.WebhookSecretTTL))
	set(m, CORSOrigin, strings.Join(a.CORSOrigins, ","))
	set(m, SiteAbbr, a.SiteAbbr)
	set(m, SiteName, a.SiteName)
	a.List.env(m)
	return m
}

// Worker is a fetch worker container's deployment.
type Worker struct {
	Common
	MirrorRoot string
	Fetchers   int
	// MemoryBudget is what the fetches may use together, e.g. 1228M; "" = the worker's
	// default (a share of the container's memory limit).
	MemoryBudget string
	Drain        time.Duration
	DiskQuota    string // e.g. 500G; "" = the file system's size (none on an elastic one)
	DiskUsage    string // DiskUsageWalk, DiskUsageStatfs or DiskUsageElastic; "" = walk
	AliveFile    string
	// PollBudget is the polls per repo per day the workers hold, averaged over the
	// fleet (worker.Config.PollBudget); 0 = no budget.
	PollBudget float64
	// MaintainEvery and ScrubEvery: MIRRORFLEET_MAINTAIN_EVERY and _SCRUB_EVERY; 0 =
	// the worker's defaults. ScrubChanged: MIRRORFLEET_SCRUB_CHANGED.
	MaintainEvery, ScrubEvery time.Duration
	ScrubChanged              bool
	EventBus                  string // name or ARN of the bus the events go to; "" = none
	// Feeds are the forges' change feeds (KIND=URL); FeedEvery their period (0: the
	// worker's default); ForgeTokensARN the secret of their tokens ("" = none).
	Feeds          []string
	FeedEvery      time.Duration
	ForgeTokensARN string
}

// Env is the worker's environment.
func (w Worker) Env() map[string]string {
	m := w.Common.env()
	set(m, MirrorRoot, w.MirrorRoot)
	set(m, Fetchers, num(w.Fetchers))
	set(m, MemoryBudget, w.MemoryBudget)
	set(m, Drain, dur(w.Drain))
	if w.PollBudget > 0 {
		m[PollBudget] = strconv.FormatFloat(w.PollBudget, 'g', -1, 64)
	}
	set(m, DiskQuota, w.DiskQuota)
	set(m, DiskUsage, w.DiskUsage)
	set(m, AliveFile, w.AliveFile)
	set(m, MaintainEvery, dur(w.MaintainEvery))
	set(m, ScrubEvery, dur(w.ScrubEvery))
	if w.ScrubChanged {
		m[ScrubChanged] = "true"
	}
	set(m, EventBus, w.EventBus)
	set(m, Feeds, strings.Join(w.Feeds, ","))
	set(m, FeedEvery, dur(w.FeedEvery))
	set(m, ForgeTokensARN, w.ForgeTokensARN)
	return m
}

// Serve is a git server container's deployment (`mirrorfleet serve`).
type Serve struct {
	Common
	MirrorRoot     string
	Listen         string // e.g. :8080
	PackCacheDir   string
	PackCacheBytes string // e.g. 10G
	// TrustedProxy is the proxies in front of the server: the load balancer's network
	// (CIDR) and, behind CloudFront, TrustedCloudFront, comma-separated. A client's
	// address then comes from X-Forwarded-For, so the per-client limit is per client.
	TrustedProxy string
	// QueuePerClient and QueueWait bound a client's requests waiting past its share
	// (0: the server's defaults, 16 and 30s).
	QueuePerClient int
	QueueWait      time.Duration
}

// Env is the git server's environment.
func (s Serve) Env() map[string]string {
	m := s.Common.env()
	set(m, MirrorRoot, s.MirrorRoot)
	set(m, ServeListen, s.Listen)
	set(m, PackCacheDir, s.PackCacheDir)
	set(m, PackCacheBytes, s.PackCacheBytes)
	set(m, TrustedProxy, s.TrustedProxy)
	set(m, ServeQueuePerClient, num(s.QueuePerClient))
	set(m, ServeQueueWait, dur(s.QueueWait))
	return m
}

var bytesRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*(?:([KMGTkmgt])(?:i?B)?|B)?$`)

// ParseBytes reads a byte count as the binaries take one (MIRRORFLEET_DISK_QUOTA,
// _PACK_CACHE_BYTES, ...): "1073741824", "512M", "500G", "1.5TiB"; suffixes are binary
// (K = 1024).
func ParseBytes(s string) (int64, error) {
	m := bytesRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, errors.New("not a size in bytes (e.g. 1073741824, 512M, 500G, 2TiB)")
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, errors.New("not a size in bytes (e.g. 1073741824, 512M, 500G, 2TiB)")
	}
	n := f * map[string]float64{"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[strings.ToUpper(m[2])]
	if n >= math.MaxInt64 {
		return 0, errors.New("size too large")
	}
	return int64(n), nil
}

// Merge returns a copy of base with extra's entries added (extra wins).
func Merge(base, extra map[string]string) map[string]string {
	out := maps.Clone(base)
	maps.Copy(out, extra)
	return out
}
