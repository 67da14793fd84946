package main

import (
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/repogen"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
)

// allocEnv makes the test binary a child that holds this many MiB, touched, and exits.
const allocEnv = "FETCHCOST_TEST_ALLOC_MIB"

func TestMain(m *testing.M) {
	if isChild() {
		os.Exit(childMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if v := os.Getenv(allocEnv); v != "" {
		n, _ := strconv.Atoi(v)
		hold(n)
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "fetchcost-test-")
	if err != nil {
		panic(err)
	}
	launcherDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var sink []byte

// hold allocates n MiB and writes every page, so that it is resident.
func hold(n int) {
	sink = make([]byte, n<<20)
	for i := 0; i < len(sink); i += 4096 {
		sink[i] = 1
	}
}

func requireGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
}

func TestGenerateSizeAndFsck(t *testing.T) {
	requireGit(t)
	t.Parallel()
	ctx := context.Background()
	for _, target := range []int64{1 << 20, 3 << 20} {
		dir := filepath.Join(t.TempDir(), "r.git")
		p := repogen.PlanFor(target)
		g, err := repogen.Create(ctx, dir, p, 7)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := repogen.PackBytes(dir)
		if err != nil {
			t.Fatal(err)
		}
		if r := float64(got) / float64(target); r < 0.7 || r > 1.4 {
			t.Errorf("target %d: pack is %d bytes (%.2fx the target)", target, got, r)
		}
		if n, err := gitInt(ctx, "--git-dir="+dir, "rev-list", "--count", "main"); err != nil || n != p.Commits {
			t.Errorf("target %d: main has %d commits (err %v), want %d", target, n, err, p.Commits)
		}
		if err := repogen.PushSmallChange(ctx, dir, g); err != nil {
			t.Fatal(err)
		}
		if n, err := gitInt(ctx, "--git-dir="+dir, "rev-list", "--count", "main"); err != nil || n != p.Commits+1 {
			t.Errorf("after a small change main has %d commits (err %v), want %d", n, err, p.Commits+1)
		}
		gittest.Fsck(t, dir)
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	requireGit(t)
	t.Parallel()
	ctx := context.Background()
	var refs []string
	for range 2 {
		dir := filepath.Join(t.TempDir(), "r.git")
		if _, err := repogen.Create(ctx, dir, repogen.PlanFor(256<<10), 3); err != nil {
			t.Fatal(err)
		}
		r, err := repogen.RefsOf(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, r)
	}
	if refs[0] != refs[1] || refs[0] == "" {
		t.Fatalf("two generations with one seed differ:\n%s\n--\n%s", refs[0], refs[1])
	}
}

var (
	launcherDir  string // removed when the tests end
	launcherOnce sync.Once
	launcherM    meter
	launcherErr  error
)

// testMeter builds the launcher once for all tests.
func testMeter(t *testing.T) meter {
	t.Helper()
	launcherOnce.Do(func() {
		launcherM, launcherErr = buildLauncher(context.Background(), launcherDir)
	})
	if launcherErr != nil {
		t.Fatal(launcherErr)
	}
	return launcherM
}

func allocProc(t *testing.T, mib int) proc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return proc{args: []string{self}, env: append(os.Environ(), allocEnv+"="+strconv.Itoa(mib))}
}

func TestMeasureMaxRSSFollowsTheChild(t *testing.T) {
	m := testMeter(t)
	ctx := context.Background()
	small, err := m.measure(ctx, allocProc(t, 8), true)
	if err != nil {
		t.Fatal(err)
	}
	big, err := m.measure(ctx, allocProc(t, 100), true)
	if err != nil {
		t.Fatal(err)
	}
	if d := big.MaxRSS - small.MaxRSS; d < 80<<20 {
		t.Fatalf("MaxRSS %d (100 MiB child) - %d (8 MiB child) = %d, want over 80 MiB", big.MaxRSS, small.MaxRSS, d)
	}
	if big.TreeRSS < big.MaxRSS || big.Wall <= 0 || big.CPU <= 0 {
		t.Fatalf("implausible usage %+v", big)
	}
}

// A child's ru_maxrss must not inherit this process's peak (see the launcher).
func TestMeasureIgnoresTheParentsMemory(t *testing.T) {
	requireGit(t)
	m := testMeter(t)
	hold(120)
	defer func() { sink = nil }()
	u, err := m.measure(context.Background(), proc{args: []string{"git", "--version"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if u.MaxRSS > 60<<20 || u.MaxRSS <= 0 {
		t.Fatalf("git --version measured at %d bytes while the parent holds 120 MiB", u.MaxRSS)
	}
}

func TestMeasureReportsFailure(t *testing.T) {
	requireGit(t)
	m := testMeter(t)
	_, err := m.measure(context.Background(), proc{args: []string{"git", "no-such-command"}}, false)
	if err == nil || !strings.Contains(err.Error(), "no-such-command") {
		t.Fatalf("err = %v, want git's complaint", err)
	}
	if _, err := measureDirect(context.Background(), proc{args: []string{"git", "no-such-command"}}); err == nil {
		t.Fatal("measureDirect of a failing command succeeded")
	}
}

func TestMedianAndRatio(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, 1, 1}, 1},
	} {
		in := append([]float64(nil), c.in...)
		if got := results.Median(c.in); got != c.want {
			t.Errorf("results.Median(%v) = %v, want %v", c.in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Errorf("median reordered its input: %v", c.in)
			}
		}
	}
	if got := results.Ratio(3, 2); got != 1.5 {
		t.Errorf("results.Ratio(3, 2) = %v", got)
	}
	if got := results.Ratio(3, 0); got != 0 || math.IsInf(got, 0) {
		t.Errorf("results.Ratio(3, 0) = %v, want 0", got)
	}
	p := pairFor(summarize("a", []usage{{Wall: 4 * time.Second, MaxRSS: 30}, {Wall: 2 * time.Second, MaxRSS: 10}, {Wall: 3 * time.Second, MaxRSS: 20}}),
		summarize("b", []usage{{Wall: time.Second, MaxRSS: 10}}))
	if p.GoGit.WallSeconds != 3 || p.Ratio.Wall != 3 || p.Ratio.MaxRSS != 2 || p.GoGit.Runs != 3 || len(p.GoGit.WallSecondsAll) != 3 {
		t.Fatalf("pair = %+v", p)
	}
}

func TestDiskUsage(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{"x": 10, "a/y": 5000, "a/b/z": 70000} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	alloc, apparent, err := diskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if apparent != 75010 {
		t.Fatalf("apparent = %d, want 75010", apparent)
	}
	if alloc < 70000 {
		t.Fatalf("allocated = %d, less than the largest file", alloc)
	}
}

// One tiny size end to end: server, go-git child, CLI, polls, and the checks between.
func TestSizeEndToEnd(t *testing.T) {
	gittest.Require(t)
	m := testMeter(t)
	ctx := context.Background()
	work := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{log: slog.New(slog.NewTextHandler(io.Discard, nil)), work: work, self: self, meter: m,
		served: filepath.Join(work, "served"), home: filepath.Join(work, "home"), pollFor: 150 * time.Millisecond}
	for _, d := range []string{b.served, b.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	srv, stop, err := gittest.Serve(b.served)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	b.serverURL = srv.URL

	s, err := b.size(ctx, spec{name: "tiny", target: 256 << 10, cloneRuns: 1, fetchRuns: 1, seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	if s.Repo.PackBytes <= 0 || s.Repo.Commits != repogen.PlanFor(256<<10).Commits || s.Repo.Refs < 2 {
		t.Errorf("repo = %+v", s.Repo)
	}
	for _, r := range []struct {
		name string
		run  float64
		disk int64
	}{
		{"clone gogit", s.Clone.GoGit.WallSeconds, s.Clone.GoGit.DiskBytes},
		{"clone cli", s.Clone.CLI.WallSeconds, s.Clone.CLI.DiskBytes},
		{"fetch gogit", s.Fetch.GoGit.WallSeconds, s.Fetch.GoGit.DiskBytes},
		{"fetch cli", s.Fetch.CLI.WallSeconds, s.Fetch.CLI.DiskBytes},
	} {
		if r.run <= 0 || r.disk < s.Repo.PackBytes/2 {
			t.Errorf("%s: wall %v s, disk %d bytes (upstream pack %d)", r.name, r.run, r.disk, s.Repo.PackBytes)
		}
	}
	if s.Clone.GoGit.PackBytes < s.Repo.PackBytes/2 || s.Clone.CLI.MaxRSSBytes <= 0 || s.Clone.Ratio.Wall <= 0 {
		t.Errorf("clone = %+v", s.Clone)
	}
	if s.Fetch.GoGit.Runs != 1 || s.Fetch.CLI.Runs != 1 {
		t.Errorf("fetch runs = %d and %d, want 1", s.Fetch.GoGit.Runs, s.Fetch.CLI.Runs)
	}
	for name, p := range map[string]float64{"gogit": s.Polls.GoGit.PerSecond, "gogit_list": s.Polls.GoGitList.PerSecond,
		"git_fetch": s.Polls.GitFetch.PerSecond, "ls_remote": s.Polls.LsRemote.PerSecond} {
		if p <= 0 {
			t.Errorf("%s: %v polls/s", name, p)
		}
	}
	if s.Polls.RateVsFetch <= 0 || s.Polls.CPUVsLsRemote <= 0 {
		t.Errorf("poll ratios = %+v", s.Polls)
	}
}
