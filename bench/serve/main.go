// Command serve measures cloning from the fleet: one generated mirror of at least 100
// MiB, as the fetcher leaves it and after maintenance, served by the fleet's git front
// (`mirrorfleet serve`, with its pack cache) and by plain `git http-backend` on the
// same directory. Each server runs in a process of its own, started fresh for every
// operation, so its CPU time (with every git process it ran) and its peak memory are
// the operation's alone. It writes bench/results/serve.json.
//
//	go run ./bench/serve -out bench/results
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/proctree"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/repogen"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/serve/packcache"
)

// backendArg runs this binary as the plain http-backend server over a root.
const backendArg = "__serve_backend"

type config struct {
	out       string
	sizeMB    int
	clients   int
	cloneRuns int
	work      string
}

func main() {
	if len(os.Args) > 2 && os.Args[1] == backendArg {
		os.Exit(backendMain(os.Args[2]))
	}
	var cfg config
	flag.StringVar(&cfg.out, "out", "bench/results", "directory to write serve.json into")
	flag.IntVar(&cfg.sizeMB, "size-mb", 120, "pack size of the generated mirror, in MiB (the goal asks for at least 100)")
	flag.IntVar(&cfg.clients, "clients", 20, "identical clones at once")
	flag.IntVar(&cfg.cloneRuns, "runs", 2, "cold clones per server and state")
	flag.StringVar(&cfg.work, "work", "", "working directory, kept afterwards (default: a temporary one, removed)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, cfg); err != nil {
		log.Error("serve bench", "err", err)
		os.Exit(1)
	}
}

// bench is what every measurement shares.
type bench struct {
	log      *slog.Logger
	cfg      config
	work     string
	root     string // the mirrors root both servers serve
	rel      string // the mirror under it
	gitDir   string
	home     string // HOME of the git clients
	front    string // the mirrorfleet binary
	launcher string // starts a server so its rusage and memory are its own
	self     string
	gen      *repogen.Generator
}

func run(ctx context.Context, log *slog.Logger, cfg config) error {
	res := results.Serve{Meta: results.Collect(), Clients: cfg.clients, CloneRuns: cfg.cloneRuns, LoadStart: results.LoadAverage()}
	var err error
	if res.GitVersion, err = repogen.GitOutput(ctx, "", "--version"); err != nil {
		return err
	}
	work := cfg.work
	if work == "" {
		if work, err = os.MkdirTemp("", "servebench-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	b := &bench{log: log, cfg: cfg, work: work, root: filepath.Join(work, "root"), rel: "example.org/big.git",
		home: filepath.Join(work, "home")}
	b.gitDir = filepath.Join(b.root, b.rel)
	if b.self, err = os.Executable(); err != nil {
		return err
	}
	if err := os.MkdirAll(b.home, 0o755); err != nil {
		return err
	}
	if err := b.build(ctx); err != nil {
		return err
	}
	if res.Repo, err = b.generate(ctx); err != nil {
		return err
	}
	for _, state := range []string{"unmaintained", "maintained"} {
		if state == "maintained" {
			start := time.Now()
			if err := maintain(ctx, b.gitDir); err != nil {
				return fmt.Errorf("maintenance: %w", err)
			}
			log.Info("maintained", "took", time.Since(start).Round(time.Millisecond))
		}
		s, err := b.state(ctx, state)
		if err != nil {
			return fmt.Errorf("%s: %w", state, err)
		}
		res.States = append(res.States, s)
	}
	log.Info("slow client")
	if res.Slow, err = b.slow(ctx, cfg.cloneRuns); err != nil {
		return fmt.Errorf("slow client: %w", err)
	}
	res.Notes = []string{
		"Client and servers share one machine; the client's work is in the wall times, not in the server CPU.",
		"Each server process is started for one operation and stopped after it; its CPU is the rusage of the process and of every process it waited for (upload-pack, pack-objects, the pack cache hook, http-backend).",
		"The front's pack cache starts empty for every operation, so the concurrent clones include the one generation they share.",
		"A clone (no haves) is kept in the cache as its whole response and answered again from the file with no git process; fetches go to upload-pack and the cached packs.",
		"Maintenance here is the fleet's own first (full) run (mirror.Maintain): `git pack-refs`, `git repack --geometric=2 -d --write-midx --write-bitmap-index`, `git commit-graph write --split --reachable` and `git fsck --connectivity-only`.",
		"Wall times are the client's: from starting git until the last clone of the operation finished.",
		"Slow client (maintained mirror): the slow request goes through a proxy that reads the front's answer at 8 KiB/s from a 16 KiB socket buffer; it starts a second before the measured identical request, on a fresh front with an empty cache, and is cut when that request is done.",
	}
	res.LoadEnd = results.LoadAverage()
	res.Meta.Finish()
	if err := results.Write(cfg.out, "serve", res); err != nil {
		return err
	}
	log.Info("written", "path", filepath.Join(cfg.out, "serve.json"))
	return nil
}

// maintain runs the fleet's own mirror maintenance once, as a mirror's first.
func maintain(ctx context.Context, gitDir string) error {
	git, err := gitcmd.Find(ctx)
	if err != nil {
		return err
	}
	// A mirror's first maintenance in the fleet is the full run (ADR 23).
	_, err = mirror.Maintain(ctx, git, gitDir, mirror.MaintainOptions{Full: true})
	return err
}

// build compiles the mirrorfleet binary and the launcher into the work directory.
func (b *bench) build(ctx context.Context) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	b.front, b.launcher = filepath.Join(b.work, "mirrorfleet"), filepath.Join(b.work, "launcher")
	for out, pkg := range map[string]string{
		b.front:    "github.com/mirrorfleet/mirrorfleet/cmd/mirrorfleet",
		b.launcher: "github.com/mirrorfleet/mirrorfleet/bench/fetchcost/launcher",
	} {
		cmd := exec.CommandContext(ctx, goCmd, "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if o, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %w: %s", pkg, err, o)
		}
	}
	return nil
}

func (b *bench) generate(ctx context.Context) (results.ServeRepo, error) {
	start := time.Now()
	var r results.ServeRepo
	if err := os.MkdirAll(filepath.Dir(b.gitDir), 0o755); err != nil {
		return r, err
	}
	var err error
	if b.gen, err = repogen.Create(ctx, b.gitDir, repogen.PlanFor(int64(b.cfg.sizeMB)<<20), 11); err != nil {
		return r, err
	}
	r.GenerateSeconds = time.Since(start).Seconds()
	if r.PackBytes, _, err = repogen.PackBytes(b.gitDir); err != nil {
		return r, err
	}
	out, err := repogen.GitOutput(ctx, "", "--git-dir="+b.gitDir, "rev-list", "--count", "--all")
	if err != nil {
		return r, err
	}
	r.Commits, _ = strconv.Atoi(out)
	refs, err := repogen.RefsOf(ctx, b.gitDir)
	if err != nil {
		return r, err
	}
	r.Refs = len(strings.Split(refs, "\n"))
	b.log.Info("generated", "pack_mib", r.PackBytes>>20, "commits", r.Commits, "refs", r.Refs, "took", time.Since(start).Round(time.Second))
	return r, nil
}

func (b *bench) state(ctx context.Context, name string) (results.ServeState, error) {
	s := results.ServeState{Name: name}
	_, s.Packs, _ = repogen.PackBytes(b.gitDir)
	for _, pat := range []string{"objects/pack/*.bitmap", "objects/pack/multi-pack-index-*.bitmap"} {
		if m, _ := filepath.Glob(filepath.Join(b.gitDir, pat)); len(m) > 0 {
			s.Bitmap = true
		}
	}
	var err error
	steps := []struct {
		name string
		out  *results.ServePair
		op   func(ctx context.Context, url string) error
		runs int
	}{
		{"clone", &s.Clone, b.cloneOnce, b.cfg.cloneRuns},
		{"concurrent", &s.Concurrent, b.concurrent, 1},
		{"shallow", &s.Shallow, b.shallow, b.cfg.cloneRuns},
	}
	for _, st := range steps {
		if *st.out, err = b.pair(ctx, st.runs, st.op); err != nil {
			return s, fmt.Errorf("%s: %w", st.name, err)
		}
		b.log.Info(st.name, "state", name, "front_s", round(st.out.Front.WallSeconds), "backend_s", round(st.out.Backend.WallSeconds),
			"front_cpu", round(st.out.Front.ServerCPUSeconds), "backend_cpu", round(st.out.Backend.ServerCPUSeconds),
			"hits", st.out.Front.CacheHits, "misses", st.out.Front.CacheMisses)
	}
	if s.Fetch, err = b.fetch(ctx); err != nil {
		return s, fmt.Errorf("fetch: %w", err)
	}
	b.log.Info("fetch", "state", name, "front_s", round(s.Fetch.Front.WallSeconds), "backend_s", round(s.Fetch.Backend.WallSeconds))
	return s, nil
}

// pair runs op runs times against each server, alternating which goes first.
func (b *bench) pair(ctx context.Context, runs int, op func(context.Context, string) error) (results.ServePair, error) {
	var front, backend []measured
	for i := range runs {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, isFront := range order {
			m, err := b.measure(ctx, isFront, op)
			if err != nil {
				return results.ServePair{}, err
			}
			if isFront {
				front = append(front, m)
			} else {
				backend = append(backend, m)
			}
		}
	}
	return pairOf(summarize("mirrorfleet serve", front), summarize("git http-backend", backend)), nil
}

func pairOf(f, bk results.ServeRun) results.ServePair {
	return results.ServePair{Front: f, Backend: bk, WallRatio: results.Ratio(f.WallSeconds, bk.WallSeconds), CPURatio: results.Ratio(f.ServerCPUSeconds, bk.ServerCPUSeconds)}
}

// measured is one operation against one server.
type measured struct {
	wall, cpu    time.Duration
	peak         int64
	hits, misses int
	cacheBytes   int64
}

func summarize(server string, ms []measured) results.ServeRun {
	r := results.ServeRun{Server: server, Runs: len(ms)}
	var wall, cpu, peak []float64
	for _, m := range ms {
		wall = append(wall, m.wall.Seconds())
		cpu = append(cpu, m.cpu.Seconds())
		peak = append(peak, float64(m.peak))
		r.CacheHits += m.hits
		r.CacheMisses += m.misses
		r.CacheDiskBytes = max(r.CacheDiskBytes, m.cacheBytes)
	}
	r.WallSeconds, r.WallAll, r.ServerCPUSeconds, r.PeakServerRSSBytes = results.Median(wall), wall, results.Median(cpu), int64(slices.Max(append(peak, 0)))
	return r
}

// measure starts a fresh server, runs op against it, stops it and reads its usage.
func (b *bench) measure(ctx context.Context, front bool, op func(context.Context, string) error) (measured, error) {
	srv, err := b.start(ctx, front)
	if err != nil {
		return measured{}, err
	}
	start := time.Now()
	opErr := op(ctx, srv.url)
	m := measured{wall: time.Since(start)}
	if front && opErr == nil {
		m.hits, m.misses = srv.cacheCounts()
		m.cacheBytes, _, _ = packcache.Size(srv.cache)
	}
	cpu, peak, err := srv.stop()
	m.cpu, m.peak = cpu, peak
	return m, errors.Join(opErr, err)
}

// server is one server process, started through the launcher.
type server struct {
	cmd   *exec.Cmd
	url   string
	cache string
	peak  chan int64
	stopc chan struct{}
}

func (b *bench) start(ctx context.Context, front bool) (*server, error) {
	s := &server{peak: make(chan int64, 1), stopc: make(chan struct{})}
	var args []string
	if front {
		s.cache = filepath.Join(b.work, "packcache")
		if err := os.RemoveAll(s.cache); err != nil {
			return nil, err
		}
		args = []string{b.launcher, b.front, "serve", "--root", b.root, "--listen", "127.0.0.1:0",
			"--pack-cache-dir", s.cache, "--pack-cache-bytes", "8G", "--emf-interval", "0",
			"--serve-max-per-repo", strconv.Itoa(max(b.cfg.clients, 32)), "--serve-max-total", strconv.Itoa(max(2*b.cfg.clients, 64)),
			// Every client of the bench is 127.0.0.1.
			"--serve-max-per-client", strconv.Itoa(max(2*b.cfg.clients, 64))}
	} else {
		args = []string{b.launcher, b.self, backendArg, b.root}
	}
	s.cmd = exec.CommandContext(ctx, args[0], args[1:]...)
	s.cmd.Env = gittest.Env(b.home)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.cmd.Cancel = func() error { return syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) }
	// The front logs its address (JSON, stderr); the backend prints its URL (stdout).
	var pipe io.ReadCloser
	var err error
	if front {
		pipe, err = s.cmd.StderrPipe()
	} else {
		pipe, err = s.cmd.StdoutPipe()
	}
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.peak <- proctree.SampleTree(s.cmd.Process.Pid, s.stopc) }()
	lines := bufio.NewScanner(pipe)
	for lines.Scan() {
		line := lines.Text()
		if !front {
			s.url = strings.TrimSpace(line) + "/" + b.rel
			break
		}
		var l struct{ Msg, Listen string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "serving git" {
			s.url = "http://" + l.Listen + "/git/" + b.rel
			break
		}
	}
	if s.url == "" {
		s.stop()
		return nil, fmt.Errorf("the server did not start (%v)", lines.Err())
	}
	go io.Copy(io.Discard, pipe)
	return s, nil
}

// cacheCounts reads the front's pack cache counters from its /metrics.
func (s *server) cacheCounts() (hits, misses int) {
	base := strings.SplitN(strings.TrimPrefix(s.url, "http://"), "/", 2)[0]
	resp, err := http.Get("http://" + base + "/metrics")
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "mirrorfleet_pack_cache_hits_total":
			hits = int(v)
		case "mirrorfleet_pack_cache_misses_total":
			misses = int(v)
		}
	}
	return hits, misses
}

// stop ends the server gracefully (SIGTERM to the server under the launcher) and
// returns the CPU of its whole tree and its sampled peak memory.
func (s *server) stop() (time.Duration, int64, error) {
	for _, c := range proctree.Children(s.cmd.Process.Pid) {
		syscall.Kill(c, syscall.SIGTERM)
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
	}
	close(s.stopc)
	peak := <-s.peak
	var cpu time.Duration
	if ru, ok := s.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) { // killed by our SIGTERM: expected
		err = nil
	}
	return cpu, peak, err
}

// backendMain serves root with plain git http-backend until SIGTERM, printing its URL.
func backendMain(root string) int {
	srv, stop, err := gittest.Serve(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(srv.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	stop()
	return 0
}

// ---- the operations ----

func (b *bench) git(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = gittest.Env(b.home)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (b *bench) scratch() (string, func(), error) {
	d, err := os.MkdirTemp(b.work, "client-")
	return d, func() { os.RemoveAll(d) }, err
}

func (b *bench) cloneOnce(ctx context.Context, url string) error {
	d, done, err := b.scratch()
	if err != nil {
		return err
	}
	defer done()
	return b.git(ctx, "", "clone", "--mirror", "--quiet", url, filepath.Join(d, "c.git"))
}

func (b *bench) shallow(ctx context.Context, url string) error {
	d, done, err := b.scratch()
	if err != nil {
		return err
	}
	defer done()
	return b.git(ctx, "", "clone", "--bare", "--depth", "1", "--quiet", url, filepath.Join(d, "c.git"))
}

func (b *bench) concurrent(ctx context.Context, url string) error {
	d, done, err := b.scratch()
	if err != nil {
		return err
	}
	defer done()
	errs := make([]error, b.cfg.clients)
	var wg sync.WaitGroup
	for i := range b.cfg.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.git(ctx, "", "clone", "--mirror", "--quiet", url, filepath.Join(d, fmt.Sprintf("c%d.git", i)))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// fetch clones through each server (not measured), changes the upstream a little,
// and measures each clone's fetch through a fresh server.
func (b *bench) fetch(ctx context.Context) (results.ServePair, error) {
	d, done, err := b.scratch()
	if err != nil {
		return results.ServePair{}, err
	}
	defer done()
	clones := map[bool]string{true: filepath.Join(d, "front"), false: filepath.Join(d, "backend")}
	for front, dir := range clones {
		if _, err := b.measure(ctx, front, func(ctx context.Context, url string) error {
			return b.git(ctx, "", "clone", "--quiet", "--no-checkout", url, dir)
		}); err != nil {
			return results.ServePair{}, err
		}
	}
	if err := repogen.PushSmallChange(ctx, b.gitDir, b.gen); err != nil {
		return results.ServePair{}, err
	}
	var f, bk []measured
	for _, front := range []bool{true, false} {
		m, err := b.measure(ctx, front, func(ctx context.Context, url string) error {
			return b.git(ctx, clones[front], "fetch", "--quiet", url, "+refs/heads/*:refs/remotes/origin/*")
		})
		if err != nil {
			return results.ServePair{}, err
		}
		if front {
			f = append(f, m)
		} else {
			bk = append(bk, m)
		}
	}
	return pairOf(summarize("mirrorfleet serve", f), summarize("git http-backend", bk)), nil
}

// ---- small figures ----

func round(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }
