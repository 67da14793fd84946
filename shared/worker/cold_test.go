package worker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/pagecache"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// countingGit is a git that appends a line to a file at every run: how many git
// processes maintenance started.
func countingGit(t *testing.T) (gitcmd.Git, func() int) {
	t.Helper()
	real, err := gitcmd.Find(context.Background())
	if err != nil {
		t.Skipf("maintenance needs git: %v", err)
	}
	dir := t.TempDir()
	calls, wrapper := filepath.Join(dir, "calls"), filepath.Join(dir, "git")
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %q\nexec %q \"$@\"\n", calls, real.Path)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return gitcmd.Git{Path: wrapper, Version: real.Version}, func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "\n")
	}
}

// TestColdMirrorStaysCold: once a mirror's files are out of the page cache, polls that
// find nothing new, a `repos sync` of the unchanged repo and the daily maintenance of
// the unchanged mirror, all through the worker, read none of its object files (packs,
// indexes, bitmap, commit-graph: not one page comes back into the cache) and start no
// git process. On EFS any read of a file restarts its lifecycle timer: a mirror nobody
// changes or clones must not be read at all, or it never reaches Infrequent Access.
// Once it changes, its maintenance reads the new packs, and of the old one only the
// new commits' parents.
func TestColdMirrorStaysCold(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	if err := pagecache.Check(root); err != nil {
		t.Skipf("cannot evict files from the page cache here, so cannot tell whether they are read: %v", err)
	}
	srv := gittest.NewServer(t)
	up := srv.NewRepo(t, "cold/repo")
	for i := range 4 {
		up.Commit(t, fmt.Sprint("c", i), map[string][]byte{fmt.Sprint("blob", i): gittest.RandomBytes(t, 1<<20)})
	}
	up.Git(t, "tag", "-a", "v1", "-m", "v1")
	up.Git(t, "branch", "side")
	g, gitRuns := countingGit(t)

	var now func() time.Time // the worker's virtual clock, once it exists
	m, err := mirror.New(mirror.Config{Root: root, Git: g, Now: func() time.Time { return now() },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// ScrubEvery far longer than the test: no scrub slot starts while it runs.
	cfg := worker.Config{MinInterval: time.Minute, MaintainEvery: 24 * time.Hour, ScrubEvery: 100 * 365 * 24 * time.Hour}
	st, clk, w, el := newJoined(t, cfg, m, nil)
	now = clk.Now
	id := ownRepo(t, st, w, el, up.URL())
	tg := fetch.Target{ID: id, URL: up.URL()}
	dir, err := m.Path(tg)
	if err != nil {
		t.Fatal(err)
	}

	if !w.RunOnce(ctx) || !m.Exists(tg) {
		t.Fatal("no clone")
	}
	clk.Advance(25 * time.Hour)
	if n := w.MaintainOnce(ctx); n != 1 || gitRuns() == 0 {
		t.Fatalf("first maintenance: %d runs, %d git processes; want one run", n, gitRuns())
	}
	rec, err := st.GetRepo(ctx, id)
	if err != nil || rec.LastCommitAt.IsZero() {
		t.Fatalf("record after clone: %+v, %v", rec, err)
	}

	objects := filepath.Join(dir, "objects")
	if err := pagecache.EvictTree(dir); err != nil {
		t.Fatal(err)
	}
	assertCold(t, objects, "after eviction")
	runsBefore := gitRuns()

	for range 5 { // polls that find nothing new
		clk.Advance(time.Minute)
		if !w.RunOnce(ctx) {
			t.Fatal("no poll due")
		}
	}
	// `repos sync` of the unchanged repo: an outbox entry, fetched at once.
	r, _ := st.GetRepo(ctx, id)
	wk, _ := st.GetWorker(ctx, "w1")
	if err := st.Apply(ctx, el.Term, []store.Mutation{
		store.AssignRepo{ID: id, ExpectOwner: "w1", ExpectEpoch: r.OwnerEpoch, Owner: "w1", ClearSync: true},
		store.AppendOutbox{Worker: "w1", ExpectHead: wk.OutboxHead, Entries: []store.OutboxEntry{{Op: store.OpSync, RepoID: id, URL: r.URL, Epoch: r.OwnerEpoch + 1}}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if !w.RunOnce(ctx) {
		t.Fatal("the sync entry did not fetch at once")
	}
	// The next day's maintenance of the unchanged mirror: the worker knows nothing was
	// fetched into it since the last one (its refs digest), so it does not even look.
	clk.Advance(24 * time.Hour)
	unchanged := w.Stats().MaintenanceUnchanged
	w.MaintainOnce(ctx)

	if n := gitRuns() - runsBefore; n != 0 {
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(g.Path), "calls"))
		t.Errorf("%d git processes ran for an unchanged mirror:\n%s", n, b)
	}
	assertCold(t, objects, "after no-change polls, a sync and maintenance")
	if got := w.Stats().MaintenanceUnchanged - unchanged; got != 0 {
		t.Fatalf("%d maintenance runs looked at the unchanged mirror, want none (stats %+v)", got, w.Stats())
	}
	if st := w.Stats(); st.Failures != 0 || st.MaintenanceFailures != 0 {
		t.Fatalf("failures: %+v", st)
	}
	if rec2, _ := st.GetRepo(ctx, id); !rec2.LastCommitAt.Equal(rec.LastCommitAt) {
		t.Fatalf("LastCommitAt %v after no-change polls, was %v", rec2.LastCommitAt, rec.LastCommitAt)
	}

	// A change upstream is still seen, and the mirror stays complete; its
	// maintenance reads the new packs, not the old ones.
	oldPacks, _ := filepath.Glob(filepath.Join(objects, "pack", "*.pack"))
	for i := range 3 {
		up.Commit(t, fmt.Sprint("new ", i), map[string][]byte{"new": []byte(fmt.Sprint(i))})
		clk.Advance(time.Minute)
		if !w.RunOnce(ctx) {
			t.Fatal("no poll due")
		}
	}
	if got, want := gittest.RefsOf(t, dir), gittest.RefsOf(t, up.Served()); got != want {
		t.Fatalf("mirror refs\n%s\nwant\n%s", got, want)
	}
	if rec3, _ := st.GetRepo(ctx, id); !rec3.LastCommitAt.After(rec.LastCommitAt) {
		t.Fatalf("LastCommitAt %v after a new commit, was %v", rec3.LastCommitAt, rec.LastCommitAt)
	}
	if err := pagecache.EvictTree(dir); err != nil {
		t.Fatal(err)
	}
	clk.Advance(24 * time.Hour)
	if n := w.MaintainOnce(ctx); n != 1 {
		t.Fatalf("maintenance of the changed mirror: %d runs, want 1", n)
	}
	// git 2.39's commit-graph write parses the new commits' parents without the graph:
	// those few objects of the old pack are read (pages and read-ahead), nothing more.
	const boundary = 128 << 10
	for _, p := range oldPacks {
		if r, size, err := pagecache.Resident(p); err != nil || r > boundary {
			t.Errorf("maintenance of the changed mirror read %d of %d bytes of the old pack %s (%v); want at most %d (the new commits' parents)", r, size, filepath.Base(p), err, boundary)
		}
	}
	if out, err := exec.Command("git", "--git-dir", dir, "fsck", "--connectivity-only", "--no-progress").CombinedOutput(); err != nil {
		t.Fatalf("fsck after the changed mirror's maintenance: %v\n%s", err, out)
	}
}

// assertCold fails the test for every file under dir that has pages in the cache.
func assertCold(t *testing.T, dir, when string) {
	t.Helper()
	files, err := pagecache.ResidentTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no files under %s", dir)
	}
	for _, f := range files {
		if f.Resident > 0 {
			t.Errorf("%s: %s has %d of %d bytes in the page cache: it was read", when, f.Path, f.Resident, f.Size)
		}
	}
}
