// Package coordinator is the fleet's control loop: one tick campaigns for leadership,
// reads the state that needs a decision, plans with pure functions, applies the plan
// with writes fenced by the term, and arms timers (docs/architecture.md, Coordinator).
package coordinator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Config holds the coordinator's knobs. Zero fields take the defaults of DefaultConfig.
type Config struct {
	Warmup       time.Duration // first-start wait before anything is assigned
	Grace        time.Duration // silence after which a worker is dead and its repos move
	SuspectAfter time.Duration // silence after which a worker is suspect (nothing moves)
	Lease        time.Duration // leadership lease; longer than the tick interval
	FirstBatch   int           // pending repos assigned in the first tick after warm-up
	MaxBatch     int           // the batch doubles each tick that used it up, up to this
	MaxMoves     int           // repo writes per tick; the rest continue next tick
	MaxReads     int           // repo records read per tick; the rest continue next tick
	MaxSalt      int           // disk-guard re-hashes before a repo stays overflow
	TrimEvery    uint64        // trim a worker's outbox once this many entries are acked
	MaxLag       uint64        // unacked entries after which the outbox is cut (full resync)
	ReadPage     int           // page size of store reads
	// MaxTrim bounds the outbox entries a worker's trim deletes in a tick, and one Apply
	// deletes: on DynamoDB each entry is an item of its own, deleted by the Apply.
	MaxTrim uint64
	// Budget is how long a tick works: 8 s fits in the local fleet's 10 s tick and
	// keeps a Lambda tick short (a bulk add takes more ticks, each no longer). With a
	// deadline on its context (a Lambda invocation's) it also stops Reserve before that.
	// Worker states, the ring and timers always go first; repo moves and trims stop at
	// the deadline and resume next tick.
	Budget  time.Duration
	Reserve time.Duration
	// KeepDead is how long a dead worker's record stays visible once it owns nothing.
	KeepDead time.Duration
	// SweepPeriod bounds how long the anti-entropy sweep takes to check every repo's
	// owner against the ring (invariant 12); it paces itself to finish a pass in three
	// quarters of it.
	SweepPeriod time.Duration
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Warmup:       10 * time.Minute,
		Grace:        10 * time.Minute,
		SuspectAfter: 30 * time.Second,
		Lease:        3 * time.Minute,
		FirstBatch:   1000,
		MaxBatch:     100000,
		MaxMoves:     50000,
		MaxReads:     100000,
		MaxSalt:      8,
		TrimEvery:    256,
		MaxLag:       100000,
		MaxTrim:      1000,
		ReadPage:     1000,
		Budget:       8 * time.Second,
		Reserve:      5 * time.Second,
		KeepDead:     time.Hour,
		SweepPeriod:  6 * time.Hour,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Warmup == 0 { // negative (NoWarmup) stays: withDefaults must be idempotent
		c.Warmup = d.Warmup
	}
	set := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&c.Grace, d.Grace)
	set(&c.SuspectAfter, d.SuspectAfter)
	set(&c.Lease, d.Lease)
	set(&c.KeepDead, d.KeepDead)
	set(&c.SweepPeriod, d.SweepPeriod)
	set(&c.Budget, d.Budget)
	set(&c.Reserve, d.Reserve)
	seti := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	seti(&c.FirstBatch, d.FirstBatch)
	seti(&c.MaxBatch, d.MaxBatch)
	seti(&c.MaxMoves, d.MaxMoves)
	seti(&c.MaxReads, d.MaxReads)
	seti(&c.MaxSalt, d.MaxSalt)
	seti(&c.ReadPage, d.ReadPage)
	if c.TrimEvery == 0 {
		c.TrimEvery = d.TrimEvery
	}
	if c.MaxLag == 0 {
		c.MaxLag = d.MaxLag
	}
	if c.MaxTrim == 0 {
		c.MaxTrim = d.MaxTrim
	}
	return c
}

// NoWarmup is a Warmup value that disables the first-start wait (tests, single laptop).
const NoWarmup time.Duration = -1

// Membership is the first half of a plan: worker state changes and the ring after this
// tick.
type Membership struct {
	Old, New *ring.Ring
	// Stored is the ring record to write (without members and tokens, which New has):
	// New's bookkeeping and the scans still to do. RingChanged says it differs from what
	// was read; it is written before any repo moves.
	Stored      store.Ring
	RingChanged bool
	WorkerOps   []store.Mutation // state changes, applied first
	Timers      []TimerOp
	WarmingUp   bool
	// Until is when the plan can next change on its own: a worker's silence reaching
	// SuspectAfter or Grace, or the warm-up ending. Before it, the same workers, seen and
	// ring give the same plan. Zero: nothing is due.
	Until time.Time
}

// NoOp reports whether the plan changes nothing.
func (m Membership) NoOp() bool {
	return len(m.WorkerOps) == 0 && len(m.Timers) == 0 && !m.RingChanged
}

// soonest moves *t to at if at comes first (a zero *t is no time yet).
func soonest(t *time.Time, at time.Time) {
	if t.IsZero() || at.Before(*t) {
		*t = at
	}
}

// TimerOp arms (or, with Cancel, disarms) a named timer.
type TimerOp struct {
	Name    string
	At      time.Time
	Payload []byte
	Cancel  bool
}

// TimerPayload is the JSON a coordinator timer carries. A death timer carries the
// heartbeat count it was armed for; a firing after the count moved is ignored (ADR 3).
type TimerPayload struct {
	Kind   string `json:"kind"` // "death" | "warmup"
	Worker string `json:"worker,omitempty"`
	Beats  uint64 `json:"beats,omitempty"`
}

// Timer names.
const warmupTimer = "warmup"

func deathTimer(worker string) string { return "death-" + worker }

func payload(p TimerPayload) []byte {
	b, _ := json.Marshal(p) // a struct of strings and numbers always marshals
	return b
}

// PlanMembership decides worker state changes and the new ring. head is the stored ring
// record (its members and tokens are not read), cur the ring it describes, seen when
// (on the coordinator's clock) each worker's heartbeat count was first seen at its
// current value; a worker missing from seen counts as seen now. It is pure.
func PlanMembership(head store.Ring, cur *ring.Ring, workers []store.Worker, seen map[string]time.Time, now time.Time, cfg Config) (Membership, error) {
	cfg = cfg.withDefaults()
	stored := head
	stored.Members, stored.Tokens = nil, nil
	stored.Scans = slices.Clone(head.Scans)
	m := Membership{Old: cur, New: cur, Stored: stored}
	if head.Version == 0 && head.WarmupUntil.IsZero() {
		// First start ever: wait for workers to show up before hashing (anti-thrashing).
		m.Stored.Hash = ring.HashID
		m.Stored.WarmupUntil = now.Add(max(cfg.Warmup, 0))
		m.Stored.Batch = cfg.FirstBatch
		m.RingChanged = true
		if cfg.Warmup > 0 {
			m.Timers = append(m.Timers, TimerOp{Name: warmupTimer, At: m.Stored.WarmupUntil, Payload: payload(TimerPayload{Kind: "warmup"})})
		}
	}
	m.WarmingUp = now.Before(m.Stored.WarmupUntil)
	if m.WarmingUp {
		m.Until = m.Stored.WarmupUntil
	}

	// Stores list workers by id already; sorting a copy is for any other caller. What a
	// quiet tick does per worker is kept to map-free work: at a thousand workers it is
	// most of the tick.
	sorted := workers
	byID := func(a, b store.Worker) int { return cmp.Compare(a.ID, b.ID) }
	if !slices.IsSortedFunc(sorted, byID) {
		sorted = slices.Clone(workers)
		slices.SortFunc(sorted, byID)
	}
	want := make([]store.Member, 0, len(sorted)) // desired ring members, by id
	for _, w := range sorted {
		since, ok := seen[w.ID]
		if !ok {
			since = now
		}
		age := now.Sub(since) // never negative: since is the coordinator's own reading
		switch w.State {
		case store.WorkerDead:
			// stays out; its record goes once it owns nothing
		case store.WorkerDraining:
			m.WorkerOps = append(m.WorkerOps, store.SetWorkerState{ID: w.ID, State: store.WorkerDead})
			m.Timers = append(m.Timers, TimerOp{Name: deathTimer(w.ID), Cancel: true})
		case store.WorkerJoining, store.WorkerActive, store.WorkerSuspect:
			if age < cfg.SuspectAfter {
				soonest(&m.Until, since.Add(cfg.SuspectAfter))
			} else {
				soonest(&m.Until, since.Add(cfg.Grace))
			}
			switch {
			case age >= cfg.Grace:
				m.WorkerOps = append(m.WorkerOps, store.SetWorkerState{ID: w.ID, State: store.WorkerDead, ExpectBeats: w.Beats})
			case w.State == store.WorkerJoining:
				if !m.WarmingUp && age < cfg.SuspectAfter {
					m.WorkerOps = append(m.WorkerOps, store.SetWorkerState{ID: w.ID, State: store.WorkerActive})
					want = append(want, store.Member{ID: w.ID, Slot: w.Slot})
				}
			case age >= cfg.SuspectAfter:
				if w.State == store.WorkerActive {
					// The silence is recorded with the state, so any coordinator (another
					// Lambda environment, a restarted process) can finish judging it. The
					// timer that wakes a tick when the grace ends is armed once: re-arming
					// every tick would cost Scheduler calls and, with its one-minute
					// precision, push it past the minute tick. Should the arming be lost,
					// the minute tick still declares the death, at most a tick late.
					m.WorkerOps = append(m.WorkerOps, store.SetWorkerState{ID: w.ID, State: store.WorkerSuspect,
						ExpectBeats: w.Beats, SilentSince: since})
					m.Timers = append(m.Timers, TimerOp{Name: deathTimer(w.ID), At: since.Add(cfg.Grace),
						Payload: payload(TimerPayload{Kind: "death", Worker: w.ID, Beats: w.Beats})})
				}
				want = append(want, store.Member{ID: w.ID, Slot: w.Slot})
			default:
				if w.State == store.WorkerSuspect {
					m.WorkerOps = append(m.WorkerOps, store.SetWorkerState{ID: w.ID, State: store.WorkerActive})
					m.Timers = append(m.Timers, TimerOp{Name: deathTimer(w.ID), Cancel: true})
				}
				want = append(want, store.Member{ID: w.ID, Slot: w.Slot})
			}
		}
	}
	if m.WarmingUp {
		return m, nil // nothing is hashed before the warm-up ends
	}

	removes, adds := diffMembers(cur.Members(), want)
	next := cur
	var err error
	for _, id := range removes {
		if next, err = next.Remove(id); err != nil {
			return Membership{}, fmt.Errorf("remove %s from the ring: %w", id, err)
		}
	}
	for _, mem := range adds {
		if next, err = next.Add(mem); err != nil {
			return Membership{}, fmt.Errorf("add %s to the ring: %w", mem.ID, err)
		}
	}
	if next != cur {
		m.New = next
		m.Stored.Hash = ring.HashID
		m.Stored.Scans = PlanScans(m.Stored.Scans, cur, next)
		m.RingChanged = true
	}
	return m, nil
}

// diffMembers walks two member lists sorted by id: the ids of have missing from want,
// and the members of want missing from have.
func diffMembers(have, want []store.Member) (removes []string, adds []store.Member) {
	i, j := 0, 0
	for i < len(have) || j < len(want) {
		switch {
		case j == len(want) || i < len(have) && have[i].ID < want[j].ID:
			removes = append(removes, have[i].ID)
			i++
		case i == len(have) || want[j].ID < have[i].ID:
			adds = append(adds, want[j])
			j++
		default:
			i, j = i+1, j+1
		}
	}
	return removes, adds
}

// PlanScans is the scans after the ring changed from old to next: the scans not done
// yet and, for every arc that changed owner, its previous owner's repos there; each
// narrowed to where next gives the positions to another member (a member no longer in
// next scans the whole circle). It is pure.
func PlanScans(scans []store.Scan, old, next *ring.Ring) []store.Scan {
	all := slices.Clone(scans)
	for _, mv := range ring.Moves(old, next) {
		if mv.From == "" {
			continue // the ring was empty: the repos are pending, in no owner's index
		}
		for _, rg := range arcRanges(mv.Start, mv.End) {
			all = append(all, store.Scan{Owner: mv.From, From: rg[0], To: rg[1]})
		}
	}
	whole := map[string]bool{}
	var out []store.Scan
	for _, s := range all {
		if !next.Has(s.Owner) {
			whole[s.Owner] = true
			continue
		}
		for _, sp := range next.Spans(s.From, s.To) {
			if sp.Owner != s.Owner {
				out = append(out, store.Scan{Owner: s.Owner, From: sp.From, To: sp.To})
			}
		}
	}
	for owner := range whole {
		out = append(out, store.Scan{Owner: owner, From: 0, To: store.MaxPos})
	}
	return mergeScans(out)
}

// arcRanges turns the arc (start, end] into ranges of positions; start == end is the
// whole circle.
func arcRanges(start, end uint64) [][2]uint64 {
	switch {
	case start == end:
		return [][2]uint64{{0, store.MaxPos}}
	case start < end:
		return [][2]uint64{{start + 1, end}}
	case start == store.MaxPos:
		return [][2]uint64{{0, end}}
	default:
		return [][2]uint64{{start + 1, store.MaxPos}, {0, end}}
	}
}

// mergeScans sorts scans by owner and position and joins the overlapping or adjacent
// ones of one owner.
func mergeScans(scans []store.Scan) []store.Scan {
	slices.SortFunc(scans, func(a, b store.Scan) int {
		return cmp.Or(cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	var out []store.Scan
	for _, s := range scans {
		if n := len(out); n > 0 && out[n-1].Owner == s.Owner && (out[n-1].To == store.MaxPos || s.From <= out[n-1].To+1) {
			out[n-1].To = max(out[n-1].To, s.To)
			continue
		}
		out = append(out, s)
	}
	return out
}

// RepoAction is one repo's write and the outbox entries that go with it; the two are
// applied atomically so a worker never misses an assignment.
type RepoAction struct {
	Repo       store.Repo
	Assign     *store.AssignRepo
	Delete     *store.DeleteRepo
	Deliveries []Delivery
}

// Delivery is an outbox entry for one worker.
type Delivery struct {
	Worker string
	Entry  store.OutboxEntry
}

// Planner decides, repo by repo, what a tick does with the repos it reads, against the
// ring of a Membership. It is pure but for its batch counter.
type Planner struct {
	mem     Membership
	cfg     Config
	workers []store.Worker
	// reachable: workers told when a repo leaves them; built by the first decision that
	// needs it, so a tick that decides nothing does no per-worker work here.
	reachable map[string]bool
	// Batch is how many pending repos may still be assigned this tick.
	Batch int
}

// NewPlanner returns a planner for mem; workers are the records the tick read.
func NewPlanner(mem Membership, workers []store.Worker, cfg Config) *Planner {
	cfg = cfg.withDefaults()
	p := &Planner{mem: mem, cfg: cfg, workers: workers}
	p.Batch = mem.Stored.Batch
	if p.Batch <= 0 {
		p.Batch = cfg.FirstBatch
	}
	if mem.WarmingUp {
		p.Batch = 0
	}
	return p
}

// Assigning reports whether the ring has members to assign to.
func (p *Planner) Assigning() bool { return !p.mem.WarmingUp && p.mem.New.Len() > 0 }

// canReach reports whether a worker is told when a repo leaves it: it still exists and
// is not dead (nor about to be, by this tick's worker states).
func (p *Planner) canReach(id string) bool {
	if p.reachable == nil {
		dead := deadByOps(p.mem.WorkerOps)
		p.reachable = make(map[string]bool, len(p.workers))
		for _, w := range p.workers {
			p.reachable[w.ID] = w.State != store.WorkerDead && w.State != store.WorkerDraining && !dead[w.ID]
		}
	}
	return p.reachable[id]
}

func deadByOps(ops []store.Mutation) map[string]bool {
	dead := map[string]bool{}
	for _, op := range ops {
		if s, ok := op.(store.SetWorkerState); ok && s.State == store.WorkerDead {
			dead[s.ID] = true
		}
	}
	return dead
}

func (p *Planner) owner(r store.Repo, salt int) string {
	o, _ := p.mem.New.Owner(store.RingHash(store.RingKey(r.URL, salt)))
	return o
}

// Decide returns r's action, or false when r needs none now: it is where the ring puts
// it, it is pending beyond this tick's batch, or it is an overflow repo every re-hash
// sends back to the same worker.
func (p *Planner) Decide(r store.Repo) (RepoAction, bool) {
	switch {
	case r.State == store.RepoDeleting:
		target := r.Owner
		if !p.mem.New.Has(target) {
			target = p.owner(r, r.Salt)
		}
		a := RepoAction{Repo: r, Delete: &store.DeleteRepo{ID: r.ID, ExpectEpoch: r.OwnerEpoch}}
		if target != "" {
			a.Deliveries = append(a.Deliveries, Delivery{target, store.OutboxEntry{Op: store.OpPurge, RepoID: r.ID, URL: r.URL, Epoch: r.OwnerEpoch}})
		}
		if r.Owner != "" && r.Owner != target && p.canReach(r.Owner) {
			a.Deliveries = append(a.Deliveries, Delivery{r.Owner, store.OutboxEntry{Op: store.OpDel, RepoID: r.ID, URL: r.URL, Epoch: r.OwnerEpoch}})
		}
		return a, true
	case !p.Assigning():
		return RepoAction{}, false
	case r.State == store.RepoOverflow:
		salt := r.Salt + 1
		for salt <= p.cfg.MaxSalt && p.owner(r, salt) == r.Owner {
			salt++
		}
		if salt <= p.cfg.MaxSalt {
			return p.move(r, p.owner(r, salt), salt, store.RepoCloning, 0), true
		}
		if want := p.owner(r, r.Salt); want != r.Owner {
			// Every re-hash lands on its worker, but the ring gave its place to another
			// (a scan found it): a fresh try there.
			return p.move(r, want, r.Salt, store.RepoCloning, 0), true
		}
		return RepoAction{}, false // stays overflow
	case r.Owner == "":
		if !r.SyncRequested { // a sync request jumps the batch: someone wants it now
			if p.Batch <= 0 {
				return RepoAction{}, false
			}
			p.Batch--
		}
		return p.move(r, p.owner(r, r.Salt), r.Salt, store.RepoCloning, 0), true
	}
	want := p.owner(r, r.Salt)
	switch {
	case r.Owner == want && r.SyncRequested:
		a := RepoAction{Repo: r, Assign: &store.AssignRepo{ID: r.ID, ExpectOwner: r.Owner, ExpectEpoch: r.OwnerEpoch,
			Owner: r.Owner, Salt: r.Salt, Priority: r.Priority, ClearSync: true}}
		a.Deliveries = []Delivery{{r.Owner, store.OutboxEntry{Op: store.OpSync, RepoID: r.ID, URL: r.URL, Epoch: r.OwnerEpoch + 1}}}
		return a, true
	case r.Owner == want:
		return RepoAction{}, false
	}
	prio := r.Priority
	if !p.mem.New.Has(r.Owner) {
		prio = 0 // orphan: to the front of the new owner's queue
	}
	return p.move(r, want, r.Salt, "", prio), true
}

func (p *Planner) move(r store.Repo, to string, salt int, state store.RepoState, prio float64) RepoAction {
	a := RepoAction{Repo: r, Assign: &store.AssignRepo{ID: r.ID, ExpectOwner: r.Owner, ExpectEpoch: r.OwnerEpoch,
		Owner: to, State: state, Salt: salt, Priority: prio, ClearSync: r.SyncRequested}}
	if r.Owner != "" && r.Owner != to && p.canReach(r.Owner) {
		a.Deliveries = append(a.Deliveries, Delivery{r.Owner, store.OutboxEntry{Op: store.OpDel, RepoID: r.ID, URL: r.URL, Epoch: r.OwnerEpoch}})
	}
	a.Deliveries = append(a.Deliveries, Delivery{to, store.OutboxEntry{Op: store.OpAdd, RepoID: r.ID, URL: r.URL, Epoch: r.OwnerEpoch + 1, Priority: prio}})
	if r.SyncRequested && r.Owner != "" {
		// A hook or a sync for a repo on its way between owners: the move clears the
		// request, so the new owner must carry it out, not just schedule the repo.
		a.Deliveries = append(a.Deliveries, Delivery{to, store.OutboxEntry{Op: store.OpSync, RepoID: r.ID, URL: r.URL, Epoch: r.OwnerEpoch + 1}})
	}
	return a
}

// Cleanup is the end of a tick's plan: outbox trims of live workers, and the dead
// workers whose record may go once they own nothing.
type Cleanup struct {
	Trims []Trim
	// Expired are dead workers silent past Grace + KeepDead, out of the ring: deleted
	// once a read shows they own nothing.
	Expired []store.Worker
}

// Trim is an outbox trim and how many entries it deletes.
type Trim struct {
	store.TrimOutbox
	Entries uint64
}

// PlanCleanup is pure; seen is as for PlanMembership.
func PlanCleanup(mem Membership, workers []store.Worker, seen map[string]time.Time, now time.Time, cfg Config) Cleanup {
	cfg = cfg.withDefaults()
	var c Cleanup
	dead := deadByOps(mem.WorkerOps)
	for _, w := range workers {
		if w.State == store.WorkerDead {
			since, ok := seen[w.ID]
			if ok && now.Sub(since) >= cfg.Grace+cfg.KeepDead && !mem.New.Has(w.ID) {
				c.Expired = append(c.Expired, w)
			}
			continue
		}
		if dead[w.ID] {
			continue
		}
		var through uint64
		switch {
		case w.OutboxHead > w.AckSeq && w.OutboxHead-w.AckSeq > cfg.MaxLag && w.OutboxHead > w.TrimmedTo:
			// Too far behind: cut the outbox at its head in one go; the worker sees its ack
			// below the trim point and resyncs in full, with nothing left to replay.
			through = w.OutboxHead
		case w.AckSeq > w.TrimmedTo && w.AckSeq-w.TrimmedTo >= cfg.TrimEvery:
			through = w.AckSeq
		default:
			continue
		}
		// The trim point moves at once; the entries it drops are deleted at most MaxTrim a
		// tick, the oldest first (later trims take the rest).
		c.Trims = append(c.Trims, Trim{TrimOutbox: store.TrimOutbox{Worker: w.ID, Through: through, Max: cfg.MaxTrim},
			Entries: min(through-w.TrimmedTo, cfg.MaxTrim)})
	}
	return c
}
