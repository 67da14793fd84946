package worker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// scripted is a Mirrorer whose answers the test sets per call.
type scripted struct {
	exists  bool
	results []error // popped per Sync; nil = success with changes
	changed bool
	commits []fetch.Commit // brought by the next successful Sync (then cleared)
	since   time.Time      // a clone's HistorySince
	calls   int
}

func (s *scripted) Sync(context.Context, fetch.Target) (fetch.Result, error) {
	s.calls++
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
	ctx := context.Background()
	st, err := bolt.OpenWith(filepath.Join(t.TempDir(), "s.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewVirtual(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	m := &scripted{}
	cfg.ID = "w1"
	w := worker.New(cfg, st, m, nil, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
