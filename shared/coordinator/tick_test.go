package coordinator

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/timer"
)

// tickFleet is a coordinator on a real bbolt store with workers played by their store
// calls (they heartbeat before every tick).
type tickFleet struct {
	t     *testing.T
	st    storetest.Store
	clk   *clock.Virtual
	c     *Coordinator
	live  []string
	repos int
	nextW int
}

func newTickFleet(t *testing.T, workers, repos int, cfg Config) *tickFleet {
	t.Helper()
	st, err := bolt.OpenWith(filepath.Join(t.TempDir(), "fleet.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newTickFleetOn(t, st, workers, repos, cfg)
}

// newTickFleetOn is newTickFleet on the given store.
func newTickFleetOn(t *testing.T, st storetest.Store, workers, repos int, cfg Config) *tickFleet {
	t.Helper()
	clk := clock.NewVirtual(t0)
	cfg.Warmup = NoWarmup
	f := &tickFleet{t: t, st: st, clk: clk, c: &Coordinator{ID: "c", Store: st, Timer: timer.NewLocal(), Clock: clk, Config: cfg,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	for range workers {
		f.addWorker()
	}
	f.addRepos(repos)
	f.settle(100)
	return f
}

func (f *tickFleet) addWorker() string {
	f.nextW++
	id := fmt.Sprintf("w%03d", f.nextW)
	if _, err := f.st.ClaimSlot(f.t.Context(), store.Worker{ID: id, StartedAt: f.clk.Now()}, 1024); err != nil {
		f.t.Fatal(err)
	}
	f.live = append(f.live, id)
	return id
}

func (f *tickFleet) addRepos(n int) {
	for i := range n {
		url := fmt.Sprintf("https://example.org/r/%d", f.repos+i)
		if _, _, err := f.st.CreateRepo(f.t.Context(), store.Repo{ID: store.RepoID(url), URL: url, State: store.RepoPending}); err != nil {
			f.t.Fatal(err)
		}
	}
	f.repos += n
}

// tick advances 10 s, has the live workers heartbeat, and ticks.
func (f *tickFleet) tick() Report {
	f.t.Helper()
	return f.tickCtx(f.t.Context())
}

func (f *tickFleet) tickCtx(ctx context.Context) Report {
	f.t.Helper()
	f.clk.Advance(10 * time.Second)
	for _, id := range f.live {
		w, err := f.st.Heartbeat(f.t.Context(), id, store.Heartbeat{At: f.clk.Now()})
		if err != nil {
			f.t.Fatal(err)
		}
		// Ack everything, so outboxes get trimmed.
		if _, err := f.st.Heartbeat(f.t.Context(), id, store.Heartbeat{At: f.clk.Now(), AckSeq: w.OutboxHead}); err != nil {
			f.t.Fatal(err)
		}
	}
	rep, err := f.c.Tick(ctx)
	if err != nil || !rep.Leader || rep.Stale != "" {
		f.t.Fatalf("tick: %+v, %v", rep, err)
	}
	return rep
}

// settle ticks until a tick has nothing left to do.
func (f *tickFleet) settle(max int) int {
	f.t.Helper()
	for i := 1; i <= max; i++ {
		r := f.tick()
		if r.Moved+r.Deleted == 0 && !r.Incomplete && r.PendingLeft == 0 && r.Writes == 0 {
			return i
		}
	}
	f.t.Fatalf("not settled after %d ticks", max)
	return 0
}

// placed checks every repo sits with its ring owner.
func (f *tickFleet) placed() {
	f.t.Helper()
	sr, err := f.st.GetRing(f.t.Context())
	if err != nil {
		f.t.Fatal(err)
	}
	rg, err := ring.FromStore(sr)
	if err != nil {
		f.t.Fatal(err)
	}
	cursor := ""
	for {
		page, next, err := f.st.ListRepos(f.t.Context(), cursor, 1000)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, r := range page {
			if want := ownerOf(rg, r, r.Salt); r.Owner != want {
				f.t.Fatalf("repo %s owned by %q, ring says %q", r.ID, r.Owner, want)
			}
		}
		if next == "" {
			return
		}
		cursor = next
	}
}

// repoReads counts the repo records the store hands the coordinator (listings by owner,
// by owner and range, by need): what a tick read, counted at the store rather than by
// the tick's own report.
type repoReads struct {
	Store
	n int
}

func (c *repoReads) take() int { n := c.n; c.n = 0; return n }

func (c *repoReads) ListReposByOwner(ctx context.Context, owner, cursor string, limit int) ([]store.Repo, string, error) {
	rs, next, err := c.Store.ListReposByOwner(ctx, owner, cursor, limit)
	c.n += len(rs)
	return rs, next, err
}

func (c *repoReads) ListReposByOwnerRange(ctx context.Context, owner string, from, to uint64, cursor string, limit int) ([]store.Repo, string, error) {
	rs, next, err := c.Store.ListReposByOwnerRange(ctx, owner, from, to, cursor, limit)
	c.n += len(rs)
	return rs, next, err
}

func (c *repoReads) ListReposNeedingDecision(ctx context.Context, need store.Need, cursor string, limit int) ([]store.Repo, string, error) {
	rs, next, err := c.Store.ListReposNeedingDecision(ctx, need, cursor, limit)
	c.n += len(rs)
	return rs, next, err
}

// readsWhatMoves fails unless a membership change's tick read, counted at the store, at
// most 1.5 times the repos it moved plus 100, none of it the sweep's (ADR 33).
func readsWhatMoves(t *testing.T, what string, r Report, read int) {
	t.Helper()
	limit := 1.5*float64(r.Moved) + 100
	if r.Moved == 0 || r.Incomplete || float64(read) > limit || float64(r.Read) > limit || r.SweepRead != 0 {
		t.Fatalf("%s: the store read %d repo records (the tick's report: %d, the sweep's %d) for %d moved, incomplete %v; "+
			"want at most 1.5 × moved + 100, none by the sweep", what, read, r.Read, r.SweepRead, r.Moved, r.Incomplete)
	}
}

// A join and a death read the repos that move, not the donors' whole assignment, nor
// the anti-entropy sweep's slice, even after a gap in which the sweep's pace built up:
// a join's tick a while after the last (a restarted coordinator), a death declared by
// the first tick past the grace. The sweep reads its slice at the next tick instead.
// Reads are counted at the store: the records it served the coordinator.
func TestMembershipTicksReadWhatMoves(t *testing.T) {
	// 20 workers of 100 repos: a change moves about 100, and an hour's pass over 2,000
	// repos has about 440 more due by the end of a 10-minute gap.
	f := newTickFleet(t, 20, 2000, Config{SweepPeriod: time.Hour})
	reads := &repoReads{Store: f.st}
	f.c.Store = reads
	membershipReadsWhatMoves(t, f, 300, reads.take)
}

// membershipReadsWhatMoves runs a join and a death on f, each after a gap, and checks
// their ticks' reads (read: what the store read since it was last called) against what
// they moved, and that the sweep reads at least due at the tick after each.
func membershipReadsWhatMoves(t *testing.T, f *tickFleet, due int, read func() int) {
	t.Helper()
	f.settle(10)
	for i := 0; f.tick().SweepRead == 0; i++ { // the pass has begun and is on record
		if i == 100 {
			t.Fatal("the sweep read nothing in 100 ticks")
		}
	}
	read()
	if q := f.tick(); read() != 0 || q.Read != 0 || q.Writes != 0 {
		t.Fatalf("quiet tick read %d repos and made %d writes", q.Read, q.Writes)
	}

	f.addWorker()
	f.clk.Advance(10 * time.Minute)
	join := f.tick()
	readsWhatMoves(t, "join", join, read())
	if next := f.tick(); next.SweepRead < due {
		t.Fatalf("the tick after the join: the sweep read %d repos, want at least %d", next.SweepRead, due)
	}
	f.settle(10)
	f.placed()

	victim := f.live[3]
	f.live = append(f.live[:3], f.live[4:]...)
	// The first tick to read the workers sees its last heartbeat, the next past
	// SuspectAfter records its silence; the first tick past the grace declares it dead.
	for r := f.tick(); r.WorkersByState[store.WorkerSuspect] == 0; r = f.tick() {
		if f.clk.Now().Sub(t0) > 24*time.Hour {
			t.Fatal("the silent worker never turned suspect")
		}
	}
	f.clk.Advance(DefaultConfig().Grace)
	read()
	death := f.tick()
	readsWhatMoves(t, "death of "+victim, death, read())
	if next := f.tick(); next.SweepRead < due {
		t.Fatalf("the tick after the death: the sweep read %d repos, want at least %d", next.SweepRead, due)
	}
	f.settle(10)
	f.placed()
	t.Logf("join: moved %d, read %d; death: moved %d, read %d", join.Moved, join.Read, death.Moved, death.Read)
}

// A pass behind its course reads in every tick, membership changes or not: a fleet
// that changes at every tick is still swept within the period (invariant 12). The
// change's own reads stay apart from the sweep's.
func TestSweepBehindReadsInAMembershipTick(t *testing.T) {
	f := newTickFleet(t, 5, 1000, Config{SweepPeriod: 4 * time.Minute})
	f.tick() // the pass begins
	f.addWorker()
	f.clk.Advance(5 * time.Minute) // past 3/4 of the period: behind
	join := f.tick()
	if join.Moved == 0 || join.SweepRead == 0 || float64(join.Read) > 1.5*float64(join.Moved)+100 {
		t.Fatalf("join with the pass behind: moved %d, read %d, sweep read %d; want the sweep to read and the join's reads apart",
			join.Moved, join.Read, join.SweepRead)
	}
}

func TestSweepBehind(t *testing.T) {
	start := t0
	sw := store.Sweep{PassStart: start, Size: 1000}
	for _, c := range []struct {
		after  time.Duration
		period time.Duration
		want   bool
	}{
		{0, time.Hour, false},
		{44 * time.Minute, time.Hour, false},
		{45 * time.Minute, time.Hour, true}, // three quarters of the period
		{2 * time.Hour, time.Hour, true},
		{0, 0, true}, // no period: no pace to be on
	} {
		if got := SweepBehind(sw, start.Add(c.after), c.period); got != c.want {
			t.Errorf("SweepBehind %v into a pass of period %v = %v, want %v", c.after, c.period, got, c.want)
		}
	}
}

// With a read cap far below what a change moves, the ring is written at once and the
// moves spread over ticks, each within the cap, until every repo is in place.
func TestCappedTicksResume(t *testing.T) {
	f := newTickFleet(t, 4, 3000, Config{MaxReads: 100, ReadPage: 40})
	before, err := f.st.GetRingHead(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	f.addWorker()
	first := f.tick()
	head, err := f.st.GetRingHead(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if head.Version <= before.Version || len(head.Scans) == 0 || !first.Incomplete || first.Cut != "max reads" {
		t.Fatalf("first tick of a capped join: ring %d -> %d with %d scans, incomplete %v, cut %q",
			before.Version, head.Version, len(head.Scans), first.Incomplete, first.Cut)
	}
	moved, ticks := first.Moved, 1
	for r := first; r.Incomplete; ticks++ {
		r = f.tick()
		if r.Read > 100 {
			t.Fatalf("tick read %d repos, over the cap of 100", r.Read)
		}
		moved += r.Moved
	}
	head, _ = f.st.GetRingHead(t.Context())
	if len(head.Scans) != 0 || ticks < 5 {
		t.Fatalf("after %d ticks: %d scans left", ticks, len(head.Scans))
	}
	f.placed()
	t.Logf("a join of %d moves in %d ticks of at most 100 reads", moved, ticks)
}

// A tick whose deadline has (nearly) come still writes worker states and the ring, and
// leaves the moves to the next tick.
func TestDeadlineLeavesMovesForTheNextTick(t *testing.T) {
	f := newTickFleet(t, 4, 1000, Config{})
	f.addWorker()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second) // inside the 5 s reserve
	defer cancel()
	r := f.tickCtx(ctx)
	if r.Moved != 0 || r.Cut != "deadline" || !r.Incomplete || r.Members != 5 {
		t.Fatalf("tick past its deadline: moved %d, cut %q, incomplete %v, %d members", r.Moved, r.Cut, r.Incomplete, r.Members)
	}
	if next := f.tick(); next.Moved == 0 || next.Incomplete {
		t.Fatalf("the next tick: moved %d, incomplete %v", next.Moved, next.Incomplete)
	}
	f.placed()
}

// Repos that can get no action (overflow with every re-hash on the only worker) do not
// keep the tick from the repos after them in the index.
func TestStuckOverflowDoesNotStarveTheRest(t *testing.T) {
	f := newTickFleet(t, 1, 300, Config{MaxReads: 50, ReadPage: 25})
	ctx := t.Context()
	owned, _, err := f.st.ListReposByOwner(ctx, f.live[0], "", 1000)
	if err != nil || len(owned) != 300 {
		t.Fatalf("%d repos owned, %v", len(owned), err)
	}
	for _, r := range owned[:250] {
		if err := f.st.HandBack(ctx, r.ID, r.Owner, r.OwnerEpoch, "disk full"); err != nil {
			t.Fatal(err)
		}
	}
	var victims []string
	for _, r := range owned[250:] {
		if err := f.st.RequestDelete(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		victims = append(victims, r.ID)
	}
	for range 20 {
		f.tick()
	}
	for _, id := range victims {
		if _, err := f.st.GetRepo(ctx, id); err == nil {
			t.Fatalf("repo %s still waits for its deletion behind the overflow repos", id)
		}
	}
}

// slowApply is a store whose repo writes take longer than a tick's whole budget, as a
// slow or throttled store's would: each moves the coordinator's clock by delay.
type slowApply struct {
	Store
	clk   *clock.Virtual
	delay time.Duration
	calls int
}

func (s *slowApply) Apply(ctx context.Context, term int64, muts []store.Mutation) error {
	for _, m := range muts {
		if _, ok := m.(store.AssignRepo); ok {
			s.calls++
			s.clk.Advance(s.delay)
			break
		}
	}
	return s.Store.Apply(ctx, term, muts)
}

// A tick stops writing moves at its deadline within a page of reads, not after the
// page's dozens of writes; the repos it did not reach are decided by later ticks.
func TestDeadlineStopsWithinAPage(t *testing.T) {
	f := newTickFleet(t, 3, 0, Config{Budget: 3 * time.Second, ReadPage: 1000})
	f.addRepos(600) // one page of pending repos: 600 moves, about 18 Apply calls
	// The first repo write alone outlasts the budget, however long the tick took before it.
	slow := &slowApply{Store: f.st, clk: f.clk, delay: 3 * time.Second}
	f.c.Store = slow
	r := f.tick()
	// The write under way when the deadline came lands, and so does what it had batched.
	if r.Cut != "deadline" || !r.Incomplete || slow.calls > 2 || r.Moved == 0 || r.Moved >= 100 {
		t.Fatalf("first tick: cut %q, incomplete %v, %d repo writes, moved %d; want it stopped after the first write",
			r.Cut, r.Incomplete, slow.calls, r.Moved)
	}
	f.c.Store = f.st
	f.settle(100)
	f.placed()
}

// listCounter counts the coordinator's reads of the worker list.
type listCounter struct {
	storetest.Store
	lists int
}

func (l *listCounter) ListWorkers(ctx context.Context) ([]store.Worker, error) {
	l.lists++
	return l.Store.ListWorkers(ctx)
}

// While the membership does not change, a tick reads no worker and plans nothing, with
// heartbeats flowing or not; yet a silence still turns into suspect and dead on time
// (nothing in the store changes for that: only the coordinator's clock moves). A
// membership change ends the quiet at once; heartbeats are seen when a silence threshold
// comes, so a death is declared after the grace, at most SuspectAfter and a tick late.
func TestQuietTicksReadNoWorkersYetJudgeSilence(t *testing.T) {
	f := newTickFleet(t, 3, 200, Config{})
	lc := &listCounter{Store: f.st}
	f.c.Store = lc
	ctx := t.Context()
	tick := func() Report {
		t.Helper()
		rep, err := f.c.Tick(ctx)
		if err != nil || !rep.Leader || rep.Stale != "" {
			t.Fatalf("tick: %+v, %v", rep, err)
		}
		return rep
	}
	beat := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			if _, err := f.st.Heartbeat(ctx, id, store.Heartbeat{At: f.clk.Now()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tick() // reads the workers once and keeps the quiet plan
	lc.lists = 0
	for range 5 { // 25 s of heartbeats: under SuspectAfter since the workers were read
		f.clk.Advance(5 * time.Second)
		beat(f.live...)
		if rep := tick(); rep.WorkersByState[store.WorkerActive] != 3 {
			t.Fatalf("quiet tick reports workers %v, want 3 active", rep.WorkersByState)
		}
	}
	if lc.lists != 0 {
		t.Fatalf("quiet ticks with heartbeats flowing listed the workers %d times, want 0", lc.lists)
	}
	// 30 s after the read, a silence could reach SuspectAfter: the workers are read again,
	// their counts have moved, and nobody is suspect.
	f.clk.Advance(5 * time.Second)
	beat(f.live...)
	if rep := tick(); lc.lists != 1 || rep.WorkersByState[store.WorkerActive] != 3 {
		t.Fatalf("at SuspectAfter: listed %d times, workers %v; want 1 and 3 active", lc.lists, rep.WorkersByState)
	}
	// A membership change (a worker registering) is seen by the next tick.
	f.clk.Advance(5 * time.Second)
	beat(f.live...)
	newcomer := f.addWorker()
	tick()
	if lc.lists != 2 {
		t.Fatalf("tick after a join listed the workers %d times, want 2", lc.lists)
	}
	// Silence: the two that stop beating turn suspect while the others beat on; then all
	// stop and are declared dead after the grace, with no write from any worker.
	var rep Report
	for range 9 {
		f.clk.Advance(5 * time.Second)
		beat(f.live[0], newcomer)
		rep = tick()
	}
	lastBeat := f.clk.Now()
	if got := rep.WorkersByState[store.WorkerSuspect]; got != 2 {
		t.Fatalf("after 45 s of silence: workers %v, want 2 suspect", rep.WorkersByState)
	}
	for i := 0; i < 200 && rep.WorkersByState[store.WorkerDead] < 4; i++ {
		f.clk.Advance(5 * time.Second)
		rep = tick()
	}
	if rep.WorkersByState[store.WorkerDead] != 4 {
		t.Fatalf("silent workers never declared dead: %v", rep.WorkersByState)
	}
	cfg := DefaultConfig()
	if silent := f.clk.Now().Sub(lastBeat); silent < cfg.Grace || silent > cfg.Grace+cfg.SuspectAfter+5*time.Second {
		t.Fatalf("last death declared %v after the last heartbeat, want the grace (%v) within SuspectAfter and a tick", silent, cfg.Grace)
	}
}
