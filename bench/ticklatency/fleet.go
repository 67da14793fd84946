package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/timer"
)

// Virtual time between ticks, and between a worker's heartbeats (the worker default).
// Ticking more often than workers heartbeat keeps the untimed heartbeat writes, 100 per
// round at 100 workers, from dominating the run; what a tick reads is the same.
const (
	tickEvery      = 2 * time.Second
	heartbeatEvery = 10 * time.Second
)

// maxSlots is the worker slot bitmap size the workers use (worker.DefaultConfig).
const maxSlots = 1024

// probe sits between the coordinator and the store and counts the repo records a tick
// reads. With naive set, the needs-decision reads become one scan of every repo: the
// coordinator one would write without the indexes.
type probe struct {
	storetest.Store
	naive   bool
	read    int
	lists   int          // ListWorkers calls
	pending []store.Repo // naive: the pending repos of the last scan
}

func (p *probe) ListWorkers(ctx context.Context) ([]store.Worker, error) {
	p.lists++
	return p.Store.ListWorkers(ctx)
}

func (p *probe) ListReposByOwner(ctx context.Context, owner, cursor string, limit int) ([]store.Repo, string, error) {
	rs, next, err := p.Store.ListReposByOwner(ctx, owner, cursor, limit)
	p.read += len(rs)
	return rs, next, err
}

func (p *probe) ListReposByOwnerRange(ctx context.Context, owner string, from, to uint64, cursor string, limit int) ([]store.Repo, string, error) {
	rs, next, err := p.Store.ListReposByOwnerRange(ctx, owner, from, to, cursor, limit)
	p.read += len(rs)
	return rs, next, err
}

func (p *probe) ListReposNeedingDecision(ctx context.Context, need store.Need, cursor string, limit int) ([]store.Repo, string, error) {
	if !p.naive {
		rs, next, err := p.Store.ListReposNeedingDecision(ctx, need, cursor, limit)
		p.read += len(rs)
		return rs, next, err
	}
	if need == store.NeedOwner {
		return p.pending, "", nil // read by the scan that served the other part
	}
	all, err := scanAll(ctx, p.Store)
	p.read += len(all)
	var action []store.Repo
	p.pending = nil
	for _, r := range all {
		switch {
		case !r.NeedsDecision():
		case r.Need() == store.NeedOwner:
			p.pending = append(p.pending, r)
		default:
			action = append(action, r)
		}
	}
	return action, "", err
}

// scanAll reads every repo, a page at a time.
func scanAll(ctx context.Context, st storetest.Store) ([]store.Repo, error) {
	var all []store.Repo
	cursor := ""
	for {
		page, next, err := st.ListRepos(ctx, cursor, 1000)
		if err != nil {
			return nil, fmt.Errorf("list repos: %w", err)
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		cursor = next
	}
}

// fleet is a coordinator and a set of workers on one store. Workers are simulated by
// their store calls alone (claim a slot, heartbeat and ack the outbox); time is virtual,
// so only the wall-clock time of Tick itself is measured.
type fleet struct {
	st       storetest.Store
	probe    *probe
	clk      *clock.Virtual
	coord    *coordinator.Coordinator
	rng      *rand.Rand
	live     []string          // workers that heartbeat
	acks     map[string]uint64 // outbox head each worker saw at its last heartbeat
	lastHB   time.Time         // when the workers last heartbeated
	nextW    int
	nextRepo int // index of the next repo to create
	parallel int // concurrent API calls (creates, delete requests): a network store gains from it
}

func newFleet(st storetest.Store, seed uint64) *fleet {
	clk := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := &probe{Store: st}
	return &fleet{
		st: st, probe: p, clk: clk,
		coord: &coordinator.Coordinator{ID: "coord", Store: p, Timer: timer.NewLocal(), Clock: tickClock{v: clk, start: time.Now()},
			Config: coordinator.Config{Warmup: coordinator.NoWarmup},
			Log:    slog.New(slog.NewTextHandler(io.Discard, nil))},
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		acks:     map[string]uint64{},
		parallel: 1,
	}
}

// repoURL is the i-th repo's URL; ids derive from it, so every run creates the same repos.
func repoURL(i int) string { return fmt.Sprintf("https://git.example.org/org%d/repo%d", i%97, i) }

// createRepos creates the next n repos as pending, as the API would, and returns their ids.
func (f *fleet) createRepos(ctx context.Context, n int) ([]string, error) {
	from := f.nextRepo
	f.nextRepo += n
	ids := make([]string, n)
	now := f.clk.Now()
	err := f.each(n, func(i int) error {
		url := repoURL(from + i)
		ids[i] = store.RepoID(url)
		_, created, err := f.st.CreateRepo(ctx, store.Repo{ID: ids[i], URL: url, Source: store.SourceAPI,
			State: store.RepoPending, CreatedAt: now})
		if err != nil {
			return fmt.Errorf("create repo %d: %w", from+i, err)
		}
		if !created {
			return fmt.Errorf("create repo %d: id %s exists", from+i, ids[i])
		}
		return nil
	})
	return ids, err
}

// bulkCreator is a store's bulk path for a first load (bolt.Store.CreateRepos).
type bulkCreator interface {
	CreateRepos(ctx context.Context, rs []store.Repo) (int, error)
}

// loadChunk is how many repos one bulk call creates: one bbolt transaction holds them
// all in memory until it commits.
const loadChunk = 20000

// loadRepos creates the next n repos as createRepos does, through the store's bulk path
// when it has one (big transactions instead of one a repo), else one CreateRepo each.
func (f *fleet) loadRepos(ctx context.Context, n int) error {
	bc, ok := f.st.(bulkCreator)
	if !ok {
		_, err := f.createRepos(ctx, n)
		return err
	}
	now := f.clk.Now()
	for done := 0; done < n; {
		chunk := make([]store.Repo, min(loadChunk, n-done))
		for i := range chunk {
			url := repoURL(f.nextRepo + i)
			chunk[i] = store.Repo{ID: store.RepoID(url), URL: url, Source: store.SourceAPI, State: store.RepoPending, CreatedAt: now}
		}
		created, err := bc.CreateRepos(ctx, chunk)
		if err != nil {
			return fmt.Errorf("create repos %d-%d: %w", f.nextRepo, f.nextRepo+len(chunk)-1, err)
		}
		if created != len(chunk) {
			return fmt.Errorf("create repos %d-%d: %d created, want %d (ids exist)", f.nextRepo, f.nextRepo+len(chunk)-1, created, len(chunk))
		}
		f.nextRepo += len(chunk)
		done += len(chunk)
	}
	return nil
}

// requestDelete marks repos for deletion, as the API would.
func (f *fleet) requestDelete(ctx context.Context, ids []string) error {
	return f.each(len(ids), func(i int) error {
		if err := f.st.RequestDelete(ctx, ids[i]); err != nil {
			return fmt.Errorf("request delete %s: %w", ids[i], err)
		}
		return nil
	})
}

// each calls fn(0..n-1), on f.parallel goroutines, and returns the errors.
func (f *fleet) each(n int, fn func(i int) error) error {
	if f.parallel <= 1 {
		for i := range n {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make(chan error, f.parallel)
	next := make(chan int)
	for range f.parallel {
		go func() {
			var first error
			for i := range next {
				if first == nil {
					first = fn(i)
				}
			}
			errs <- first
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	var err error
	for range f.parallel {
		err = errors.Join(err, <-errs)
	}
	return err
}

// addWorker registers a new worker; it heartbeats from the next step on.
func (f *fleet) addWorker(ctx context.Context) (string, error) {
	f.nextW++
	id := fmt.Sprintf("w%04d", f.nextW)
	now := f.clk.Now()
	if _, err := f.st.ClaimSlot(ctx, store.Worker{ID: id, StartedAt: now, HeartbeatAt: now}, maxSlots); err != nil {
		return "", fmt.Errorf("claim slot for %s: %w", id, err)
	}
	f.live = append(f.live, id)
	return id, nil
}

// kill silences a worker: it never heartbeats again.
func (f *fleet) kill(id string) {
	f.live = slices.DeleteFunc(f.live, func(s string) bool { return s == id })
}

// heartbeat has every live worker report in at the current virtual time, acking the
// outbox head it saw last time (as if it had applied those entries since).
func (f *fleet) heartbeat(ctx context.Context) error {
	now := f.clk.Now()
	for _, id := range f.live {
		w, err := f.st.Heartbeat(ctx, id, store.Heartbeat{At: now, AckSeq: f.acks[id]})
		if err != nil {
			return fmt.Errorf("heartbeat of %s: %w", id, err)
		}
		f.acks[id] = w.OutboxHead
	}
	return nil
}

// tickResult is one measured tick.
type tickResult struct {
	rep   coordinator.Report
	dur   time.Duration
	read  int    // repo records read
	lists int    // ListWorkers calls
	heap  uint64 // peak heap bytes seen during the tick
}

// tick runs one coordinator tick and times it. Only Tick is inside the timed region.
func (f *fleet) tick(ctx context.Context) (tickResult, error) {
	f.probe.read, f.probe.lists = 0, 0
	h := startHeapPeak()
	start := time.Now()
	rep, err := f.coord.Tick(ctx)
	dur := time.Since(start)
	heap := h.Stop()
	if err != nil {
		return tickResult{}, fmt.Errorf("tick: %w", err)
	}
	if !rep.Leader || rep.Stale != "" {
		// Nothing else writes while a tick runs, so this is a broken setup, not a race.
		return tickResult{}, fmt.Errorf("tick did not lead or stopped early: leader=%v stale=%q", rep.Leader, rep.Stale)
	}
	return tickResult{rep: rep, dur: dur, read: f.probe.read, lists: f.probe.lists, heap: heap}, nil
}

// step advances virtual time by one tick interval, has the workers heartbeat if their
// interval is up, and ticks.
func (f *fleet) step(ctx context.Context) (tickResult, error) {
	now := f.clk.Advance(tickEvery)
	if now.Sub(f.lastHB) >= heartbeatEvery {
		if err := f.heartbeat(ctx); err != nil {
			return tickResult{}, err
		}
		f.lastHB = now
	}
	return f.tick(ctx)
}

// settle steps until a tick finds nothing to do: no repo moved or pending, no write at all
// (outboxes acked and trimmed). It returns the number of ticks it took.
func (f *fleet) settle(ctx context.Context, maxTicks int) (int, error) {
	b, err := f.settleBulk(ctx, maxTicks)
	return b.Ticks, err
}

// settleBulk is settle, recording the ticks as a bulk add (Store, Repos, Workers and
// Seconds are the caller's).
func (f *fleet) settleBulk(ctx context.Context, maxTicks int) (b results.TickBulkAdd, err error) {
	var peak uint64
	defer func() { b.PeakHeapMiB = mib(peak) }()
	for i := 1; i <= maxTicks; i++ {
		t, serr := f.step(ctx)
		if serr != nil {
			b.Ticks = i
			return b, serr
		}
		r := t.rep
		b.SlowestTickMs = max(b.SlowestTickMs, round(ms(t.dur)))
		peak = max(peak, t.heap)
		if r.Cut != "" {
			b.TicksCut++
		}
		if r.Assigned > 0 {
			b.TicksUntilAssigned = i
		}
		if r.Moved == 0 && r.Deleted == 0 && r.PendingLeft == 0 && !r.Incomplete && r.Writes == 0 {
			b.Ticks = i
			return b, nil
		}
	}
	b.Ticks = maxTicks
	return b, fmt.Errorf("not settled after %d ticks", maxTicks)
}

// setup builds a settled fleet: workers joined and, with create, repos created; then
// every repo in the store is assigned. Without create the repos are already in the store
// (a copied template) and f.nextRepo must say how many.
func (f *fleet) setup(ctx context.Context, repos, workers int, create bool) (results.TickBulkAdd, error) {
	for range workers {
		if _, err := f.addWorker(ctx); err != nil {
			return results.TickBulkAdd{}, err
		}
	}
	if create {
		if _, err := f.createRepos(ctx, repos); err != nil {
			return results.TickBulkAdd{}, err
		}
	}
	// Assignment batches double from 1,000 per tick up to the tick's cap on moves (and
	// its deadline), so 1M repos take a few dozen ticks; the outboxes are trimmed at most
	// 1,000 entries a worker a tick, so 1M repos on 10 workers take a hundred more.
	runtime.GC() // the peak heap is the ticks', not the creation's garbage
	start := time.Now()
	b, err := f.settleBulk(ctx, 100+settleTicks(repos/max(workers, 1)))
	b.Repos, b.Workers, b.Seconds = repos, workers, round(time.Since(start).Seconds())
	if err != nil {
		return b, fmt.Errorf("settle %d repos on %d workers: %w", repos, workers, err)
	}
	return b, nil
}

// tickClock is the coordinator's clock: the virtual time between ticks plus the wall time
// the run has taken, so a tick's budget (on the coordinator's clock) runs out in real
// time as it would in a fleet.
type tickClock struct {
	v     *clock.Virtual
	start time.Time
}

func (c tickClock) Now() time.Time { return c.v.Now().Add(time.Since(c.start)) }
