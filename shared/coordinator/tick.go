package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/election"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Store is the part of the store the coordinator uses.
type Store interface {
	election.Store
	Apply(ctx context.Context, term int64, muts []store.Mutation) error
	GetRing(ctx context.Context) (store.Ring, error)
	ListWorkers(ctx context.Context) ([]store.Worker, error)
	GetWorker(ctx context.Context, id string) (store.Worker, error)
	ListReposByOwner(ctx context.Context, owner, cursor string, limit int) ([]store.Repo, string, error)
	ListReposNeedingDecision(ctx context.Context, limit int) ([]store.Repo, error)
}

// Timer arms delayed wake-ups; a later Set of a name replaces the earlier one.
type Timer interface {
	Set(ctx context.Context, name string, at time.Time, payload []byte) error
	Cancel(ctx context.Context, name string) error
}

// ListSyncer applies the upstream repo list kept in a git repository (DESIGN §4 step 6).
// It writes with the leader's term as fencing token.
type ListSyncer interface {
	SyncList(ctx context.Context, term int64) error
}

// Coordinator runs ticks. It keeps no state between ticks: everything it knows is read
// from the store, so a restarted (or Lambda-invoked) coordinator carries on.
type Coordinator struct {
	ID     string
	Store  Store
	Timer  Timer
	Clock  clock.Clock
	Config Config
	Log    *slog.Logger
	// List, if set, syncs the repo list at the end of every tick the coordinator leads.
	List ListSyncer
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
	PendingLeft    int
	Incomplete     bool
	Ignored        string // why a timer firing was ignored
	Stale          string // why the tick stopped early: the state changed under it
	Writes         int    // Apply calls made
	ListError      string // why the list sync failed, if it did
}

func (c *Coordinator) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// Tick runs one coordinator round (DESIGN.md §4).
func (c *Coordinator) Tick(ctx context.Context) (Report, error) {
	cfg := c.Config.withDefaults()
	now := c.Clock.Now()
	rep := Report{Coordinator: c.ID}
	el := election.Elector{Store: c.Store, ID: c.ID, Lease: cfg.Lease}
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

	stored, err := c.Store.GetRing(ctx)
	if err != nil {
		return rep, fmt.Errorf("read ring: %w", err)
	}
	workers, err := c.Store.ListWorkers(ctx)
	if err != nil {
		return rep, fmt.Errorf("read workers: %w", err)
	}
	mem, err := PlanMembership(stored, workers, now, cfg)
	if err != nil {
		return rep, err
	}
	repos, err := c.Store.ListReposNeedingDecision(ctx, cfg.MaxMoves+cfg.MaxBatch)
	if err != nil {
		return rep, fmt.Errorf("read repos needing a decision: %w", err)
	}
	for _, owner := range mem.LoadOwners {
		cursor := ""
		for {
			page, next, err := c.Store.ListReposByOwner(ctx, owner, cursor, cfg.ReadPage)
			if err != nil {
				return rep, fmt.Errorf("read repos of %s: %w", owner, err)
			}
			repos = append(repos, page...)
			if next == "" {
				break
			}
			cursor = next
		}
	}
	plan, err := Reconcile(State{Ring: stored, Workers: workers, Repos: repos}, now, cfg)
	if err != nil {
		return rep, err
	}
	rep.WarmingUp, rep.PendingLeft, rep.Incomplete = plan.WarmingUp, plan.PendingLeft, plan.Incomplete
	err = c.apply(ctx, term, stored, workers, plan, &rep)
	rep.RingVersion = stored.Version
	if err == nil && plan.RingChanged && !plan.Incomplete {
		rep.RingVersion++
	}
	rep.Members = plan.New.Len()
	rep.WorkersByState = countWorkers(workers, plan.WorkerOps, plan.DeleteWorkers)
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
	for _, t := range plan.Timers {
		if t.Cancel {
			err = c.Timer.Cancel(ctx, t.Name)
		} else {
			err = c.Timer.Set(ctx, t.Name, t.At, t.Payload)
		}
		if err != nil {
			return rep, fmt.Errorf("timer %s: %w", t.Name, err)
		}
	}
	if c.List != nil {
		// A list that cannot be fetched must not stop the fleet: report and go on.
		if err := c.List.SyncList(ctx, term); err != nil {
			rep.ListError = err.Error()
			c.log().Warn("list sync", "coordinator", c.ID, "term", term, "err", err)
		}
	}
	level := slog.LevelDebug // a quiet tick is not news
	if rep.Moved+rep.Deleted+rep.Skipped > 0 || plan.RingChanged || len(plan.WorkerOps) > 0 || act == election.TakeOver {
		level = slog.LevelInfo
	}
	c.log().Log(ctx, level, "tick", "coordinator", c.ID, "term", term, "ring", rep.RingVersion, "members", rep.Members,
		"moved", rep.Moved, "assigned", rep.Assigned, "deleted", rep.Deleted, "skipped", rep.Skipped,
		"pending_left", rep.PendingLeft, "incomplete", rep.Incomplete, "warming_up", rep.WarmingUp)
	return rep, nil
}

// apply writes the plan in dependency order: worker states, repo actions, the ring (only
// when every action was planned), then clean-up. Each step is fenced by term and
// idempotent, so a crash between any two writes is repaired by the next tick.
func (c *Coordinator) apply(ctx context.Context, term int64, stored store.Ring, workers []store.Worker, plan Plan, rep *Report) error {
	if len(plan.WorkerOps) > 0 {
		for _, chunk := range chunks(plan.WorkerOps) {
			rep.Writes++
			if err := c.Store.Apply(ctx, term, chunk); err != nil {
				// A conflict means a worker heartbeated since we read it: the plan rests on a
				// stale view, so stop here and decide again next tick.
				return fmt.Errorf("worker states: %w", err)
			}
		}
	}
	heads := map[string]uint64{}
	for _, w := range workers {
		heads[w.ID] = w.OutboxHead
	}
	ap := applier{store: c.Store, term: term, heads: heads, rep: rep}
	for _, a := range plan.Actions {
		if err := ap.add(ctx, a); err != nil {
			return err
		}
	}
	if err := ap.flush(ctx); err != nil {
		return err
	}
	if plan.RingChanged && !plan.Incomplete {
		rep.Writes++
		if err := c.Store.Apply(ctx, term, []store.Mutation{store.PutRing{Ring: plan.Stored, ExpectVersion: stored.Version}}); err != nil {
			return fmt.Errorf("write ring: %w", err)
		}
	}
	if plan.Incomplete {
		return nil
	}
	tail := append(append([]store.Mutation{}, plan.DeleteWorkers...), plan.Trims...)
	for _, chunk := range chunks(tail) {
		rep.Writes++
		if err := c.Store.Apply(ctx, term, chunk); err != nil && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("clean-up: %w", err)
		}
	}
	return nil
}

// applier packs repo actions into atomic Apply calls together with their outbox entries,
// keeping each worker's outbox head in step.
type applier struct {
	store   Store
	term    int64
	heads   map[string]uint64
	rep     *Report
	pending []RepoAction
	items   int
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

func (ap *applier) known(id string) bool { _, ok := ap.heads[id]; return ok }

func (ap *applier) add(ctx context.Context, a RepoAction) error {
	n := actionItems(a, ap.known)
	if ap.items+n > store.MaxApplyItems {
		if err := ap.flush(ctx); err != nil {
			return err
		}
	}
	ap.pending = append(ap.pending, a)
	ap.items += n
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
		muts = append(muts, store.AppendOutbox{Worker: w, ExpectHead: ap.heads[w], Entries: entries[w]})
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
		ap.heads[w] += uint64(len(entries[w]))
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

func countWorkers(ws []store.Worker, ops, deletes []store.Mutation) map[store.WorkerState]int {
	state := map[string]store.WorkerState{}
	for _, w := range ws {
		state[w.ID] = w.State
	}
	for _, op := range ops {
		if s, ok := op.(store.SetWorkerState); ok {
			state[s.ID] = s.State
		}
	}
	for _, op := range deletes {
		if d, ok := op.(store.DeleteWorker); ok {
			delete(state, d.ID)
		}
	}
	out := map[store.WorkerState]int{}
	for _, s := range state {
		out[s]++
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
		if w.HeartbeatAt.After(p.HeartbeatAt) {
			c.log().Info("death timer ignored: worker heartbeated since", "worker", p.Worker,
				"armed_for", p.HeartbeatAt, "heartbeat_at", w.HeartbeatAt)
			return Report{Ignored: "worker " + p.Worker + " heartbeated since"}, nil
		}
		return c.Tick(ctx)
	case "warmup":
		return c.Tick(ctx)
	default:
		return Report{}, fmt.Errorf("timer payload: unknown kind %q", p.Kind)
	}
}
