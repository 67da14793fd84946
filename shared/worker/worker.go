// Package worker is the fetch worker's runtime (docs/architecture.md, Worker): it joins the fleet in a
// slot, heartbeats, learns its assignment from its outbox (partial resync) or from the
// owner index (full resync), and keeps its repos fresh through a priority queue.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
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

	// Maintenance (when the Mirrorer is a Maintainer): each repo once per
	// MaintainEvery at a phase from its id (<0: never), sooner once a fetch leaves
	// MaintainPacks packs (at most once per MaintainGap), a connectivity check at most
	// every FsckEvery; due repos are looked for every MaintainCheck.
	MaintainEvery time.Duration
	MaintainPacks int
	MaintainGap   time.Duration
	FsckEvery     time.Duration
	MaintainCheck time.Duration
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
		MaintainEvery: 24 * time.Hour,
		MaintainPacks: 16,
		MaintainGap:   time.Hour,
		FsckEvery:     7 * 24 * time.Hour,
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
		{&c.MaintainGap, d.MaintainGap}, {&c.FsckEvery, d.FsckEvery}, {&c.MaintainCheck, d.MaintainCheck},
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

// repoState is what a worker keeps per owned repo.
type repoState struct {
	rec         store.Repo // last known record (history the policy needs)
	host        string     // upstream host, for politeness
	lastWritten time.Time  // when the repo record was last written by us
	inFlight    bool
	dropped     bool // removed while a fetch was in flight
	syncAgain   bool // a sync was asked for while a fetch was in flight
	unwritten   bool // a report that should have landed did not: the next fetch writes

	// Maintenance: the slot start last handled, when, the pack count last seen, and
	// whether a fetch found the mirror corrupt.
	phase     time.Duration
	maintSlot time.Time
	maintAt   time.Time
	packs     int
	corrupt   bool
}

// Stats are counters for metrics and tests.
type Stats struct {
	Fetches, Changed, Failures, Reports, HandedBack, FullResyncs, Purged int64
	LostReports                                                          int64 // reports the store refused that we no longer owned
	Maintained, MaintenanceFailures, Recloned                            int64
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

	mu           sync.Mutex
	id           string
	incarnation  int
	joined       bool
	everJoined   bool           // this process has joined once: later joins never resume a record
	pendingTrash []fetch.Target // purged mirrors whose trash failed (busy); retried each heartbeat
	ack          uint64
	repos        map[string]*repoState
	queue        *Queue
	hosts        *hosts
	parkSeq      uint64
	// prior is what the repos this worker owns (a random sample of the fleet's) say of
	// change rates; scores weigh how often repos change behaviour. Learned in Heartbeat.
	prior    *priority.Prior
	scores   priority.Scores
	fitting  bool
	inFlight int
	tokens   float64
	tokensAt time.Time
	leaseAt  time.Time // when the last heartbeat the store accepted was sent

	stats struct {
		fetches, changed, failures, reports, handedBack, fullResyncs, purged, lost atomic.Int64
		maintained, maintFailures, recloned                                        atomic.Int64
	}
	wake      chan struct{}
	maintWake chan struct{}
}

// New returns a worker that has not joined yet.
func New(cfg Config, st Store, m Mirrorer, disk Disk, clk clock.Clock, log *slog.Logger) *Worker {
	if log == nil {
		log = slog.Default()
	}
	cfg = cfg.withDefaults()
	w := &Worker{cfg: cfg, store: st, mirror: m, disk: disk, clock: clk, log: log,
		repos: map[string]*repoState{}, queue: NewQueue(), prior: priority.DefaultPrior(),
		wake: make(chan struct{}, 1), maintWake: make(chan struct{}, 1),
		hosts: newHosts(cfg.HostConcurrency, cfg.HostRate, float64(cfg.HostBurst), cfg.HostPause)}
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
		if !r.dropped {
			out[id] = r.rec.OwnerEpoch
		}
	}
	return out
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	return Stats{Fetches: w.stats.fetches.Load(), Changed: w.stats.changed.Load(), Failures: w.stats.failures.Load(),
		Reports: w.stats.reports.Load(), HandedBack: w.stats.handedBack.Load(), FullResyncs: w.stats.fullResyncs.Load(),
		Purged: w.stats.purged.Load(), Maintained: w.stats.maintained.Load(), MaintenanceFailures: w.stats.maintFailures.Load(),
		Recloned: w.stats.recloned.Load(), LostReports: w.stats.lost.Load()}
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
	if r, ok := w.repos[id]; ok && !r.dropped && !r.inFlight {
		w.queue.Push(id, prio, time.Time{})
	}
}

// dequeueLocked takes id out of the queue and off its host.
func (w *Worker) dequeueLocked(id string) {
	w.queue.Remove(id)
	w.hosts.unpark(id)
}

// Join claims a slot and registers the worker. A live record under our id is a previous
// run of this same worker (a restart): it is resumed and the outbox replayed from the
// start. A dead or draining one is not ours any more: we take the next incarnation id.
func (w *Worker) Join(ctx context.Context) error {
	now := w.clock.Now()
	for attempt := 0; ; attempt++ {
		w.mu.Lock()
		w.incarnation++
		id := w.cfg.ID
		if w.incarnation > 1 {
			id = fmt.Sprintf("%s.%d", w.cfg.ID, w.incarnation)
		}
		w.mu.Unlock()
		rec, err := w.store.ClaimSlot(ctx, store.Worker{ID: id, StartedAt: now, HeartbeatAt: now, State: store.WorkerJoining}, w.cfg.MaxSlots)
		if errors.Is(err, store.ErrConflict) && attempt < 100 {
			old, gerr := w.store.GetWorker(ctx, id)
			if gerr != nil && !errors.Is(gerr, store.ErrNotFound) {
				return fmt.Errorf("join as %s: %w", id, gerr)
			}
			// Only a process that has not joined yet may resume a record (a restart after a
			// crash, under whatever incarnation it last ran as); one declared dead while
			// running must take a fresh identity.
			if gerr != nil || old.State == store.WorkerDead || old.State == store.WorkerDraining || w.everJoined {
				continue
			}
			rec = old
			w.log.Info("resuming worker record from a previous run", "as", id, "state", old.State)
		} else if err != nil {
			return fmt.Errorf("join as %s: %w", id, err)
		}
		w.mu.Lock()
		w.id, w.joined, w.everJoined, w.ack = rec.ID, true, true, 0
		w.leaseAt = now // the slot claim is the first heartbeat the store accepted
		w.dropAllLocked()
		w.mu.Unlock()
		w.log.Info("joined", "as", rec.ID, "slot", rec.Slot)
		return nil
	}
}

func (w *Worker) dropAllLocked() {
	for id, r := range w.repos {
		if r.inFlight {
			r.dropped = true
		} else {
			delete(w.repos, id)
		}
		w.dequeueLocked(id)
	}
}

// Heartbeat reports liveness and applies new outbox entries (joining first if needed).
func (w *Worker) Heartbeat(ctx context.Context) error {
	w.mu.Lock()
	joined := w.joined
	w.mu.Unlock()
	if !joined {
		if err := w.Join(ctx); err != nil {
			return err
		}
	}
	sent := w.clock.Now()
	hb := store.Heartbeat{At: sent}
	if w.disk != nil {
		used, total, err := w.disk.Usage(ctx)
		if err == nil {
			hb.DiskUsed, hb.DiskTotal = used, total
		}
	}
	w.mu.Lock()
	id := w.id
	hb.AckSeq, hb.Fetching, hb.QueueLen = w.ack, w.inFlight, w.queueLenLocked()
	last := make([]time.Time, 0, len(w.repos))
	for _, r := range w.repos {
		if !r.dropped {
			last = append(last, r.rec.LastSuccessAt)
		}
	}
	w.mu.Unlock()
	// The staleness of the repos it owns: the coordinator merges the workers' summaries
	// into the fleet's without reading the repos.
	hb.Staleness = store.Staleness(metrics.ComputeStaleness(hb.At, last))

	rec, err := w.store.Heartbeat(ctx, id, hb)
	if errors.Is(err, store.ErrNotFound) || (err == nil && rec.State == store.WorkerDead) {
		// Declared dead while we were away: our repos have moved. Start over as a new
		// incarnation rather than fight the coordinator for them.
		w.log.Warn("worker was declared dead; rejoining", "was", id)
		w.mu.Lock()
		w.joined = false
		w.dropAllLocked()
		w.mu.Unlock()
		return w.Join(ctx)
	}
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	w.mu.Lock()
	w.leaseAt = sent // measured from when it was sent: the coordinator saw it no earlier
	w.mu.Unlock()
	if err := w.syncOutbox(ctx, rec); err != nil {
		return err
	}
	w.retryTrash(ctx)
	w.learn()
	w.poke()
	return nil
}

// learn fits the prior again from the owned repos' stats when it is due (weekly, or
// while the repos with evidence grow by a quarter, as a new fleet's first clones do).
// The fit runs outside the lock; a worker with 10,000 repos fits in well under a second.
func (w *Worker) learn() {
	now := w.clock.Now()
	w.mu.Lock()
	var stats []priority.Stats
	for _, r := range w.repos {
		if !r.dropped && r.rec.Stats != (priority.Stats{}) {
			stats = append(stats, r.rec.Stats)
		}
	}
	base, scores := w.prior, w.scores
	if w.fitting || !base.Due(now, len(stats)) {
		w.mu.Unlock()
		return
	}
	w.fitting = true
	w.mu.Unlock()

	p := priority.Fit(stats, base, now, &scores)
	w.mu.Lock()
	w.prior, w.fitting = p, false
	w.scores.Fade()
	w.mu.Unlock()
	w.log.Info("learned the prior of change rates", "repos", p.Repos,
		"dormant_share", p.Weights[0], "changes_per_month", p.Hazard*30, "mean_pushes_per_day", p.Mean())
}

func (w *Worker) syncOutbox(ctx context.Context, rec store.Worker) error {
	w.mu.Lock()
	ack := w.ack
	w.mu.Unlock()
	if ack < rec.TrimmedTo {
		// Resync from the owner index, then replay every entry still in the outbox: the
		// index may lag (DynamoDB GSIs are eventually consistent) and the entries are
		// idempotent, so replaying from the trim point closes the gap.
		if err := w.fullResync(ctx, rec.TrimmedTo); err != nil {
			return err
		}
		ack = rec.TrimmedTo
	}
	for {
		entries, err := w.store.ReadOutbox(ctx, rec.ID, ack, 1000)
		if err != nil {
			return fmt.Errorf("read outbox: %w", err)
		}
		if len(entries) == 0 {
			return nil
		}
		if entries[0].Seq != ack+1 {
			// Entries we never saw were trimmed between the heartbeat and this read.
			if err := w.fullResync(ctx, entries[0].Seq-1); err != nil {
				return err
			}
			ack = entries[0].Seq - 1
		}
		for _, e := range entries {
			if err := w.applyEntry(ctx, e); err != nil {
				return err
			}
			ack = e.Seq
		}
		w.mu.Lock()
		w.ack = ack
		w.mu.Unlock()
	}
}

// fullResync replaces the local assignment with the owner index's view and sets the ack
// to from; the entries after it are replayed afterwards (they are idempotent).
func (w *Worker) fullResync(ctx context.Context, from uint64) error {
	w.stats.fullResyncs.Add(1)
	id := w.ID()
	listed := map[string]store.Repo{}
	cursor := ""
	for {
		page, next, err := w.store.ListReposByOwner(ctx, id, cursor, 1000)
		if err != nil {
			return fmt.Errorf("full resync: %w", err)
		}
		for _, r := range page {
			listed[r.ID] = r
		}
		if next == "" {
			break
		}
		cursor = next
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for rid, r := range w.repos {
		if _, ok := listed[rid]; !ok {
			w.removeLocked(rid, r)
		}
	}
	front := w.queue.Min()
	for _, r := range listed {
		w.addLocked(r, r.Priority, front)
	}
	w.ack = from
	w.log.Info("full resync", "as", id, "repos", len(listed), "replay_from", from)
	return nil
}

func (w *Worker) removeLocked(id string, r *repoState) {
	w.dequeueLocked(id)
	if r.inFlight {
		r.dropped = true
		return
	}
	delete(w.repos, id)
}

// addLocked starts tracking rec, or refreshes its epoch when already tracked.
// Priority 0 means "front of the queue" (orphans and new repos): no earlier than front,
// the queue's Min.
func (w *Worker) addLocked(rec store.Repo, prio, front float64) {
	if r, ok := w.repos[rec.ID]; ok && !r.dropped {
		r.rec.OwnerEpoch = rec.OwnerEpoch
		return
	}
	// The slot the repo is in now counts as done: a worker that starts, or takes over
	// repos, maintains each at its next slot, not all of them at once.
	ph := maintPhase(rec.ID, max(w.cfg.MaintainEvery, time.Second))
	w.repos[rec.ID] = &repoState{rec: rec, host: hostOf(rec.URL), lastWritten: rec.LastFetchAt, phase: ph,
		maintSlot: slotStart(w.clock.Now(), ph, max(w.cfg.MaintainEvery, time.Second))}
	if prio <= front {
		w.queue.PushFront(rec.ID) // next in line, behind earlier front pushes only
	} else {
		w.queue.Push(rec.ID, prio, time.Time{})
	}
}

func (w *Worker) applyEntry(ctx context.Context, e store.OutboxEntry) error {
	switch e.Op {
	case store.OpAdd:
		rec, err := w.store.GetRepo(ctx, e.RepoID)
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted since; a purge entry follows or already came
		}
		if err != nil {
			return fmt.Errorf("read repo %s: %w", e.RepoID, err)
		}
		rec.OwnerEpoch = e.Epoch
		w.mu.Lock()
		w.addLocked(rec, e.Priority, w.queue.Min())
		w.mu.Unlock()
	case store.OpDel:
		w.mu.Lock()
		if r, ok := w.repos[e.RepoID]; ok {
			w.removeLocked(e.RepoID, r)
		}
		w.mu.Unlock()
	case store.OpPurge:
		w.mu.Lock()
		if r, ok := w.repos[e.RepoID]; ok {
			w.removeLocked(e.RepoID, r)
		}
		w.mu.Unlock()
		w.trash(ctx, fetch.Target{ID: e.RepoID, URL: e.URL})
		w.stats.purged.Add(1)
	case store.OpSync:
		w.mu.Lock()
		if r, ok := w.repos[e.RepoID]; ok && !r.dropped {
			r.rec.OwnerEpoch = e.Epoch
			if r.inFlight {
				r.syncAgain = true // the fetch in flight may have started before the push
			} else {
				w.hosts.unpark(e.RepoID)
				w.queue.PushFront(e.RepoID)
			}
		}
		w.mu.Unlock()
	}
	return nil
}

// trash moves a purged repo's mirror to the trash. If a fetch still holds it (busy), it
// is retried at every heartbeat: the repo record is gone, so nobody else would.
func (w *Worker) trash(ctx context.Context, t fetch.Target) {
	err := w.mirror.Trash(ctx, t)
	if err == nil {
		return
	}
	if fetch.KindOf(err) == fetch.KindBusy {
		w.mu.Lock()
		w.pendingTrash = append(w.pendingTrash, t)
		w.mu.Unlock()
		w.log.Info("purge: mirror busy; retrying at the next heartbeat", "repo", t.ID)
		return
	}
	w.log.Warn("purge: trash mirror", "repo", t.ID, "err", err)
}

func (w *Worker) retryTrash(ctx context.Context) {
	w.mu.Lock()
	todo := w.pendingTrash
	w.pendingTrash = nil
	w.mu.Unlock()
	for _, t := range todo {
		w.trash(ctx, t)
	}
}

// Job is one fetch handed to a fetcher.
type Job struct {
	Target   fetch.Target
	Owner    string
	Epoch    int64
	Priority float64
}

// Next pops the next repo to fetch at now, if one is eligible and the rate allows. A
// repo whose upstream host is closed (hosts.go) waits on the host instead. A worker whose
// lease ran out (no heartbeat accepted for Lease) starts nothing: the coordinator may be
// about to give its repos to others.
func (w *Worker) Next(now time.Time) (Job, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.joined || !w.leasedLocked(now) || !w.allowLocked(now) {
		return Job{}, false
	}
	w.hosts.release(now, w.requeueLocked)
	for {
		id, prio, ok := w.queue.Pop(now)
		if !ok {
			return Job{}, false
		}
		r, ok := w.repos[id]
		if !ok || r.dropped {
			continue
		}
		if !w.hosts.admit(r.host, now) {
			w.parkSeq++
			w.hosts.park(r.host, id, prio, w.parkSeq, now)
			continue
		}
		r.inFlight = true
		w.inFlight++
		if w.cfg.Rate > 0 {
			w.tokens--
		}
		return Job{Target: fetch.Target{ID: id, URL: r.rec.URL}, Owner: w.id, Epoch: r.rec.OwnerEpoch, Priority: prio}, true
	}
}

// leasedLocked reports whether the lease from the last accepted heartbeat holds at now.
func (w *Worker) leasedLocked(now time.Time) bool { return now.Sub(w.leaseAt) < w.cfg.Lease }

// Leased reports whether the worker may start fetches (its lease holds).
func (w *Worker) Leased() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.joined && w.leasedLocked(w.clock.Now())
}

// allowLocked is a token bucket over the worker's fetch starts.
func (w *Worker) allowLocked(now time.Time) bool {
	if w.cfg.Rate <= 0 {
		return true
	}
	burst := math.Max(1, w.cfg.Rate)
	if w.tokensAt.IsZero() {
		w.tokens = burst
	} else {
		w.tokens = math.Min(burst, w.tokens+now.Sub(w.tokensAt).Seconds()*w.cfg.Rate)
	}
	w.tokensAt = now
	return w.tokens >= 1
}

// Do runs one job: the disk guard, the fetch, the bookkeeping.
//
// The disk guard runs before every fetch, not only before a clone: above the threshold
// an uncloned repo is handed back (another worker may have room) and a mirrored one is
// not fetched (a disk_full error on the repo, no failure counted); below it, the fetch
// may add at most its share of the room left under the threshold (the room divided by
// the fetchers, which may all be filling it at once).
func (w *Worker) Do(ctx context.Context, j Job) {
	cloned := w.mirror.Exists(j.Target)
	if w.disk != nil {
		if used, total, err := w.disk.Usage(ctx); err == nil && total > 0 {
			room := int64(w.cfg.DiskThreshold*float64(total)) - used
			share := room / int64(w.cfg.Fetchers)
			if share <= 0 {
				full := fmt.Sprintf("disk %.0f%% full on %s (threshold %.0f%%)", 100*float64(used)/float64(total), j.Owner, 100*w.cfg.DiskThreshold)
				if !cloned {
					w.handBack(ctx, j, full)
					return
				}
				w.finish(ctx, j, cloned, fetch.Result{}, fetch.Errorf(fetch.KindDiskFull, "%s: fetch skipped", full))
				return
			}
			j.Target.MaxBytes = share
		}
	}
	w.stats.fetches.Add(1)
	res, err := w.mirror.Sync(ctx, j.Target)
	w.finish(ctx, j, cloned, res, err)
}

// RunOnce takes the next eligible job and runs it synchronously; false if none was due.
func (w *Worker) RunOnce(ctx context.Context) bool {
	j, ok := w.Next(w.clock.Now())
	if !ok {
		return false
	}
	w.Do(ctx, j)
	return true
}

func (w *Worker) handBack(ctx context.Context, j Job, reason string) {
	w.mu.Lock()
	if r, ok := w.repos[j.Target.ID]; ok {
		r.inFlight = false
		w.inFlight--
		delete(w.repos, j.Target.ID)
	}
	w.hosts.done(hostOf(j.Target.URL), w.clock.Now(), w.requeueLocked)
	w.mu.Unlock()
	w.stats.handedBack.Add(1)
	if err := w.store.HandBack(ctx, j.Target.ID, j.Owner, j.Epoch, reason); err != nil && !errors.Is(err, store.ErrConflict) {
		w.log.Warn("hand back", "repo", j.Target.ID, "err", err)
	}
	w.log.Info("handed back (disk guard)", "repo", j.Target.ID, "reason", reason)
}

// finish updates the repo after a fetch, decides its next turn and writes the record
// only when something worth storing happened (invariant 6).
func (w *Worker) finish(ctx context.Context, j Job, wasCloned bool, res fetch.Result, ferr error) {
	now := w.clock.Now()
	kind := fetch.KindOf(ferr)
	host := hostOf(j.Target.URL)
	w.mu.Lock()
	if ferr != nil && kind == fetch.KindRateLimited {
		// The whole host asked us to slow down, not just this repo.
		w.hosts.pauseHost(host, now, fetch.RetryAfterOf(ferr))
	}
	w.hosts.done(host, now, w.requeueLocked)
	r, ok := w.repos[j.Target.ID]
	if !ok {
		w.mu.Unlock()
		return
	}
	r.inFlight = false
	w.inFlight--
	if r.dropped {
		delete(w.repos, j.Target.ID)
		w.mu.Unlock()
		return
	}
	rec := &r.rec
	prev := *rec
	write := r.unwritten
	maintNow := false
	notBefore := now.Add(max(w.cfg.MinInterval, 0))
	switch {
	case ferr == nil:
		// The poll covers the time since the last success (failed polls in between are
		// part of it); a first clone brings the history instead.
		poll := priority.Poll{Now: now, Changed: res.Changed, Commits: commitTimes(res.Commits)}
		if wasCloned && !res.Cloned && !prev.LastSuccessAt.IsZero() {
			poll.Prev = prev.LastSuccessAt
		} else {
			poll.Since, poll.FromRoot, poll.LastCommitAt = res.HistorySince, res.HistoryFromRoot, res.LastCommitAt
		}
		w.scores.Add(w.prior, rec.Stats, poll)
		rec.Stats = priority.Fold(rec.Stats, poll, w.prior)
		rec.FetchFailCnt, rec.CloneFailCnt, rec.LastError = 0, 0, ""
		rec.LastFetchAt, rec.LastSuccessAt = now, now
		if res.Changed {
			rec.LastChangeAt = now
			w.stats.changed.Add(1)
		}
		if !res.LastCommitAt.IsZero() {
			rec.LastCommitAt = res.LastCommitAt
		}
		rec.SizeBytes = res.SizeBytes
		rec.State = store.RepoOK
		if res.Packs > 0 {
			r.packs = res.Packs
			maintNow = w.cfg.MaintainPacks > 0 && res.Packs >= w.cfg.MaintainPacks
		}
		write = write || res.Cloned || res.Changed || prev.State != store.RepoOK || prev.LastError != "" ||
			now.Sub(r.lastWritten) >= w.cfg.Checkpoint
	case kind == fetch.KindDiskFull:
		// Not the repo's fault: no failure is counted. The record says why the mirror is
		// not being refreshed (written once, not at every skipped poll).
		rec.LastError = ferr.Error()
		write = prev.LastError != rec.LastError
		notBefore = now.Add(max(w.cfg.MinInterval, w.cfg.BusyRetry))
	case kind == fetch.KindBusy:
		// Someone else is fetching it (its previous owner, just after a move): nothing to
		// record; look again soon, but no later than a normal poll would.
		notBefore = now.Add(min(w.cfg.BusyRetry, max(w.cfg.MinInterval, time.Second)))
	default:
		w.stats.failures.Add(1)
		rec.LastFetchAt = now
		rec.LastError = ferr.Error()
		fails := 0
		if wasCloned {
			rec.FetchFailCnt++
			fails = rec.FetchFailCnt
		} else {
			rec.CloneFailCnt++
			fails = rec.CloneFailCnt
		}
		backoff := min(time.Duration(float64(w.cfg.BackoffBase)*math.Pow(2, float64(fails-1))), w.cfg.BackoffMax)
		if kind == fetch.KindCorrupt && wasCloned {
			r.corrupt, maintNow = true, true // checked, and re-cloned if need be, by maintenance
		}
		switch {
		case kind == fetch.KindNotFound:
			rec.State = store.RepoGone // the mirror is kept; checked again on the cooldown
			backoff = w.cfg.FailCooldown
		case fails >= w.cfg.FailAfter:
			rec.State = store.RepoFailing
			backoff = w.cfg.FailCooldown
		case !wasCloned:
			// No mirror yet: the repo is not mirrored at all, which its state says at
			// once (with the error); retries keep their back-off.
			rec.State = store.RepoFailing
		}
		if ra := fetch.RetryAfterOf(ferr); ra > backoff {
			backoff = ra
		}
		notBefore = now.Add(max(backoff, w.cfg.MinInterval, 0))
		write = true
	}
	cloned := wasCloned || (ferr == nil)
	rec.Priority = w.cfg.Policy.Next(priority.Input{Old: j.Priority, Cloned: cloned, CloneFailCnt: rec.CloneFailCnt,
		FetchFailCnt: rec.FetchFailCnt, LastCommitAt: rec.LastCommitAt, Changed: ferr == nil && res.Changed,
		Stats: rec.Stats, Prior: w.prior, Now: now})
	if r.syncAgain && kind != fetch.KindBusy {
		// A sync was asked for while this fetch ran: fetch again, now.
		r.syncAgain = false
		w.queue.PushFront(j.Target.ID)
	} else {
		w.queue.Push(j.Target.ID, rec.Priority, notBefore)
	}
	// No-change polls change the stats but write nothing (invariant 6): they reach the
	// store with the next change or checkpoint, which carries them all.
	report := store.FetchReport{State: rec.State, Priority: rec.Priority, LastFetchAt: rec.LastFetchAt,
		LastSuccessAt: rec.LastSuccessAt, LastChangeAt: rec.LastChangeAt, LastCommitAt: rec.LastCommitAt,
		CloneFailCnt: rec.CloneFailCnt, FetchFailCnt: rec.FetchFailCnt, SizeBytes: rec.SizeBytes, LastError: rec.LastError,
		Stats: rec.Stats}
	w.mu.Unlock()
	if maintNow {
		w.pokeMaintenance()
	}

	if ferr != nil && kind != fetch.KindBusy {
		w.log.Warn("fetch failed", "repo", j.Target.ID, "url", j.Target.URL, "kind", kind, "err", ferr)
	}
	if write {
		w.report(ctx, j, report, now)
	}
}

// report writes a fetch report and counts it only once it landed. A report refused
// because the epoch moved while we still own the repo (a sync request during the fetch
// bumps it) is written again at the current epoch; one refused because the repo went
// elsewhere is dropped. A report that could not be written at all is left for the next
// fetch of the repo to write.
func (w *Worker) report(ctx context.Context, j Job, rep store.FetchReport, now time.Time) {
	epoch := j.Epoch
	landed := false
	for attempt := 0; attempt < 3; attempt++ {
		err := w.store.ReportFetch(ctx, j.Target.ID, j.Owner, epoch, rep)
		if err == nil {
			landed = true
			break
		}
		if !errors.Is(err, store.ErrConflict) {
			w.log.Warn("report fetch", "repo", j.Target.ID, "err", err)
			break
		}
		cur, gerr := w.store.GetRepo(ctx, j.Target.ID)
		if gerr != nil || cur.Owner != j.Owner || cur.State == store.RepoDeleting || cur.OwnerEpoch == epoch {
			// Not ours any more (moved, deleted): the outbox says what next.
			w.log.Debug("fetch report fenced off", "repo", j.Target.ID, "epoch", epoch)
			w.stats.lost.Add(1)
			w.markWritten(j.Target.ID, now, true)
			return
		}
		epoch = cur.OwnerEpoch // still ours at a newer epoch: the report is ours to write
	}
	if landed {
		w.stats.reports.Add(1)
	}
	w.markWritten(j.Target.ID, now, landed)
}

// markWritten records whether the report of the fetch at now landed.
func (w *Worker) markWritten(id string, now time.Time, landed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.repos[id]
	if !ok {
		return
	}
	r.unwritten = !landed
	if landed {
		r.lastWritten = now
	}
}

// commitTimes are the times the policy reads from the commits a sync brought.
func commitTimes(cs []fetch.Commit) []time.Time {
	out := make([]time.Time, len(cs))
	for i, c := range cs {
		out[i] = c.Time()
	}
	return out
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

func (w *Worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}
