package mirror

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// gitServer serves the repos under root with `git http-backend` (smart HTTP) on
// 127.0.0.1 and records every request.
type gitServer struct {
	root string
	home string
	srv  *httptest.Server

	mu   sync.Mutex
	reqs []string

	// stallAfter > 0: POST responses of git-upload-pack stop after that many bytes
	// and hang until the client goes away. stalled is closed when one does.
	stallAfter atomic.Int64
	stallOnce  sync.Once
	stalled    chan struct{}
}

func gitBackend(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skipf("git not available: %v", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("git http-backend not available: %v", err)
	}
	return p
}

func newGitServer(t testing.TB) *gitServer {
	t.Helper()
	s := &gitServer{root: t.TempDir(), home: t.TempDir(), stalled: make(chan struct{})}
	backend := &cgi.Handler{
		Path: gitBackend(t),
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.root,
			"GIT_HTTP_EXPORT_ALL=1",
			"HOME=" + s.home,
			"GIT_CONFIG_NOSYSTEM=1",
		},
		Logger: log.New(io.Discard, "", 0), // "copy error" when a test cuts a transfer
		Stderr: io.Discard,                 // http-backend's "Not a git repository"
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Method+" "+r.URL.RequestURI())
		s.mu.Unlock()
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
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *gitServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

func (s *gitServer) resetRequests() {
	s.mu.Lock()
	s.reqs = nil
	s.mu.Unlock()
}

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

// upstream is a non-bare repo under the server root; commits, branch deletions and
// resets in it are what an upstream's pushes would do.
type upstream struct {
	s    *gitServer
	name string
	dir  string
	n    int
}

var commitBase = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

func (s *gitServer) newRepo(t testing.TB, name string) *upstream {
	t.Helper()
	u := &upstream{s: s, name: name, dir: filepath.Join(s.root, name)}
	if err := os.MkdirAll(u.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	u.git(t, "init", "-q", "-b", "main")
	return u
}

func (u *upstream) URL() string { return u.s.srv.URL + "/" + u.name }

func (u *upstream) target(id string) fetch.Target { return fetch.Target{ID: id, URL: u.URL()} }

func (u *upstream) git(t testing.TB, args ...string) string {
	t.Helper()
	return runGit(t, u.s.home, u.dir, nil, args...)
}

func runGit(t testing.TB, home, dir string, extraEnv []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(home), extraEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func gitEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"HOME="+home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Up Stream", "GIT_AUTHOR_EMAIL=up@example.com",
		"GIT_COMMITTER_NAME=Up Stream", "GIT_COMMITTER_EMAIL=up@example.com",
	)
}

// commit writes files and commits them with a deterministic, increasing date;
// it returns the commit date.
func (u *upstream) commit(t testing.TB, msg string, files map[string][]byte) time.Time {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(u.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u.n++
	when := commitBase.Add(time.Duration(u.n) * time.Hour)
	date := "GIT_COMMITTER_DATE=" + strconv.FormatInt(when.Unix(), 10) + " +0000"
	adate := "GIT_AUTHOR_DATE=" + strconv.FormatInt(when.Unix(), 10) + " +0000"
	runGit(t, u.s.home, u.dir, nil, "add", "-A")
	runGit(t, u.s.home, u.dir, []string{date, adate}, "commit", "-q", "--allow-empty", "-m", msg)
	return when
}

// mergeNoFF merges branch into the current one with a merge commit.
func (u *upstream) mergeNoFF(t testing.TB, branch string) time.Time {
	t.Helper()
	u.n++
	when := commitBase.Add(time.Duration(u.n) * time.Hour)
	ts := strconv.FormatInt(when.Unix(), 10) + " +0000"
	runGit(t, u.s.home, u.dir, []string{"GIT_COMMITTER_DATE=" + ts, "GIT_AUTHOR_DATE=" + ts},
		"merge", "-q", "--no-ff", "-m", "merge "+branch, branch)
	return when
}

// refs is the upstream's `for-each-ref` (all refs, sorted).
func (u *upstream) refs(t testing.TB) string {
	t.Helper()
	return forEachRef(t, u.s.home, u.dir, "")
}

func forEachRef(t testing.TB, home, dir, gitDir string) string {
	t.Helper()
	args := []string{"for-each-ref", "--format=%(objectname) %(refname)"}
	if gitDir != "" {
		args = append([]string{"--git-dir=" + gitDir}, args...)
	}
	return runGit(t, home, dir, nil, args...)
}

// newestCommit is the newest committer time over the commits the refs point to
// (annotated tags peeled), computed by git itself.
func (u *upstream) newestCommit(t testing.TB) time.Time {
	t.Helper()
	out := u.git(t, "for-each-ref", "--format=%(committerdate:unix)%(*committerdate:unix)")
	var newest int64
	for _, l := range strings.Fields(out) {
		v, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			t.Fatalf("bad date %q", l)
		}
		if v > newest {
			newest = v
		}
	}
	if newest == 0 {
		return time.Time{}
	}
	return time.Unix(newest, 0).UTC()
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
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
func fsck(t testing.TB, home, gitDir string) {
	t.Helper()
	cmd := exec.Command("git", "--git-dir="+gitDir, "fsck", "--full", "--no-dangling")
	cmd.Env = gitEnv(home)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "error") || strings.Contains(string(out), "missing") {
		t.Fatalf("git fsck %s: %v\n%s", gitDir, err, out)
	}
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
