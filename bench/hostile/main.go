// Command hostile attacks a fleet the way issues 15 and 23 list — hostile upstreams, a
// list of bad lines, hostile API clients, hostile clients of the git front — and runs
// the simulation's chaos, and writes what came of it to bench/results/hostile.json: each attack's outcome and the process's
// memory peak under it, and the repos the chaos lost (none).
//
// Everything runs in this process on 127.0.0.1: the attacker and the fleet share the
// heap that is measured, so the figures are upper bounds for the fleet.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/hostile"
)

func main() {
	out := flag.String("out", "bench/results", "directory to write hostile.json into")
	quick := flag.Bool("quick", false, "small figures (a try-out, not the report's)")
	servingOnly := flag.Bool("serving-only", false, "only the git front's attacks, printed, not written (a try-out)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *servingOnly {
		v, err := serving(context.Background(), log, *quick)
		if err != nil {
			log.Error("hostile", "err", err)
			os.Exit(1)
		}
		json.NewEncoder(os.Stdout).Encode(v)
		return
	}
	if err := run(context.Background(), *out, *quick, log); err != nil {
		log.Error("hostile", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string, quick bool, log *slog.Logger) error {
	v := results.Hostile{Meta: results.Collect()}
	var err error
	log.Info("upstream attacks")
	if v.Upstreams, v.Limits, err = upstreams(ctx); err != nil {
		return fmt.Errorf("upstreams: %w", err)
	}
	log.Info("list attack")
	lines := 10_000_000 // 20 MB of bad lines, as in the issue
	if quick {
		lines = 200_000
	}
	if v.List, err = list(ctx, lines); err != nil {
		return fmt.Errorf("list: %w", err)
	}
	log.Info("client attacks")
	conns := 5000
	if quick {
		conns = 300
	}
	var limits []results.HostileLimit
	if v.Clients, limits, err = clients(ctx, conns, quick); err != nil {
		return fmt.Errorf("clients: %w", err)
	}
	v.Limits = append(v.Limits, limits...)
	log.Info("serving attacks")
	if v.Serving, err = serving(ctx, log, quick); err != nil {
		return fmt.Errorf("serving: %w", err)
	}
	log.Info("chaos")
	if v.Chaos, err = chaos(ctx, log); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	v.Notes = append(v.Notes,
		"The attacker runs in the measured process: heap and RSS peaks are of the fleet and its attacker together.",
		"Heap peak: the Go heap's objects (runtime/metrics), sampled every 2 ms after a collection; RSS peak: VmHWM, reset per attack through /proc/self/clear_refs.",
		"Serving attacks: `mirrorfleet serve` runs as a process of its own (default limits, a fresh one and an empty pack cache per attack, the loopback trusted as a proxy so each attacker names its client address in X-Forwarded-For); its RSS peak is its own VmHWM, without the git processes it runs. Git processes are counted by their command line or working directory in the bench's directory, children of the front or not.",
		fmt.Sprintf("Run with quick=%v.", quick))
	v.Meta.Finish()
	if err := results.Write(out, "hostile", v); err != nil {
		return err
	}
	log.Info("written", "path", out+"/hostile.json")
	return nil
}

// measure runs f and returns its duration and the heap and RSS peaks during it.
func measure(f func()) (seconds, heapMiB, rssMiB float64) {
	rssReset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	mem := hostile.StartSampler()
	start := time.Now()
	f()
	seconds = time.Since(start).Seconds()
	heapMiB = mib(mem.Stop())
	if rssReset {
		rssMiB = float64(procHWM("self")) / 1024
	}
	runtime.GC()
	return
}

func limit(name, value string) results.HostileLimit {
	return results.HostileLimit{Name: name, Value: value}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// cut shortens a message for the report.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
