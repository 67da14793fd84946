package mirror

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// gitServer is gittest's server with the failure modes the mirror tests need: paths
// under /ratelimited/, /unavailable/ and /forbidden/ answer 429, 503 and 403, and
// stallAfter stalls pack transfers.
type gitServer struct {
	*gittest.Server
	home string
	srv  *httptest.Server

	// stallAfter > 0: POST responses of git-upload-pack stop after that many bytes
	// and hang until the client goes away. stalled is closed when one does.
	stallAfter atomic.Int64
	stallOnce  sync.Once
	stalled    chan struct{}
}

func newGitServer(t testing.TB) *gitServer {
	t.Helper()
	gs := gittest.NewServer(t)
	s := &gitServer{Server: gs, home: gs.Home, srv: gs.HTTP, stalled: make(chan struct{})}
	gs.Intercept(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/ratelimited/"):
			w.Header().Set("Retry-After", "7")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		case strings.HasPrefix(r.URL.Path, "/unavailable/"):
			w.Header().Set("Retry-After", time.Now().Add(90*time.Second).UTC().Format(http.TimeFormat))
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		case strings.HasPrefix(r.URL.Path, "/forbidden/"):
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		if n := s.stallAfter.Load(); n > 0 && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			w = &stallWriter{ResponseWriter: w, left: n, ctx: r.Context(), onStall: func() {
				s.stallOnce.Do(func() { close(s.stalled) })
			}}
		}
		next.ServeHTTP(w, r)
	})
	return s
}

func (s *gitServer) requests() []string { return s.Requests() }

func (s *gitServer) resetRequests() { s.ResetRequests() }

// stallWriter passes left bytes through (flushed, so the client really gets them)
// and then blocks until the request is gone.
type stallWriter struct {
	http.ResponseWriter
	left    int64
	ctx     context.Context
	onStall func()
}

func (w *stallWriter) Write(p []byte) (int, error) {
	n := 0
	if w.left > 0 {
		chunk := p
		if int64(len(chunk)) > w.left {
			chunk = chunk[:w.left]
		}
		var err error
		n, err = w.ResponseWriter.Write(chunk)
		w.left -= int64(n)
		if f, ok := w.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		if err != nil || n == len(p) {
			return n, err
		}
	}
	w.onStall()
	<-w.ctx.Done()
	return n, w.ctx.Err()
}

// upstream is a served working repo (gittest.NewWorkRepo): commits, branch deletions,
// resets and HEAD moves in it, even with git run directly in dir, are what an
// upstream's pushes would do.
type upstream struct {
	*gittest.Repo
	s   *gitServer
	dir string
}

func (s *gitServer) newRepo(t testing.TB, name string) *upstream {
	t.Helper()
	r := s.NewWorkRepo(t, name)
	return &upstream{Repo: r, s: s, dir: r.Dir}
}

func (u *upstream) target(id string) fetch.Target { return fetch.Target{ID: id, URL: u.URL()} }

func (u *upstream) git(t testing.TB, args ...string) string {
	t.Helper()
	return u.Git(t, args...)
}

// commit writes files and commits them with a deterministic, increasing date.
func (u *upstream) commit(t testing.TB, msg string, files map[string][]byte) {
	t.Helper()
	u.Commit(t, msg, files)
}

// mergeNoFF merges branch into the current one with a merge commit.
func (u *upstream) mergeNoFF(t testing.TB, branch string) {
	t.Helper()
	u.Merge(t, branch)
}

// refs is the upstream's `for-each-ref` (all refs, sorted).
func (u *upstream) refs(t testing.TB) string {
	t.Helper()
	return u.Refs(t)
}

// newestCommit is the newest committer time over the commits the refs point to
// (annotated tags peeled), computed by git itself.
func (u *upstream) newestCommit(t testing.TB) time.Time {
	t.Helper()
	return u.NewestCommit(t)
}

func runGit(t testing.TB, home, dir string, extraEnv []string, args ...string) string {
	t.Helper()
	return gittest.Run(t, home, dir, extraEnv, args...)
}

func gitEnv(home string) []string { return gittest.Env(home) }

// forEachRef is the refs of the repository at gitDir (gittest.RefsOf).
func forEachRef(t testing.TB, _, _, gitDir string) string {
	t.Helper()
	return gittest.RefsOf(t, gitDir)
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	return gittest.RandomBytes(t, n)
}

// treeSnapshot records every file and dir under dir with size, mode and mtime.
func treeSnapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		snap[rel] = fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func diffSnapshots(a, b map[string]string) []string {
	var d []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			d = append(d, "removed "+k)
		} else if v != w {
			d = append(d, "changed "+k+": "+v+" -> "+w)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, "added "+k)
		}
	}
	sort.Strings(d)
	return d
}

// fsck runs `git fsck --full` on a bare repo and fails on any error.
func fsck(t testing.TB, _, gitDir string) {
	t.Helper()
	gittest.Fsck(t, gitDir)
}

func newTestMirrorer(t testing.TB, cfg Config) *Mirrorer {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func mustSync(t testing.TB, m *Mirrorer, tg fetch.Target) fetch.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := m.Sync(ctx, tg)
	if err != nil {
		t.Fatalf("Sync(%s): %v", tg.URL, err)
	}
	return res
}

func mirrorDir(t testing.TB, m *Mirrorer, tg fetch.Target) string {
	t.Helper()
	p, err := m.Path(tg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// assertMirrored checks that the mirror's refs equal the upstream's exactly.
func assertMirrored(t testing.TB, m *Mirrorer, u *upstream, tg fetch.Target) {
	t.Helper()
	dir := mirrorDir(t, m, tg)
	want := u.refs(t)
	got := forEachRef(t, u.s.home, dir, dir)
	if got != want {
		t.Fatalf("mirror refs differ from upstream\nupstream:\n%s\nmirror:\n%s", want, got)
	}
}

// assertOnlyDotDirs checks that no mirror, lock file or empty directory is left: the
// root holds only .tmp, .trash and .locks, and .locks is empty.
func assertOnlyDotDirs(t testing.TB, m *Mirrorer) {
	t.Helper()
	for _, d := range []string{m.root, m.lockDir} {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if d == m.lockDir || !strings.HasPrefix(e.Name(), ".") {
				t.Fatalf("%s left in %s", e.Name(), d)
			}
		}
	}
}

// syncedBasic serves buildBasic's upstream at x/<name>, mirrors it with a new Mirrorer
// of cfg and returns the server, the upstream, the Mirrorer and the target.
func syncedBasic(t testing.TB, name string, cfg Config) (*gitServer, *upstream, *Mirrorer, fetch.Target) {
	t.Helper()
	s := newGitServer(t)
	u := buildBasic(t, s, "x/"+name)
	m := newTestMirrorer(t, cfg)
	tg := u.target(name)
	mustSync(t, m, tg)
	return s, u, m, tg
}
