package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
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
	exists  bool
	results []error // popped per Sync; nil = success with changes
	changed bool
	calls   int
	during  func() // runs inside Sync, while the fetch is in flight
}

func (s *scripted) Sync(context.Context, fetch.Target) (fetch.Result, error) {
	s.calls++
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
	return fetch.Result{Cloned: cloned, Changed: cloned || s.changed, LastCommitAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, nil
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
	return newFixtureOn(t, cfg, func(s worker.Store) worker.Store { return s })
}

// newFixtureOn is newFixture with the worker's store seen through wrap.
func newFixtureOn(t *testing.T, cfg worker.Config, wrap func(worker.Store) worker.Store) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := bolt.OpenWith(filepath.Join(t.TempDir(), "s.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewVirtual(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	m := &scripted{}
	cfg.ID = "w1"
	if cfg.Lease == 0 {
		// These tests move the clock by hours between heartbeats; the lease has its own.
		cfg.Lease = 365 * 24 * time.Hour
	}
	w := worker.New(cfg, wrap(st), m, nil, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	el, err := st.CASElection(ctx, 0, store.Election{Term: 1, VotedFor: "c"})
	if err != nil {
		t.Fatal(err)
	}
	url := "https://example.org/a/b"
	id := store.RepoID(url)
	if _, _, err := st.CreateRepo(ctx, store.Repo{ID: id, URL: url, State: store.RepoPending}); err != nil {
		t.Fatal(err)
	}
	err = st.Apply(ctx, el.Term, []store.Mutation{
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
	return &fixture{st: st, clk: clk, w: w, m: m, id: id}
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
	if r := f.repo(t); r.CloneFailCnt != 1 || r.State != store.RepoCloning || r.LastError == "" {
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
	priority.Rate
	inputs []priority.Input
}

func (p *recording) Next(in priority.Input) float64 {
	p.inputs = append(p.inputs, in)
	return p.Rate.Next(in)
}

func TestPollStatsAccumulateAndReachTheStoreOnAChange(t *testing.T) {
	pol := &recording{}
	f := newFixture(t, worker.Config{MinInterval: time.Minute, Checkpoint: 24 * time.Hour, Policy: pol})
	ctx := context.Background()
	f.w.RunOnce(ctx) // the clone starts the clock: nothing observed yet
	if r := f.repo(t); r.Stats != (priority.Stats{}) {
		t.Fatalf("stats after the clone: %+v", r.Stats)
	}
	var want priority.Stats
	reports := f.w.Stats().Reports
	for i, gap := range []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour} {
		f.clk.Advance(gap)
		if !f.w.RunOnce(ctx) {
			t.Fatalf("poll %d: nothing to fetch", i)
		}
		want = want.Observe(gap, false)
		if got := pol.inputs[len(pol.inputs)-1].Stats; got != want {
			t.Fatalf("poll %d: policy saw %+v, want %+v", i, got, want)
		}
	}
	if got := f.w.Stats().Reports - reports; got != 0 {
		t.Fatalf("%d writes for no-change polls", got)
	}
	if r := f.repo(t); r.Stats != (priority.Stats{}) {
		t.Fatalf("no-change polls wrote stats: %+v", r.Stats)
	}

	f.m.changed = true
	f.clk.Advance(4 * time.Hour)
	f.w.RunOnce(ctx)
	want = want.Observe(4*time.Hour, true)
	r := f.repo(t)
	if r.Stats != want {
		t.Fatalf("stored stats after a change: %+v, want %+v", r.Stats, want)
	}
	// Four polls over 10 h, one of them with a change; 10 h of decay is about 0.3%.
	if math.Abs(r.Stats.Polls-4) > 0.05 || math.Abs(r.Stats.Changes-1) > 1e-9 || math.Abs(r.Stats.Seconds-36000) > 180 {
		t.Fatalf("stored stats %+v, want about 4 polls, 1 change, 36000 s", r.Stats)
	}
	if got := pol.inputs[len(pol.inputs)-1]; got.Stats != want || !got.Changed {
		t.Fatalf("policy input of the changed poll: %+v", got)
	}
}

func TestFailedPollsAreCoveredByTheNextSuccess(t *testing.T) {
	f := newFixture(t, worker.Config{MinInterval: time.Minute, BackoffBase: time.Minute, Checkpoint: 24 * time.Hour})
	ctx := context.Background()
	f.w.RunOnce(ctx)
	netErr := &fetch.Error{Kind: fetch.KindNetwork, Err: errors.New("connection reset")}
	f.m.results = []error{netErr}
	f.clk.Advance(time.Hour)
	f.w.RunOnce(ctx) // fails: observes nothing
	if r := f.repo(t); r.Stats != (priority.Stats{}) || r.FetchFailCnt != 1 {
		t.Fatalf("after a failed poll: %+v", r)
	}
	f.m.changed = true
	f.clk.Advance(time.Hour)
	f.w.RunOnce(ctx)
	want := priority.Stats{}.Observe(2*time.Hour, true)
	if r := f.repo(t); r.Stats != want {
		t.Fatalf("stats after recovering: %+v, want one poll over 2 h: %+v", r.Stats, want)
	}
}

func TestDefaultPolicyIsRate(t *testing.T) {
	if got := worker.DefaultConfig().Policy.Name(); got != "rate" {
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
	f := newFixtureOn(t, worker.Config{MinInterval: time.Second, Lease: 5 * time.Minute, Checkpoint: time.Hour},
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
