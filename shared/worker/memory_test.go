package worker_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/membudget"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// A worker with a budget for two first mirrors at a time, handed eight at once: they
// wait for memory (the worker keeps heartbeating meanwhile), never hold more than the
// budget together, and are all mirrored.
func TestFirstMirrorsWithinMemoryBudget(t *testing.T) {
	ctx := t.Context()
	srv := gittest.NewServer(t)
	const n = 8
	var urls []string
	for i := range n {
		r := srv.NewRepo(t, fmt.Sprintf("r%d.git", i))
		for c := range 3 {
			r.Commit(t, fmt.Sprintf("c%d", c), map[string][]byte{fmt.Sprintf("f%d.txt", c): gittest.RandomBytes(t, 2000)})
		}
		u, err := urlpolicy.Policy{AllowPrivateHosts: true}.Normalize(r.URL())
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, u)
	}
	m, err := mirror.New(mirror.Config{Root: t.TempDir(), Client: urlpolicy.Policy{AllowPrivateHosts: true}.HTTPClient(0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })

	// Two first mirrors of these small repos fit, with their packs; a third does not.
	budget := int64(2*membudget.FetchBase + 200*membudget.PerObject)
	pool := membudget.NewPool(budget)
	st, _, w, el := newJoined(t, worker.Config{Fetchers: n, Memory: pool, HostConcurrency: -1, HostRate: -1}, m, nil)
	var muts []store.Mutation
	var entries []store.OutboxEntry
	for _, u := range urls {
		id := store.RepoID(u)
		if _, _, err := st.CreateRepo(ctx, store.Repo{ID: id, URL: u, State: store.RepoPending}); err != nil {
			t.Fatal(err)
		}
		muts = append(muts, store.AssignRepo{ID: id, Owner: "w1", State: store.RepoCloning})
		entries = append(entries, store.OutboxEntry{Op: store.OpAdd, RepoID: id, URL: u, Epoch: 1})
	}
	if err := st.Apply(ctx, el.Term, append(muts, store.AppendOutbox{Worker: "w1", Entries: entries})); err != nil {
		t.Fatal(err)
	}
	if err := w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}

	// Something else holds the whole budget at first: every fetch waits for it.
	hold, err := pool.Reserve(ctx, budget)
	if err != nil {
		t.Fatal(err)
	}
	var over []membudget.Stats
	var maxRunning int
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			s := pool.Stats()
			if s.Reserved > s.Budget {
				over = append(over, s)
			}
			maxRunning = max(maxRunning, s.Running)
			select {
			case <-stopSampling:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	started := make(chan bool, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- w.RunOnce(ctx)
		}()
	}
	waitFor(t, func() bool { return pool.Stats().Waiting == n }, "every fetch waiting for memory")
	if err := w.Heartbeat(ctx); err != nil {
		t.Fatalf("heartbeat while fetches wait for memory: %v", err)
	}
	hold.Release()
	wg.Wait()
	close(stopSampling)
	<-sampled
	close(started)
	for ok := range started {
		if !ok {
			t.Fatal("a fetcher found no job: the eight repos should have been eligible at once")
		}
	}
	if len(over) > 0 {
		t.Errorf("reservations over the budget of %d: %+v", budget, over[0])
	}
	if maxRunning > 3 { // two fetches, and the hold before it was released
		t.Errorf("%d reservations at once, the budget allows two fetches", maxRunning)
	}
	if s := pool.Stats(); s.Reserved != 0 || s.Waiting != 0 || s.Peak > budget {
		t.Errorf("after the burst: %+v", s)
	}
	if got := w.Stats().Fetches; got != n {
		t.Errorf("%d fetches, want %d", got, n)
	}
	for _, u := range urls {
		if !m.Exists(fetch.Target{URL: u}) {
			t.Errorf("%s not mirrored", u)
		}
		r, err := st.GetRepo(ctx, store.RepoID(u))
		if err != nil || r.State != store.RepoOK {
			t.Errorf("%s: state %q, err %v", u, r.State, err)
		}
	}
}

// waitFor polls cond until it holds, within the test's deadline.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatalf("never: %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}
