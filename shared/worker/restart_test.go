package worker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// onBackends runs test on a bolt store and on DynamoDB Local (skipped, saying why,
// where it is not running).
func onBackends(t *testing.T, test func(t *testing.T, open func(t *testing.T) storetest.Store)) {
	t.Run("bolt", func(t *testing.T) {
		test(t, func(t *testing.T) storetest.Store {
			st, err := bolt.OpenWith(filepath.Join(t.TempDir(), "s.db"), bolt.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		})
	})
	t.Run("dynamodb-local", func(t *testing.T) {
		test(t, func(t *testing.T) storetest.Store { return dynamotest.Table(t, "worker", dynamo.Config{}) })
	})
}

// joinedOn registers worker w1 on st (its first run) and takes a coordinator's term.
func joinedOn(t *testing.T, st storetest.Store, cfg worker.Config) (storetest.Store, *clock.Virtual, store.Election) {
	t.Helper()
	clk := clock.NewVirtual(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	cfg.ID, cfg.Lease = "w1", 1<<62
	w := worker.New(cfg, st, &scripted{}, nil, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := w.Heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}
	el, err := st.CASElection(context.Background(), 0, store.Election{Term: 1, VotedFor: "c"})
	if err != nil {
		t.Fatal(err)
	}
	return st, clk, el
}

// counting counts what a worker reads from its store.
type counting struct {
	worker.Store
	getRepo, listed, entries int
}

func (c *counting) GetRepo(ctx context.Context, id string) (store.Repo, error) {
	c.getRepo++
	return c.Store.GetRepo(ctx, id)
}

func (c *counting) ListReposByOwner(ctx context.Context, owner, cursor string, limit int) ([]store.Repo, string, error) {
	page, next, err := c.Store.ListReposByOwner(ctx, owner, cursor, limit)
	c.listed += len(page)
	return page, next, err
}

func (c *counting) ReadOutbox(ctx context.Context, w string, after uint64, limit int) ([]store.OutboxEntry, error) {
	es, err := c.Store.ReadOutbox(ctx, w, after, limit)
	c.entries += len(es)
	return es, err
}

func (c *counting) reset() { c.getRepo, c.listed, c.entries = 0, 0, 0 }

// assignMany gives w1 n new repos, each with its outbox entry, as a bulk add does.
func assignMany(t *testing.T, st storetest.Store, term int64, n int) {
	t.Helper()
	ctx := context.Background()
	head := getHead(t, st)
	for k := 0; k < n; k += 40 { // a store batch holds under 100 items
		var muts []store.Mutation
		var entries []store.OutboxEntry
		for i := k; i < min(k+40, n); i++ {
			url := fmt.Sprintf("https://example.org/bulk/r%d", i)
			id := store.RepoID(url)
			if _, _, err := st.CreateRepo(ctx, store.Repo{ID: id, URL: url, State: store.RepoPending}); err != nil {
				t.Fatal(err)
			}
			muts = append(muts, store.AssignRepo{ID: id, Owner: "w1", State: store.RepoCloning})
			entries = append(entries, store.OutboxEntry{Op: store.OpAdd, RepoID: id, URL: url, Epoch: 1})
		}
		if err := st.Apply(ctx, term, append(muts, store.AppendOutbox{Worker: "w1", ExpectHead: head, Entries: entries})); err != nil {
			t.Fatal(err)
		}
		head += uint64(len(entries))
	}
}

func getHead(t *testing.T, st storetest.Store) uint64 {
	t.Helper()
	w, err := st.GetWorker(context.Background(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	return w.OutboxHead
}

// A worker restarted under a backlog of outbox entries catches up over several
// heartbeats, each reading a bounded slice: it never goes silent for the whole replay,
// and the entries the owner index already reflects cost no repo read.
// On bolt and on DynamoDB Local.
func TestRestartUnderABacklogKeepsHeartbeating(t *testing.T) {
	onBackends(t, testRestartUnderABacklog)
}

func testRestartUnderABacklog(t *testing.T, open func(t *testing.T) storetest.Store) {
	const n, slice = 3000, 500
	ctx := context.Background()
	cfg := worker.Config{ReplaySlice: slice, HostRate: -1}
	st, clk, el := joinedOn(t, open(t), cfg)
	assignMany(t, st, el.Term, n)

	cfg.ID, cfg.Lease = "w1", 1<<62
	c := &counting{Store: st}
	w := worker.New(cfg, c, &scripted{}, nil, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	beats := 0
	for ; beats < 40; beats++ {
		c.reset()
		if err := w.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		if c.getRepo > slice || c.listed+c.entries > slice {
			t.Fatalf("heartbeat %d read %d repos, listed %d and read %d entries: more than a slice of %d",
				beats, c.getRepo, c.listed, c.entries, slice)
		}
		rec, err := st.GetWorker(ctx, "w1")
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Owned()) == n && rec.AckSeq == rec.OutboxHead {
			break
		}
	}
	if got := len(w.Owned()); got != n {
		t.Fatalf("the restarted worker holds %d repos after %d heartbeats, want %d", got, beats, n)
	}
	if beats > 2*n/slice+2 {
		t.Fatalf("caught up after %d heartbeats, want at most %d", beats, 2*n/slice+2)
	}
	if got := w.Stats().FullResyncs; got != 1 {
		t.Fatalf("%d full resyncs, want 1", got)
	}
}

// A worker far behind is cut at its outbox head in one tick (its trim point moves there
// while the entries go a bounded number at a time): it resyncs in full once and replays
// nothing.
func TestCutWorkerResyncsOnceAndReplaysNothing(t *testing.T) {
	onBackends(t, testCutWorker)
}

func testCutWorker(t *testing.T, open func(t *testing.T) storetest.Store) {
	const n = 1200
	ctx := context.Background()
	cfg := worker.Config{ReplaySlice: 100000, HostRate: -1}
	st, clk, el := joinedOn(t, open(t), cfg)
	assignMany(t, st, el.Term, n)
	rec, err := st.GetWorker(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	// The coordinator's clean-up of a worker n entries behind, past its MaxLag.
	cl := coordinator.PlanCleanup(coordinator.Membership{}, []store.Worker{rec}, nil, clk.Now(),
		coordinator.Config{MaxLag: n / 2, MaxTrim: 100})
	if len(cl.Trims) != 1 {
		t.Fatalf("clean-up of a worker %d behind: %+v, want one trim", n, cl.Trims)
	}
	if err := st.Apply(ctx, el.Term, []store.Mutation{cl.Trims[0].TrimOutbox}); err != nil {
		t.Fatal(err)
	}

	cfg.ID, cfg.Lease = "w1", 1<<62
	c := &counting{Store: st}
	w := worker.New(cfg, c, &scripted{}, nil, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(w.Owned()); got != n {
		t.Fatalf("holds %d repos after the resync, want %d", got, n)
	}
	if c.entries != 0 || c.getRepo != 0 || w.Stats().FullResyncs != 1 {
		t.Fatalf("read %d entries and %d repos with %d full resyncs, want none, none and one",
			c.entries, c.getRepo, w.Stats().FullResyncs)
	}
}
