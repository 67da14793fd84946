package serve

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/logtest"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/serve/packcache"
)

// The test binary is also the pack-objects hook: upload-pack runs it as
// `<test binary> pack-objects-hook git pack-objects ...`.
func TestMain(m *testing.M) {
	if packcache.IsHook(os.Args) {
		packcache.RunHook()
	}
	os.Exit(m.Run())
}

// env is a front over a mirrors root that is also a gittest server's root, so the
// upstream repositories the tests build are the mirrors the front serves.
type env struct {
	t     *testing.T
	up    *gittest.Server
	root  string
	cache string
	h     *Handler
	srv   *httptest.Server
	sink  *sink
	logs  *logtest.Buffer
	home  string // HOME of the git client
}

type option func(*Config)

func newEnv(t *testing.T, opts ...option) *env {
	t.Helper()
	git, err := gitcmd.Find(context.Background())
	if err != nil {
		t.Skip(err)
	}
	up := gittest.NewServer(t)
	e := &env{t: t, up: up, root: up.Root, cache: t.TempDir(), sink: &sink{}, logs: &logtest.Buffer{}, home: t.TempDir()}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Root: e.root, Git: git.Path, Scratch: t.TempDir(),
		PackCache: packcache.Config{Dir: e.cache}, Hook: []string{self, packcache.Arg},
		Metrics: e.sink, Log: slog.New(slog.NewTextHandler(e.logs, nil))}
	for _, o := range opts {
		o(&cfg)
	}
	if e.h, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.h.Close() })
	e.srv = httptest.NewServer(e.h)
	t.Cleanup(e.srv.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("front log:\n%s", e.logs.String())
		}
	})
	return e
}

// repo makes an upstream repository at rel under the root (a mirror as the fleet
// keeps one) with a few commits, a branch and an annotated tag.
func (e *env) repo(rel string) *gittest.Repo {
	e.t.Helper()
	r := e.up.NewRepo(e.t, rel)
	for i := range 3 {
		r.Commit(e.t, fmt.Sprintf("commit %d", i), map[string][]byte{
			"README":                  fmt.Appendf(nil, "version %d\n", i),
			fmt.Sprintf("f%d.bin", i): gittest.RandomBytes(e.t, 4096),
		})
	}
	r.Branch(e.t, "dev", "HEAD~1")
	r.AnnotatedTag(e.t, "v1", "HEAD", "release 1")
	return r
}

// url is the front's URL of a mirror path.
func (e *env) url(rel string) string { return e.srv.URL + Prefix + rel }

// git runs the git client in its isolated environment.
func (e *env) git(dir string, args ...string) string {
	e.t.Helper()
	return gittest.Run(e.t, e.home, dir, nil, args...)
}

// gitErr runs the git client and returns its combined output and error.
func (e *env) gitErr(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gittest.Env(e.home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// snapshot lists every file under dir with its size and modification time, to show
// that serving wrote nothing.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		lines = append(lines, fmt.Sprintf("%s %v %d %d", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// sink is a metrics sink that keeps counter totals and histogram counts.
type sink struct {
	mu     sync.Mutex
	totals map[string]float64
	counts map[string]int
}

func (s *sink) Record(samples ...metrics.Sample) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.totals == nil {
		s.totals, s.counts = map[string]float64{}, map[string]int{}
	}
	for _, x := range samples {
		k := x.Name
		for _, v := range x.Dims {
			k += "/" + v
		}
		s.totals[k] += x.Value
		s.counts[k]++
	}
	return nil
}

func (s *sink) total(k string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.totals[k]
}

// waitTotal waits (the hook's reports arrive asynchronously) until metric k reaches
// want, and fails if it does not within a generous time or goes past it.
func (s *sink) waitTotal(t *testing.T, k string, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.total(k) < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := s.total(k); got != want {
		t.Fatalf("%s = %v, want %v", k, got, want)
	}
}
