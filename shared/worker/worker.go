// Package worker is the fetch worker's runtime (docs/architecture.md, Worker): it joins the fleet in a
// slot, heartbeats, learns its assignment from its outbox (partial resync) or from the
// owner index (full resync), and keeps its repos fresh through a priority queue.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/faillog"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/membudget"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Store is the part of the store a worker uses.
type Store interface {
	ClaimSlot(ctx context.Context, w store.Worker, maxSlots int) (store.Worker, error)
	Heartbeat(ctx context.Context, id string, hb store.Heartbeat) (store.Worker, error)
	Leave(ctx context.Context, id string) error
	GetWorker(ctx context.Context, id string) (store.Worker, error)
	ReadOutbox(ctx context.Context, worker string, after uint64, limit int) ([]store.OutboxEntry, error)
	ListReposByOwner(ctx context.Context, owner, cursor string, limit int) ([]store.Repo, string, error)
	GetRepo(ctx context.Context, id string) (store.Repo, error)
	ReportFetch(ctx context.Context, id, owner string, epoch int64, rep store.FetchReport) error
	HandBack(ctx context.Context, id, owner string, epoch int64, reason string) error
}

// Mirrorer keeps mirrors on the shared storage.
type Mirrorer interface {
	Sync(ctx context.Context, t fetch.Target) (fetch.Result, error) // clone if absent, else fetch
	Exists(t fetch.Target) bool
	Trash(ctx context.Context, t fetch.Target) error // lazy delete: rename now, free later
}

// Disk reports the mirror file system's usage (or a byte quota on EFS).
type Disk interface {
	Usage(ctx context.Context) (used, total int64, err error)
}

// Config holds a worker's knobs; zero fields take DefaultConfig's values.
type Config struct {
	ID            string        // base id; a worker that rejoins gets a new incarnation suffix
	Fetchers      int           // concurrent fetches
	Heartbeat     time.Duration // heartbeat interval
	MinInterval   time.Duration // a repo is not fetched again sooner than this; <0: no minimum
	Rate          float64       // fetch starts per second across the worker; 0 = unlimited
	MaxSlots      int           // size of the worker slot bitmap
	DiskThreshold float64       // above this fraction used, new clones are handed back
	Checkpoint    time.Duration // a no-change poll writes the repo at most this often
	FailAfter     int           // consecutive failures before the repo is failing
	BackoffBase   time.Duration // first retry delay after a failure; doubles
	BackoffMax    time.Duration
	FailCooldown  time.Duration // retry interval of failing and gone repos
	BusyRetry     time.Duration // retry delay when another process holds the repo's lock
	Drain         time.Duration // on shutdown, how long in-flight fetches may finish
	// Lease is how long after its last heartbeat the store accepted the worker keeps
	// starting fetches: a worker that cannot reach the store stops before the coordinator
	// (after its grace, 10 min by default) gives its repos to others. Keep it below the
	// grace.
	Lease  time.Duration
	Policy priority.Policy
	// ReplaySlice bounds the records (outbox entries, owner-index rows) one heartbeat
	// reads to bring the assignment up to date; reading also stops half a heartbeat
	// interval after the heartbeat was sent. The rest waits for the next heartbeat, so a
	// worker restarted under a large backlog keeps heartbeating while it catches up.
	ReplaySlice int
	// Memory, if set, is the memory budget the worker's fetches share (with the other
	// workers of the process given the same pool): each fetch reserves what it is
	// expected to need before it starts and waits for it (ADR 0026).
	Memory *membudget.Pool

	// Maintenance (when the Mirrorer is a Maintainer): each repo is considered once per
	// MaintainEvery at a phase from its id (<0: never), sooner once a fetch leaves
	// MaintainPacks packs (at most once per MaintainGap); an unchanged mirror costs no
	// git run. A full run (scrub: bitmap, connectivity check) once per ScrubEvery, in
	// a slot at another phase from its id; due repos are looked for every MaintainCheck.
	MaintainEvery time.Duration
	MaintainPacks int
	MaintainGap   time.Duration
	ScrubEvery    time.Duration
	MaintainCheck time.Duration
	// ScrubChangedOnly: a scrub slot scrubs a mirror only if it was written since its
	// last scrub (on EFS, which keeps the bytes at rest redundantly: ADR 24).
	ScrubChangedOnly bool
	// FeedCovered, if set, reports whether a forge's change feed lists the repo at url:
	// such a repo is polled FeedStretch times less (the feed tells of its pushes).
	FeedCovered func(url string) bool
	// HookFound, if set, is told what each fetch that brought pushes of a hooked repo
	// says of its host's hooks (the hook metrics); it is called outside the worker's
	// lock and must not block.
	HookFound func(host string, f HookFind)
	// PollBudget is polls per repo per day, averaged over the fleet (budget.go): the
	// worker polls its repos PollsPerDay(PollBudget, repos it holds) times a day at
	// most, the policy's order choosing which. First clones, hooks', feeds' and syncs'
	// fetches are not counted. <= 0: no budget, as fast as the per-host limits and the
	// minimum interval allow.
	PollBudget float64
	// Polled, if set, is told the host of each poll the budget counts (the polls
	// metric); it is called outside the worker's lock and must not block.
	Polled func(host string)
	// PollFound, if set, is told the host of each of those polls that found something
	// new (the polls-found metric), likewise outside the lock.
	PollFound func(host string)
	// Per upstream host (hosts.go); negative: no limit.
	HostConcurrency int           // fetches of one host at a time
	HostRate        float64       // fetch starts per second on one host
	HostBurst       int           // starts on one host at once, within HostRate
	HostPause       time.Duration // a host answering 429/503 without Retry-After is left alone this long
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Fetchers:      10,
		Heartbeat:     10 * time.Second,
		MinInterval:   5 * time.Minute,
		MaxSlots:      1024,
		DiskThreshold: 0.85,
		Checkpoint:    6 * time.Hour,
		FailAfter:     5,
		BackoffBase:   time.Minute,
		BackoffMax:    6 * time.Hour,
		FailCooldown:  24 * time.Hour,
		BusyRetry:     30 * time.Second,
		Drain:         20 * time.Second,
		Lease:         5 * time.Minute,
		Policy:        priority.Bayes{},
		ReplaySlice:   20000,
		MaintainEvery: 24 * time.Hour,
		MaintainPacks: 16,
		MaintainGap:   time.Hour,
		ScrubEvery:    90 * 24 * time.Hour,
		MaintainCheck: time.Minute,

		HostConcurrency: 4,
		HostRate:        2,
		HostBurst:       4,
		HostPause:       time.Minute,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Fetchers <= 0 {
		c.Fetchers = d.Fetchers
	}
	durs := []struct {
		v *time.Duration
		d time.Duration
	}{
		{&c.Heartbeat, d.Heartbeat}, {&c.Checkpoint, d.Checkpoint}, {&c.BackoffBase, d.BackoffBase},
		{&c.BackoffMax, d.BackoffMax}, {&c.FailCooldown, d.FailCooldown}, {&c.BusyRetry, d.BusyRetry}, {&c.Drain, d.Drain},
		{&c.Lease, d.Lease},
		{&c.MaintainGap, d.MaintainGap}, {&c.ScrubEvery, d.ScrubEvery}, {&c.MaintainCheck, d.MaintainCheck},
	}
	for _, x := range durs {
		if *x.v <= 0 {
			*x.v = x.d
		}
	}
	if c.MinInterval == 0 {
		c.MinInterval = d.MinInterval
	}
	if c.MaxSlots <= 0 {
		c.MaxSlots = d.MaxSlots
	}
	if c.DiskThreshold <= 0 {
		c.DiskThreshold = d.DiskThreshold
	}
	if c.ReplaySlice <= 0 {
		c.ReplaySlice = d.ReplaySlice
	}
	if c.FailAfter <= 0 {
		c.FailAfter = d.FailAfter
	}
	if c.Policy == nil {
		c.Policy = d.Policy
	}
	if c.MaintainEvery == 0 {
		c.MaintainEvery = d.MaintainEvery
	}
	if c.MaintainPacks == 0 {
		c.MaintainPacks = d.MaintainPacks
	}
	if c.HostConcurrency == 0 {
		c.HostConcurrency = d.HostConcurrency
	}
	if c.HostRate == 0 {
		c.HostRate = d.HostRate
	}
	if c.HostBurst == 0 {
		c.HostBurst = d.HostBurst
	}
	if c.HostPause == 0 {
		c.HostPause = d.HostPause
	}
	return c
}

// repoEntry is what a worker keeps per repo it holds: the step's state (step.go) and
// the shell's own bookkeeping.
type repoEntry struct {
	RepoState
	host string // upstream host, for politeness

	// Maintenance: the slot start last handled, when, the pack count last seen, and
	// whether a fetch found the mirror corrupt.
	phase     time.Duration
	maintSlot time.Time
	maintAt   time.Time
	maintRefs string // the refs digest its last maintenance saw; "": none since this process took the repo
	packs     int
	corrupt   bool
}

// Stats are counters for metrics and tests.
type Stats struct {
	Fetches, Changed, Failures, Reports, HandedBack, FullResyncs, Purged int64
	LostReports                                                          int64 // reports the store refused that we no longer owned
	Maintained, MaintenanceFailures, Recloned                            int64
	MaintenanceUnchanged                                                 int64 // considered, nothing changed: no git run
}

// Worker is one fetch worker.
type Worker struct {
	cfg    Config
	store  Store
	mirror Mirrorer
	maint  Maintainer // nil: no maintenance
	disk   Disk
	clock  clock.Clock
	log    *slog.Logger
	// The failure logs, in proportion to the problems rather than the repos: a host that
	// is down is a line a minute, not a line per repo.
	fetchFails, maintFails *faillog.Log

	mu           sync.Mutex
	id           string
	incarnation  int
	joined       bool
	everJoined   bool           // this process has joined once: later joins never resume a record
	joinedAt     time.Time      // when it first joined
	pendingTrash []fetch.Target // purged mirrors whose trash failed (busy); retried each heartbeat
	ack          uint64
	resync       resyncState // a full resync under way, or due
	repos        map[string]*repoEntry
	queue        *Queue
	hosts        *hosts
	hookLoss     map[string]*HookLoss   // per host: what its hooks announced and missed
	owners       map[string]*OwnerHooks // per owner (OwnerOf) whose hooks came, or were found missing, within HookMemory
	parkSeq      uint64
	// prior is what the repos this worker owns (a random sample of the fleet's) say of
	// change rates; scores weigh how often repos change behaviour. Learned in Heartbeat.
	prior    *priority.Prior
	scores   priority.Scores
	fitting  bool
	inFlight int
	tokens   float64
	tokensAt time.Time
	budget   pollBudget // the poll budget's bucket
	leaseAt  time.Time  // when the last heartbeat the store accepted was sent

	stats struct {
		fetches, changed, failures, reports, handedBack, fullResyncs, purged, lost atomic.Int64
		maintained, maintFailures, recloned, maintUnchanged                        atomic.Int64
	}
	wake      chan struct{}
	beatWake  chan struct{} // WakeHeartbeat: heartbeat (and read the outbox) now
	maintWake chan struct{}
}

// New returns a worker that has not joined yet.
func New(cfg Config, st Store, m Mirrorer, disk Disk, clk clock.Clock, log *slog.Logger) *Worker {
	if log == nil {
		log = slog.Default()
	}
	cfg = cfg.withDefaults()
	w := &Worker{cfg: cfg, store: st, mirror: m, disk: disk, clock: clk, log: log,
		fetchFails: faillog.New(log, "fetch"), maintFails: faillog.New(log, "maintenance"),
		repos: map[string]*repoEntry{}, queue: NewQueue(), prior: priority.DefaultPrior(),
		wake: make(chan struct{}, 1), maintWake: make(chan struct{}, 1), beatWake: make(chan struct{}, 1),
		hookLoss: map[string]*HookLoss{}, owners: map[string]*OwnerHooks{},
		hosts:  newHosts(cfg.HostConcurrency, cfg.HostRate, float64(cfg.HostBurst), cfg.HostPause),
		budget: pollBudget{budget: cfg.PollBudget}}
	w.maint, _ = m.(Maintainer)
	return w
}

// ID is the worker's current identity ("" before it joined).
func (w *Worker) ID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.id
}

// Owned returns the ids of the repos the worker believes it owns and their epochs.
func (w *Worker) Owned() map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int64, len(w.repos))
	for id, r := range w.repos {
		if r.Held() {
			out[id] = r.Rec.OwnerEpoch
		}
	}
	return out
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	return Stats{Fetches: w.stats.fetches.Load(), Changed: w.stats.changed.Load(), Failures: w.stats.failures.Load(),
		Reports: w.stats.reports.Load(), HandedBack: w.stats.handedBack.Load(), FullResyncs: w.stats.fullResyncs.Load(),
		Purged: w.stats.purged.Load(), Maintained: w.stats.maintained.Load(), MaintenanceFailures: w.stats.maintFailures.Load(),
		MaintenanceUnchanged: w.stats.maintUnchanged.Load(),
		Recloned:             w.stats.recloned.Load(), LostReports: w.stats.lost.Load()}
}

// NextPoll estimates when the worker fetches repo id next: now if it is in flight;
// otherwise once the repos ahead of it in the queue have gone, at the worker's fetch rate
// (fetchRateLocked) and after the poll budget's wait for a poll, and not before the
// repo's minimum interval. False if the worker does not hold it queued (not its repo,
// or waiting for a host that asked for a pause) or knows no rate yet.
func (w *Worker) NextPoll(id string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	r, ok := w.repos[id]
	if !ok || !r.Held() {
		return time.Time{}, false
	}
	if r.Phase == Fetching {
		return now, true
	}
	ahead, notBefore, ok := w.queue.Ahead(id)
	if !ok {
		return time.Time{}, false
	}
	rate := w.fetchRateLocked(now)
	if rate <= 0 {
		return time.Time{}, false
	}
	at := now.Add(time.Duration(float64(ahead) / rate * float64(time.Second)))
	if r.Budgeted() {
		at = at.Add(w.budget.wait(now, len(w.repos)))
	}
	if notBefore.After(at) {
		at = notBefore
	}
	return at, true
}

// fetchRateLocked is the worker's fetch rate at now: its configured Rate, or the rate it
// has kept since it joined (0 before it has fetched anything), and no more than its
// poll budget's.
func (w *Worker) fetchRateLocked(now time.Time) float64 {
	rate := w.cfg.Rate
	if up := now.Sub(w.joinedAt).Seconds(); rate <= 0 && !w.joinedAt.IsZero() && up > 0 {
		rate = float64(w.stats.fetches.Load()) / up // fetches counts from the process's start, as joinedAt
	}
	if b := w.budget.rate(len(w.repos)); b > 0 && (rate <= 0 || b < rate) {
		rate = b
	}
	return rate
}

// LastChecked is when the worker last polled repo id, whether or not the poll found
// anything new or was written to the store (a no-change poll writes only at the
// checkpoint, invariant 6); false if the worker does not hold the repo.
func (w *Worker) LastChecked(id string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.repos[id]
	if !ok || !r.Held() || r.Rec.LastFetchAt.IsZero() {
		return time.Time{}, false
	}
	return r.Rec.LastFetchAt, true
}

// Prior is what the worker has learned of its repos' change rates so far.
func (w *Worker) Prior() *priority.Prior {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.prior
}

// QueueLen is the number of repos waiting in the queue (or for their host).
func (w *Worker) QueueLen() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queueLenLocked()
}

func (w *Worker) queueLenLocked() int { return w.queue.Len() + w.hosts.parkedLen() }

// requeueLocked puts a parked repo back in the queue, ready now.
func (w *Worker) requeueLocked(id string, prio float64) {
	if r, ok := w.repos[id]; ok && r.Phase == Queued {
		w.queue.Push(id, prio, time.Time{})
	}
}

// dequeueLocked takes id out of the queue and off its host.
func (w *Worker) dequeueLocked(id string) {
	w.queue.Remove(id)
	w.hosts.unpark(id)
}

// Leave tells the coordinator this worker is going away so its repos move now rather
// than after the grace.
func (w *Worker) Leave(ctx context.Context) error {
	id := w.ID()
	if id == "" {
		return nil
	}
	if err := w.store.Leave(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("leave: %w", err)
	}
	return nil
}

// WakeHeartbeat makes Run's heartbeat loop beat now rather than at its next interval,
// so an outbox entry just written (a purge, a sync) is applied at once. It never blocks.
func (w *Worker) WakeHeartbeat() {
	select {
	case w.beatWake <- struct{}{}:
	default:
	}
}

func (w *Worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}
