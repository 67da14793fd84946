package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/election"
	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Store is the part of the store the coordinator uses.
type Store interface {
	election.Store
	Apply(ctx context.Context, term int64, muts []store.Mutation) error
	GetRing(ctx context.Context) (store.Ring, error)
	GetRingHead(ctx context.Context) (store.Ring, error)
	ListWorkers(ctx context.Context) ([]store.Worker, error)
	WorkersVersion(ctx context.Context) (uint64, error)
	GetWorker(ctx context.Context, id string) (store.Worker, error)
	GetSweep(ctx context.Context) (store.Sweep, error)
	CountRepos(ctx context.Context) (map[store.RepoState]int, error)
	ListReposByOwner(ctx context.Context, owner, cursor string, limit int) ([]store.Repo, string, error)
	ListReposByOwnerRange(ctx context.Context, owner string, from, to uint64, cursor string, limit int) ([]store.Repo, string, error)
	ListReposNeedingDecision(ctx context.Context, need store.Need, cursor string, limit int) ([]store.Repo, string, error)
}

// Timer arms delayed wake-ups; a later Set of a name replaces the earlier one.
type Timer interface {
	Set(ctx context.Context, name string, at time.Time, payload []byte) error
	Cancel(ctx context.Context, name string) error
}

// ListSyncer applies the upstream repo list kept in a git repository (docs/list-sync.md).
// It writes with the leader's term as fencing token.
type ListSyncer interface {
	SyncList(ctx context.Context, term int64) error
}

// Coordinator runs ticks. Everything it decides on is read from the store, so a
// restarted (or Lambda-invoked) coordinator carries on; what it keeps between ticks is
// a cache — the decoded ring, when it saw each worker's heartbeat count change, where
// its last pass over the needs-decision index stopped, the last plan that changed
// nothing — that only makes ticks cheaper and fairer. Ticks of one Coordinator run one at a time.
type Coordinator struct {
	ID     string
	Group  string // see election.Elector.Group
	Store  Store
	Timer  Timer
	Clock  clock.Clock
	Config Config
	Log    *slog.Logger
	// List, if set, syncs the repo list at the end of every tick the coordinator leads.
	List ListSyncer

	run      sync.Mutex // one tick at a time; guards the caches below
	ring     ringCache
	live     liveness
	cursors  [2]string // where the last pass over each part of the needs-decision index stopped
	lastTerm int64
	quiet    quietPlan
	sweep    sweepCache
}

type ringCache struct {
	version int64
	r       *ring.Ring
}

// Forget drops what the coordinator cached, as a restart would.
func (c *Coordinator) Forget() {
	c.run.Lock()
	defer c.run.Unlock()
	c.ring, c.cursors, c.lastTerm, c.quiet, c.sweep = ringCache{}, [2]string{}, 0, quietPlan{}, sweepCache{}
	c.live.forget()
}

// Report says what a tick did; it feeds logs and metrics.
type Report struct {
	Coordinator    string
	Leader         bool
	Term           int64
	Campaign       string
	WarmingUp      bool
	RingVersion    int64
	Members        int
	WorkersByState map[store.WorkerState]int
	Moved          int // repos (re)assigned
	Assigned       int // of which were pending
	Deleted        int
	Skipped        int // actions whose condition failed; retried next tick
	// PendingLeft is a lower bound of the pending repos left for later ticks: a tick reads
	// no more of them than its batch assigns.
	PendingLeft int
	ScansLeft   int    // ranges of the ring whose repos may still have to move
	Incomplete  bool   // work the tick knows of is left for the next one
	Cut         string // what stopped the tick's repo work early: "deadline", "max reads", "max moves"
	// Read counts the repo records the tick read for its own decisions (scans, the
	// needs-decision index, clean-up); the anti-entropy sweep's are SweepRead, apart.
	// The tick's read cap (MaxReads) bounds both together.
	Read    int
	Ignored string // why a timer firing was ignored
	Stale   string // why the tick stopped early: the state changed under it
	Writes  int    // Apply calls made (but the sweep record's: SweepWrites)
	// SweepRead counts the repos the anti-entropy sweep read, SweepFound those it found
	// off the owner the ring gives them (and moved), SweepPasses the passes this tick
	// completed, SweepWrites the writes of the sweep's own record.
	SweepRead   int
	SweepFound  int
	SweepPasses int
	SweepWrites int
	ListError   string // why the list sync failed, if it did
}

func (c *Coordinator) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// budget tracks a tick's limits: its deadline, reads and writes. The deadline is
// Budget on the coordinator's clock (a test or simulation moves it as it likes), and the
// context's deadline less Reserve, which is wall time (a Lambda invocation's).
type budget struct {
	clk          clock.Clock
	until        time.Time // on clk
	ctxUntil     time.Time // wall time; zero: none
	reads, moves int
	cfg          Config
	cut          string
}

func newBudget(ctx context.Context, clk clock.Clock, cfg Config) *budget {
	b := &budget{clk: clk, until: clk.Now().Add(cfg.Budget), cfg: cfg}
	if d, ok := ctx.Deadline(); ok {
		b.ctxUntil = d.Add(-cfg.Reserve)
	}
	return b
}

// due reports whether either deadline has come.
func (b *budget) due() bool {
	return !b.clk.Now().Before(b.until) || (!b.ctxUntil.IsZero() && !time.Now().Before(b.ctxUntil))
}

// spent reports whether the tick must stop starting repo work, and remembers why.
func (b *budget) spent() bool {
	switch {
	case b.cut != "":
	case b.due():
		b.cut = "deadline"
	case b.reads >= b.cfg.MaxReads:
		b.cut = "max reads"
	case b.moves >= b.cfg.MaxMoves:
		b.cut = "max moves"
	}
	return b.cut != ""
}

// late reports whether the tick's deadline has come (and so it must stop writing moves).
func (b *budget) late() bool {
	if b.cut == "deadline" || b.due() {
		b.cut = "deadline"
		return true
	}
	return false
}

// page is the size of the next read: at most a page, and what the read cap leaves.
func (b *budget) page() int { return max(min(b.cfg.ReadPage, b.cfg.MaxReads-b.reads), 1) }

// Tick runs one coordinator round (docs/architecture.md, Coordinator): campaign; read the workers and the
// ring head; decide worker states and the ring; write the worker states, then the ring
// (with the ranges whose repos must move), then arm timers; then move repos — those of
// the ranges, then those needing a decision — until the work is done or the tick's
// deadline or caps; then write the ring head again (ranges done, batch), trim outboxes
// and remove dead workers; then sync the repo list.
func (c *Coordinator) Tick(ctx context.Context) (Report, error) {
	c.run.Lock()
	defer c.run.Unlock()
	cfg := c.Config.withDefaults()
	b := newBudget(ctx, c.Clock, cfg)
	now := c.Clock.Now()
	rep := Report{Coordinator: c.ID}
	el := election.Elector{Store: c.Store, ID: c.ID, Group: c.Group, Lease: cfg.Lease}
	term, act, err := el.Campaign(ctx, now)
	rep.Campaign = act.String()
	if errors.Is(err, election.ErrNotLeader) {
		c.log().Debug("not leader", "coordinator", c.ID, "reason", err)
		return rep, nil
	}
	if err != nil {
		return rep, fmt.Errorf("campaign: %w", err)
	}
	rep.Leader, rep.Term = true, term
	if term != c.lastTerm {
		// Another coordinator may have led in between: its cursors are not ours.
		c.cursors, c.lastTerm = [2]string{}, term
	}

	head, cur, err := c.readRing(ctx)
	if err != nil {
		return rep, err
	}
	workers, seen, mem, err := c.membership(ctx, term, head, cur, now, cfg)
	if err != nil {
		return rep, err
	}
	rep.WarmingUp, rep.RingVersion, rep.Members = mem.WarmingUp, head.Version, mem.New.Len()
	if c.quiet.ok { // this tick's plan is the kept no-op
		rep.WorkersByState = maps.Clone(c.quiet.byState) // a handful of states
	} else {
		rep.WorkersByState = countWorkers(workers, mem.WorkerOps)
	}

	t := &tickRun{c: c, ctx: ctx, term: term, cfg: cfg, b: b, rep: &rep, version: head.Version}
	err = t.run(mem, workers, seen, now, head)
	if t.wroteWorkers || err != nil {
		// The kept records' outbox heads or trim points are ours no more (the workers
		// version does not move with them): the next tick reads the workers again.
		c.quiet = quietPlan{}
	}
	rep.RingVersion = t.version
	rep.Cut = b.cut
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrFenced) {
		// Someone moved under us (a heartbeat, a newer term). Everything written so far is
		// consistent on its own; the next tick reads again and carries on.
		rep.Stale = err.Error()
		c.log().Info("tick stopped early", "coordinator", c.ID, "term", term, "reason", err)
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	if c.List != nil {
		// A list that cannot be fetched must not stop the fleet: report and go on. It gets
		// what is left of the invocation, not of the repo work's budget.
		if err := c.List.SyncList(ctx, term); err != nil {
			rep.ListError = err.Error()
			c.log().Warn("list sync", "coordinator", c.ID, "term", term, "err", err)
		}
	}
	level := slog.LevelDebug // a quiet tick is not news
	if rep.Moved+rep.Deleted+rep.Skipped+rep.SweepFound > 0 || mem.RingChanged || len(mem.WorkerOps) > 0 || act == election.TakeOver || rep.Cut != "" {
		level = slog.LevelInfo
	}
	c.log().Log(ctx, level, "tick", "coordinator", c.ID, "term", term, "ring", rep.RingVersion, "members", rep.Members,
		"moved", rep.Moved, "assigned", rep.Assigned, "deleted", rep.Deleted, "skipped", rep.Skipped, "read", rep.Read,
		"pending_left", rep.PendingLeft, "scans_left", rep.ScansLeft, "incomplete", rep.Incomplete, "cut", rep.Cut,
		"warming_up", rep.WarmingUp, "sweep_read", rep.SweepRead, "sweep_found", rep.SweepFound)
	return rep, nil
}

// quietPlan is what a tick whose membership plan changed nothing leaves for the next.
// While the membership does not change (the workers version: heartbeats do not move it),
// the ring stays the same, no tick wrote a worker record since (outbox heads, trims) and
// no worker's silence reaches a threshold (Membership.Until), the plan is that same
// no-op: the tick reads no worker and plans nothing, so a quiet tick does not grow with
// the workers, heartbeats flowing or not. Liveness is still judged on the
// coordinator's clock: at Until the workers are read again, their counts seen.
type quietPlan struct {
	ok      bool
	term    int64
	version uint64 // WorkersVersion the workers were read at
	ring    int64
	until   time.Time
	workers []store.Worker
	seen    map[string]time.Time
	mem     Membership
	byState map[store.WorkerState]int
}

func (q *quietPlan) holds(term int64, version uint64, ring int64, now time.Time) bool {
	return q.ok && q.term == term && q.version == version && q.ring == ring && (q.until.IsZero() || now.Before(q.until))
}

// membership reads the workers and plans their states and the ring, or, when the store
// shows nothing changed since a tick that planned nothing, reuses that tick's view.
func (c *Coordinator) membership(ctx context.Context, term int64, head store.Ring, cur *ring.Ring, now time.Time, cfg Config) ([]store.Worker, map[string]time.Time, Membership, error) {
	// Read before the workers: a write in between then shows as a new version.
	version, err := c.Store.WorkersVersion(ctx)
	versioned := err == nil
	if err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return nil, nil, Membership{}, fmt.Errorf("read workers version: %w", err)
	}
	if versioned {
		if q := c.quiet; q.holds(term, version, head.Version, now) {
			mem := q.mem
			mem.Stored.Scans = slices.Clone(mem.Stored.Scans)
			return q.workers, q.seen, mem, nil
		}
	}
	c.quiet = quietPlan{}
	workers, err := c.Store.ListWorkers(ctx)
	if err != nil {
		return nil, nil, Membership{}, fmt.Errorf("read workers: %w", err)
	}
	seen := c.live.observe(workers, now)
	mem, err := PlanMembership(head, cur, workers, seen, now, cfg)
	if err != nil {
		return nil, nil, Membership{}, err
	}
	if versioned && mem.NoOp() {
		kept := mem
		kept.Stored.Scans = slices.Clone(mem.Stored.Scans)
		c.quiet = quietPlan{ok: true, term: term, version: version, ring: head.Version, until: mem.Until,
			workers: workers, seen: seen, mem: kept, byState: countWorkers(workers, nil)}
	}
	return workers, seen, mem, nil
}

// readRing returns the stored ring head and the ring it describes, decoding the members
// and tokens only when the version changed since the last tick.
func (c *Coordinator) readRing(ctx context.Context) (store.Ring, *ring.Ring, error) {
	head, err := c.Store.GetRingHead(ctx)
	if err != nil {
		return store.Ring{}, nil, fmt.Errorf("read ring: %w", err)
	}
	if c.ring.r != nil && c.ring.version == head.Version {
		return head, c.ring.r, nil
	}
	full, err := c.Store.GetRing(ctx)
	if err != nil {
		return store.Ring{}, nil, fmt.Errorf("read ring: %w", err)
	}
	r, err := ring.FromStore(full)
	if err != nil {
		return store.Ring{}, nil, fmt.Errorf("stored ring: %w", err)
	}
	c.ring = ringCache{version: full.Version, r: r}
	full.Members, full.Tokens = nil, nil
	return full, r, nil
}

// tickRun is one leader tick's writing half.
type tickRun struct {
	c       *Coordinator
	ctx     context.Context
	term    int64
	cfg     Config
	b       *budget
	rep     *Report
	version int64 // of the stored ring
	ap      *applier
	// wroteWorkers: the tick wrote worker records (states, outbox heads, trims).
	wroteWorkers bool
}

func (t *tickRun) run(mem Membership, workers []store.Worker, seen map[string]time.Time, now time.Time, head store.Ring) error {
	c, ctx := t.c, t.ctx
	// 1. Worker states first: deaths, joins, drains are what everything after rests on.
	for _, chunk := range chunks(mem.WorkerOps) {
		t.rep.Writes++
		t.wroteWorkers = true
		if err := c.Store.Apply(ctx, t.term, chunk); err != nil {
			// A conflict means a worker heartbeated since we read it: the plan rests on a
			// stale view, so stop here and decide again next tick.
			return fmt.Errorf("worker states: %w", err)
		}
	}
	// 2. The target ring, with the ranges whose repos must move, before any repo moves:
	// a crash from here on leaves a ring every later tick reconciles owners against.
	stored := mem.Stored
	if mem.RingChanged {
		if err := t.putRing(stored, mem.New); err != nil {
			return err
		}
	}
	// 3. Timers: cheap, and what wakes the tick that declares a death.
	for _, tm := range mem.Timers {
		var err error
		if tm.Cancel {
			err = c.Timer.Cancel(ctx, tm.Name)
		} else {
			err = c.Timer.Set(ctx, tm.Name, tm.At, tm.Payload)
		}
		if err != nil {
			return fmt.Errorf("timer %s: %w", tm.Name, err)
		}
	}
	// 4. Repos: the ranges whose owners changed, then the repos needing a decision.
	t.ap = &applier{store: c.Store, term: t.term, workers: workers, rep: t.rep, b: t.b, wrote: &t.wroteWorkers}
	p := NewPlanner(mem, workers, t.cfg)
	batch := p.Batch
	var left []store.Scan
	if p.Assigning() {
		var err error
		if left, err = t.scans(p, stored.Scans); err != nil {
			return err
		}
	} else {
		left = stored.Scans
	}
	if err := t.needs(p, store.NeedAction); err != nil {
		return err
	}
	if err := t.needs(p, store.NeedOwner); err != nil {
		return err
	}
	if err := t.ap.flush(ctx); err != nil {
		return err
	}
	if err := t.sweep(p, workers, now, len(stored.Scans) > 0); err != nil {
		return err
	}
	t.rep.ScansLeft = len(left)
	t.rep.Incomplete = t.rep.Incomplete || len(left) > 0 || t.b.cut != ""
	// 5. The ring head again: scans done, the batch grown once used up.
	next := stored
	next.Scans = left
	if batch > 0 && p.Batch == 0 && stored.Batch < t.cfg.MaxBatch {
		next.Batch = min(max(stored.Batch, t.cfg.FirstBatch)*2, t.cfg.MaxBatch)
	}
	// 6. Clean-up: trims, and dead workers that own nothing.
	cl := PlanCleanup(mem, workers, seen, now, t.cfg)
	var gone []store.Mutation
	for _, w := range cl.Expired {
		owned, _, err := c.Store.ListReposByOwner(ctx, w.ID, "", 1)
		if err != nil {
			return fmt.Errorf("read repos of %s: %w", w.ID, err)
		}
		t.rep.Read += len(owned)
		if len(owned) == 0 {
			gone = append(gone, store.DeleteWorker{ID: w.ID, ExpectBeats: w.Beats})
		} else if !hasScan(next.Scans, w.ID) {
			// Repos left with a worker gone from the ring and no scan for them (a store
			// written by an older coordinator): scan all of its repos.
			next.Scans = mergeScans(append(next.Scans, store.Scan{Owner: w.ID, From: 0, To: store.MaxPos}))
			t.rep.Incomplete = true
		}
	}
	if next.Batch != stored.Batch || !sameScans(next.Scans, stored.Scans) {
		if err := t.putRing(next, mem.New); err != nil {
			return err
		}
	}
	// Trims and removals delete outbox entries, which on DynamoDB are items of their
	// own: a bounded number an Apply, and none started past the deadline (the rest
	// waits for the next tick).
	for _, chunk := range append(trimChunks(cl.Trims, t.cfg.MaxTrim), chunks(gone)...) {
		if t.b.late() {
			t.rep.Incomplete = true
			break
		}
		t.rep.Writes++
		t.wroteWorkers = true
		if err := c.Store.Apply(ctx, t.term, chunk); err != nil && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("clean-up: %w", err)
		}
	}
	return nil
}

// trimChunks packs trims into Apply calls that delete at most max entries each.
func trimChunks(trims []Trim, max uint64) [][]store.Mutation {
	var out [][]store.Mutation
	var cur []store.Mutation
	var entries uint64
	items := 0
	for _, tr := range trims {
		if len(cur) > 0 && (entries+tr.Entries > max || items+tr.Items() > store.MaxApplyItems) {
			out = append(out, cur)
			cur, entries, items = nil, 0, 0
		}
		cur = append(cur, tr.TrimOutbox)
		entries += tr.Entries
		items += tr.Items()
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// putRing writes head with r's members and tokens over the current version, and keeps
// the decoded ring cached under the new version.
func (t *tickRun) putRing(head store.Ring, r *ring.Ring) error {
	rec := head
	rec.Members, rec.Tokens = r.Members(), r.Tokens()
	t.rep.Writes++
	if err := t.c.Store.Apply(t.ctx, t.term, []store.Mutation{store.PutRing{Ring: rec, ExpectVersion: t.version}}); err != nil {
		return fmt.Errorf("write ring: %w", err)
	}
	t.version++
	t.c.ring = ringCache{version: t.version, r: r}
	return nil
}

// scans moves the repos of each scan's owner in its range to where the ring puts them,
// and returns the scans not finished: cut short, or with a move that did not land.
func (t *tickRun) scans(p *Planner, scans []store.Scan) ([]store.Scan, error) {
	var left []store.Scan
	for i, s := range scans {
		if t.b.spent() {
			return append(left, scans[i:]...), nil
		}
		skipped := t.rep.Skipped
		done, cursor := false, ""
		for !t.b.spent() {
			page, next, err := t.c.Store.ListReposByOwnerRange(t.ctx, s.Owner, s.From, s.To, cursor, t.b.page())
			if err != nil {
				return nil, fmt.Errorf("read repos of %s in [%x, %x]: %w", s.Owner, s.From, s.To, err)
			}
			t.b.reads += len(page)
			t.rep.Read += len(page)
			stopped, err := t.decide(p, page)
			if err != nil {
				return nil, err
			}
			if stopped { // the scan stays: what moved has left the range, the rest is read again
				break
			}
			if next == "" {
				done = true
				break
			}
			cursor = next
		}
		if err := t.ap.flush(t.ctx); err != nil {
			return nil, err
		}
		if !done || t.rep.Skipped != skipped {
			left = append(left, s)
		}
	}
	return left, nil
}

// needs works through one part of the needs-decision index from where the last tick
// stopped, so repos that can get no action now (an overflow repo every re-hash sends
// back) never keep the tick from the ones after them. Pending repos are read no further
// than the batch assigns.
func (t *tickRun) needs(p *Planner, need store.Need) error {
	cursor := &t.c.cursors[need]
	from := *cursor
	for {
		limit := t.b.page()
		if need == store.NeedOwner {
			if !p.Assigning() {
				return nil
			}
			if p.Batch <= 0 {
				if *cursor != "" { // the batch is used up and more follow
					t.rep.PendingLeft, t.rep.Incomplete = 1, true
				}
				return nil
			}
			limit = min(limit, p.Batch)
		}
		if t.b.spent() {
			t.rep.Incomplete = true
			return nil
		}
		page, next, err := t.c.Store.ListReposNeedingDecision(t.ctx, need, *cursor, limit)
		if err != nil {
			return fmt.Errorf("read repos needing a decision: %w", err)
		}
		t.b.reads += len(page)
		t.rep.Read += len(page)
		stopped, err := t.decide(p, page)
		if err != nil {
			return err
		}
		if stopped {
			// The cursor stays before this page: the repos decided have left the index,
			// the rest are read again next tick.
			t.rep.Incomplete = true
			return nil
		}
		*cursor = next
		if next == "" {
			if from != "" { // the part before where this pass began waits for the next one
				t.rep.Incomplete = true
			}
			return nil
		}
	}
}

// decide plans and writes the actions for a page of repos. It stops early, reporting
// so, once the tick's deadline has come: a page's writes (a thousand repos, dozens of
// Apply calls) may take seconds on a slow store.
func (t *tickRun) decide(p *Planner, page []store.Repo) (stopped bool, err error) {
	for _, r := range page {
		if t.b.late() {
			return true, nil
		}
		if a, ok := p.Decide(r); ok {
			if err := t.ap.add(t.ctx, a); err != nil {
				return false, err
			}
		}
	}
	return false, nil
}

func hasScan(scans []store.Scan, owner string) bool {
	for _, s := range scans {
		if s.Owner == owner {
			return true
		}
	}
	return false
}

func sameScans(a, b []store.Scan) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// applier packs repo actions into atomic Apply calls together with their outbox entries,
// keeping each worker's outbox head in step.
type applier struct {
	store   Store
	term    int64
	workers []store.Worker
	heads   map[string]uint64 // from workers, on first use: most ticks write no repo
	rep     *Report
	b       *budget
	pending []RepoAction
	items   int
	wrote   *bool // set once an Apply appends to an outbox
}

func actionItems(a RepoAction, known func(string) bool) int {
	n := 1
	for _, d := range a.Deliveries {
		if known(d.Worker) {
			n += 2 // the entry and, at worst, the worker's head
		}
	}
	return n
}

func (ap *applier) known(id string) bool { _, ok := ap.outboxHeads()[id]; return ok }

func (ap *applier) outboxHeads() map[string]uint64 {
	if ap.heads == nil {
		ap.heads = make(map[string]uint64, len(ap.workers))
		for _, w := range ap.workers {
			ap.heads[w.ID] = w.OutboxHead
		}
	}
	return ap.heads
}

func (ap *applier) add(ctx context.Context, a RepoAction) error {
	n := actionItems(a, ap.known)
	if ap.items+n > store.MaxApplyItems {
		if err := ap.flush(ctx); err != nil {
			return err
		}
	}
	ap.pending = append(ap.pending, a)
	ap.items += n
	ap.b.moves++
	return nil
}

func (ap *applier) flush(ctx context.Context) error {
	if len(ap.pending) == 0 {
		return nil
	}
	batch := ap.pending
	ap.pending, ap.items = nil, 0
	err := ap.write(ctx, batch)
	if errors.Is(err, store.ErrConflict) && len(batch) > 1 {
		// Find the repo that changed under us: write one by one and skip the ones that
		// conflict; the next tick re-reads and re-decides them.
		for _, a := range batch {
			if err := ap.write(ctx, []RepoAction{a}); err != nil && !errors.Is(err, store.ErrConflict) {
				return err
			}
		}
		return nil
	}
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	return err
}

func (ap *applier) write(ctx context.Context, batch []RepoAction) error {
	var muts []store.Mutation
	entries := map[string][]store.OutboxEntry{}
	var order []string
	for _, a := range batch {
		if a.Assign != nil {
			muts = append(muts, *a.Assign)
		}
		if a.Delete != nil {
			muts = append(muts, *a.Delete)
		}
		for _, d := range a.Deliveries {
			if !ap.known(d.Worker) {
				continue // no such worker (record gone): nobody to tell
			}
			if _, ok := entries[d.Worker]; !ok {
				order = append(order, d.Worker)
			}
			entries[d.Worker] = append(entries[d.Worker], d.Entry)
		}
	}
	for _, w := range order {
		muts = append(muts, store.AppendOutbox{Worker: w, ExpectHead: ap.outboxHeads()[w], Entries: entries[w]})
	}
	if len(order) > 0 && ap.wrote != nil {
		*ap.wrote = true
	}
	ap.rep.Writes++
	if err := ap.store.Apply(ctx, ap.term, muts); err != nil {
		if errors.Is(err, store.ErrConflict) {
			if len(batch) == 1 {
				ap.rep.Skipped++
			}
			return err
		}
		return fmt.Errorf("apply repo actions: %w", err)
	}
	for _, w := range order {
		ap.outboxHeads()[w] += uint64(len(entries[w]))
	}
	for _, a := range batch {
		switch {
		case a.Delete != nil:
			ap.rep.Deleted++
		case a.Assign != nil && a.Assign.Owner != a.Repo.Owner:
			ap.rep.Moved++
			if a.Repo.State == store.RepoPending {
				ap.rep.Assigned++
			}
		}
	}
	return nil
}

func chunks(muts []store.Mutation) [][]store.Mutation {
	var out [][]store.Mutation
	var cur []store.Mutation
	n := 0
	for _, m := range muts {
		if n+m.Items() > store.MaxApplyItems && len(cur) > 0 {
			out = append(out, cur)
			cur, n = nil, 0
		}
		cur = append(cur, m)
		n += m.Items()
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func countWorkers(ws []store.Worker, ops []store.Mutation) map[store.WorkerState]int {
	next := map[string]store.WorkerState{} // the few states this tick changes
	for _, op := range ops {
		if s, ok := op.(store.SetWorkerState); ok {
			next[s.ID] = s.State
		}
	}
	out := map[store.WorkerState]int{}
	for _, w := range ws {
		st := w.State
		if s, ok := next[w.ID]; ok {
			st = s
		}
		out[st]++
	}
	return out
}

// OnTimer handles a coordinator timer firing. Firings are at-least-once and may be late:
// a death timer for a worker that has heartbeated since it was armed is ignored (seed
// 000); anything else runs a tick, which decides from the store alone.
func (c *Coordinator) OnTimer(ctx context.Context, raw []byte) (Report, error) {
	var p TimerPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return Report{}, fmt.Errorf("timer payload: %w", err)
	}
	switch p.Kind {
	case "death":
		w, err := c.Store.GetWorker(ctx, p.Worker)
		if errors.Is(err, store.ErrNotFound) {
			return Report{Ignored: "worker " + p.Worker + " is gone"}, nil
		}
		if err != nil {
			return Report{}, fmt.Errorf("read worker %s: %w", p.Worker, err)
		}
		if w.Beats != p.Beats {
			c.log().Info("death timer ignored: worker heartbeated since", "worker", p.Worker,
				"armed_for_beats", p.Beats, "beats", w.Beats)
			return Report{Ignored: "worker " + p.Worker + " heartbeated since"}, nil
		}
		return c.Tick(ctx)
	case "warmup":
		return c.Tick(ctx)
	default:
		return Report{}, fmt.Errorf("timer payload: unknown kind %q", p.Kind)
	}
}
