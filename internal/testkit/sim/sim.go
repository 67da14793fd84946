// Package sim runs a whole fleet — coordinators, workers, store, timers and fake
// upstreams — in one goroutine on a virtual clock, deterministically from a seed, and
// checks the invariants of docs/architecture.md as it goes. Tests use it for the fleet scenarios;
// the benchmarks use it to compare scheduling policies.
package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/timer"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// Config describes a simulated fleet.
type Config struct {
	Seed         uint64
	Store        storetest.Store // required: the backend under test
	Start        time.Time       // virtual start time; default 2026-01-01
	Step         time.Duration   // granularity of simulated time; default 1 s
	Tick         time.Duration   // coordinator tick interval; default 10 s
	Coordinators int             // default 1
	Workers      int             // workers started at the beginning
	FetchTime    time.Duration   // simulated duration of one fetch; default 2 s
	Coordinator  coordinator.Config
	Worker       worker.Config
	Log          *slog.Logger // default: discard
	CheckEvery   int          // check the invariants every this many steps; default 1
	// ClockSkew gives each worker its own clock, off the simulation's by a seeded
	// offset in [-ClockSkew, +ClockSkew] (the coordinators keep the true time).
	ClockSkew time.Duration
	// TolerateStoreErrors counts store errors of ticks, timers and heartbeats in
	// StoreErrors instead of failing the step: for runs with injected store failures
	// (throttling), which the fleet must ride out.
	TolerateStoreErrors bool
	// CheckStore, if set, is what the invariant checks read (Store may inject
	// failures into what the fleet reads; the checks must see the truth).
	CheckStore storetest.Store
}

// Node is one simulated worker process.
type Node struct {
	Name   string
	W      *worker.Worker
	Disk   *Disk
	Offset time.Duration // its clock's offset from the simulation's
	// Restarts counts the processes started after the first.
	Restarts int
	slots    []time.Time // when each fetcher is free again
	nextHB   time.Time
	killed   bool
	silent   time.Time // heartbeats and fetches stop until then
	proc     *nodeStore
	killAt   *killPoint
}

// Sim is a running simulation.
type Sim struct {
	cfg     Config
	Clock   *clock.Virtual
	Store   *CountingStore
	Timer   *timer.Local
	Storage *Storage
	Coords  []*coordinator.Coordinator
	Nodes   []*Node
	rng     *rand.Rand
	ctx     context.Context

	nextTick   time.Time
	steps      int
	leaders    map[int64]string // term → the coordinator that led it
	Violations []string
	Reports    []coordinator.Report // every leader report, in order
	// StoreErrors counts the store errors ridden out (TolerateStoreErrors), by where.
	StoreErrors map[string]int
	// Kills counts the workers killed at each stage of a sync (KillAt), by
	// "<stage>/clone" or "<stage>/fetch".
	Kills    map[string]int
	repoURLs []string

	cacheGen uint64
	cache    map[string]store.Repo // ownership view, valid while the store's generation holds
}

// New builds a simulation and starts its workers (they join at the first step).
func New(ctx context.Context, cfg Config) (*Sim, error) {
	if cfg.Store == nil {
		return nil, errors.New("sim: Config.Store is required")
	}
	if cfg.Start.IsZero() {
		cfg.Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if cfg.Step <= 0 {
		cfg.Step = time.Second
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 10 * time.Second
	}
	if cfg.Coordinators <= 0 {
		cfg.Coordinators = 1
	}
	if cfg.FetchTime <= 0 {
		cfg.FetchTime = 2 * time.Second
	}
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = 1
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.Worker = withWorkerDefaults(cfg.Worker)
	s := &Sim{cfg: cfg, Clock: clock.NewVirtual(cfg.Start), Timer: timer.NewLocal(),
		rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), ctx: ctx, leaders: map[int64]string{},
		StoreErrors: map[string]int{}, Kills: map[string]int{}}
	s.Store = NewCountingStore(cfg.Store)
	s.Storage = NewStorage(s.Clock, cfg.FetchTime)
	s.Storage.kill = s.killHook
	for i := range cfg.Coordinators {
		s.Coords = append(s.Coords, &coordinator.Coordinator{ID: fmt.Sprintf("coord-%d", i), Store: s.Store,
			Timer: s.Timer, Clock: s.Clock, Config: cfg.Coordinator, Log: cfg.Log})
	}
	s.nextTick = cfg.Start
	for range cfg.Workers {
		s.AddWorker()
	}
	return s, nil
}

func withWorkerDefaults(c worker.Config) worker.Config {
	if c.Fetchers == 0 {
		c.Fetchers = 10
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 10 * time.Second
	}
	// Every simulated upstream is on one host: per-host politeness (tested on its own)
	// would only slow the scenarios down. A scenario may set it.
	if c.HostConcurrency == 0 {
		c.HostConcurrency = -1
	}
	if c.HostRate == 0 {
		c.HostRate = -1
	}
	return c
}

// Now is the virtual time.
func (s *Sim) Now() time.Time { return s.Clock.Now() }

// Tick is the coordinator tick interval.
func (s *Sim) Tick() time.Duration { return s.cfg.Tick }

// RestartCoordinators makes every coordinator forget what it cached, as a crash and a
// restart would.
func (s *Sim) RestartCoordinators() {
	for _, c := range s.Coords {
		c.Forget()
	}
}

// Rand is the simulation's seeded random source.
func (s *Sim) Rand() *rand.Rand { return s.rng }

// AddWorker starts a new worker process; it joins at its first heartbeat.
func (s *Sim) AddWorker() *Node {
	name := fmt.Sprintf("w%02d", len(s.Nodes)+1)
	n := &Node{Name: name, Disk: NewDisk(0, 1<<40)}
	if s.cfg.ClockSkew > 0 {
		n.Offset = time.Duration(s.rng.Int64N(int64(2*s.cfg.ClockSkew)+1)) - s.cfg.ClockSkew
	}
	s.startProcess(n)
	s.Nodes = append(s.Nodes, n)
	return n
}

// startProcess runs a fresh worker process on n: nothing of a previous one survives
// but the shared storage, the store and its id.
func (s *Sim) startProcess(n *Node) {
	cfg := s.cfg.Worker
	cfg.ID = n.Name
	n.proc = &nodeStore{CountingStore: s.Store}
	n.killed, n.killAt = false, nil
	n.slots, n.nextHB = make([]time.Time, cfg.Fetchers), s.Now()
	var clk clock.Clock = s.Clock
	if n.Offset != 0 {
		clk = skewed{s.Clock, n.Offset}
	}
	n.W = worker.New(cfg, n.proc, s.Storage.For(n.Name), n.Disk, clk, s.cfg.Log)
}

// Kill stops a worker abruptly: no goodbye, no more heartbeats, no more store writes.
func (s *Sim) Kill(n *Node) {
	n.killed = true
	n.proc.dead = true
}

// Restart starts a new process for a killed worker: it rejoins under its id (resuming
// its record if the coordinator has not declared it dead), as a restarted task does,
// and the temp files its previous process left are removed, as mirror.New does.
func (s *Sim) Restart(n *Node) {
	if !n.killed {
		return
	}
	n.Restarts++
	s.Storage.cleanTemps(n.Name)
	s.startProcess(n)
}

// Stage is a point in a sync at which KillAt can kill the worker.
type Stage string

// The stages of a sync, in order.
const (
	StagePopped      Stage = "popped"      // taken from the queue; nothing done yet
	StageLocked      Stage = "locked"      // the repo's lock taken (a dead holder's lock lapses with its lease)
	StageTransferred Stage = "transferred" // the pack (or the clone) written aside, refs not moved
	StageUpdated     Stage = "updated"     // the mirror moved to the new refs; the store not told
	StageReported    Stage = "reported"    // the sync over and the store told (if it had anything to tell)
)

// Stages lists them in order.
var Stages = []Stage{StagePopped, StageLocked, StageTransferred, StageUpdated, StageReported}

type killPoint struct {
	stage Stage
	clone bool
}

// KillAt kills n when its next clone (clone=true) or fetch of an existing mirror
// reaches stage.
func (s *Sim) KillAt(n *Node, stage Stage, clone bool) { n.killAt = &killPoint{stage, clone} }

// Disarm cancels n's KillAt.
func (s *Sim) Disarm(n *Node) { n.killAt = nil }

// Armed reports whether n still waits for its KillAt.
func (n *Node) Armed() bool { return n.killAt != nil }

// Killed reports whether n's process is dead.
func (n *Node) Killed() bool { return n.killed }

// killHook is called by the storage at each stage of a node's sync.
func (s *Sim) killHook(node string, stage Stage, clone bool) bool {
	for _, n := range s.Nodes {
		if n.Name != node || n.killed || n.killAt == nil || n.killAt.stage != stage || n.killAt.clone != clone {
			continue
		}
		s.Kill(n)
		what := "fetch"
		if clone {
			what = "clone"
		}
		s.Kills[string(stage)+"/"+what]++
		return true
	}
	return false
}

// reported is the last stage: the sync is over, its report (if any) written.
func (s *Sim) reported(n *Node, clone bool) {
	if n.killAt != nil && n.killAt.stage == StageReported && n.killAt.clone == clone {
		s.killHook(n.Name, StageReported, clone)
	}
}

// skewed is a worker's clock: the simulation's, off by a fixed offset.
type skewed struct {
	base clock.Clock
	off  time.Duration
}

func (c skewed) Now() time.Time { return c.base.Now().Add(c.off) }

// Silence stops a worker's heartbeats and fetches for d (a pause or partition).
func (s *Sim) Silence(n *Node, d time.Duration) { n.silent = s.Now().Add(d) }

// AddRepos creates n repos through the store, as the API would, each with an upstream
// whose commits arrive at a seeded random rate (about half never change).
func (s *Sim) AddRepos(n int, horizon time.Duration) error {
	for range n {
		i := len(s.repoURLs)
		url := fmt.Sprintf("https://git.example.org/org%d/repo%d", i%97, i)
		up := &Upstream{URL: url}
		if s.rng.Float64() < 0.5 {
			perDay := s.rng.ExpFloat64() * 2 // heavy-ish tail of change rates
			t := s.cfg.Start.Add(-24 * time.Hour)
			end := s.cfg.Start.Add(horizon)
			for perDay > 0 {
				t = t.Add(time.Duration(s.rng.ExpFloat64() / perDay * float64(24*time.Hour)))
				if t.After(end) {
					break
				}
				up.Commits = append(up.Commits, t)
			}
		}
		if err := s.AddRepo(up); err != nil {
			return err
		}
	}
	return nil
}

// AddRepo registers an upstream and creates its repo record.
func (s *Sim) AddRepo(up *Upstream) error {
	s.Storage.AddUpstream(up)
	s.repoURLs = append(s.repoURLs, up.URL)
	_, _, err := s.Store.CreateRepo(s.ctx, store.Repo{ID: store.RepoID(up.URL), URL: up.URL, Source: store.SourceAPI,
		State: store.RepoPending, CreatedAt: s.Now()})
	return err
}

// Step advances simulated time by one step (or to the next timer, if sooner) and runs
// everything due at the new time: timers, coordinator ticks, heartbeats, fetches.
func (s *Sim) Step() error {
	next := s.Now().Add(s.cfg.Step)
	if p := s.Timer.Pending(); len(p) > 0 && p[0].At.After(s.Now()) && p[0].At.Before(next) {
		next = p[0].At
	}
	s.Clock.Set(next)
	s.steps++
	return s.runDue()
}

func (s *Sim) runDue() error {
	now := s.Now()
	for _, f := range s.Timer.Due(now) {
		rep, err := s.Coords[0].OnTimer(s.ctx, f.Payload)
		if err := s.record(rep, err); err != nil {
			if !s.tolerate("timer", err) {
				return fmt.Errorf("timer %s: %w", f.Name, err)
			}
			// A lost firing is re-armed by the next tick (death timers are armed for
			// every suspect worker without one).
		}
	}
	if !now.Before(s.nextTick) {
		for _, c := range s.Coords {
			rep, err := c.Tick(s.ctx)
			if err := s.record(rep, err); err != nil && !s.tolerate("tick", err) {
				return fmt.Errorf("tick of %s: %w", c.ID, err)
			}
		}
		s.nextTick = now.Add(s.cfg.Tick)
	}
	for _, n := range s.Nodes {
		if n.killed || now.Before(n.silent) {
			continue
		}
		if !now.Before(n.nextHB) {
			if err := n.W.Heartbeat(s.ctx); err != nil && !n.killed && !s.tolerate("heartbeat", err) {
				return fmt.Errorf("heartbeat of %s: %w", n.Name, err)
			}
			n.nextHB = now.Add(s.cfg.Worker.Heartbeat)
		}
		for i, free := range n.slots {
			if free.After(now) || n.killed {
				continue
			}
			syncs := s.Storage.syncsOf(n.Name)
			if !n.W.RunOnce(s.ctx) {
				break
			}
			if s.Storage.syncsOf(n.Name) > syncs {
				s.reported(n, s.Storage.lastWasClone(n.Name))
			}
			n.slots[i] = now.Add(s.Storage.Duration())
		}
	}
	return nil
}

// tolerate counts err as a store error ridden out, if the run tolerates those.
func (s *Sim) tolerate(where string, err error) bool {
	if !s.cfg.TolerateStoreErrors {
		return false
	}
	s.StoreErrors[where]++
	s.cfg.Log.Debug("store error ridden out", "where", where, "err", err)
	return true
}

// record checks leader uniqueness per term; tick errors that come from a stale view
// (a conflicting write) are expected and retried by the next tick.
func (s *Sim) record(rep coordinator.Report, err error) error {
	if err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrFenced) && !errors.Is(err, ErrInjected) {
		return err
	}
	if rep.Leader {
		if l, ok := s.leaders[rep.Term]; ok && l != rep.Coordinator {
			s.Violations = append(s.Violations, fmt.Sprintf("term %d led by %s and %s", rep.Term, l, rep.Coordinator))
		}
		s.leaders[rep.Term] = rep.Coordinator
		s.Reports = append(s.Reports, rep)
	}
	return nil
}

// RunFor steps for d of simulated time, checking the invariants after every step.
func (s *Sim) RunFor(d time.Duration) error {
	end := s.Now().Add(d)
	for s.Now().Before(end) {
		if err := s.step(); err != nil {
			return err
		}
	}
	return nil
}

// step is Step followed, every CheckEvery steps, by Check.
func (s *Sim) step() error {
	if err := s.Step(); err != nil {
		return err
	}
	if s.steps%s.cfg.CheckEvery != 0 {
		return nil
	}
	if err := s.Check(); err != nil {
		return fmt.Errorf("at %s: %w", s.Now().Format(time.RFC3339), err)
	}
	return nil
}

// RunUntil steps until cond holds or d passes; it reports whether cond held.
func (s *Sim) RunUntil(d time.Duration, cond func() bool) (bool, error) {
	end := s.Now().Add(d)
	for !cond() {
		if !s.Now().Before(end) {
			return false, nil
		}
		if err := s.step(); err != nil {
			return false, err
		}
	}
	return true, nil
}

// Check verifies the invariants that hold at every instant: one leader per term, no
// mirror going back, no repo fetched twice at once, and no repo believed owned at its
// current epoch by anyone but its owner of record.
func (s *Sim) Check() error {
	if len(s.Violations) > 0 {
		return fmt.Errorf("coordinators: %v", s.Violations)
	}
	if len(s.Storage.Violations) > 0 {
		return fmt.Errorf("storage: %v", s.Storage.Violations)
	}
	repos, err := s.ownership()
	if err != nil {
		return err
	}
	holders := map[string][]string{}
	for _, n := range s.Nodes {
		if n.killed {
			continue
		}
		id := n.W.ID()
		for rid, epoch := range n.W.Owned() {
			r, ok := repos[rid]
			if ok && epoch == r.OwnerEpoch {
				holders[rid] = append(holders[rid], id)
			}
		}
	}
	for rid, hs := range holders {
		if len(hs) > 1 {
			return fmt.Errorf("repo %s held at its current epoch by %v", rid, hs)
		}
		if hs[0] != repos[rid].Owner {
			return fmt.Errorf("repo %s held at its current epoch by %s but owned by %q", rid, hs[0], repos[rid].Owner)
		}
	}
	return nil
}

// ownership returns every repo record as of the last write that could change ownership;
// fetch-report fields in it may be stale.
func (s *Sim) ownership() (map[string]store.Repo, error) {
	if g := s.Store.Generation(); s.cache == nil || g != s.cacheGen {
		rs, err := s.AllRepos()
		if err != nil {
			return nil, err
		}
		s.cache, s.cacheGen = rs, g
	}
	return s.cache, nil
}

// reader is the store the checks read.
func (s *Sim) reader() storetest.Store {
	if s.cfg.CheckStore != nil {
		return s.cfg.CheckStore
	}
	return s.Store.Store
}

// AllRepos reads every repo record.
func (s *Sim) AllRepos() (map[string]store.Repo, error) {
	out := map[string]store.Repo{}
	cursor := ""
	for {
		page, next, err := s.reader().ListRepos(s.ctx, cursor, 1000)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			out[r.ID] = r
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// Settled reports nil when the fleet has converged: every repo that is not pending is
// owned by its ring owner, that owner is an active worker that holds it at the current
// epoch, and no live worker holds a repo it does not own.
func (s *Sim) Settled() error {
	st, err := s.reader().GetRing(s.ctx)
	if err != nil {
		return err
	}
	rg, err := ring.FromStore(st)
	if err != nil {
		return err
	}
	workers, err := s.reader().ListWorkers(s.ctx)
	if err != nil {
		return err
	}
	active := map[string]bool{}
	for _, w := range workers {
		if w.State == store.WorkerActive {
			active[w.ID] = true
		}
	}
	held := map[string]map[string]int64{}
	for _, n := range s.Nodes {
		if n.killed || s.Now().Before(n.silent) {
			continue
		}
		if !active[n.W.ID()] || !rg.Has(n.W.ID()) {
			return fmt.Errorf("worker process %s (%q) is not an active ring member", n.Name, n.W.ID())
		}
		held[n.W.ID()] = n.W.Owned()
	}
	repos, err := s.ownership()
	if err != nil {
		return err
	}
	ids := slices.Sorted(maps.Keys(repos))
	for _, id := range ids {
		r := repos[id]
		if r.State == store.RepoPending || r.State == store.RepoOverflow || r.State == store.RepoDeleting || r.SyncRequested {
			return fmt.Errorf("repo %s still %s", id, r.State)
		}
		want, _ := rg.Owner(ring.KeyHash(store.RingKey(r.URL, r.Salt)))
		if r.Owner != want {
			return fmt.Errorf("repo %s owned by %q, ring says %q", id, r.Owner, want)
		}
		if !active[r.Owner] {
			return fmt.Errorf("repo %s owned by %q, which is not active", id, r.Owner)
		}
		if e, ok := held[r.Owner][id]; !ok || e != r.OwnerEpoch {
			return fmt.Errorf("repo %s not held by its owner %s at epoch %d", id, r.Owner, r.OwnerEpoch)
		}
	}
	for w, set := range held {
		for id := range set {
			if r, ok := repos[id]; !ok || r.Owner != w {
				return fmt.Errorf("worker %s still holds repo %s (owner %q)", w, id, repos[id].Owner)
			}
		}
	}
	return nil
}
