package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
	"github.com/mirrorfleet/mirrorfleet/shared/events"
	"github.com/mirrorfleet/mirrorfleet/shared/feeds"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/membudget"
	"github.com/mirrorfleet/mirrorfleet/shared/meter"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/secrets"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// Environment variables of the worker (besides EnvTable, EnvFleet, EnvLogLevel and
// EnvAllowPrivateHosts; AWS_REGION and AWS_ENDPOINT_URL are the SDK's).
const (
	EnvMirrorRoot      = deployenv.MirrorRoot      // shared mirror directory (EFS mount)
	EnvFetchers        = deployenv.Fetchers        // concurrent fetches
	EnvMemoryBudget    = deployenv.MemoryBudget    // memory the fetches may use together; default a share of the cgroup limit
	EnvHeartbeat       = deployenv.Heartbeat       // heartbeat interval
	EnvMinInterval     = deployenv.MinInterval     // per-repo minimum poll interval
	EnvPollBudget      = deployenv.PollBudget      // polls per repo per day, averaged over the fleet; 0: none
	EnvDiskQuota       = deployenv.DiskQuota       // bytes the mirrors may use; 0 = the file system's size (none on an elastic one)
	EnvDiskUsage       = deployenv.DiskUsage       // walk (default), statfs, or elastic (EFS: no size of its own)
	EnvWorkerID        = deployenv.WorkerID        // default: the ECS task id, else hostname-pid
	EnvDrain           = deployenv.Drain           // on SIGTERM, how long in-flight fetches may finish
	EnvMetricsInterval = deployenv.MetricsInterval // how often EMF metrics are written
	EnvPolicy          = deployenv.Policy          // when a repo is polled next: bayes (default), rate or cbrt
	EnvAliveFile       = deployenv.AliveFile       // touched after each successful heartbeat
	EnvMaintainEvery   = deployenv.MaintainEvery   // each mirror is maintained once per this interval
	EnvMaintainPacks   = deployenv.MaintainPacks   // a mirror with this many packs is maintained sooner
	EnvEventBus        = deployenv.EventBus        // EventBridge bus of the mirror.updated events; empty: none
	EnvScrubEvery      = deployenv.ScrubEvery      // each mirror gets a full run (bitmap, connectivity check) once per this period
	EnvScrubChanged    = deployenv.ScrubChanged    // true: only mirrors written since their last scrub are scrubbed
	EnvFeeds           = deployenv.Feeds           // forge change feeds, KIND=URL,KIND=URL (ADR 28)
	EnvFeedEvery       = deployenv.FeedEvery       // how often each feed is probed
	EnvForgeTokensARN  = deployenv.ForgeTokensARN  // Secrets Manager secret of the feeds' tokens (HOST=TOKEN lines)

	// What one upstream can make a fetch receive (mirror.Limits).
	EnvMaxRefBytes     = deployenv.MaxRefBytes     // bytes of one ref advertisement
	EnvMaxRefs         = deployenv.MaxRefs         // refs in one ref advertisement
	EnvMaxPackBytes    = deployenv.MaxPackBytes    // bytes one fetch may receive
	EnvMaxPackBytesFor = deployenv.MaxPackBytesFor // per repo: URL=SIZE,URL/=SIZE
	EnvMaxPackObjects  = deployenv.MaxPackObjects  // objects a pack may declare
	EnvMaxObjectBytes  = deployenv.MaxObjectBytes  // bytes one pack object may declare
	EnvMinRate         = deployenv.MinRate         // bytes a second; slower transfers are cut
	EnvRateWindow      = deployenv.RateWindow      // the window MIN_RATE is measured over
	// Politeness per upstream host (worker.Config).
	EnvHostConcurrency = deployenv.HostConcurrency // fetches of one host at a time; -1: no limit
	EnvHostRate        = deployenv.HostRate        // fetch starts a second on one host; -1: no limit
	EnvHostPause       = deployenv.HostPause       // a host answering 429/503 without Retry-After is left alone this long

	// EnvECSMetadata is set by the ECS agent in every container (task metadata v4).
	EnvECSMetadata = "ECS_CONTAINER_METADATA_URI_V4"
)

// Worker defaults. Drain + the 5 s the worker gives its goodbye stay inside ECS's
// default 30 s stop timeout, after which the task is SIGKILLed.
const (
	DefaultMirrorRoot      = "/mnt/mirrors"
	DefaultDrain           = 20 * time.Second
	DefaultMetricsInterval = time.Minute
	ecsMetadataTimeout     = 2 * time.Second
	// eventFlush bounds the wait for the last events at a stop: with Drain and the
	// goodbye it stays inside ECS's 30 s stop timeout.
	eventFlush = 3 * time.Second
)

// WorkerConfig is a worker process's configuration.
type WorkerConfig struct {
	Table             string
	MirrorRoot        string
	Fetchers          int
	MemoryBudget      int64 // bytes the fetches may reserve together; 0: membudget.Default()
	Heartbeat         time.Duration
	MinInterval       time.Duration
	PollBudget        float64 // polls per repo per day, averaged over the fleet; 0: none
	PriorityPolicy    string  // a priority.ByName name; "" is the default (bayes)
	MaintainEvery     time.Duration
	MaintainPacks     int
	ScrubEvery        time.Duration
	ScrubChanged      bool // a scrub slot scrubs only mirrors written since their last scrub
	Drain             time.Duration
	DiskQuota         int64  // bytes; 0 = the file system's own size (none when DiskElastic)
	DiskStatfs        bool   // under a quota, the used bytes are the file system's own figure, no walk
	DiskElastic       bool   // the file system grows with what it holds (EFS): no bound but DiskQuota
	AliveFile         string // touched after each heartbeat the store accepted (container health check)
	Fetch             mirror.Limits
	HostConcurrency   int
	HostRate          float64
	HostPause         time.Duration
	AllowPrivateHosts bool
	// CaseInsensitiveHosts: hosts, besides github.com and gitlab.com, whose repo paths
	// are case-insensitive (MIRRORFLEET_CASE_INSENSITIVE_HOSTS).
	CaseInsensitiveHosts []string
	WorkerID             string
	// EventBus is the EventBridge bus (name or ARN) each mirror.updated event is put
	// on; empty: events go nowhere.
	EventBus string
	// Feeds are the forges' change feeds the worker probes for its own repos (KIND=URL
	// each; ADR 28), every FeedEvery; their tokens are read from the Secrets Manager
	// secret ForgeTokensARN (HOST=TOKEN lines) at start and again while it runs.
	Feeds          []string
	FeedEvery      time.Duration
	ForgeTokensARN string
	// WorkerIDSource says where WorkerID came from ("env", "ecs-metadata", "hostname"),
	// with the reason when ECS metadata was expected but not usable.
	WorkerIDSource  string
	Fleet           string
	MetricsInterval time.Duration
	LogLevel        slog.Level

	// Not from the environment. Log defaults to NewLogger(LogLevel); Metrics (where EMF
	// lines go) to stdout; DynamoDBEndpoint, if set, overrides the configured endpoint.
	// EventBridge, if set, is the client of EventBus (default: one from the
	// environment's AWS configuration).
	Log              *slog.Logger
	Metrics          io.Writer
	DynamoDBEndpoint string
	EventBridge      events.PutEventsAPI
	// SecretsManager, if set, reads ForgeTokensARN (default: a client from the
	// environment's AWS configuration).
	SecretsManager secrets.GetSecretValueAPI
}

// WorkerConfigFromEnv reads and validates the worker's environment. Without
// MIRRORFLEET_WORKER_ID it asks the ECS task metadata endpoint for the task id (for at
// most 2 s), else uses hostname-pid. The error lists every variable at fault.
func WorkerConfigFromEnv(ctx context.Context) (WorkerConfig, error) {
	return workerConfigFrom(ctx, os.Getenv)
}

var workerIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

func workerConfigFrom(ctx context.Context, get func(string) string) (WorkerConfig, error) {
	e := newEnv(get)
	def := worker.DefaultConfig()
	c := WorkerConfig{
		Table:                e.required(EnvTable, "the DynamoDB table of the fleet's state"),
		MirrorRoot:           e.str(EnvMirrorRoot, DefaultMirrorRoot),
		Fetchers:             e.integer(EnvFetchers, def.Fetchers, 1, 1000),
		MemoryBudget:         e.bytes(EnvMemoryBudget, 0),
		Heartbeat:            e.duration(EnvHeartbeat, def.Heartbeat),
		MinInterval:          e.duration(EnvMinInterval, def.MinInterval),
		PollBudget:           e.float(EnvPollBudget, 0),
		PriorityPolicy:       e.str(EnvPolicy, def.Policy.Name()),
		MaintainEvery:        e.duration(EnvMaintainEvery, def.MaintainEvery),
		MaintainPacks:        e.integer(EnvMaintainPacks, def.MaintainPacks, 2, 10000),
		ScrubEvery:           e.duration(EnvScrubEvery, def.ScrubEvery),
		ScrubChanged:         e.boolean(EnvScrubChanged, def.ScrubChangedOnly),
		Drain:                e.duration(EnvDrain, DefaultDrain),
		DiskQuota:            e.bytes(EnvDiskQuota, 0),
		AliveFile:            e.raw(EnvAliveFile),
		EventBus:             e.raw(EnvEventBus),
		FeedEvery:            e.duration(EnvFeedEvery, feeds.DefaultPeriod),
		ForgeTokensARN:       e.raw(EnvForgeTokensARN),
		AllowPrivateHosts:    e.boolean(EnvAllowPrivateHosts, false),
		CaseInsensitiveHosts: e.hosts(EnvCaseInsensitiveHosts),
		Fleet:                e.str(EnvFleet, DefaultFleet),
		MetricsInterval:      e.duration(EnvMetricsInterval, DefaultMetricsInterval),
		LogLevel:             e.logLevel(),
	}
	ml := mirror.DefaultLimits()
	c.Fetch = mirror.Limits{
		MaxRefBytes: e.bytes(EnvMaxRefBytes, ml.MaxRefBytes), MaxRefs: e.integer(EnvMaxRefs, ml.MaxRefs, 1, 1<<30),
		MaxPackBytes: e.bytes(EnvMaxPackBytes, ml.MaxPackBytes), MaxPackObjects: int64(e.integer(EnvMaxPackObjects, int(ml.MaxPackObjects), 1, 1<<31-1)),
		MaxObjectBytes: e.bytes(EnvMaxObjectBytes, ml.MaxObjectBytes), MinRate: e.bytes(EnvMinRate, ml.MinRate),
		RateWindow: e.duration(EnvRateWindow, ml.RateWindow),
	}
	for _, spec := range strings.Split(e.raw(EnvFeeds), ",") {
		if spec = strings.TrimSpace(spec); spec == "" {
			continue
		}
		// The shape is checked now; a GitHub feed's token only once the secret is read.
		if _, err := feeds.ParseSource(spec, map[string]string{}); err != nil && !strings.Contains(err.Error(), "needs a token") {
			e.fail(EnvFeeds, spec, "%v", err)
		}
		c.Feeds = append(c.Feeds, spec)
	}
	if c.FeedEvery < time.Minute {
		e.fail(EnvFeedEvery, c.FeedEvery.String(), "must be at least 1m (each probe is a request to the forge)")
	}
	if v := e.raw(EnvMaxPackBytesFor); v != "" {
		m, err := ParseByteOverrides(v)
		if err != nil {
			e.fail(EnvMaxPackBytesFor, v, "%v", err)
		}
		c.Fetch.PackBytesFor = m
	}
	if c.PollBudget < 0 {
		e.fail(EnvPollBudget, e.raw(EnvPollBudget), "want polls per repo per day, or 0 for no budget")
	}
	c.HostConcurrency = e.integer(EnvHostConcurrency, def.HostConcurrency, -1, 100000)
	c.HostRate = e.float(EnvHostRate, def.HostRate)
	c.HostPause = e.duration(EnvHostPause, def.HostPause)
	checkFleet(e, c.Fleet)
	switch u := e.str(EnvDiskUsage, deployenv.DiskUsageWalk); u {
	case deployenv.DiskUsageWalk:
	case deployenv.DiskUsageStatfs:
		c.DiskStatfs = true
	case deployenv.DiskUsageElastic:
		c.DiskElastic = true
	default:
		e.fail(EnvDiskUsage, u, "want %s (sum the files under the mirror root), %s (the file system's own figure) or %s "+
			"(a file system that grows with what it holds, EFS: no bound but %s)",
			deployenv.DiskUsageWalk, deployenv.DiskUsageStatfs, deployenv.DiskUsageElastic, EnvDiskQuota)
	}
	if c.AliveFile != "" && !strings.HasPrefix(c.AliveFile, "/") {
		e.fail(EnvAliveFile, c.AliveFile, "must be an absolute path")
	}
	if _, ok := priority.ByName(c.PriorityPolicy); !ok {
		e.fail(EnvPolicy, c.PriorityPolicy, "unknown policy: bayes (the default), rate or cbrt")
	}
	if !strings.HasPrefix(c.MirrorRoot, "/") {
		e.fail(EnvMirrorRoot, c.MirrorRoot, "must be an absolute path")
	}
	if c.Heartbeat < 100*time.Millisecond {
		e.fail(EnvHeartbeat, c.Heartbeat.String(), "must be at least 100ms (each heartbeat is a DynamoDB write)")
	}
	if id := e.raw(EnvWorkerID); id != "" {
		c.WorkerID, c.WorkerIDSource = id, "env"
	} else {
		c.WorkerID, c.WorkerIDSource = defaultWorkerID(ctx, get(EnvECSMetadata))
	}
	if !workerIDRE.MatchString(c.WorkerID) {
		e.fail(EnvWorkerID, c.WorkerID, "a worker id is 1 to 100 of [A-Za-z0-9_.-], starting with a letter or digit")
	}
	if err := e.err("worker"); err != nil {
		return WorkerConfig{}, err
	}
	return c, nil
}

// Disk is the disk guard's view of the mirror root under this configuration.
func (c WorkerConfig) Disk() *mirror.Disk {
	return &mirror.Disk{Path: c.MirrorRoot, Quota: c.DiskQuota, Statfs: c.DiskStatfs, Elastic: c.DiskElastic}
}

// defaultWorkerID is the ECS task id (the last segment of the task ARN: unique per task,
// and what the console and the logs show), else hostname-pid.
func defaultWorkerID(ctx context.Context, metadataURI string) (string, string) {
	why := ""
	if metadataURI != "" {
		id, err := ecsTaskID(ctx, metadataURI)
		if err == nil {
			return id, "ecs-metadata"
		}
		why = fmt.Sprintf(" (ECS task metadata unusable: %v)", err)
	}
	host, _ := os.Hostname()
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, host)
	if host == "" || host[0] == '-' || host[0] == '_' {
		host = "worker" + host
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid()), "hostname" + why
}

// metadataClient reaches the task metadata endpoint directly: an HTTP_PROXY set for the
// task's upstream traffic must not capture the link-local 169.254.170.2.
var metadataClient = &http.Client{Transport: &http.Transport{Proxy: nil}}

// ecsTaskID reads TaskARN from <metadata URI>/task.
func ecsTaskID(ctx context.Context, uri string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, ecsMetadataTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(uri, "/")+"/task", nil)
	if err != nil {
		return "", err
	}
	resp, err := metadataClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /task: %s", resp.Status)
	}
	var task struct {
		TaskARN string `json:"TaskARN"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&task); err != nil {
		return "", fmt.Errorf("GET /task: %w", err)
	}
	id := task.TaskARN[strings.LastIndexByte(task.TaskARN, '/')+1:]
	if !strings.HasPrefix(task.TaskARN, "arn:") || !workerIDRE.MatchString(id) {
		return "", fmt.Errorf("GET /task: unexpected TaskARN %q", task.TaskARN)
	}
	return id, nil
}

// RunWorker runs one worker until ctx ends: it joins the fleet, heartbeats, reads its
// signal item every second (a hook or a sync the API passed on: fetched at once), fetches its
// repos into cfg.MirrorRoot, maintains them with git (which it needs: it refuses to
// start without), and writes EMF metrics every cfg.MetricsInterval. When ctx
// ends (SIGTERM) in-flight fetches get cfg.Drain to finish and are then abandoned (a cut
// fetch leaves the previous mirror intact), and the worker leaves the fleet so the next
// coordinator tick moves its repos instead of waiting for the grace.
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	log := cfg.Log
	if log == nil {
		log = NewLogger(cfg.LogLevel)
	}
	out := cfg.Metrics
	if out == nil {
		out = os.Stdout
	}
	if fi, err := os.Stat(cfg.MirrorRoot); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s=%s is not a directory (is the EFS volume mounted?)", EnvMirrorRoot, cfg.MirrorRoot)
	}
	prio, ok := priority.ByName(cfg.PriorityPolicy)
	if !ok {
		return fmt.Errorf("%s=%q: unknown policy: bayes (the default), rate or cbrt", EnvPolicy, cfg.PriorityPolicy)
	}
	git, err := gitcmd.Find(ctx)
	if err != nil {
		return fmt.Errorf("worker: mirror maintenance: %w", err)
	}
	st, err := OpenDynamoStore(ctx, cfg.DynamoDBEndpoint, cfg.Table)
	if err != nil {
		return err
	}
	defer st.Close()
	policy := urlpolicy.Policy{AllowPrivateHosts: cfg.AllowPrivateHosts, CaseInsensitiveHosts: cfg.CaseInsensitiveHosts}
	emf := metrics.NewEMF(out, cfg.Fleet, nil)
	git.Metrics = emf // maintenance's git processes, by command
	m, err := mirror.New(mirror.Config{Root: cfg.MirrorRoot, Client: policy.HTTPClient(0), Logger: log, Git: git, Limits: cfg.Fetch})
	if err != nil {
		return fmt.Errorf("mirrors: %w", err)
	}
	defer m.Close()
	var wm worker.Mirrorer = m
	var publisher *events.EventBridge
	if cfg.EventBus != "" {
		client := cfg.EventBridge
		if client == nil {
			awsCfg, err := LoadAWSConfig(ctx)
			if err != nil {
				return err
			}
			client = eventbridge.NewFromConfig(awsCfg)
		}
		publisher = events.NewEventBridge(events.EventBridgeConfig{Client: client, Bus: cfg.EventBus, Metrics: emf, Log: log})
		hub := events.NewHub(events.Config{Metrics: emf, Sinks: []events.Sink{publisher}})
		wm = events.Mirror{Mirrorer: m, Hub: hub}
	}
	disk := cfg.Disk()
	var ws worker.Store = st
	if cfg.AliveFile != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.AliveFile), 0o755); err != nil {
			return fmt.Errorf("%s: %w", EnvAliveFile, err)
		}
		ws = AliveStore{Store: st, Path: cfg.AliveFile}
	}
	budget, budgetFrom := cfg.MemoryBudget, EnvMemoryBudget
	if budget <= 0 {
		budget, budgetFrom = membudget.Default()
	}
	pool := membudget.NewPool(budget)
	log.Info("memory budget", "fetches", membudget.FormatSize(budget), "from", budgetFrom, "gomemlimit", membudget.SetGoMemLimit(budget))
	feedRunner, err := workerFeeds(ctx, cfg, log, emf)
	if err != nil {
		return err
	}
	wcfg := worker.Config{ID: cfg.WorkerID, Fetchers: cfg.Fetchers, Heartbeat: cfg.Heartbeat, Memory: pool,
		MinInterval: cfg.MinInterval, PollBudget: cfg.PollBudget, Polled: meter.Polls(emf), PollFound: meter.PollsFound(emf), Drain: cfg.Drain, Policy: prio,
		MaintainEvery: cfg.MaintainEvery, MaintainPacks: cfg.MaintainPacks, ScrubEvery: cfg.ScrubEvery, ScrubChangedOnly: cfg.ScrubChanged,
		HostConcurrency: cfg.HostConcurrency, HostRate: cfg.HostRate, HostPause: cfg.HostPause, HookFound: meter.Hooks(emf)}
	if feedRunner != nil {
		wcfg.FeedCovered = feedRunner.Covered
	}
	w := worker.New(wcfg, ws, meter.Mirror{Mirrorer: wm, Sink: emf}, disk, clock.Real{}, log.With("worker", cfg.WorkerID))
	log.Info("worker starting", "worker", cfg.WorkerID, "id_source", cfg.WorkerIDSource, "table", cfg.Table,
		"mirrors", cfg.MirrorRoot, "fetchers", cfg.Fetchers, "heartbeat", cfg.Heartbeat, "disk_quota", cfg.DiskQuota,
		"priority_policy", prio.Name(), "git", git.Path, "git_version", git.Version.String(),
		"maintain_every", cfg.MaintainEvery, "scrub_every", cfg.ScrubEvery, "scrub_changed", cfg.ScrubChanged,
		"disk_statfs", cfg.DiskStatfs, "disk_elastic", cfg.DiskElastic, "alive_file", cfg.AliveFile,
		"max_pack_bytes", cfg.Fetch.MaxPackBytes, "host_concurrency", cfg.HostConcurrency, "host_rate", cfg.HostRate,
		"poll_budget", cfg.PollBudget,
		"event_bus", cfg.EventBus)

	var wg sync.WaitGroup
	mctx, stopMetrics := context.WithCancel(context.WithoutCancel(ctx))
	wg.Add(1)
	go func() {
		defer wg.Done()
		clock.Every(mctx, cfg.MetricsInterval, nil, func() { flushWorkerMetrics(w, pool, emf, log) })
	}()
	if publisher != nil {
		wg.Go(func() { publisher.Run(mctx) })
	}
	// The API Lambda's rings (hooks, syncs) arrive in the worker's signal item (ADR 21).
	wg.Go(func() { w.RunSignals(ctx, st, worker.SignalEvery) })
	if feedRunner != nil {
		wg.Go(func() { runWorkerFeeds(ctx, w, feedRunner, cfg.FeedEvery, policy) })
	}
	err = w.Run(ctx)
	if publisher != nil {
		// The events of the last fetches go out too, within the stop timeout; what is
		// still failing then is lost.
		fctx, cancel := context.WithTimeout(mctx, eventFlush)
		publisher.Flush(fctx)
		cancel()
	}
	stopMetrics()
	wg.Wait()
	flushWorkerMetrics(w, pool, emf, log) // the last interval's fetches, drained ones included
	if err != nil {
		return fmt.Errorf("worker %s: %w", cfg.WorkerID, err)
	}
	log.Info("worker stopped", "worker", w.ID())
	return nil
}

func flushWorkerMetrics(w *worker.Worker, pool *membudget.Pool, emf *metrics.EMF, log *slog.Logger) {
	if id := w.ID(); id != "" {
		_ = emf.Record(metrics.Queue(id, w.QueueLen()), metrics.Packs(id, w.MaxPacks()))
	}
	ms := pool.Stats()
	_ = emf.Record(metrics.Memory(ms.Budget, ms.Reserved, membudget.HeapInUse(), ms.Waiting)...)
	if err := emf.Flush(); err != nil {
		log.Warn("metrics", "err", err)
	}
}

// AliveStore touches Path after each heartbeat the store accepted. The container's
// health check (`mirrorfleet healthcheck --file`) reads the file's age: a worker whose
// heartbeats stop landing — stuck, or cut off from the store — is replaced by ECS
// rather than left running while the coordinator moves its repos away.
type AliveStore struct {
	worker.Store
	Path string
}

// Heartbeat passes the heartbeat on and, when it landed, touches the file.
func (a AliveStore) Heartbeat(ctx context.Context, id string, hb store.Heartbeat) (store.Worker, error) {
	w, err := a.Store.Heartbeat(ctx, id, hb)
	if err == nil {
		// The modification time is what counts; the content is for a reader.
		_ = os.WriteFile(a.Path, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
	}
	return w, err
}
