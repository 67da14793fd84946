// Package coordinator is the fleet's control loop: one tick campaigns for leadership,
// reads the state that needs a decision, plans with the pure Reconcile, applies the plan
// with writes fenced by the term, and arms timers (DESIGN.md §4).
package coordinator

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Config holds the coordinator's knobs. Zero fields take the defaults of DefaultConfig.
type Config struct {
	Warmup       time.Duration // first-start wait before anything is assigned (seed 004)
	Grace        time.Duration // silence after which a worker is dead and its repos move
	SuspectAfter time.Duration // silence after which a worker is suspect (nothing moves)
	Lease        time.Duration // leadership lease; longer than the tick interval
	FirstBatch   int           // pending repos assigned in the first tick after warm-up
	MaxBatch     int           // the batch doubles each tick up to this
	MaxMoves     int           // repo writes per tick; the rest continue next tick
	MaxSalt      int           // disk-guard re-hashes before a repo stays overflow
	TrimEvery    uint64        // trim a worker's outbox once this many entries are acked
	MaxLag       uint64        // unacked entries after which the outbox is cut (full resync)
	ReadPage     int           // page size of store reads
	// KeepDead is how long a dead worker's record stays visible once it owns nothing.
	KeepDead time.Duration
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
		MaxSalt:      8,
		TrimEvery:    256,
		MaxLag:       100000,
		ReadPage:     1000,
		KeepDead:     time.Hour,
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
	seti := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	seti(&c.FirstBatch, d.FirstBatch)
	seti(&c.MaxBatch, d.MaxBatch)
	seti(&c.MaxMoves, d.MaxMoves)
	seti(&c.MaxSalt, d.MaxSalt)
	seti(&c.ReadPage, d.ReadPage)
	if c.TrimEvery == 0 {
		c.TrimEvery = d.TrimEvery
	}
	if c.MaxLag == 0 {
		c.MaxLag = d.MaxLag
	}
	return c
}

// NoWarmup is a Warmup value that disables the first-start wait (tests, single laptop).
const NoWarmup time.Duration = -1

// Membership is the first half of a plan: who is in the ring after this tick.
type Membership struct {
	Old, New    *ring.Ring
	Stored      store.Ring       // the ring record to write (New plus bookkeeping)
	RingChanged bool             // Stored differs from what was read
	WorkerOps   []store.Mutation // state changes, applied before any repo moves
	Timers      []TimerOp
	// LoadOwners are the workers whose repos the tick must read: members whose arcs
	// changed and every worker not in the new ring that may still own repos.
	LoadOwners []string
	WarmingUp  bool
}

// TimerOp arms (or, with Cancel, disarms) a named timer.
type TimerOp struct {
	Name    string
	At      time.Time
	Payload []byte
	Cancel  bool
}

// TimerPayload is the JSON a coordinator timer carries. A death timer carries the
// heartbeat it was armed for; a firing after a newer heartbeat is ignored (seed 000).
type TimerPayload struct {
	Kind        string    `json:"kind"` // "death" | "warmup"
	Worker      string    `json:"worker,omitempty"`
	HeartbeatAt time.Time `json:"heartbeat_at,omitzero"`
}

// Timer names.
const warmupTimer = "warmup"

func deathTimer(worker string) string { return "death-" + worker }

func payload(p TimerPayload) []byte {
	b, _ := json.Marshal(p) // a struct of strings and times always marshals
	return b
}

// PlanMembership decides worker state changes and the new ring. It is pure.
func PlanMembership(stored store.Ring, workers []store.Worker, now time.Time, cfg Config) (Membership, error) {
	cfg = cfg.withDefaults()
	old, err := ring.FromStore(stored)
	if err != nil {
		return Membership{}, fmt.Errorf("stored ring: %w", err)
	}
	m := Membership{Old: old, New: old, Stored: stored}
	if stored.Version == 0 && stored.WarmupUntil.IsZero() {
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

	byID := map[string]store.Worker{}
	for _, w := range workers {
		byID[w.ID] = w
	}
	want := map[string]store.Member{} // desired ring members
	sorted := slices.Clone(workers)
	slices.SortFunc(sorted, func(a, b store.Worker) int { return cmpString(a.ID, b.ID) })
	for _, w := range sorted {
		age := now.Sub(w.HeartbeatAt)
		switch w.State {
		case store.WorkerDead:
			// stays out; its record goes once it owns nothing
		case store.WorkerDraining:
			m.WorkerOps = append(m.WorkerOps, store.SetWorkerState{ID: w.ID, State: store.WorkerDead})
			m.Timers = append(m.Timers, TimerOp{Name: deathTimer(w.ID), Cancel: true})
		case store.WorkerJoining, store.WorkerActive, store.WorkerSuspect:
			switch {
			case age >= cfg.Grace:
				m.WorkerOps = append(m.WorkerOps, store.SetWorkerState{ID: w.ID, State: store.WorkerDead, ExpectHeartbeat: w.HeartbeatAt})
			case w.State == store.WorkerJoining:
				if !m.WarmingUp && age < cfg.SuspectAfter {
					m.WorkerOps = append(m.WorkerOps, store.SetWorkerState{ID: w.ID, State: store.WorkerActive})
					want[w.ID] = store.Member{ID: w.ID, Slot: w.Slot}
				}
			case age >= cfg.SuspectAfter:
				if w.State == store.WorkerActive {
					m.WorkerOps = append(m.WorkerOps, store.SetWorkerState{ID: w.ID, State: store.WorkerSuspect, ExpectHeartbeat: w.HeartbeatAt})
					// Arm the timer that wakes a tick when the grace ends, carrying the
					// heartbeat it was armed for, once: re-arming every tick would cost
					// Scheduler calls and, with its one-minute precision, push it past the
					// minute tick. Should the arming be lost, the minute tick still declares
					// the death, at most a tick late.
					m.Timers = append(m.Timers, TimerOp{Name: deathTimer(w.ID), At: w.HeartbeatAt.Add(cfg.Grace),
						Payload: payload(TimerPayload{Kind: "death", Worker: w.ID, HeartbeatAt: w.HeartbeatAt})})
				}
				want[w.ID] = store.Member{ID: w.ID, Slot: w.Slot}
			default:
				if w.State == store.WorkerSuspect {
					m.WorkerOps = append(m.WorkerOps, store.SetWorkerState{ID: w.ID, State: store.WorkerActive})
					m.Timers = append(m.Timers, TimerOp{Name: deathTimer(w.ID), Cancel: true})
				}
				want[w.ID] = store.Member{ID: w.ID, Slot: w.Slot}
			}
		}
	}
	if m.WarmingUp {
		want = map[string]store.Member{} // nothing is hashed before the warm-up ends
	}

	next := old
	for _, mem := range old.Members() {
		if _, ok := want[mem.ID]; !ok && !m.WarmingUp {
			if next, err = next.Remove(mem.ID); err != nil {
				return Membership{}, fmt.Errorf("remove %s from the ring: %w", mem.ID, err)
			}
		}
	}
	var adds []string
	for id := range want {
		if !next.Has(id) {
			adds = append(adds, id)
		}
	}
	slices.Sort(adds)
	for _, id := range adds {
		if next, err = next.Add(want[id]); err != nil {
			return Membership{}, fmt.Errorf("add %s to the ring: %w", id, err)
		}
	}
	m.New = next
	if next != old {
		m.Stored.Members = next.Members()
		m.Stored.Tokens = next.Tokens()
		m.Stored.Hash = ring.HashID
		m.RingChanged = true
	}

	owners := map[string]bool{}
	for _, mv := range ring.Moves(old, next) {
		if mv.From != "" {
			owners[mv.From] = true
		}
	}
	for _, w := range workers {
		if !next.Has(w.ID) {
			owners[w.ID] = true // joining, dead, draining: may own repos from an earlier tick
		}
	}
	for _, mem := range old.Members() {
		if _, ok := byID[mem.ID]; !ok {
			owners[mem.ID] = true // a member whose worker record is gone
		}
	}
	for id := range owners {
		m.LoadOwners = append(m.LoadOwners, id)
	}
	slices.Sort(m.LoadOwners)
	return m, nil
}

// State is what Reconcile decides on.
type State struct {
	Ring    store.Ring
	Workers []store.Worker
	// Repos are the candidates: repos needing a decision and repos of Membership.LoadOwners.
	Repos []store.Repo
}

// Plan is the writes one tick makes, in the order they are applied.
type Plan struct {
	Membership
	Actions []RepoAction
	// DeleteWorkers are dead workers that own nothing any more; deleted after the ring.
	DeleteWorkers []store.Mutation
	Trims         []store.Mutation
	// Incomplete is set when MaxMoves cut the plan: the ring is then not written, so the
	// next tick finds the same changes and finishes them.
	Incomplete  bool
	Assigned    int // pending repos assigned
	PendingLeft int // pending repos beyond this tick's batch
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

// Reconcile computes the whole plan for a tick. It is pure: same inputs, same plan.
func Reconcile(s State, now time.Time, cfg Config) (Plan, error) {
	cfg = cfg.withDefaults()
	mem, err := PlanMembership(s.Ring, s.Workers, now, cfg)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Membership: mem}
	live := map[string]bool{}
	for _, mm := range mem.New.Members() {
		live[mm.ID] = true
	}
	workers := map[string]store.Worker{}
	for _, w := range s.Workers {
		workers[w.ID] = w
	}
	// A worker that still exists and is not dead gets told when a repo leaves it.
	reachable := func(id string) bool {
		w, ok := workers[id]
		return ok && w.State != store.WorkerDead && w.State != store.WorkerDraining && !deadByOps(mem.WorkerOps, id)
	}
	ownerOf := func(r store.Repo, salt int) string {
		o, _ := mem.New.Owner(ring.KeyHash(store.RingKey(r.URL, salt)))
		return o
	}

	repos := dedupe(s.Repos)
	budget := mem.Stored.Batch
	if budget <= 0 {
		budget = cfg.FirstBatch
	}
	usedBatch := 0
	for _, r := range repos {
		if len(p.Actions) >= cfg.MaxMoves {
			p.Incomplete = true
			break
		}
		var a *RepoAction
		switch {
		case r.State == store.RepoDeleting:
			target := r.Owner
			if !live[target] {
				target = ownerOf(r, r.Salt)
			}
			a = &RepoAction{Repo: r, Delete: &store.DeleteRepo{ID: r.ID, ExpectEpoch: r.OwnerEpoch}}
			if target != "" {
				a.Deliveries = append(a.Deliveries, Delivery{target, store.OutboxEntry{Op: store.OpPurge, RepoID: r.ID, URL: r.URL, Epoch: r.OwnerEpoch}})
			}
			if r.Owner != "" && r.Owner != target && reachable(r.Owner) {
				a.Deliveries = append(a.Deliveries, Delivery{r.Owner, store.OutboxEntry{Op: store.OpDel, RepoID: r.ID, URL: r.URL, Epoch: r.OwnerEpoch}})
			}
		case mem.WarmingUp || mem.New.Len() == 0:
			continue
		case r.State == store.RepoOverflow:
			salt := r.Salt + 1
			for salt <= cfg.MaxSalt && ownerOf(r, salt) == r.Owner {
				salt++
			}
			if salt > cfg.MaxSalt {
				continue // every re-hash lands on the full worker; stays overflow
			}
			a = move(r, ownerOf(r, salt), salt, store.RepoCloning, 0, reachable)
		case r.State == store.RepoPending:
			if usedBatch >= budget {
				p.PendingLeft++
				continue
			}
			usedBatch++
			p.Assigned++
			a = move(r, ownerOf(r, r.Salt), r.Salt, store.RepoCloning, 0, reachable)
		default:
			want := ownerOf(r, r.Salt)
			switch {
			case r.Owner == want && r.SyncRequested:
				a = &RepoAction{Repo: r, Assign: &store.AssignRepo{ID: r.ID, ExpectOwner: r.Owner, ExpectEpoch: r.OwnerEpoch,
					Owner: r.Owner, Salt: r.Salt, Priority: r.Priority, ClearSync: true}}
				a.Deliveries = []Delivery{{r.Owner, store.OutboxEntry{Op: store.OpSync, RepoID: r.ID, URL: r.URL, Epoch: r.OwnerEpoch + 1}}}
			case r.Owner == want:
				continue
			default:
				prio := r.Priority
				if !live[r.Owner] {
					prio = 0 // orphan: to the front of the new owner's queue (seed 004)
				}
				a = move(r, want, r.Salt, "", prio, reachable)
			}
		}
		if a != nil {
			p.Actions = append(p.Actions, *a)
		}
	}
	if usedBatch >= budget && mem.Stored.Batch < cfg.MaxBatch && !mem.WarmingUp {
		p.Stored.Batch = min(max(mem.Stored.Batch, cfg.FirstBatch)*2, cfg.MaxBatch)
		p.RingChanged = true
	}

	owned := map[string]int{}
	for _, r := range repos {
		if r.Owner != "" {
			owned[r.Owner]++
		}
	}
	for _, a := range p.Actions {
		if a.Assign != nil {
			owned[a.Repo.Owner]--
		} else if a.Delete != nil && a.Repo.Owner != "" {
			owned[a.Repo.Owner]--
		}
	}
	for _, w := range s.Workers {
		dead := w.State == store.WorkerDead
		expired := now.Sub(w.HeartbeatAt) >= cfg.Grace+cfg.KeepDead
		if dead && expired && !mem.New.Has(w.ID) && owned[w.ID] <= 0 && slices.Contains(mem.LoadOwners, w.ID) {
			p.DeleteWorkers = append(p.DeleteWorkers, store.DeleteWorker{ID: w.ID})
		}
		if dead || deadByOps(mem.WorkerOps, w.ID) {
			continue
		}
		switch {
		case w.OutboxHead > w.AckSeq && w.OutboxHead-w.AckSeq > cfg.MaxLag:
			// Too far behind: cut the outbox; the worker notices and resyncs in full.
			p.Trims = append(p.Trims, store.TrimOutbox{Worker: w.ID, Through: w.OutboxHead})
		case w.AckSeq > w.TrimmedTo && w.AckSeq-w.TrimmedTo >= cfg.TrimEvery:
			p.Trims = append(p.Trims, store.TrimOutbox{Worker: w.ID, Through: w.AckSeq})
		}
	}
	return p, nil
}

func move(r store.Repo, to string, salt int, state store.RepoState, prio float64, reachable func(string) bool) *RepoAction {
	a := &RepoAction{Repo: r, Assign: &store.AssignRepo{ID: r.ID, ExpectOwner: r.Owner, ExpectEpoch: r.OwnerEpoch,
		Owner: to, State: state, Salt: salt, Priority: prio, ClearSync: r.SyncRequested}}
	if r.Owner != "" && r.Owner != to && reachable(r.Owner) {
		a.Deliveries = append(a.Deliveries, Delivery{r.Owner, store.OutboxEntry{Op: store.OpDel, RepoID: r.ID, URL: r.URL, Epoch: r.OwnerEpoch}})
	}
	a.Deliveries = append(a.Deliveries, Delivery{to, store.OutboxEntry{Op: store.OpAdd, RepoID: r.ID, URL: r.URL, Epoch: r.OwnerEpoch + 1, Priority: prio}})
	return a
}

func deadByOps(ops []store.Mutation, id string) bool {
	for _, op := range ops {
		if s, ok := op.(store.SetWorkerState); ok && s.ID == id && s.State == store.WorkerDead {
			return true
		}
	}
	return false
}

// dedupe keeps the first copy of each repo and orders them by id for determinism.
func dedupe(rs []store.Repo) []store.Repo {
	seen := map[string]bool{}
	out := make([]store.Repo, 0, len(rs))
	for _, r := range rs {
		if !seen[r.ID] {
			seen[r.ID] = true
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b store.Repo) int { return cmpString(a.ID, b.ID) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
