package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// Environment variables of the worker (besides EnvTable, EnvFleet, EnvLogLevel and
// EnvAllowPrivateHosts; AWS_REGION and AWS_ENDPOINT_URL are the SDK's).
const (
	EnvMirrorRoot      = "MIRRORFLEET_MIRROR_ROOT"      // shared mirror directory (EFS mount)
	EnvFetchers        = "MIRRORFLEET_FETCHERS"         // concurrent fetches
	EnvHeartbeat       = "MIRRORFLEET_HEARTBEAT"        // heartbeat interval
	EnvMinInterval     = "MIRRORFLEET_MIN_INTERVAL"     // per-repo minimum poll interval
	EnvDiskQuota       = "MIRRORFLEET_DISK_QUOTA"       // bytes the mirrors may use; 0 = the file system's size
	EnvWorkerID        = "MIRRORFLEET_WORKER_ID"        // default: the ECS task id, else hostname-pid
	EnvDrain           = "MIRRORFLEET_DRAIN"            // on SIGTERM, how long in-flight fetches may finish
	EnvMetricsInterval = "MIRRORFLEET_METRICS_INTERVAL" // how often EMF metrics are written
	EnvPolicy          = "MIRRORFLEET_POLICY"           // when a repo is polled next: bayes (default), rate or cbrt

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
)

// WorkerConfig is a worker process's configuration.
type WorkerConfig struct {
	Table             string
	MirrorRoot        string
	Fetchers          int
	Heartbeat         time.Duration
	MinInterval       time.Duration
	PriorityPolicy    string // a priority.ByName name; "" is the default (bayes)
	Drain             time.Duration
	DiskQuota         int64 // bytes; 0 = the file system's own size
	AllowPrivateHosts bool
	WorkerID          string
	// WorkerIDSource says where WorkerID came from ("env", "ecs-metadata", "hostname"),
	// with the reason when ECS metadata was expected but not usable.
	WorkerIDSource  string
	Fleet           string
	MetricsInterval time.Duration
	LogLevel        slog.Level

	// Not from the environment. Log defaults to NewLogger(LogLevel); Metrics (where EMF
	// lines go) to stdout; DynamoDBEndpoint, if set, overrides the configured endpoint.
	Log              *slog.Logger
	Metrics          io.Writer
	DynamoDBEndpoint string
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
		Table:             e.required(EnvTable, "the DynamoDB table of the fleet's state"),
		MirrorRoot:        e.str(EnvMirrorRoot, DefaultMirrorRoot),
		Fetchers:          e.integer(EnvFetchers, def.Fetchers, 1, 1000),
		Heartbeat:         e.duration(EnvHeartbeat, def.Heartbeat),
		MinInterval:       e.duration(EnvMinInterval, def.MinInterval),
		PriorityPolicy:    e.str(EnvPolicy, def.Policy.Name()),
		Drain:             e.duration(EnvDrain, DefaultDrain),
		DiskQuota:         e.bytes(EnvDiskQuota, 0),
		AllowPrivateHosts: e.boolean(EnvAllowPrivateHosts, false),
		Fleet:             e.str(EnvFleet, DefaultFleet),
		MetricsInterval:   e.duration(EnvMetricsInterval, DefaultMetricsInterval),
		LogLevel:          e.logLevel(),
	}
	checkFleet(e, c.Fleet)
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

// RunWorker runs one worker until ctx ends: it joins the fleet, heartbeats, fetches its
// repos into cfg.MirrorRoot and writes EMF metrics every cfg.MetricsInterval. When ctx
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
	st, err := NewDynamoStore(ctx, cfg.DynamoDBEndpoint, cfg.Table)
	if err != nil {
		return err
	}
	defer st.Close()
	policy := urlpolicy.Policy{AllowPrivateHosts: cfg.AllowPrivateHosts}
	m, err := mirror.New(mirror.Config{Root: cfg.MirrorRoot, Client: policy.HTTPClient(0), Logger: log})
	if err != nil {
		return fmt.Errorf("mirrors: %w", err)
	}
	defer m.Close()
	emf := metrics.NewEMF(out, cfg.Fleet, nil)
	disk := &mirror.Disk{Path: cfg.MirrorRoot, Quota: cfg.DiskQuota}
	w := worker.New(worker.Config{ID: cfg.WorkerID, Fetchers: cfg.Fetchers, Heartbeat: cfg.Heartbeat,
		MinInterval: cfg.MinInterval, Drain: cfg.Drain, Policy: prio},
		st, MeteredMirror{Mirrorer: m, Sink: emf}, disk, clock.Real{}, log.With("worker", cfg.WorkerID))
	log.Info("worker starting", "worker", cfg.WorkerID, "id_source", cfg.WorkerIDSource, "table", cfg.Table,
		"mirrors", cfg.MirrorRoot, "fetchers", cfg.Fetchers, "heartbeat", cfg.Heartbeat, "disk_quota", cfg.DiskQuota,
		"priority_policy", prio.Name())

	var wg sync.WaitGroup
	mctx, stopMetrics := context.WithCancel(context.WithoutCancel(ctx))
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(cfg.MetricsInterval)
		defer t.Stop()
		for {
			select {
			case <-mctx.Done():
				return
			case <-t.C:
				flushWorkerMetrics(w, emf, log)
			}
		}
	}()
	err = w.Run(ctx)
	stopMetrics()
	wg.Wait()
	flushWorkerMetrics(w, emf, log) // the last interval's fetches, drained ones included
	if err != nil {
		return fmt.Errorf("worker %s: %w", cfg.WorkerID, err)
	}
	log.Info("worker stopped", "worker", w.ID())
	return nil
}

func flushWorkerMetrics(w *worker.Worker, emf *metrics.EMF, log *slog.Logger) {
	if id := w.ID(); id != "" {
		_ = emf.Record(metrics.Queue(id, w.QueueLen()))
	}
	if err := emf.Flush(); err != nil {
		log.Warn("metrics", "err", err)
	}
}

// MeteredMirror reports every fetch (outcome, wall time, bytes) to Sink. A fetch
// refused because another process holds the repo's lock did not fetch anything and is
// not reported.
type MeteredMirror struct {
	worker.Mirrorer
	Sink interface {
		Record(...metrics.Sample) error
	}
}

// Sync runs the fetch and reports it.
func (m MeteredMirror) Sync(ctx context.Context, t fetch.Target) (fetch.Result, error) {
	start := time.Now()
	res, err := m.Mirrorer.Sync(ctx, t)
	if err != nil && fetch.KindOf(err) == fetch.KindBusy {
		return res, err
	}
	// metrics.Fetch builds valid samples only: Record has nothing to refuse.
	_ = m.Sink.Record(metrics.Fetch(err == nil, time.Since(start), res.BytesReceived)...)
	return res, err
}
