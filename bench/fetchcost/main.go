// Command fetchcost measures what mirroring costs with go-git, through the Mirrorer the
// workers run, against the git CLI: on generated small, medium and large repositories
// served by a local `git http-backend`, the wall time, CPU, peak RSS and disk bytes of
// an initial mirror and of a fetch after a small change, and the no-change polls per
// second one worker makes. It writes bench/results/fetchcost.json.
//
//	go run ./bench/fetchcost -out bench/results
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/repogen"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

type config struct {
	out      string
	sections []string
	sizes    []string
	largeMB  int
	work     string
	pollFor  time.Duration
}

func main() {
	if isChild() {
		os.Exit(childMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	var cfg config
	var sizes string
	flag.StringVar(&cfg.out, "out", "bench/results", "directory to write fetchcost.json into")
	var sections string
	flag.StringVar(&sections, "sections", "sizes,burst", "sections to run: sizes (small, medium, large against the git CLI) and burst (concurrent first mirrors within a memory budget); a run without sizes keeps those of the existing fetchcost.json in -out")
	flag.StringVar(&sizes, "sizes", "small,medium,large", "repository sizes to measure (small, medium, large)")
	flag.IntVar(&cfg.largeMB, "large-mb", defaultLargeMB, "pack size of the large repository, in MB")
	flag.StringVar(&cfg.work, "work", "", "working directory for repositories and mirrors, kept afterwards (default: a temporary one, removed)")
	flag.DurationVar(&cfg.pollFor, "poll", 3*time.Second, "how long each no-change poll loop runs")
	flag.Parse()
	cfg.sizes = strings.Split(sizes, ",")
	cfg.sections = strings.Split(sections, ",")
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, cfg); err != nil {
		log.Error("fetchcost", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, cfg config) error {
	specs, err := specsFor(cfg.sizes, cfg.largeMB)
	if err != nil {
		return err
	}
	res := results.FetchCost{Meta: results.Collect(), PollSeconds: cfg.pollFor.Seconds()}
	if res.GitVersion, err = repogen.GitOutput(ctx, "", "--version"); err != nil {
		return err
	}
	res.GoGitVersion = goGitVersion()
	res.Worker = workerShape()
	res.LoadStart = results.LoadAverage()

	work := cfg.work
	if work == "" {
		if work, err = os.MkdirTemp("", "fetchcost-"); err != nil {
			return fmt.Errorf("work dir: %w", err)
		}
		defer os.RemoveAll(work)
	}
	b, stopServer, err := newBench(ctx, log, work, cfg.pollFor)
	if err != nil {
		return err
	}
	defer stopServer()
	log.Info("serving", "url", b.serverURL, "work", work, "git", res.GitVersion, "go-git", res.GoGitVersion)

	if !slices.Contains(cfg.sections, "sizes") {
		// Only the burst: the sizes come from the last full run.
		var prev results.FetchCost
		if err := results.Read(cfg.out, "fetchcost", &prev); err != nil {
			return fmt.Errorf("-sections without sizes keeps the existing results: %w", err)
		}
		res, specs = prev, nil
	}
	for _, spec := range specs {
		s, err := b.size(ctx, spec)
		if err != nil {
			return fmt.Errorf("%s: %w", spec.name, err)
		}
		res.Sizes = append(res.Sizes, s)
		if cfg.work == "" {
			b.drop(spec) // free the disk before the next, larger, size
		}
	}
	if specs != nil {
		res.Notes = notes(specs, cfg.largeMB)
		res.LoadEnd = results.LoadAverage()
		res.Meta.Finish()
	}
	if slices.Contains(cfg.sections, "burst") {
		if res.Burst, err = b.burst(ctx); err != nil {
			return fmt.Errorf("burst: %w", err)
		}
	}
	if err := results.Write(cfg.out, "fetchcost", res); err != nil {
		return err
	}
	log.Info("written", "path", filepath.Join(cfg.out, "fetchcost.json"), "took", time.Duration(res.Meta.Seconds)*time.Second)
	return nil
}

// The default worker task, as infra's Props.Defaults sets it (WorkerCPU 1024 units,
// WorkerMemory 2048 MiB); not imported, as the infra package would bring the CDK
// into this binary, which is also the measured go-git child.
const (
	taskVCPU      = 1
	taskMemoryMiB = 2048
)

// workerShape describes the production worker the figures are read against.
func workerShape() results.FetchCostWorker {
	d := worker.DefaultConfig()
	return results.FetchCostWorker{Fetchers: d.Fetchers, MinIntervalSeconds: d.MinInterval.Seconds(),
		TaskVCPU: taskVCPU, TaskMemoryMiB: taskMemoryMiB}
}

// goGitVersion is the version of go-git built into this binary.
func goGitVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/go-git/go-git/v5" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// newBench starts the git server over a fresh directory of upstream repositories.
func newBench(ctx context.Context, log *slog.Logger, work string, pollFor time.Duration) (*bench, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("own executable (the go-git child): %w", err)
	}
	b := &bench{log: log, work: work, self: self, pollFor: pollFor,
		served: filepath.Join(work, "served"), home: filepath.Join(work, "home")}
	for _, d := range []string{b.served, b.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, nil, fmt.Errorf("work dir: %w", err)
		}
	}
	if b.meter, err = buildLauncher(ctx, work); err != nil {
		return nil, nil, err
	}
	srv, stop, err := gittest.Serve(b.served)
	if err != nil {
		return nil, nil, fmt.Errorf("git server: %w", err)
	}
	b.serverURL = srv.URL
	return b, stop, nil
}
