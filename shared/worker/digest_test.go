package worker_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// The worker keeps what the mirror's refs are (their digest, in the repo's record) and
// polls with it: with the mirror's directory moved away, its polls of an unchanged
// upstream still succeed and create nothing; the poll that finds new refs finds the
// mirror missing and says so on the repo, and the next one clones it again. After a
// restart the digest comes back from the store, written with the reports that were
// written anyway (the clone's, the change's), so the restarted worker's polls need
// no mirror either.
func TestPollsNeedNoMirror(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	srv := gittest.NewServer(t)
	up := srv.NewRepo(t, "digest/repo")
	up.Commit(t, "one", map[string][]byte{"a": []byte("a\n")})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := mirror.New(mirror.Config{Root: root, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := worker.Config{MinInterval: time.Minute, MaintainEvery: -1, BackoffBase: time.Minute}
	st, clk, w, el := newJoined(t, cfg, m, nil)
	id := ownRepo(t, st, w, el, up.URL())
	tg := fetch.Target{ID: id, URL: up.URL()}
	dir, err := m.Path(tg)
	if err != nil {
		t.Fatal(err)
	}
	repo := func() store.Repo {
		t.Helper()
		r, err := st.GetRepo(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// poll runs the worker's next fetch, a minute on.
	poll := func(w *worker.Worker) {
		t.Helper()
		for range 30 {
			clk.Advance(time.Minute)
			if w.RunOnce(ctx) {
				return
			}
		}
		t.Fatal("no fetch due in half an hour")
	}
	moveAway := func() map[string]bool {
		t.Helper()
		if err := os.Rename(dir, filepath.Join(t.TempDir(), "away.git")); err != nil {
			t.Fatal(err)
		}
		return listTree(t, root)
	}

	poll(w)
	cloned := repo()
	if !m.Exists(tg) || cloned.RefsDigest == "" || cloned.State != store.RepoOK {
		t.Fatalf("after the clone: %+v", cloned)
	}

	before := moveAway()
	reports := w.Stats().Reports
	for range 3 {
		poll(w)
	}
	if d := treeDiff(before, listTree(t, root)); d != "" {
		t.Fatalf("no-change polls changed the mirror root: %s", d)
	}
	if r := repo(); r.LastError != "" || r.State != store.RepoOK || w.Stats().Reports != reports {
		t.Fatalf("no-change polls without the mirror: state %s, error %q, %d writes", r.State, r.LastError, w.Stats().Reports-reports)
	}

	up.Commit(t, "two", map[string][]byte{"b": []byte("b\n")})
	poll(w)
	r := repo()
	if !strings.Contains(r.LastError, "missing") || r.RefsDigest != "" || m.Exists(tg) {
		t.Fatalf("the changed poll without the mirror: error %q, digest %q, mirror made %v", r.LastError, r.RefsDigest, m.Exists(tg))
	}
	poll(w)
	r = repo()
	if !m.Exists(tg) || r.LastError != "" || r.RefsDigest == "" || r.RefsDigest == cloned.RefsDigest {
		t.Fatalf("the poll after: exists %v, error %q, digest %q (clone's %q)", m.Exists(tg), r.LastError, r.RefsDigest, cloned.RefsDigest)
	}

	// A restart: a new process on the same store takes the repo back (full resync),
	// with the digest the store kept (the old one is simply dropped).
	w2 := worker.New(withDefaults(cfg), st, m, nil, clk, quiet)
	if err := w2.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if w2.Owned()[id] == 0 {
		t.Fatalf("the restarted worker holds %v", w2.Owned())
	}
	before = moveAway()
	poll(w2)
	if d := treeDiff(before, listTree(t, root)); d != "" {
		t.Fatalf("the restarted worker's poll changed the mirror root: %s", d)
	}
	if r2 := repo(); r2.LastError != "" || r2.RefsDigest != r.RefsDigest {
		t.Fatalf("the restarted worker's poll without the mirror: error %q, digest %q", r2.LastError, r2.RefsDigest)
	}
}

// withDefaults is cfg as newJoined gives it to its worker.
func withDefaults(cfg worker.Config) worker.Config {
	cfg.ID = "w1"
	if cfg.Lease == 0 {
		cfg.Lease = 365 * 24 * time.Hour
	}
	return cfg
}

// listTree is every path under root.
func listTree(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out[p] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// treeDiff says which paths b adds to a and removes from it; "" when none.
func treeDiff(a, b map[string]bool) string {
	var d []string
	for p := range b {
		if !a[p] {
			d = append(d, "added "+p)
		}
	}
	for p := range a {
		if !b[p] {
			d = append(d, "removed "+p)
		}
	}
	slices.Sort(d)
	return strings.Join(d, ", ")
}
