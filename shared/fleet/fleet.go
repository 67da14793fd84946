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
	"strings"
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/election"
	"github.com/mirrorfleet/mirrorfleet/shared/listsync"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/timer"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// Config is the local fleet's configuration; zero fields take the defaults of Defaults.
type Config struct {
	Data              string        // data directory: store, token, mirrors
	Listen            string        // API address
	Workers           int           // in-process workers
	Fetchers          int           // fetchers per worker
	Token             string        // API bearer token; empty: read or generate <data>/token
	AllowPrivateHosts bool          // let repos on loopback/private addresses through the URL policy
	Tick              time.Duration // coordinator tick interval
	Heartbeat         time.Duration
	Grace             time.Duration
	Warmup            time.Duration // first-start warm-up; <0 none
	MinInterval       time.Duration // per-repo minimum poll interval
	PriorityPolicy    string        // when a repo is polled next (priority.ByName): "bayes" (default), "rate" or "cbrt"
	ReposFile         string        // URLs to add at start, one per line
	// List, when List.Repo is set, keeps the repos listed in a git repository
	// (listsync); its clone lives in <data>/list unless List.Dir says otherwise.
	List listsync.Config
	Log  *slog.Logger
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
	workers        []*runningWorker
	cancel         context.CancelFunc
	// stopCoordinator ends the coordinator loop and its timers (coordWG).
	stopCoordinator context.CancelFunc
	coordWG         sync.WaitGroup
	wg              sync.WaitGroup
	coord           *coordinator.Coordinator
	prio            priority.Policy
	// List is the list sync; nil when no list repository is configured.
	List *listsync.Syncer
}

type runningWorker struct {
	w      *worker.Worker
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// MirrorsDir is where mirrors land: <data>/mirrors/<host>/<path>.git.
func MirrorsDir(data string) string { return filepath.Join(data, "mirrors") }

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
	if err := os.MkdirAll(MirrorsDir(cfg.Data), 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	st, err := bolt.Open(filepath.Join(cfg.Data, "mirrorfleet.db"))
	if err != nil {
		return nil, fmt.Errorf("store: %w (is another mirrorfleet running on %s?)", err, cfg.Data)
	}
	f := &Fleet{cfg: cfg, Store: st, poke: make(chan struct{}, 1), prio: prio}
	fail := func(err error) (*Fleet, error) {
		st.Close()
		return nil, err
	}
	if f.Token, f.TokenGenerated, err = loadToken(cfg.Data, cfg.Token); err != nil {
		return fail(err)
	}
	policy := urlpolicy.Policy{AllowPrivateHosts: cfg.AllowPrivateHosts}
	f.Mirror, err = mirror.New(mirror.Config{Root: MirrorsDir(cfg.Data), Client: policy.HTTPClient(0), Logger: log})
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
	apiCfg := api.Config{Store: st, Policy: policy, Token: f.Token, Poke: f.Poke, Log: log}
	if f.List != nil {
		apiCfg.List = f.List // never a typed nil: a nil List means "not configured"
	}
	f.Metrics = metrics.NewPrometheus()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", f.Metrics.Handler()) // the same figures as CloudWatch gets on AWS
	mux.Handle("/", api.New(apiCfg))
	f.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

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
	go func() {
		defer f.coordWG.Done()
		tmr.Run(coordCtx, clock.Real{}, func(ctx context.Context, fr timer.Firing) {
			if _, err := f.coord.OnTimer(ctx, fr.Payload); err != nil {
				log.Warn("timer", "name", fr.Name, "err", err)
			}
		})
	}()
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
	log.Info("mirrorfleet running", "api", "http://"+f.addr.String(), "workers", cfg.Workers,
		"mirrors", MirrorsDir(cfg.Data), "store", filepath.Join(cfg.Data, "mirrorfleet.db"))
	return f, nil
}

func (f *Fleet) startWorker(ctx context.Context, id string) {
	wctx, cancel := context.WithCancelCause(ctx)
	disk := &mirror.Disk{Path: MirrorsDir(f.cfg.Data)}
	w := worker.New(worker.Config{ID: id, Fetchers: f.cfg.Fetchers, Heartbeat: f.cfg.Heartbeat, MinInterval: f.cfg.MinInterval,
		Policy: f.prio},
		f.Store, cloud.MeteredMirror{Mirrorer: f.Mirror, Sink: f.Metrics}, disk, clock.Real{}, f.cfg.Log.With("worker", id))
	rw := &runningWorker{w: w, cancel: cancel, done: make(chan struct{})}
	f.workers = append(f.workers, rw)
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

// coordinatorLoop ticks on the interval and whenever the API pokes.
func (f *Fleet) coordinatorLoop(ctx context.Context) {
	t := time.NewTicker(f.cfg.Tick)
	defer t.Stop()
	for {
		start := time.Now()
		rep, err := f.coord.Tick(ctx)
		if err != nil && ctx.Err() == nil {
			f.cfg.Log.Warn("coordinator tick", "err", err)
		}
		f.recordMetrics(ctx, rep, time.Since(start))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-f.poke:
		}
	}
}

// recordMetrics feeds /metrics after a tick: the tick's report, repos by state (kept
// as counters by the store, so cheap) and each worker's queue depth.
func (f *Fleet) recordMetrics(ctx context.Context, rep coordinator.Report, took time.Duration) {
	samples := metrics.FromReport(rep, took)
	if counts, err := f.Store.CountRepos(ctx); err == nil {
		samples = append(samples, metrics.ReposByStateSamples(counts)...)
	}
	for _, rw := range f.workers {
		if id := rw.w.ID(); id != "" {
			samples = append(samples, metrics.Queue(id, rw.w.QueueLen()))
		}
	}
	if err := f.Metrics.Record(samples...); err != nil {
		f.cfg.Log.Debug("metrics", "err", err)
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

// Stop shuts down cleanly: workers finish or abandon their fetches and leave (so their
// repos move at once on the next start), the coordinator steps down, the API drains.
func (f *Fleet) Stop(ctx context.Context) error {
	f.stopCoordinator()
	f.coordWG.Wait()
	for _, rw := range f.workers {
		rw.cancel(context.Canceled)
	}
	for _, rw := range f.workers {
		<-rw.done
	}
	el := election.Elector{Store: f.Store, ID: f.coord.ID}
	if err := el.StepDown(ctx, clock.Real{}.Now()); err != nil {
		f.cfg.Log.Warn("step down", "err", err)
	}
	err := f.server.Shutdown(ctx)
	f.cancel()
	f.wg.Wait()
	f.Mirror.Close()
	if f.List != nil {
		f.List.Close()
	}
	if cerr := f.Store.Close(); err == nil {
		err = cerr
	}
	return err
}

// loadToken returns the configured token, or the one saved in the data directory, or a
// new one saved there (0600).
func loadToken(data, configured string) (string, bool, error) {
	if configured != "" {
		return configured, false, nil
	}
	path := filepath.Join(data, "token")
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

// TokenPath is where a generated token is kept.
func TokenPath(data string) string { return filepath.Join(data, "token") }

func hostLabel(h string) string {
	if h == "" {
		return "local"
	}
	if i := strings.IndexByte(h, '.'); i > 0 {
		h = h[:i]
	}
	return h
}

// importFile adds the URLs of a file (one per line, # comments) as pending repos.
func importFile(ctx context.Context, st store.Store, p urlpolicy.Policy, path string, log *slog.Logger) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("repos file: %w", err)
	}
	added, existed, bad := 0, 0, 0
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		res := api.AddRepo(ctx, st, p, line, store.SourceAPI, clock.Real{}.Now())
		switch {
		case res.Err != nil:
			bad++
			log.Warn("repos file: line skipped", "file", path, "line", n+1, "err", res.Err)
		case res.Created:
			added++
		default:
			existed++
		}
	}
	log.Info("repos file imported", "file", path, "added", added, "existing", existed, "skipped", bad)
	return nil
}
