package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/timer"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// scripted is a Mirrorer whose answers the test sets per call.
type scripted struct {
	exists   bool
	results  []error // popped per Sync; nil = success with changes
	changed  bool
	commits  []fetch.Commit // brought by the next successful Sync (then cleared)
	since    time.Time      // a clone's HistorySince
	packs    int            // reported by a sync that changed something
	calls    int            // syncs past Admit (as the mirror runs it: before a write)
	maxBytes int64          // Target.MaxBytes of the last call
	during   func()         // runs inside Sync, while the fetch is in flight
	version  int            // the mirror's refs, as a number: each change is a new one
}

func (s *scripted) Sync(ctx context.Context, t fetch.Target) (fetch.Result, error) {
	if t.Admit != nil && (!s.exists || s.changed) {
		n, err := t.Admit(ctx)
		if err != nil {
			return fetch.Result{}, err
		}
		if n > 0 {
			t.MaxBytes = n
		}
	}
	s.calls++
	s.maxBytes = t.MaxBytes
	if s.during != nil {
		s.during()
	}
	var err error
	if len(s.results) > 0 {
		err, s.results = s.results[0], s.results[1:]
	}
	if err != nil {
		return fetch.Result{}, err
	}
	cloned := !s.exists
	s.exists = true
	res := fetch.Result{Cloned: cloned, Changed: cloned || s.changed, LastCommitAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Commits: s.commits}
	if cloned {
		res.HistorySince = s.since
	}
	s.commits = nil
	if res.Changed {
		res.Packs = s.packs
		s.version++
	}
	res.RefsDigest = fmt.Sprintf("refs-%d", s.version)
	return res, nil
}
func (s *scripted) Exists(fetch.Target) bool                  { return s.exists }
func (s *scripted) Trash(context.Context, fetch.Target) error { s.exists = false; return nil }

type fixture struct {
	st  *bolt.Store
	clk *clock.Virtual
	w   *worker.Worker
	m   *scripted
	id  string
}

// newFixture makes a worker that owns one repo, assigned through a real outbox entry.
func newFixture(t *testing.T, cfg worker.Config) *fixture {
	t.Helper()
	return newFixtureOn(t, cfg, &scripted{}, nil)
}

// newFixtureWith is newFixture with the given Mirrorer (a *scripted or a *maintScripted).
func newFixtureWith(t *testing.T, cfg worker.Config, mirrorer worker.Mirrorer) *fixture {
	t.Helper()
	return newFixtureOn(t, cfg, mirrorer, nil)
}

// newJoined starts worker w1 on a fresh store, joined, with a coordinator's term.
func newJoined(t *testing.T, cfg worker.Config, m worker.Mirrorer, disk worker.Disk) (*bolt.Store, *clock.Virtual, *worker.Worker, store.Election) {
	t.Helper()
	return newJoinedVia(t, cfg, m, disk, func(s worker.Store) worker.Store { return s })
}

// newJoinedVia is newJoined with the worker's store seen through wrap.
func newJoinedVia(t *testing.T, cfg worker.Config, m worker.Mirrorer, disk worker.Disk,
	wrap func(worker.Store) worker.Store) (*bolt.Store, *clock.Virtual, *worker.Worker, store.Election) {
	t.Helper()
	return newJoinedLogging(t, cfg, m, disk, wrap, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// newJoinedLogging is newJoinedVia with the worker logging to log.
func newJoinedLogging(t *testing.T, cfg worker.Config, m worker.Mirrorer, disk worker.Disk,
	wrap func(worker.Store) worker.Store, log *slog.Logger) (*bolt.Store, *clock.Virtual, *worker.Worker, store.Election) {
	t.Helper()
	st, err := bolt.OpenWith(filepath.Join(t.TempDir(), "s.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewVirtual(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	cfg.ID = "w1"
	if cfg.Lease == 0 {
		// These tests move the clock by hours between heartbeats; the lease has its own.
		cfg.Lease = 365 * 24 * time.Hour
	}
	w := worker.New(cfg, wrap(st), m, disk, clk, log)
	if err := w.Heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}
	el, err := st.CASElection(context.Background(), 0, store.Election{Term: 1, VotedFor: "c"})
	if err != nil {
		t.Fatal(err)
	}
	return st, clk, w, el
}

// newFixtureOn is newFixture with the given Mirrorer (a *scripted or a *maintScripted) and disk gauge.
func newFixtureOn(t *testing.T, cfg worker.Config, mirrorer worker.Mirrorer, disk worker.Disk) *fixture {
	t.Helper()
	return newFixtureVia(t, cfg, mirrorer, disk, func(s worker.Store) worker.Store { return s })
}

// newFixtureVia is newFixtureOn with the worker's store seen through wrap.
func newFixtureVia(t *testing.T, cfg worker.Config, mirrorer worker.Mirrorer, disk worker.Disk, wrap func(worker.Store) worker.Store) *fixture {
	t.Helper()
	m, ok := mirrorer.(*scripted)
	if ms, isMaint := mirrorer.(*maintScripted); isMaint {
		m, ok = ms.scripted, true
	}
	if !ok {
		t.Fatalf("fixture mirrorer %T", mirrorer)
	}
	st, clk, w, el := newJoinedVia(t, cfg, mirrorer, disk, wrap)
	id := ownRepo(t, st, w, el, "https://example.org/a/b")
	return &fixture{st: st, clk: clk, w: w, m: m, id: id}
}

// ownRepo adds the repo at url to the store and makes w its owner through a real
// outbox entry; it returns the repo's id.
func ownRepo(t *testing.T, st *bolt.Store, w *worker.Worker, el store.Election, url string) string {
	t.Helper()
	ctx := context.Background()
	id := store.RepoID(url)
	if _, _, err := st.CreateRepo(ctx, store.Repo{ID: id, URL: url, State: store.RepoPending}); err != nil {
		t.Fatal(err)
	}
	err := st.Apply(ctx, el.Term, []store.Mutation{
		store.AssignRepo{ID: id, Owner: "w1", State: store.RepoCloning},
		store.AppendOutbox{Worker: "w1", Entries: []store.OutboxEntry{{Op: store.OpAdd, RepoID: id, URL: url, Epoch: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.Owned(); got[id] != 1 {
		t.Fatalf("worker holds %v after the outbox entry", got)
	}
	return id
}

func (f *fixture) repo(t *testing.T) store.Repo {
	t.Helper()
	r, err := f.st.GetRepo(context.Background(), f.id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestFailuresBackOffThenFail(t *testing.T) {
	f := newFixture(t, worker.Config{FailAfter: 3, BackoffBase: time.Minute, MinInterval: time.Second, FailCooldown: 24 * time.Hour})
	ctx := context.Background()
	netErr := &fetch.Error{Kind: fetch.KindNetwork, Err: errors.New("connection reset")}
	f.m.results = []error{netErr, netErr, netErr}
	if !f.w.RunOnce(ctx) {
		t.Fatal("nothing to fetch")
	}
	// A clone that failed leaves no mirror: the repo says so at once, with the error,
	// rather than stay "cloning"; its retries keep their back-off.
	if r := f.repo(t); r.CloneFailCnt != 1 || r.State != store.RepoFailing || r.LastError != "network: connection reset" {
		t.Fatalf("after one failure: %+v", r)
	}
	// Backed off: not eligible before a minute has passed.
	f.clk.Advance(59 * time.Second)
	if f.w.RunOnce(ctx) {
		t.Fatal("fetched again before the back-off ended")
	}
	f.clk.Advance(time.Second)
	if !f.w.RunOnce(ctx) {
		t.Fatal("not retried after the back-off")
	}
	f.clk.Advance(2*time.Minute - time.Second) // the second back-off is twice as long
	if f.w.RunOnce(ctx) {
		t.Fatal("second back-off did not double")
	}
	f.clk.Advance(time.Second)
	f.w.RunOnce(ctx)
	if r := f.repo(t); r.State != store.RepoFailing || r.CloneFailCnt != 3 {
		t.Fatalf("after %d failures: state %s count %d", 3, r.State, r.CloneFailCnt)
	}
	f.clk.Advance(23 * time.Hour)
	if f.w.RunOnce(ctx) {
		t.Fatal("failing repo retried before the cooldown")
	}
	f.clk.Advance(time.Hour)
	if !f.w.RunOnce(ctx) {
		t.Fatal("failing repo not retried after the cooldown")
	}
	if r := f.repo(t); r.State != store.RepoOK || r.CloneFailCnt != 0 || r.LastError != "" {
		t.Fatalf("recovered repo: %+v", r)
	}
}

func TestNotFoundMarksGoneAndRateLimitHonoursRetryAfter(t *testing.T) {
	f := newFixture(t, worker.Config{MinInterval: time.Second, BackoffBase: time.Second})
	ctx := context.Background()
	f.m.results = []error{&fetch.Error{Kind: fetch.KindRateLimited, RetryAfter: 10 * time.Minute, Err: errors.New("429")},
		&fetch.Error{Kind: fetch.KindNotFound, Err: errors.New("404")}}
	f.w.RunOnce(ctx)
	f.clk.Advance(10*time.Minute - time.Second)
	if f.w.RunOnce(ctx) {
		t.Fatal("retried before Retry-After")
	}
	f.clk.Advance(time.Second)
	f.w.RunOnce(ctx)
	if r := f.repo(t); r.State != store.RepoGone || r.LastError == "" {
		t.Fatalf("404: state %s error %q", r.State, r.LastError)
	}
}

func TestNoChangePollWritesOnlyAtCheckpoints(t *testing.T) {
	f := newFixture(t, worker.Config{MinInterval: time.Minute, Checkpoint: time.Hour})
	ctx := context.Background()
	f.w.RunOnce(ctx) // the clone: written
	first := f.repo(t)
	if first.State != store.RepoOK {
		t.Fatalf("after clone: %s", first.State)
	}
	reports := f.w.Stats().Reports
	for range 30 { // 30 no-change polls over 30 minutes
		f.clk.Advance(time.Minute)
		if !f.w.RunOnce(ctx) {
			t.Fatal("no poll")
		}
	}
	if got := f.w.Stats().Reports - reports; got != 0 {
		t.Fatalf("%d writes for no-change polls", got)
	}
	if r := f.repo(t); !r.LastFetchAt.Equal(first.LastFetchAt) {
		t.Fatal("record changed without a write")
	}
	f.clk.Advance(31 * time.Minute)
	f.w.RunOnce(ctx)
	if got := f.w.Stats().Reports - reports; got != 1 {
		t.Fatalf("%d writes after the checkpoint interval, want 1", got)
	}
}

func TestSyncEntryJumpsTheQueueAndPurgeTrashes(t *testing.T) {
	f := newFixture(t, worker.Config{MinInterval: time.Hour})
	ctx := context.Background()
	f.w.RunOnce(ctx)
	if f.w.RunOnce(ctx) {
		t.Fatal("polled inside the minimum interval")
	}
	el, _ := f.st.GetElection(ctx)
	wk, _ := f.st.GetWorker(ctx, "w1")
	r := f.repo(t)
	err := f.st.Apply(ctx, el.Term, []store.Mutation{
		store.AssignRepo{ID: f.id, ExpectOwner: "w1", ExpectEpoch: r.OwnerEpoch, Owner: "w1", ClearSync: true},
		store.AppendOutbox{Worker: "w1", ExpectHead: wk.OutboxHead, Entries: []store.OutboxEntry{{Op: store.OpSync, RepoID: f.id, URL: r.URL, Epoch: r.OwnerEpoch + 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if !f.w.RunOnce(ctx) {
		t.Fatal("sync entry did not make the repo eligible now")
	}
	wk, _ = f.st.GetWorker(ctx, "w1")
	if err := f.st.Apply(ctx, el.Term, []store.Mutation{store.AppendOutbox{Worker: "w1", ExpectHead: wk.OutboxHead,
		Entries: []store.OutboxEntry{{Op: store.OpPurge, RepoID: f.id, URL: r.URL}}}}); err != nil {
		t.Fatal(err)
	}
	if err := f.w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if len(f.w.Owned()) != 0 || f.m.exists {
		t.Fatal("purge did not drop the repo and trash its mirror")
	}
}

// recording is a policy that remembers what it was told.
type recording struct {
	priority.Bayes
	inputs []priority.Input
}

func (p *recording) Next(in priority.Input) float64 {
	p.inputs = append(p.inputs, in)
	return p.Bayes.Next(in)
}

func TestPollStatsAccumulateAndReachTheStoreOnAChange(t *testing.T) {
	pol := &recording{}
	f := newFixture(t, worker.Config{MinInterval: time.Minute, Checkpoint: 24 * time.Hour, Policy: pol})
	ctx := context.Background()
	start := f.clk.Now()
	// The first clone brings the history: two bursts of commits in the last 30 days.
	at := func(d time.Duration) fetch.Commit {
		return fetch.Commit{Author: start.Add(-d), Committer: start.Add(-d)}
	}
	f.m.commits = []fetch.Commit{at(time.Hour), at(2 * time.Hour), at(20 * 24 * time.Hour)}
	f.m.since = start.Add(-30 * 24 * time.Hour)
	f.w.RunOnce(ctx)
	prior := priority.DefaultPrior()
	want := priority.Fold(priority.Stats{}, priority.Poll{Now: start, Changed: true, Since: f.m.since,
		Commits:      []time.Time{start.Add(-time.Hour), start.Add(-2 * time.Hour), start.Add(-20 * 24 * time.Hour)},
		LastCommitAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, prior)
	// (older evidence fades by 2^(−age/OldHalfLife): a few percent over a month)
	if n, s := want.Events+want.WinEvents, want.Exposure+want.WinSeconds; math.Abs(n-2) > 0.05 || math.Abs(s/86400-30) > 1 {
		t.Fatalf("the history folds into %+v, want about 2 pushes over 30 days", want)
	}
	if r := f.repo(t); r.Stats != want {
		t.Fatalf("stats after the clone: %+v, want %+v", r.Stats, want)
	}
	reports := f.w.Stats().Reports
	now := start
	for i, gap := range []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour} {
		f.clk.Advance(gap)
		if !f.w.RunOnce(ctx) {
			t.Fatalf("poll %d: nothing to fetch", i)
		}
		want = priority.Fold(want, priority.Poll{Prev: now, Now: now.Add(gap)}, prior)
		now = now.Add(gap)
		if got := pol.inputs[len(pol.inputs)-1]; got.Stats != want || got.Prior == nil {
			t.Fatalf("poll %d: policy saw %+v (prior %v), want %+v", i, got.Stats, got.Prior, want)
		}
	}
	if got := f.w.Stats().Reports - reports; got != 0 {
		t.Fatalf("%d writes for no-change polls", got)
	}

	// A fetch that brings three commits, two of them minutes apart: two pushes.
	f.m.changed = true
	f.m.commits = []fetch.Commit{at(-4 * time.Hour), at(-4*time.Hour + 10*time.Minute), {Author: start.Add(-48 * time.Hour), Committer: start.Add(time.Hour)}}
	f.clk.Advance(4 * time.Hour)
	f.w.RunOnce(ctx)
	want = priority.Fold(want, priority.Poll{Prev: now, Now: now.Add(4 * time.Hour), Changed: true,
		Commits: []time.Time{start.Add(4 * time.Hour), start.Add(4*time.Hour - 10*time.Minute), start.Add(time.Hour)}}, prior)
	r := f.repo(t)
	if r.Stats != want {
		t.Fatalf("stored stats after a change: %+v, want %+v", r.Stats, want)
	}
	if r.Stats.WinEvents != 2 || math.Abs(r.Stats.Polls-4) > 0.05 || math.Abs(r.Stats.Changes-1) > 1e-9 {
		t.Fatalf("stored stats %+v, want 2 pushes in the window, about 4 polls, 1 change", r.Stats)
	}
	if got := pol.inputs[len(pol.inputs)-1]; got.Stats != want || !got.Changed {
		t.Fatalf("policy input of the changed poll: %+v", got)
	}
}

func TestFailedPollsAreCoveredByTheNextSuccess(t *testing.T) {
	f := newFixture(t, worker.Config{MinInterval: time.Minute, BackoffBase: time.Minute, Checkpoint: 24 * time.Hour})
	ctx := context.Background()
	f.w.RunOnce(ctx)
	cloned := f.repo(t).Stats
	netErr := &fetch.Error{Kind: fetch.KindNetwork, Err: errors.New("connection reset")}
	f.m.results = []error{netErr}
	f.clk.Advance(time.Hour)
	f.w.RunOnce(ctx) // fails: observes nothing
	if r := f.repo(t); r.Stats != cloned || r.FetchFailCnt != 1 {
		t.Fatalf("after a failed poll: %+v", r)
	}
	f.m.changed = true
	f.clk.Advance(time.Hour)
	f.w.RunOnce(ctx)
	if r := f.repo(t); r.Stats.Polls != 1 || r.Stats.Seconds != 7200 {
		t.Fatalf("stats after recovering: %+v, want one poll over 2 h", r.Stats)
	}
}

func TestWorkerLearnsItsPriorFromItsRepos(t *testing.T) {
	f := newFixture(t, worker.Config{MinInterval: time.Minute})
	ctx := context.Background()
	if p := f.w.Prior(); p.Repos != 0 || !p.At.IsZero() {
		t.Fatalf("before any clone the worker has learned %+v", p)
	}
	start := f.clk.Now()
	f.m.since = start.Add(-365 * 24 * time.Hour)
	for d := range 100 { // a push every 3.65 days for a year
		at := start.Add(-time.Duration(d) * 365 * 24 * time.Hour / 100)
		f.m.commits = append(f.m.commits, fetch.Commit{Author: at, Committer: at})
	}
	f.w.RunOnce(ctx)
	if err := f.w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	p := f.w.Prior()
	if p.Repos != 1 || !p.At.Equal(f.clk.Now()) {
		t.Fatalf("after a clone and a heartbeat the prior is from %d repos at %v", p.Repos, p.At)
	}
	if def := priority.DefaultPrior(); !(p.Mean() > def.Mean()) {
		t.Fatalf("a repo pushing every 3.65 days did not raise the fleet's mean rate: %v, default %v", p.Mean(), def.Mean())
	}
	// Not again before it is due.
	f.clk.Advance(time.Hour)
	if err := f.w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.w.Prior(); got != p {
		t.Fatal("the prior was learned again an hour later")
	}
}

func TestDefaultPolicyIsBayes(t *testing.T) {
	if got := worker.DefaultConfig().Policy.Name(); got != "bayes" {
		t.Fatalf("default policy %q", got)
	}
}

// The lost report of issue 12: a sync request during an in-flight clone bumps the epoch,
// so the clone's report is refused; the worker, still the owner, writes it again at the
// current epoch — whether or not it has heard of the sync yet — counts it once it
// landed, and fetches again for the sync.
func TestReportDuringASyncRequestLands(t *testing.T) {
	for _, heard := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync entry applied during the fetch: %v", heard), func(t *testing.T) {
			f := newFixture(t, worker.Config{MinInterval: time.Hour})
			ctx := context.Background()
			c := &coordinator.Coordinator{ID: "coord", Store: f.st, Timer: timer.NewLocal(), Clock: f.clk,
				Config: coordinator.Config{Warmup: coordinator.NoWarmup}, Log: slog.New(slog.DiscardHandler)}
			if _, err := c.Tick(ctx); err != nil { // w1 joins the ring: the repo is where it belongs
				t.Fatal(err)
			}
			if r := f.repo(t); r.State != store.RepoCloning || r.OwnerEpoch != 1 {
				t.Fatalf("before the clone: %+v", r)
			}
			f.m.during = func() {
				f.m.during = nil
				if err := f.st.RequestSync(ctx, f.id); err != nil {
					t.Fatal(err)
				}
				if rep, err := c.Tick(ctx); err != nil || rep.Writes == 0 {
					t.Fatalf("tick on the sync request: %+v, %v", rep, err)
				}
				if heard {
					if err := f.w.Heartbeat(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !f.w.RunOnce(ctx) {
				t.Fatal("nothing to fetch")
			}
			r := f.repo(t)
			if r.State != store.RepoOK || r.OwnerEpoch != 2 || r.LastSuccessAt.IsZero() {
				t.Fatalf("after the clone: state %s epoch %d last success %v; want ok at epoch 2", r.State, r.OwnerEpoch, r.LastSuccessAt)
			}
			if st := f.w.Stats(); st.Reports != 1 || st.LostReports != 0 {
				t.Fatalf("reports %d, lost %d; want the one report counted once it landed", st.Reports, st.LostReports)
			}
			if err := f.w.Heartbeat(ctx); err != nil {
				t.Fatal(err)
			}
			if !f.w.RunOnce(ctx) || f.m.calls != 2 {
				t.Fatalf("the sync asked for during the clone did not fetch again (%d fetches)", f.m.calls)
			}
		})
	}
}

// A report refused because the repo moved to another worker is dropped and counted as
// lost, not as written.
func TestReportOfAMovedRepoIsLost(t *testing.T) {
	f := newFixture(t, worker.Config{MinInterval: time.Hour})
	ctx := context.Background()
	el, _ := f.st.GetElection(ctx)
	f.m.during = func() {
		if err := f.st.Apply(ctx, el.Term, []store.Mutation{store.AssignRepo{ID: f.id, ExpectOwner: "w1", ExpectEpoch: 1, Owner: "w9"}}); err != nil {
			t.Fatal(err)
		}
	}
	f.w.RunOnce(ctx)
	if r := f.repo(t); r.Owner != "w9" || r.State != store.RepoCloning {
		t.Fatalf("the report of a moved repo landed: %+v", r)
	}
	if st := f.w.Stats(); st.Reports != 0 || st.LostReports != 1 {
		t.Fatalf("reports %d, lost %d; want 0 and 1", st.Reports, st.LostReports)
	}
}

// flakyStore fails heartbeats while down, as an unreachable store would.
type flakyStore struct {
	worker.Store
	down bool
}

func (s *flakyStore) Heartbeat(ctx context.Context, id string, hb store.Heartbeat) (store.Worker, error) {
	if s.down {
		return store.Worker{}, errors.New("store unreachable")
	}
	return s.Store.Heartbeat(ctx, id, hb)
}

// A worker that cannot reach the store stops starting fetches once its lease from the
// last heartbeat the store accepted ran out, and resumes when a heartbeat lands again.
func TestWorkerStopsFetchingWhenItsLeaseRunsOut(t *testing.T) {
	var fs *flakyStore
	f := newFixtureVia(t, worker.Config{MinInterval: time.Second, Lease: 5 * time.Minute, Checkpoint: time.Hour}, &scripted{}, nil,
		func(s worker.Store) worker.Store { fs = &flakyStore{Store: s}; return fs })
	ctx := context.Background()
	fs.down = true
	for range 4 { // four minutes of failed heartbeats: still leased
		f.clk.Advance(time.Minute)
		if err := f.w.Heartbeat(ctx); err == nil {
			t.Fatal("heartbeat through a store that is down")
		}
		if !f.w.RunOnce(ctx) {
			t.Fatalf("no fetch %s after the last heartbeat, inside the lease", f.clk.Now().Sub(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)))
		}
	}
	f.clk.Advance(time.Minute)
	if f.w.Leased() || f.w.RunOnce(ctx) {
		t.Fatal("fetching after the lease ran out")
	}
	fs.down = false
	if err := f.w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if !f.w.Leased() || !f.w.RunOnce(ctx) {
		t.Fatal("no fetch after a heartbeat landed again")
	}
}

// A mirror directory that belongs to another URL is a failure recorded on the repo
// (its last_error says so), retried on the back-off like any other.
func TestMirrorConflictIsRecorded(t *testing.T) {
	f := newFixture(t, worker.Config{FailAfter: 3, BackoffBase: time.Minute, MinInterval: time.Second})
	f.m.results = []error{&fetch.Error{Kind: fetch.KindConflict, Err: errors.New("mirror x belongs to https://example.org/a/b.git")}}
	if !f.w.RunOnce(context.Background()) {
		t.Fatal("nothing to fetch")
	}
	r := f.repo(t)
	if r.CloneFailCnt != 1 || r.LastError != "mirror_conflict: mirror x belongs to https://example.org/a/b.git" {
		t.Fatalf("after a conflict: %+v", r)
	}
}

// maintScripted is a scripted Mirrorer that is also a Maintainer.
type maintScripted struct {
	*scripted
	reqs []fetch.MaintainRequest
	errs []error // popped per Maintain; nil = ran
}

func (m *maintScripted) Maintain(_ context.Context, _ fetch.Target, req fetch.MaintainRequest) (fetch.Maintenance, error) {
	m.reqs = append(m.reqs, req)
	var err error
	if len(m.errs) > 0 {
		err, m.errs = m.errs[0], m.errs[1:]
	}
	if err != nil {
		return fetch.Maintenance{}, err
	}
	return fetch.Maintenance{PacksBefore: 20, PacksAfter: 2, Fscked: req.Fsck}, nil
}

// A repo is maintained once per interval at its slot, not when the worker takes it
// over; sooner when a fetch leaves many packs (at most once per gap) or finds the
// mirror corrupt (with a check); a busy mirror stays due.
func TestMaintenanceSchedule(t *testing.T) {
	ms := &maintScripted{scripted: &scripted{}}
	cfg := worker.Config{MinInterval: time.Second, MaintainEvery: 24 * time.Hour, MaintainPacks: 10, MaintainGap: time.Hour}
	f := newFixtureWith(t, cfg, ms)
	ctx := context.Background()
	if n := f.w.MaintainOnce(ctx); n != 0 {
		t.Fatalf("maintained %d repos right after taking them over", n)
	}
	// Within a day the repo's slot comes, once.
	ran := 0
	var at time.Time
	for range 24 * 60 / 10 {
		f.clk.Advance(10 * time.Minute)
		if n := f.w.MaintainOnce(ctx); n > 0 {
			ran += n
			at = f.clk.Now()
		}
	}
	if ran != 1 || len(ms.reqs) != 1 || ms.reqs[0].Since.After(at) || at.Sub(ms.reqs[0].Since) > 10*time.Minute || ms.reqs[0].Fsck {
		t.Fatalf("one day: %d runs, requests %+v (last at %v); want one, at its slot", ran, ms.reqs, at)
	}
	if got := f.w.MaxPacks(); got != 2 {
		t.Fatalf("MaxPacks = %d after maintenance, want 2", got)
	}

	// A fetch that leaves 12 packs makes it due at once; again only after the gap.
	f.m.results = nil
	ms.scripted.exists = true
	f.clk.Advance(2 * time.Hour)
	f.m.changed = true
	f.w.RunOnce(ctx) // the scripted Sync reports no pack count: set it as a real fetch would
	setPacks(t, f, ms, 12)
	if n := f.w.MaintainOnce(ctx); n != 1 {
		t.Fatalf("12 packs: %d runs, want 1", n)
	}
	setPacks(t, f, ms, 12)
	f.clk.Advance(30 * time.Minute)
	if n := f.w.MaintainOnce(ctx); n != 0 {
		t.Fatalf("12 packs again within the gap: %d runs, want 0", n)
	}
	f.clk.Advance(31 * time.Minute)
	if n := f.w.MaintainOnce(ctx); n != 1 {
		t.Fatalf("12 packs after the gap: %d runs, want 1", n)
	}

	// Busy: still due next time.
	setPacks(t, f, ms, 12)
	f.clk.Advance(2 * time.Hour)
	ms.errs = []error{&fetch.Error{Kind: fetch.KindBusy, Err: errors.New("locked")}}
	if n := f.w.MaintainOnce(ctx); n != 0 {
		t.Fatalf("busy: %d runs", n)
	}
	if n := f.w.MaintainOnce(ctx); n != 1 {
		t.Fatalf("after busy: %d runs, want 1", n)
	}

	// A fetch that finds the mirror corrupt: maintained at once, with a check.
	f.clk.Advance(time.Minute)
	f.m.results = []error{&fetch.Error{Kind: fetch.KindCorrupt, Err: errors.New("bad object")}}
	f.clk.Advance(time.Hour)
	if !f.w.RunOnce(ctx) {
		t.Fatal("no fetch due")
	}
	before := len(ms.reqs)
	if n := f.w.MaintainOnce(ctx); n != 1 || len(ms.reqs) != before+1 || !ms.reqs[before].Fsck {
		t.Fatalf("corrupt: %d runs, requests %+v; want one with a check", n, ms.reqs[before:])
	}
	if st := f.w.Stats(); st.Maintained != 5 || st.MaintenanceFailures != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// setPacks makes the next fetch report n packs, runs it, and checks it was seen.
func setPacks(t *testing.T, f *fixture, ms *maintScripted, n int) {
	t.Helper()
	ms.scripted.packs = n
	f.clk.Advance(time.Minute)
	if !f.w.RunOnce(context.Background()) {
		t.Fatal("no fetch due")
	}
	if got := f.w.MaxPacks(); got != n {
		t.Fatalf("MaxPacks = %d after a fetch that left %d", got, n)
	}
}

// The heartbeat carries the staleness of the worker's repos: never fetched before the
// first success, then the age of the last success, growing until the next one.
func TestHeartbeatReportsStaleness(t *testing.T) {
	f := newFixture(t, worker.Config{MinInterval: time.Second})
	ctx := context.Background()
	stored := func() store.Staleness {
		t.Helper()
		w, err := f.st.GetWorker(ctx, "w1")
		if err != nil {
			t.Fatal(err)
		}
		return w.Staleness
	}
	// A heartbeat reports what the worker owned when it was sent: the fixture's repo
	// arrived with the last one.
	if err := f.w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if s := stored(); s != (store.Staleness{Never: 1}) {
		t.Fatalf("before the first fetch: %+v, want one repo never fetched", s)
	}
	if !f.w.RunOnce(ctx) {
		t.Fatal("nothing to fetch")
	}
	f.clk.Advance(90 * time.Minute)
	if err := f.w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	want := store.Staleness{Repos: 1, P50: 90 * time.Minute, P99: 90 * time.Minute, Max: 90 * time.Minute}
	if s := stored(); s != want {
		t.Fatalf("90 minutes after the fetch: %+v, want %+v", s, want)
	}
}

// gauge is a disk whose usage the test sets.
type gauge struct{ used, total int64 }

func (g *gauge) Usage(context.Context) (int64, int64, error) { return g.used, g.total, nil }

// TestDiskGuardOnEveryFetch: the guard caps what a fetch may add to its share of the
// room under the threshold, skips fetches of mirrored repos above it (a disk_full
// error on the repo, written once, no failure counted), and lets them resume after.
// Polls that find nothing to write are not its business.
func TestDiskGuardOnEveryFetch(t *testing.T) {
	disk := &gauge{used: 500, total: 1000}
	f := newFixtureOn(t, worker.Config{MinInterval: time.Minute, Fetchers: 5, DiskThreshold: 0.85}, &scripted{}, disk)
	ctx := context.Background()
	if !f.w.RunOnce(ctx) || f.m.calls != 1 {
		t.Fatal("no clone")
	}
	if want := int64((850 - 500) / 5); f.m.maxBytes != want {
		t.Fatalf("clone capped at %d bytes, want the share of the room %d", f.m.maxBytes, want)
	}
	disk.used = 900
	f.clk.Advance(time.Minute)
	if !f.w.RunOnce(ctx) || f.m.calls != 2 || f.repo(t).LastError != "" {
		t.Fatalf("a no-change poll above the threshold: %d syncs, error %q", f.m.calls, f.repo(t).LastError)
	}
	f.m.changed = true
	reports := f.w.Stats().Reports
	for range 3 {
		f.clk.Advance(time.Minute)
		if !f.w.RunOnce(ctx) {
			t.Fatal("no poll")
		}
	}
	if f.m.calls != 2 {
		t.Fatalf("%d fetches of changes above the threshold", f.m.calls-2)
	}
	r := f.repo(t)
	if !strings.Contains(r.LastError, "disk_full") || r.FetchFailCnt != 0 || r.State != store.RepoOK {
		t.Fatalf("repo above the threshold: state %s, failures %d, error %q", r.State, r.FetchFailCnt, r.LastError)
	}
	if got := f.w.Stats().Reports - reports; got != 1 {
		t.Fatalf("%d writes for three skipped polls, want 1", got)
	}
	disk.used = 100
	f.clk.Advance(time.Minute)
	f.w.RunOnce(ctx)
	if r := f.repo(t); f.m.calls != 3 || r.LastError != "" {
		t.Fatalf("after the disk emptied: %d fetches, error %q", f.m.calls, r.LastError)
	}
}

// hostMirror answers per repo URL and records which fetches are in flight.
type hostMirror struct {
	fail map[string]error
}

func (h *hostMirror) Sync(_ context.Context, t fetch.Target) (fetch.Result, error) {
	if err := h.fail[t.URL]; err != nil {
		return fetch.Result{}, err
	}
	return fetch.Result{Cloned: true, Changed: true}, nil
}
func (h *hostMirror) Exists(fetch.Target) bool                  { return false }
func (h *hostMirror) Trash(context.Context, fetch.Target) error { return nil }

// TestPolitenessPerHost: a worker owning many repos on one forge starts at most
// HostConcurrency fetches of it at a time while other hosts go on, and a 429 from one
// repo of the forge stops them all until its Retry-After.
func TestPolitenessPerHost(t *testing.T) {
	ctx := context.Background()
	m := &hostMirror{fail: map[string]error{}}
	st, clk, w, el := newJoined(t, worker.Config{HostConcurrency: 2, HostRate: -1, MinInterval: time.Minute}, m, nil)
	var muts []store.Mutation
	var entries []store.OutboxEntry
	for i := range 12 {
		host := "forge.example"
		if i%3 == 2 {
			host = "other.example"
		}
		url := fmt.Sprintf("https://%s/org/r%d", host, i)
		id := store.RepoID(url)
		if _, _, err := st.CreateRepo(ctx, store.Repo{ID: id, URL: url, State: store.RepoPending}); err != nil {
			t.Fatal(err)
		}
		muts = append(muts, store.AssignRepo{ID: id, Owner: "w1", State: store.RepoCloning})
		entries = append(entries, store.OutboxEntry{Op: store.OpAdd, RepoID: id, URL: url, Epoch: 1})
	}
	if err := st.Apply(ctx, el.Term, append(muts, store.AppendOutbox{Worker: "w1", Entries: entries})); err != nil {
		t.Fatal(err)
	}
	if err := w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	hostOf := func(j worker.Job) string { return strings.Split(j.Target.URL, "/")[2] }
	take := func() map[string][]worker.Job {
		out := map[string][]worker.Job{}
		for {
			j, ok := w.Next(clk.Now())
			if !ok {
				return out
			}
			out[hostOf(j)] = append(out[hostOf(j)], j)
		}
	}
	jobs := take()
	if len(jobs["forge.example"]) != 2 || len(jobs["other.example"]) != 2 {
		t.Fatalf("in flight: %d on the forge, %d on the other host; want 2 and 2", len(jobs["forge.example"]), len(jobs["other.example"]))
	}
	// One forge fetch answers 429, Retry-After 10 minutes; the other ends well.
	m.fail[jobs["forge.example"][0].Target.URL] = &fetch.Error{Kind: fetch.KindRateLimited, RetryAfter: 10 * time.Minute, Err: errors.New("429")}
	w.Do(ctx, jobs["forge.example"][0])
	w.Do(ctx, jobs["forge.example"][1])
	for _, j := range jobs["other.example"] {
		w.Do(ctx, j)
	}
	for _, d := range []time.Duration{0, time.Minute, 9*time.Minute + 59*time.Second} {
		clk.Set(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC).Add(d))
		got := take()
		if n := len(got["forge.example"]); n != 0 {
			t.Fatalf("%d forge fetches started %v into its 10-minute pause", n, d)
		}
		for _, j := range got["other.example"] {
			w.Do(ctx, j)
		}
	}
	if w.QueueLen() != 12 {
		t.Fatalf("queue length %d, want all 12 repos waiting (the forge's on their host)", w.QueueLen())
	}
	clk.Set(time.Date(2026, 6, 1, 0, 10, 0, 0, time.UTC))
	if got := take(); len(got["forge.example"]) != 2 {
		t.Fatalf("after the pause: %d forge fetches, want 2", len(got["forge.example"]))
	}
}

// NextPoll: nothing to say before the first fetch; then the repo's minimum interval
// (alone in its queue) or its place in the queue at the worker's fetch rate.
func TestNextPollEstimate(t *testing.T) {
	cfg := worker.Config{MinInterval: 10 * time.Minute, Rate: 0.5}
	f := newFixture(t, cfg)
	ctx := context.Background()
	if _, ok := f.w.NextPoll("not-its-repo"); ok {
		t.Fatal("NextPoll of a repo the worker does not hold")
	}
	at, ok := f.w.NextPoll(f.id)
	if !ok || !at.Equal(f.clk.Now()) {
		t.Fatalf("before its first fetch: NextPoll = %v, %v; want now (nothing ahead)", at, ok)
	}
	if !f.w.RunOnce(ctx) {
		t.Fatal("nothing fetched")
	}
	at, ok = f.w.NextPoll(f.id)
	if want := f.clk.Now().Add(10 * time.Minute); !ok || !at.Equal(want) {
		t.Fatalf("after a fetch: NextPoll = %v, %v; want its minimum interval, %v", at, ok, want)
	}

	// Three new repos queue for their clones: one every 2 s at 0.5 fetches a second.
	el, err := f.st.GetElection(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	var entries []store.OutboxEntry
	muts := []store.Mutation{}
	for i := range 3 {
		url := fmt.Sprintf("https://example.org/more/%d", i)
		id := store.RepoID(url)
		if _, _, err := f.st.CreateRepo(ctx, store.Repo{ID: id, URL: url, State: store.RepoPending}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		muts = append(muts, store.AssignRepo{ID: id, Owner: "w1", State: store.RepoCloning})
		entries = append(entries, store.OutboxEntry{Op: store.OpAdd, RepoID: id, URL: url, Epoch: 1})
	}
	w, err := f.st.GetWorker(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	muts = append(muts, store.AppendOutbox{Worker: "w1", ExpectHead: w.OutboxHead, Entries: entries})
	if err := f.st.Apply(ctx, el.Term, muts); err != nil {
		t.Fatal(err)
	}
	if err := f.w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	var offsets []time.Duration
	for _, id := range ids {
		at, ok := f.w.NextPoll(id)
		if !ok {
			t.Fatalf("no NextPoll for new repo %s", id)
		}
		offsets = append(offsets, at.Sub(f.clk.Now()))
	}
	slices.Sort(offsets)
	if want := []time.Duration{0, 2 * time.Second, 4 * time.Second}; !slices.Equal(offsets, want) {
		t.Fatalf("new repos' next polls in %v, want %v (their places at 0.5 fetches a second)", offsets, want)
	}
}

// TestBulkAddSpreadsFirstClones: new repos go to the front in the order they came while
// fewer than worker.FrontClones wait there; past that, a bulk add's clones come in an
// order of their own (spread over a step), and a repo that already has a mirror (an
// orphan from a dead worker) still goes to the front.
func TestBulkAddSpreadsFirstClones(t *testing.T) {
	ctx := context.Background()
	m := &hostMirror{fail: map[string]error{}}
	st, clk, w, el := newJoined(t, worker.Config{HostRate: -1}, m, nil)
	var muts []store.Mutation
	var entries []store.OutboxEntry
	add := func(rec store.Repo, state store.RepoState) {
		t.Helper()
		rec.ID, rec.State = store.RepoID(rec.URL), store.RepoPending
		if _, _, err := st.CreateRepo(ctx, rec); err != nil {
			t.Fatal(err)
		}
		muts = append(muts, store.AssignRepo{ID: rec.ID, Owner: "w1", State: state})
		entries = append(entries, store.OutboxEntry{Op: store.OpAdd, RepoID: rec.ID, URL: rec.URL, Epoch: 1})
	}
	var added []string
	for i := range worker.FrontClones + 200 {
		url := fmt.Sprintf("https://h%d.example/org/r", i)
		add(store.Repo{URL: url}, store.RepoCloning)
		added = append(added, url)
	}
	orphan := "https://orphan.example/org/r"
	add(store.Repo{URL: orphan, LastSuccessAt: clk.Now().Add(-time.Hour)}, store.RepoOK)
	for k := 0; k < len(muts); k += 40 { // a store batch holds under 100 items
		e := min(k+40, len(muts))
		if err := st.Apply(ctx, el.Term, append(muts[k:e:e], store.AppendOutbox{Worker: "w1", ExpectHead: uint64(k), Entries: entries[k:e]})); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		j, ok := w.Next(clk.Now())
		if !ok {
			break
		}
		got = append(got, j.Target.URL)
	}
	if len(got) != len(added)+1 {
		t.Fatalf("%d jobs, want %d", len(got), len(added)+1)
	}
	front := worker.FrontClones
	if !slices.Equal(got[:front], added[:front]) {
		t.Fatalf("the first %d clones did not come first, in order", front)
	}
	if got[front] != orphan {
		t.Fatalf("the orphan came at %d, want %d (right behind the front)", slices.Index(got, orphan), front)
	}
	rest := got[front+1:]
	if slices.Equal(rest, added[front:]) {
		t.Fatal("the bulk add past the front came in the order it was added: not spread")
	}
	if !slices.Equal(slices.Sorted(slices.Values(rest)), slices.Sorted(slices.Values(added[front:]))) {
		t.Fatal("the bulk add past the front lost or doubled repos")
	}
}

// TestFetchNowJumpsTheQueueOnceAndAnswersTheDurableRequest: a ring makes an owned repo
// eligible at once despite the minimum interval, rings during a fetch coalesce into one
// more fetch, and the outbox's sync entry for the same request fetches nothing again.
func TestFetchNowJumpsTheQueueOnceAndAnswersTheDurableRequest(t *testing.T) {
	f := newFixture(t, worker.Config{MinInterval: time.Hour})
	ctx := context.Background()
	f.w.RunOnce(ctx)
	if f.w.RunOnce(ctx) {
		t.Fatal("polled inside the minimum interval")
	}
	if f.w.FetchNow("not-owned", worker.AskHook) {
		t.Fatal("a ring for a repo the worker does not own was taken")
	}
	if !f.w.FetchNow(f.id, worker.AskHook) || !f.w.RunOnce(ctx) {
		t.Fatal("a ring did not make the repo eligible now")
	}
	if f.w.RunOnce(ctx) {
		t.Fatal("one ring fetched twice")
	}
	// Three rings while a fetch is in flight: one more fetch after it, no more.
	f.w.FetchNow(f.id, worker.AskHook)
	j, ok := f.w.Next(f.clk.Now())
	if !ok {
		t.Fatal("no job after a ring")
	}
	for range 3 {
		f.w.FetchNow(f.id, worker.AskHook)
	}
	f.w.Do(ctx, j)
	if !f.w.RunOnce(ctx) || f.w.RunOnce(ctx) {
		t.Fatal("rings during a fetch did not coalesce into exactly one more fetch")
	}
	calls := f.m.calls
	// The durable request that went with the ring arrives through the outbox: the fetch
	// since the ring answered it.
	el, _ := f.st.GetElection(ctx)
	wk, _ := f.st.GetWorker(ctx, "w1")
	r := f.repo(t)
	if err := f.st.Apply(ctx, el.Term, []store.Mutation{
		store.AssignRepo{ID: f.id, ExpectOwner: "w1", ExpectEpoch: r.OwnerEpoch, Owner: "w1", ClearSync: true},
		store.AppendOutbox{Worker: "w1", ExpectHead: wk.OutboxHead, Entries: []store.OutboxEntry{{Op: store.OpSync, RepoID: f.id, URL: r.URL, Epoch: r.OwnerEpoch + 1}}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(10 * time.Second) // the host's politeness budget refills: only the answered request holds it back
	if f.w.RunOnce(ctx) || f.m.calls != calls {
		t.Fatal("the durable request of an answered ring fetched again")
	}
	// A later sync with no ring is honoured.
	wk, _ = f.st.GetWorker(ctx, "w1")
	r = f.repo(t)
	if err := f.st.Apply(ctx, el.Term, []store.Mutation{
		store.AssignRepo{ID: f.id, ExpectOwner: "w1", ExpectEpoch: r.OwnerEpoch, Owner: "w1", ClearSync: true},
		store.AppendOutbox{Worker: "w1", ExpectHead: wk.OutboxHead, Entries: []store.OutboxEntry{{Op: store.OpSync, RepoID: f.id, URL: r.URL, Epoch: r.OwnerEpoch + 1}}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(10 * time.Second) // the host's politeness budget refills; the minimum interval is an hour
	if !f.w.RunOnce(ctx) {
		t.Fatal("a sync without a ring was not fetched")
	}
}

func TestOnlyUnaskedPollsOfUncoveredReposAreScored(t *testing.T) {
	f := newFixture(t, worker.Config{MinInterval: time.Hour})
	ctx := context.Background()
	fetch := func(ask func()) {
		t.Helper()
		f.clk.Advance(2 * time.Hour)
		ask()
		if !f.w.RunOnce(ctx) {
			t.Fatal("nothing fetched")
		}
	}
	poll := func() {}
	scored := func(want float64, what string) {
		t.Helper()
		if got := f.w.ScoredPolls(); got != want {
			t.Fatalf("%s: %v polls scored, want %v", what, got, want)
		}
	}
	fetch(poll) // the first clone
	scored(0, "a first clone")
	fetch(poll)
	scored(1, "a poll")
	// A fetch a feed's listing or a user's sync asked for is not scored; the next poll is.
	fetch(func() { f.w.FetchNow(f.id, worker.AskSync) })
	scored(1, "an asked-for fetch")
	fetch(poll)
	scored(2, "the poll after an asked-for fetch")
	// A hook's fetch is not scored, nor the polls of the repo it hooks.
	fetch(func() { f.w.FetchNow(f.id, worker.AskHook) })
	fetch(poll)
	scored(2, "a hook's fetch and a hooked repo's poll")
	// A hooked repo's poll that finds a push its hook missed unhooks the repo; it was
	// polled as covered and is not scored, the polls after it are.
	f.m.changed = true
	fetch(poll)
	scored(2, "the poll that found a push before its hook")
	f.m.changed = false
	fetch(poll)
	scored(3, "a poll of the repo its hooks no longer cover")
}

// A hook's fetch that finds the mirror's lock busy (maintenance, or the previous owner
// just after a move) fetched nothing: its retry still answers the hook. The push it
// brings is announced by the hook, not counted as a hook lost (which would unhook the
// repo), and the retry is no poll the hazard learns from.
func TestHookRetriedAfterABusyLockStillAnswersTheHook(t *testing.T) {
	var found []worker.HookFind
	f := newFixture(t, worker.Config{MinInterval: time.Hour, BusyRetry: 30 * time.Second,
		HookFound: func(_ string, hf worker.HookFind) { found = append(found, hf) }})
	ctx := context.Background()
	f.w.RunOnce(ctx) // the first clone
	f.clk.Advance(2 * time.Hour)
	f.w.RunOnce(ctx) // a poll
	scored := f.w.ScoredPolls()
	f.clk.Advance(time.Minute)
	f.m.results = []error{fetch.Errorf(fetch.KindBusy, "lock held")}
	if !f.w.FetchNow(f.id, worker.AskHook) || !f.w.RunOnce(ctx) {
		t.Fatal("the hook's fetch did not start")
	}
	if f.m.calls != 3 {
		t.Fatalf("%d syncs, want 3", f.m.calls)
	}
	f.m.changed = true
	f.clk.Advance(30 * time.Second)
	if !f.w.RunOnce(ctx) {
		t.Fatal("the busy hook's fetch was not retried after BusyRetry")
	}
	if len(found) != 1 || found[0] != worker.HookAnnounced {
		t.Fatalf("the retry that brought the push counted %v, want it announced by the hook", found)
	}
	if s, _ := f.w.PollStretchOf(f.id); s <= 1 {
		t.Fatalf("the repo's stretch after its hook's retry is %v: unhooked", s)
	}
	if got := f.w.ScoredPolls(); got != scored {
		t.Fatalf("the hook's retry was scored as a poll (%v scored, %v before)", got, scored)
	}
}

// A repo moved out and back in while its fetch runs is fetched by that fetch, not by a
// second one started beside it.
func TestMovedOutAndInDuringAFetchIsFetchedOnce(t *testing.T) {
	f := newFixture(t, worker.Config{MinInterval: time.Hour})
	ctx := context.Background()
	f.w.RunOnce(ctx) // the first clone
	f.clk.Advance(2 * time.Hour)
	j, ok := f.w.Next(f.clk.Now())
	if !ok {
		t.Fatal("no poll due")
	}
	el, _ := f.st.GetElection(ctx)
	wk, _ := f.st.GetWorker(ctx, "w1")
	r := f.repo(t)
	if err := f.st.Apply(ctx, el.Term, []store.Mutation{store.AppendOutbox{Worker: "w1", ExpectHead: wk.OutboxHead,
		Entries: []store.OutboxEntry{{Op: store.OpDel, RepoID: f.id, URL: r.URL, Epoch: r.OwnerEpoch + 1},
			{Op: store.OpAdd, RepoID: f.id, URL: r.URL, Epoch: r.OwnerEpoch + 2}}}}); err != nil {
		t.Fatal(err)
	}
	if err := f.w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.w.Owned(); got[f.id] != r.OwnerEpoch+2 {
		t.Fatalf("owned %v after the move back, want epoch %d", got, r.OwnerEpoch+2)
	}
	f.clk.Advance(10 * time.Second)
	if j2, ok := f.w.Next(f.clk.Now()); ok {
		t.Fatalf("a second fetch of %s started while its first ran (%+v)", j2.Target.ID, j2)
	}
	f.w.Do(ctx, j)
	if f.m.calls != 2 {
		t.Fatalf("%d syncs, want the clone and one poll", f.m.calls)
	}
	if f.w.QueueLen() != 1 {
		t.Fatalf("queue holds %d repos after the fetch, want it queued again", f.w.QueueLen())
	}
}

// A poll budget holds polls back, not first clones or asks; Polled hears of each poll it
// counts, and PollFound of each of those that found something new: not the clone, nor a
// hook's fetch, nor a poll that found nothing.
func TestPollBudgetHoldsPollsNotAsks(t *testing.T) {
	var polled, found []string
	f := newFixture(t, worker.Config{MinInterval: time.Minute, PollBudget: 24, // one repo: a poll an hour
		Polled:    func(host string) { polled = append(polled, host) },
		PollFound: func(host string) { found = append(found, host) }})
	ctx := context.Background()
	if !f.w.RunOnce(ctx) {
		t.Fatal("the first clone waited")
	}
	f.clk.Advance(2 * time.Minute)
	if !f.w.RunOnce(ctx) {
		t.Fatal("the first poll waited")
	}
	f.clk.Advance(2 * time.Minute)
	if f.w.RunOnce(ctx) {
		t.Fatal("polled past the budget")
	}
	f.m.changed = true // the hook's fetch and the next poll bring something
	if !f.w.FetchNow(f.id, worker.AskHook) || !f.w.RunOnce(ctx) {
		t.Fatal("a hook's fetch waited for the budget")
	}
	f.clk.Advance(2 * time.Minute)
	if f.w.RunOnce(ctx) {
		t.Fatal("polled past the budget after a hook")
	}
	f.clk.Advance(time.Hour)
	if !f.w.RunOnce(ctx) {
		t.Fatal("no poll an hour on")
	}
	if f.m.calls != 4 || !slices.Equal(polled, []string{"example.org", "example.org"}) {
		t.Fatalf("%d syncs, polls counted %v; want 4 syncs, the 2 polls counted", f.m.calls, polled)
	}
	if !slices.Equal(found, []string{"example.org"}) {
		t.Fatalf("polls that found something: %v, want the last poll alone", found)
	}
	if at, ok := f.w.NextPoll(f.id); !ok || at.Sub(f.clk.Now()) < 50*time.Minute {
		t.Fatalf("next poll estimated at %v (ok %v), want about an hour on", at.Sub(f.clk.Now()), ok)
	}
}
