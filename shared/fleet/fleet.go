// Package fleet assembles the local product: the coordinator, N workers and the HTTP API
// in one process on the embedded bbolt store, with real go-git mirrors under <data>/mirrors.
// `mirrorfleet run` is a thin wrapper around Start.
package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/election"
	"github.com/mirrorfleet/mirrorfleet/shared/events"
	"github.com/mirrorfleet/mirrorfleet/shared/feeds"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/health"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
	"github.com/mirrorfleet/mirrorfleet/shared/listsync"
	"github.com/mirrorfleet/mirrorfleet/shared/membudget"
	"github.com/mirrorfleet/mirrorfleet/shared/meter"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/serve"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/timer"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// Config is the local fleet's configuration; zero fields take the defaults of Defaults.
type Config struct {
	Data              string // data directory: store, token, mirrors
	Listen            string // API address
	Workers           int    // in-process workers
	Fetchers          int    // fetchers per worker
	Token             string // API bearer token; empty: read or generate <data>/token
	AllowPrivateHosts bool   // let repos on loopback/private addresses through the URL policy
	// CaseInsensitiveHosts are hosts, besides github.com and gitlab.com, whose repo
	// paths are case-insensitive (urlpolicy.Policy).
	CaseInsensitiveHosts []string
	Tick                 time.Duration // coordinator tick interval
	Heartbeat            time.Duration
	Grace                time.Duration
	Warmup               time.Duration // first-start warm-up; <0 none
	MinInterval          time.Duration // per-repo minimum poll interval
	PriorityPolicy       string        // when a repo is polled next (priority.ByName): "bayes" (default), "rate" or "cbrt"
	ReposFile            string        // URLs to add at start, one per line
	// List, when List.Repo is set, keeps the repos listed in a git repository
	// (listsync); its clone lives in <data>/list unless List.Dir says otherwise.
	List listsync.Config
	Log  *slog.Logger

	// Fetch bounds what one upstream can make a fetch receive (zero fields: defaults).
	Fetch mirror.Limits
	// HostConcurrency, HostRate and HostPause are each worker's politeness per upstream
	// host (worker.Config; zero: the defaults, negative: no limit).
	HostConcurrency int
	HostRate        float64
	HostPause       time.Duration
	// MemoryBudget is the memory the in-process workers' fetches may reserve together
	// (shared/membudget); 0: membudget.Default(), <0: no budget. GOMEMLIMIT follows it
	// unless set.
	MemoryBudget int64
	// PollBudget is polls per repo per day, averaged over the fleet (worker.Config);
	// 0: none, the workers poll as fast as the per-host limits and MinInterval allow.
	PollBudget float64
	// MaintainEvery is how often each mirror is considered for maintenance (an
	// unchanged one costs no git run), ScrubEvery the period of each mirror's full run
	// (worker.Config; zero: the defaults, MaintainEvery < 0: no maintenance).
	MaintainEvery time.Duration
	ScrubEvery    time.Duration
	// HTTP bounds the API server (zero fields: defaults). AllowHosts are Host names the
	// API, /metrics and the status page answer besides loopback ones ("*": any).
	HTTP       httpguard.Limits
	AllowHosts []string
	// Serve configures the git front at /git/ on the API's listener (Root, Git,
	// Index, BaseURL and Metrics are the fleet's own). Its PackCache.Dir defaults to
	// <data>/packcache; without Serve.Hook there is no pack cache.
	Serve serve.Config
	// CloneBaseURL is the base of every clone URL; default http://<listen address>
	// (127.0.0.1 for an unspecified address).
	CloneBaseURL string
	// Site names the fleet as a mirror site for /mirrorz.json (off without an Abbr).
	Site api.Site
	// WebhookSecret and WebhookSecretFor (host → secret) authenticate the forges' push
	// webhooks at /v1/hooks/{forge}; with neither set the hooks answer 403.
	WebhookSecret    string
	WebhookSecretFor map[string]string
	// Feeds are forges' change feeds probed every FeedEvery (feeds.DefaultPeriod): a repo
	// a feed names is fetched at once, and the repos a feed covers are polled as a
	// fall-back only.
	Feeds     []feeds.Source
	FeedEvery time.Duration
	// Events configures the outgoing events: GET /v1/events and the webhooks.
	Events EventsConfig
	// CORSOrigins are the origins whose pages may read /v1/events and /tunasync.json
	// (api.Config.CORSOrigins); none by default.
	CORSOrigins []string
}

// EventsConfig configures the outgoing events; zero fields take the defaults.
type EventsConfig struct {
	Backlog   int // events kept for Last-Event-ID resumes (events.DefaultBacklog)
	Streams   int // open event streams at most (api.DefaultEventStreams)
	PerClient int // open event streams of one client address (api.DefaultEventStreamsPerClient)
	// Token, if set, is needed for GET /v1/events (api.Config.EventsToken).
	Token     string
	Heartbeat time.Duration // keep-alive comment period of a stream (api.DefaultEventHeartbeat)
	// NotifyURLs get every event POSTed (events.Webhooks), signed with NotifySecret.
	NotifyURLs   []string
	NotifySecret string
}

// urlPolicy is the policy every repo URL of the fleet passes.
func (c Config) urlPolicy() urlpolicy.Policy {
	return urlpolicy.Policy{AllowPrivateHosts: c.AllowPrivateHosts, CaseInsensitiveHosts: c.CaseInsensitiveHosts}
}

// Defaults returns the documented defaults of `mirrorfleet run`.
func Defaults() Config {
	return Config{Data: ".mirrorfleet", Listen: "127.0.0.1:8080", Workers: 3, Fetchers: 10,
		Tick: 10 * time.Second, Heartbeat: 10 * time.Second, Grace: 10 * time.Minute,
		Warmup: 10 * time.Second, MinInterval: time.Minute}
}

func (c Config) withDefaults() Config {
	d := Defaults()
	if c.Data == "" {
		c.Data = d.Data
	}
	if c.Listen == "" {
		c.Listen = d.Listen
	}
	if c.Workers <= 0 {
		c.Workers = d.Workers
	}
	if c.Fetchers <= 0 {
		c.Fetchers = d.Fetchers
	}
	for _, x := range []struct {
		v *time.Duration
		d time.Duration
	}{
		{&c.Tick, d.Tick}, {&c.Heartbeat, d.Heartbeat}, {&c.Grace, d.Grace}, {&c.MinInterval, d.MinInterval}} {
		if *x.v <= 0 {
			*x.v = x.d
		}
	}
	if c.Warmup == 0 {
		c.Warmup = d.Warmup
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return c
}

// Fleet is a running local fleet.
type Fleet struct {
	cfg    Config
	Store  *bolt.Store
	Mirror *mirror.Mirrorer
	// Metrics holds the Prometheus figures served at /metrics.
	Metrics *metrics.Prometheus
	Token   string
	// TokenGenerated is set when the token was created at this start (print it once).
	TokenGenerated bool
	addr           net.Addr
	server         *http.Server
	poke           chan struct{}
	workersMu      sync.Mutex // the API reads workers while they start
	workers        []*runningWorker
	memory         *membudget.Pool // nil: no budget
	cancel         context.CancelFunc
	// stopCoordinator ends the coordinator loop and its timers (coordWG).
	stopCoordinator context.CancelFunc
	coordWG         sync.WaitGroup
	wg              sync.WaitGroup
	coord           *coordinator.Coordinator
	prio            priority.Policy
	// List is the list sync; nil when no list repository is configured.
	List *listsync.Syncer
	// Git is the git binary the front serves with.
	Git gitcmd.Git
	// CloneBase is the base of the clone URLs.
	CloneBase string
	front     *serve.Handler
	feeds     *feeds.Runner // nil: no feed configured
	stopFeeds context.CancelFunc
	// lastTick is when the coordinator loop last finished a tick (unix nanoseconds),
	// for /healthz.
	lastTick atomic.Int64
	// Events numbers and fans out the mirror.updated events.
	Events   *events.Hub
	webhooks *events.Webhooks
}

type runningWorker struct {
	w       *worker.Worker
	cancel  context.CancelCauseFunc
	done    chan struct{}
	started time.Time
	beat    atomic.Int64 // unix nanoseconds of the last heartbeat the store took (beatStore)
}

// beatStore records when a worker's heartbeat last landed, for /healthz: the heartbeat
// loop takes the worker's lock, so a worker stuck on it stops beating.
type beatStore struct {
	*bolt.Store
	at *atomic.Int64
}

func (b beatStore) Heartbeat(ctx context.Context, id string, hb store.Heartbeat) (store.Worker, error) {
	w, err := b.Store.Heartbeat(ctx, id, hb)
	if err == nil {
		b.at.Store(time.Now().UnixNano())
	}
	return w, err
}

// MirrorsDir is where mirrors land: <data>/mirrors/<host>/<path>.git.
func MirrorsDir(data string) string { return filepath.Join(data, "mirrors") }

// PackCacheDir is where the pack cache lives by default: <data>/packcache.
func PackCacheDir(data string) string { return filepath.Join(data, "packcache") }

// ListDir is where the list repository's clone is kept by default: <data>/list.
func ListDir(data string) string { return filepath.Join(data, "list") }

// Start opens the store and starts everything. It returns once the API is listening.
func Start(ctx context.Context, cfg Config) (*Fleet, error) {
	cfg = cfg.withDefaults()
	log := cfg.Log
	prio, ok := priority.ByName(cfg.PriorityPolicy)
	if !ok {
		return nil, fmt.Errorf("priority policy %q: want bayes (the default), rate or cbrt", cfg.PriorityPolicy)
	}
	// git maintains the mirrors (and serves them): without it, say so now rather than
	// at the first maintenance.
	git, err := gitcmd.Find(ctx)
	if err != nil {
		return nil, err
	}
	prom := metrics.NewPrometheus()
	git.Metrics = prom // every git process the fleet starts is counted
	if err := os.MkdirAll(MirrorsDir(cfg.Data), 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	st, err := bolt.Open(filepath.Join(cfg.Data, "mirrorfleet.db"))
	if err != nil {
		return nil, fmt.Errorf("store: %w (is another mirrorfleet running on %s?)", err, cfg.Data)
	}
	f := &Fleet{cfg: cfg, Store: st, poke: make(chan struct{}, 1), prio: prio, Git: git}
	f.lastTick.Store(time.Now().UnixNano()) // the first tick is due a tick after the workers joined
	if budget, from := cfg.MemoryBudget, "--memory-budget"; budget >= 0 {
		if budget == 0 {
			budget, from = membudget.Default()
		}
		f.memory = membudget.NewPool(budget)
		log.Info("memory budget", "fetches", membudget.FormatSize(budget), "from", from, "gomemlimit", membudget.SetGoMemLimit(budget))
	}
	fail := func(err error) (*Fleet, error) {
		st.Close()
		return nil, err
	}
	if f.Token, f.TokenGenerated, err = loadToken(cfg.Data, cfg.Token); err != nil {
		return fail(err)
	}
	if cfg.Events.Token != "" && cfg.Events.Token == f.Token {
		return fail(errors.New("the events token must differ from the API token: it may travel in URLs, which get logged"))
	}
	policy := cfg.urlPolicy()
	f.Mirror, err = mirror.New(mirror.Config{Root: MirrorsDir(cfg.Data), Client: policy.HTTPClient(0), Logger: log, Git: git, Limits: cfg.Fetch})
	if err != nil {
		return fail(fmt.Errorf("mirrors: %w", err))
	}
	if cfg.ReposFile != "" {
		if err := importFile(ctx, st, policy, cfg.ReposFile, log); err != nil {
			return fail(err)
		}
	}

	if cfg.List.Enabled() {
		lc := cfg.List
		if lc.Dir == "" {
			lc.Dir = ListDir(cfg.Data)
		}
		// OnChange pokes the coordinator so the repos the list added are assigned at once.
		if f.List, err = listsync.New(lc, listsync.Options{Store: st, Policy: policy, Clock: clock.Real{}, Log: log, OnChange: f.Poke}); err != nil {
			return fail(err)
		}
	}
	failList := func(err error) (*Fleet, error) {
		if f.List != nil {
			f.List.Close()
		}
		return fail(err)
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return failList(fmt.Errorf("listen on %s: %w", cfg.Listen, err))
	}
	f.addr = ln.Addr()
	f.CloneBase = cfg.CloneBaseURL
	if f.CloneBase == "" {
		f.CloneBase = baseURL(f.addr)
	}
	f.CloneBase = strings.TrimRight(f.CloneBase, "/")
	f.Metrics = prom
	sc := cfg.Serve
	sc.Root, sc.Git, sc.Index, sc.BaseURL, sc.Metrics = MirrorsDir(cfg.Data), git.Path, st, f.CloneBase, f.Metrics
	if sc.Log == nil {
		sc.Log = log
	}
	if sc.PackCache.Dir == "" {
		sc.PackCache.Dir = PackCacheDir(cfg.Data)
	}
	if f.front, err = serve.New(sc); err != nil {
		ln.Close()
		return failList(err)
	}
	var sinks []events.Sink
	if len(cfg.Events.NotifyURLs) > 0 {
		if f.webhooks, err = events.NewWebhooks(events.WebhookConfig{URLs: cfg.Events.NotifyURLs, Secret: cfg.Events.NotifySecret,
			Policy: policy, Metrics: f.Metrics, Log: log}); err != nil {
			ln.Close()
			f.front.Close()
			return failList(err)
		}
		sinks = append(sinks, f.webhooks)
	}
	f.Events = events.NewHub(events.Config{Backlog: cfg.Events.Backlog, Metrics: f.Metrics, Sinks: sinks})
	apiCfg := api.Config{Store: st, Policy: policy, Token: f.Token, Poke: f.Poke, Log: log, CloneBaseURL: f.CloneBase,
		NextPoll: f.NextPoll, PollStretch: f.PollStretch, LastChecked: f.LastChecked, Backup: st.Backup, Ring: f.ringSync, Events: f.Events,
		EventStreams: cfg.Events.Streams, EventHeartbeat: cfg.Events.Heartbeat, EventStreamsPerClient: cfg.Events.PerClient,
		EventsToken: cfg.Events.Token, TrustedProxies: cfg.Serve.TrustedProxies, CORSOrigins: cfg.CORSOrigins, Site: cfg.Site}
	if f.List != nil {
		apiCfg.List = f.List // never a typed nil: a nil List means "not configured"
	}
	app := http.NewServeMux()
	app.Handle("GET /metrics", f.Metrics.Handler()) // the same figures as CloudWatch gets on AWS
	app.Handle("/", api.New(apiCfg))
	// The API, /metrics and the status page answer loopback Host names only (and those
	// allowed), each request within its deadlines. The git front for public mirrors goes
	// beside them on root, outside these guards, with limits of its own.
	root := http.NewServeMux()
	root.Handle(serve.Prefix, f.front) // git clones: public, read-only
	// The health check, like the git front, answers any Host and needs no token: a load
	// balancer asks by address. It says only whether the store, git and the mirrors
	// answer, which is no secret.
	// It also says whether the coordinator and the workers are turning: a process
	// whose loops are stuck must not pass for healthy.
	root.Handle("GET /healthz", httpguard.Deadlines(health.New(nil,
		health.Store(func(ctx context.Context) error { _, err := st.CountRepos(ctx); return err }),
		health.Git(git.CheckRuns), health.MirrorsRoot(MirrorsDir(cfg.Data)),
		health.Check{Name: "coordinator", Run: f.coordinatorTurning},
		health.Check{Name: "workers", Run: f.workersTurning}), cfg.HTTP))
	// The forges' webhooks come from the internet through whatever proxy the operator
	// runs, under the site's public name: a delivery is authenticated by its signature,
	// so they answer any Host (a page in a browser cannot sign one).
	root.Handle(api.HookPrefix, httpguard.Deadlines(api.NewHooks(api.HookConfig{Store: st, Policy: policy,
		Secret: cfg.WebhookSecret, SecretFor: cfg.WebhookSecretFor, Ring: f.ringHook, Poke: f.Poke, Log: log,
		TrustedProxies: cfg.Serve.TrustedProxies}), cfg.HTTP))
	root.Handle("/", httpguard.Hosts(httpguard.Deadlines(app, cfg.HTTP), cfg.AllowHosts))
	f.server = httpguard.Server(root, cfg.HTTP)
	f.server.RegisterOnShutdown(f.Events.Close) // event streams never go idle: end them
	if host, _, err := net.SplitHostPort(f.addr.String()); err == nil && !httpguard.Loopback(host) && len(cfg.AllowHosts) == 0 {
		log.Warn("the API listens beyond loopback but answers loopback Host names only; name the hosts it is reached by with --allow-host",
			"listen", cfg.Listen)
	}
	ln = httpguard.Listener(ln, cfg.HTTP.WithDefaults().MaxConns)

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.cancel = cancel
	host, _ := os.Hostname()
	tmr := timer.NewLocal()
	f.coord = &coordinator.Coordinator{ID: "local-" + host, Store: st, Timer: tmr, Clock: clock.Real{},
		Config: coordinator.Config{Grace: cfg.Grace, Warmup: cfg.Warmup, SuspectAfter: 3 * cfg.Heartbeat,
			Lease: 3 * cfg.Tick}, Log: log}
	if f.List != nil {
		f.coord.List = f.List
	}

	// The coordinator and its timers stop before the workers on Stop, so no tick moves
	// repos between workers that are leaving one after the other.
	coordCtx, coordCancel := context.WithCancel(runCtx)
	f.stopCoordinator = coordCancel
	f.wg.Add(1)
	f.coordWG.Add(2)
	go func() {
		defer f.wg.Done()
		if err := f.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("api server", "err", err)
		}
	}()
	if f.webhooks != nil {
		f.wg.Go(func() { f.webhooks.Run(runCtx) })
	}
	go func() {
		defer f.coordWG.Done()
		tmr.Run(coordCtx, clock.Real{}, func(ctx context.Context, fr timer.Firing) {
			if _, err := f.coord.OnTimer(ctx, fr.Payload); err != nil {
				log.Warn("timer", "name", fr.Name, "err", err)
			}
		})
	}()
	if len(cfg.Feeds) > 0 {
		period := cfg.FeedEvery
		if period <= 0 {
			period = feeds.DefaultPeriod
		}
		// The operator's own forges: no URL policy; the prober follows redirects within
		// a feed's origin only.
		client := &http.Client{Timeout: 30 * time.Second}
		var ps []*feeds.Prober
		for _, src := range cfg.Feeds {
			ps = append(ps, feeds.New(src, client, clock.Real{}, period))
		}
		f.feeds = feeds.NewRunner(ps, clock.Real{}, log)
		f.feeds.Metrics = f.Metrics
		feedCtx, stopFeeds := context.WithCancel(runCtx)
		f.stopFeeds = stopFeeds
		f.wg.Go(func() { f.runFeeds(feedCtx, period) })
	}
	for i := range cfg.Workers {
		f.startWorker(runCtx, fmt.Sprintf("%s-w%d", hostLabel(host), i+1))
	}
	// Let the workers register before the first tick: a tick that saw only the first
	// one would give it every repo, and the next ticks would move most of them again.
	f.waitJoined(runCtx, 2*cfg.Heartbeat)
	go func() {
		defer f.coordWG.Done()
		f.coordinatorLoop(coordCtx)
	}()
	log.Info("mirrorfleet running", "api", "http://"+f.addr.String(), "workers", cfg.Workers, "git", git.Version.String(),
		"mirrors", MirrorsDir(cfg.Data), "store", filepath.Join(cfg.Data, "mirrorfleet.db"))
	return f, nil
}

func (f *Fleet) startWorker(ctx context.Context, id string) {
	wctx, cancel := context.WithCancelCause(ctx)
	disk := &mirror.Disk{Path: MirrorsDir(f.cfg.Data)}
	rw := &runningWorker{cancel: cancel, done: make(chan struct{}), started: time.Now()}
	rw.w = worker.New(worker.Config{ID: id, Fetchers: f.cfg.Fetchers, Heartbeat: f.cfg.Heartbeat, MinInterval: f.cfg.MinInterval,
		PollBudget: f.cfg.PollBudget, Polled: meter.Polls(f.Metrics), PollFound: meter.PollsFound(f.Metrics),
		Policy: f.prio, HostConcurrency: f.cfg.HostConcurrency, HostRate: f.cfg.HostRate, HostPause: f.cfg.HostPause,
		Memory: f.memory, MaintainEvery: f.cfg.MaintainEvery, ScrubEvery: f.cfg.ScrubEvery, FeedCovered: f.feedCovered,
		HookFound: meter.Hooks(f.Metrics)},
		beatStore{Store: f.Store, at: &rw.beat}, meter.Mirror{Mirrorer: events.Mirror{Mirrorer: f.Mirror, Hub: f.Events}, Sink: f.Metrics},
		disk, clock.Real{}, f.cfg.Log.With("worker", id))
	w := rw.w
	f.workersMu.Lock()
	f.workers = append(f.workers, rw)
	f.workersMu.Unlock()
	go func() {
		defer close(rw.done)
		if err := w.Run(wctx); err != nil {
			f.cfg.Log.Warn("worker stopped", "worker", id, "err", err)
		}
	}()
}

// waitJoined waits, at most d, until every in-process worker has joined.
func (f *Fleet) waitJoined(ctx context.Context, d time.Duration) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		joined := 0
		for _, rw := range f.workers {
			if rw.w.ID() != "" {
				joined++
			}
		}
		if joined == len(f.workers) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			f.cfg.Log.Warn("starting the coordinator before every worker joined", "joined", joined, "workers", len(f.workers))
			return
		case <-poll.C:
		}
	}
}

// StaleAfter is how long a loop that turns every interval may go without turning before
// /healthz fails: several intervals, and never less than 5 s (a loaded machine delays a
// short interval's turns).
func StaleAfter(interval time.Duration) time.Duration { return max(3*interval, 5*time.Second) }

// coordinatorTurning is /healthz's check that the coordinator loop finished a tick within
// StaleAfter(Tick).
func (f *Fleet) coordinatorTurning(context.Context) error {
	last := time.Unix(0, f.lastTick.Load())
	if since := time.Since(last); since > StaleAfter(f.cfg.Tick) {
		return fmt.Errorf("the coordinator has not finished a tick for %s (it ticks every %s)", since.Round(time.Second), f.cfg.Tick)
	}
	return nil
}

// workersTurning is /healthz's check that every in-process worker's heartbeat landed
// within StaleAfter(Heartbeat) (a worker that has not beaten yet: since it started).
func (f *Fleet) workersTurning(context.Context) error {
	var stale []string
	for _, rw := range f.inProcess() {
		last := rw.started
		if at := rw.beat.Load(); at != 0 {
			last = time.Unix(0, at)
		}
		if since := time.Since(last); since > StaleAfter(f.cfg.Heartbeat) {
			name := rw.w.ID()
			if name == "" {
				name = "a worker that never joined"
			}
			stale = append(stale, fmt.Sprintf("%s: no heartbeat for %s", name, since.Round(time.Second)))
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("workers whose loop stopped turning (they beat every %s): %s", f.cfg.Heartbeat, strings.Join(stale, "; "))
	}
	return nil
}

// coordinatorLoop ticks on the interval and whenever the API pokes.
func (f *Fleet) coordinatorLoop(ctx context.Context) {
	t := time.NewTicker(f.cfg.Tick)
	defer t.Stop()
	poked := false
	for {
		start := time.Now()
		rep, err := f.coord.Tick(ctx)
		f.lastTick.Store(time.Now().UnixNano())
		if err != nil && ctx.Err() == nil {
			f.cfg.Log.Warn("coordinator tick", "err", err)
		}
		f.recordMetrics(ctx, rep, time.Since(start), err)
		if poked {
			// The API's write (a delete, a sync) is in an outbox now: the workers read
			// it at once rather than at their next heartbeat.
			f.wakeWorkers()
		}
		poked = false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-f.poke:
			poked = true
		}
	}
}

// recordMetrics feeds /metrics after a tick: the tick's figures (meter.Tick) and each
// worker's queue depth.
func (f *Fleet) recordMetrics(ctx context.Context, rep coordinator.Report, took time.Duration, tickErr error) {
	samples, err := meter.Tick(ctx, f.Store, rep, took, tickErr, time.Now())
	if err != nil {
		f.cfg.Log.Debug("metrics", "err", err)
	}
	for _, rw := range f.workers {
		if id := rw.w.ID(); id != "" {
			samples = append(samples, metrics.Queue(id, rw.w.QueueLen()), metrics.Packs(id, rw.w.MaxPacks()))
		}
	}
	ms := f.memory.Stats()
	samples = append(samples, metrics.Memory(ms.Budget, ms.Reserved, membudget.HeapInUse(), ms.Waiting)...)
	if err := f.Metrics.Record(samples...); err != nil {
		f.cfg.Log.Debug("metrics", "err", err)
	}
}

// Memory is the in-process workers' memory pool (nil: no budget).
func (f *Fleet) Memory() *membudget.Pool { return f.memory }

// inProcess is a copy of the in-process workers, to call without the lock.
func (f *Fleet) inProcess() []*runningWorker {
	f.workersMu.Lock()
	defer f.workersMu.Unlock()
	return slices.Clone(f.workers)
}

// NextPoll is when the in-process worker holding repo id expects to fetch it next
// (worker.NextPoll); false if none can say.
func (f *Fleet) NextPoll(id string) (time.Time, bool) {
	ws := f.inProcess()
	for _, rw := range ws {
		if at, ok := rw.w.NextPoll(id); ok {
			return at, true
		}
	}
	return time.Time{}, false
}

// PollStretch is the factor the in-process worker holding repo id puts on its next
// poll step now (worker.PollStretchOf): above 1 while a hook, its organization's or its
// own, or a feed covers it. False if none holds it.
func (f *Fleet) PollStretch(id string) (float64, bool) {
	ws := f.inProcess()
	for _, rw := range ws {
		if s, ok := rw.w.PollStretchOf(id); ok {
			return s, true
		}
	}
	return 0, false
}

// ring tells the in-process worker that owns repo id to fetch it now (worker.FetchNow);
// only the owner holds the repo, so the others decline. A repo between owners is left to
// the durable request the caller made, which the coordinator carries to the new one.
func (f *Fleet) ring(id string, ask worker.Ask) bool {
	ws := f.inProcess()
	for _, rw := range ws {
		if rw.w.FetchNow(id, ask) {
			return true
		}
	}
	return false
}

// ringHook rings the owner of repo id for a push webhook, and tells the other in-process
// workers what the hook says of the repo's organization (worker.NoteHook): the
// organization's other repos are spread over all of them.
func (f *Fleet) ringHook(ctx context.Context, id string, ownerLevel bool) {
	ask := worker.AskHook
	if ownerLevel {
		ask = worker.AskOwnerHook
	}
	f.ring(id, ask)
	ws := f.inProcess()
	if len(ws) < 2 {
		return
	}
	r, err := f.Store.GetRepo(ctx, id)
	if err != nil {
		f.cfg.Log.Debug("webhook: read the repo for its organization", "repo", id, "err", err)
		return
	}
	for _, rw := range ws {
		rw.w.NoteHook(id, r.URL, ask) // the owner's own record of it again: no change
	}
}
func (f *Fleet) ringSync(_ context.Context, id string) { f.ring(id, worker.AskSync) }

// feedCovered reports whether a working feed lists the repo at url.
func (f *Fleet) feedCovered(url string) bool { return f.feeds != nil && f.feeds.Covered(url) }

// runFeeds probes the feeds every period until ctx ends: GitHub's feed asks about the
// in-process workers' repos on its host; a repo a feed names gets a sync request and its
// owner is rung, as for a push webhook.
func (f *Fleet) runFeeds(ctx context.Context, period time.Duration) {
	policy := f.cfg.urlPolicy()
	repos := func(src feeds.Source) []string {
		ws := f.inProcess()
		var out []string
		for _, rw := range ws {
			out = append(out, rw.w.OwnedURLs(src.Web.Host)...)
		}
		return out
	}
	sink := func(ctx context.Context, cs []feeds.Change) {
		for _, c := range cs {
			if ctx.Err() != nil {
				return // stopping: the changes wait for the repos' polls
			}
			id, ok := api.MatchRepo(ctx, f.Store, policy, []string{c.URL})
			if !ok {
				continue
			}
			if err := f.Store.RequestSync(ctx, id); err != nil {
				f.cfg.Log.Warn("feed: request sync", "repo", id, "err", err)
			}
			f.ring(id, worker.AskFeed)
		}
		f.Poke()
	}
	f.feeds.Run(ctx, period, repos, sink)
}

// LastChecked is when the in-process worker holding repo id last polled it
// (worker.LastChecked); false if none holds it.
func (f *Fleet) LastChecked(id string) (time.Time, bool) {
	ws := f.inProcess()
	for _, rw := range ws {
		if at, ok := rw.w.LastChecked(id); ok {
			return at, true
		}
	}
	return time.Time{}, false
}

// wakeWorkers makes every in-process worker heartbeat now.
func (f *Fleet) wakeWorkers() {
	ws := f.inProcess()
	for _, rw := range ws {
		rw.w.WakeHeartbeat()
	}
}

// Poke asks the coordinator to tick now (the API calls it after writes).
func (f *Fleet) Poke() {
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

// Addr is the API's address.
func (f *Fleet) Addr() string { return f.addr.String() }

// WorkerIDs returns the current ids of the in-process workers.
func (f *Fleet) WorkerIDs() []string {
	var out []string
	for _, rw := range f.workers {
		out = append(out, rw.w.ID())
	}
	return out
}

// KillWorker stops worker i abruptly, as a crash would: no drain, no goodbye.
func (f *Fleet) KillWorker(i int) {
	rw := f.workers[i]
	rw.cancel(worker.ErrKilled)
	<-rw.done
}

// Stop shuts down cleanly: workers finish or abandon their fetches and pause (their
// records stay, so the next start resumes the same workers with their repos and nothing
// moves), the coordinator steps down, the API drains. The feeds stop first. Every wait
// ends with ctx: past it Stop returns ctx's error without closing the store (the process
// ends anyway; a restart resumes from the store), so a stop takes at most its grace
// whatever an upstream, a feed or a client is doing.
func (f *Fleet) Stop(ctx context.Context) error {
	if f.stopFeeds != nil {
		f.stopFeeds()
	}
	f.stopCoordinator()
	if err := waitCtx(ctx, "the coordinator", f.coordWG.Wait); err != nil {
		return err
	}
	for _, rw := range f.workers {
		// Paused, not gone: the next start resumes the same workers with their repos.
		rw.cancel(worker.ErrPaused)
	}
	for _, rw := range f.workers {
		select {
		case <-rw.done:
		case <-ctx.Done():
			return fmt.Errorf("stop: worker %s did not stop in time: %w", rw.w.ID(), ctx.Err())
		}
	}
	el := election.Elector{Store: f.Store, ID: f.coord.ID}
	if err := el.StepDown(ctx, clock.Real{}.Now()); err != nil {
		f.cfg.Log.Warn("step down", "err", err)
	}
	err := f.server.Shutdown(ctx)
	f.cancel()
	if werr := waitCtx(ctx, "the API and the feeds", f.wg.Wait); werr != nil {
		return errors.Join(err, werr)
	}
	f.Mirror.Close()
	f.front.Close()
	if f.List != nil {
		f.List.Close()
	}
	if cerr := f.Store.Close(); err == nil {
		err = cerr
	}
	return err
}

// waitCtx runs wait (a WaitGroup's) until it returns or ctx ends.
func waitCtx(ctx context.Context, what string, wait func()) error {
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop: %s did not stop in time: %w", what, ctx.Err())
	}
}

// loadToken returns the configured token, or the one saved in the data directory, or a
// new one saved there (0600). A saved token others can read (or that another user
// owns) is refused: anyone who reads it can write to the fleet.
func loadToken(data, configured string) (string, bool, error) {
	if configured != "" {
		return configured, false, nil
	}
	path := filepath.Join(data, "token")
	if err := checkTokenFile(path); err != nil {
		return "", false, err
	}
	if b, err := os.ReadFile(path); err == nil {
		if tok := strings.TrimSpace(string(b)); tok != "" {
			return tok, false, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("read token: %w", err)
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", false, fmt.Errorf("generate token: %w", err)
	}
	tok := hex.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("save token: %w", err)
	}
	return tok, true, nil
}

// checkTokenFile refuses a token file that is not a regular file of ours, readable by
// us only. A missing file is fine (a token is generated).
func checkTokenFile(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("token file %s is not a regular file (%s); remove it to have a token generated", path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("token file %s can be read by other users (mode %04o): run `chmod 600 %s` (and change the token if they may have read it)", path, perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("token file %s belongs to user %d, not to this user (%d)", path, st.Uid, os.Getuid())
	}
	return nil
}

// TokenPath is where a generated token is kept.
func TokenPath(data string) string { return filepath.Join(data, "token") }

// baseURL is http://<addr>, with 127.0.0.1 (or ::1) for an unspecified address.
func baseURL(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "http://" + a.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if ip != nil && ip.To4() == nil {
			host = "::1"
		} else {
			host = "127.0.0.1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

func hostLabel(h string) string {
	if h == "" {
		return "local"
	}
	if i := strings.IndexByte(h, '.'); i > 0 {
		h = h[:i]
	}
	return h
}

// importFile adds the URLs of a file (one per line, # comments) as pending repos. It
// reads the file as a stream and logs only the first bad lines, so its size does not
// matter.
func importFile(ctx context.Context, st api.RepoCreator, p urlpolicy.Policy, path string, log *slog.Logger) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("repos file: %w", err)
	}
	defer f.Close()
	const shown = 20
	added, existed, bad := 0, 0, 0
	var storeErr error
	err = listsync.EachEntry(f, func(n int, line string, tooLong bool) {
		if storeErr != nil {
			return
		}
		var res api.AddResult
		if tooLong {
			res.Err = fmt.Errorf("line longer than %d bytes", listsync.MaxLineBytes)
		} else {
			res = api.AddRepo(ctx, st, p, line, store.SourceAPI, clock.Real{}.Now())
		}
		var ae *api.Error
		switch {
		case res.Err != nil && !tooLong && !errors.As(res.Err, &ae):
			storeErr = res.Err
		case res.Err != nil:
			if bad++; bad <= shown {
				log.Warn("repos file: line skipped", "file", path, "line", n, "err", res.Err)
			}
		case res.Created:
			added++
		default:
			existed++
		}
	})
	if err == nil {
		err = storeErr
	}
	if err != nil {
		return fmt.Errorf("repos file %s: %w", path, err)
	}
	log.Info("repos file imported", "file", path, "added", added, "existing", existed, "skipped", bad)
	return nil
}
