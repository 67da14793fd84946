package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/logtest"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// A thousand repos of one host failing alike are logged in proportion to the problem,
// not to the repos: over three minutes a few lines of their own and a summary a minute,
// while a repo of another host failing in its own way still gets a line naming it, and
// its recovery another.
func TestThousandFailuresAreAFewLines(t *testing.T) {
	ctx := context.Background()
	var logs logtest.Buffer
	m := &hostMirror{fail: map[string]error{}}
	cfg := worker.Config{HostRate: -1, HostConcurrency: -1, MinInterval: 10 * time.Second}
	st, clk, w, el := newJoinedLogging(t, cfg, m, nil, func(s worker.Store) worker.Store { return s },
		slog.New(slog.NewTextHandler(&logs, nil)))

	const repos = 1000
	var urls []string
	for i := range repos {
		urls = append(urls, fmt.Sprintf("https://down.example/org/r%d", i))
		m.fail[urls[i]] = errors.New("connection refused")
	}
	lone := "https://lone.example/org/r"
	urls = append(urls, lone)
	m.fail[lone] = errors.New("repository not exported")
	for k := 0; k < len(urls); k += 40 { // a store batch holds under 100 items
		var muts []store.Mutation
		var entries []store.OutboxEntry
		for _, url := range urls[k:min(k+40, len(urls))] {
			id := store.RepoID(url)
			if _, _, err := st.CreateRepo(ctx, store.Repo{ID: id, URL: url, State: store.RepoPending}); err != nil {
				t.Fatal(err)
			}
			muts = append(muts, store.AssignRepo{ID: id, Owner: "w1", State: store.RepoCloning})
			entries = append(entries, store.OutboxEntry{Op: store.OpAdd, RepoID: id, URL: url, Epoch: 1})
		}
		if err := st.Apply(ctx, el.Term, append(muts, store.AppendOutbox{Worker: "w1", ExpectHead: uint64(k), Entries: entries})); err != nil {
			t.Fatal(err)
		}
	}

	// Three minutes of the worker: every job due each second, a heartbeat every ten.
	run := func(d time.Duration) {
		for end := clk.Now().Add(d); clk.Now().Before(end); clk.Advance(time.Second) {
			if clk.Now().Second()%10 == 0 {
				if err := w.Heartbeat(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for {
				j, ok := w.Next(clk.Now())
				if !ok {
					break
				}
				w.Do(ctx, j)
			}
		}
	}
	run(3 * time.Minute)

	failures := w.Stats().Failures
	warns := strings.Count(logs.String(), "level=WARN")
	t.Logf("%d failed fetches of %d repos in 3 min: %d WARN lines", failures, len(urls), warns)
	if failures < repos {
		t.Fatalf("%d failed fetches: the thousand repos did not all fail", failures)
	}
	if warns > 60 {
		t.Errorf("%d WARN lines for one problem on one host, want at most 60:\n%s", warns, logs.String())
	}
	summary := false
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="fetch failures"`) && strings.Contains(line, "host=down.example") {
			summary = true
		}
	}
	if !summary {
		t.Errorf("no summary line for down.example's failures:\n%s", logs.String())
	}
	loneID := store.RepoID(lone)
	if !strings.Contains(logs.String(), `msg="fetch failing" repo=`+loneID) {
		t.Errorf("no line of its own for %s failing alone:\n%s", lone, logs.String())
	}

	delete(m.fail, lone)
	before := len(logs.String())
	run(10 * time.Minute)
	if !strings.Contains(logs.String()[before:], `msg="fetch recovered" repo=`+loneID) {
		t.Errorf("no line for %s recovering:\n%s", lone, logs.String()[before:])
	}
}
