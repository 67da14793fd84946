// Command placement measures how evenly placement schemes spread repos over workers, how
// many repos a join or a leave moves, and what a lookup costs: our ring (shared/ring)
// against a plain virtual-node ring, jump hash, rendezvous hashing and consistent
// hashing with bounded loads. It writes <out>/placement.json.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

func main() {
	out := flag.String("out", "bench/results", "directory to write placement.json into")
	keys := flag.Int("keys", 1_000_000, "keys (repo URLs) to place")
	workers := flag.String("workers", "10,100,1000", "worker counts, comma-separated")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, log, *out, *keys, *workers); err != nil {
		log.Error("placement", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, out string, keys int, workers string) error {
	ns, err := parseCounts(workers)
	if err != nil {
		return err
	}
	if keys < 1 {
		return fmt.Errorf("-keys %d: want at least 1", keys)
	}
	meta := results.Collect()
	cfg := config{keys: keys, workers: ns, vnodes: 160, loadFactor: 1.25, trials: 16, lookupRuns: 3}
	cfg.bench = bestLookup(benchLookup, cfg.lookupRuns)
	res, err := measure(ctx, log, cfg)
	if err != nil {
		return err
	}
	meta.Finish()
	res.Meta = meta
	if err := results.Write(out, "placement", res); err != nil {
		return err
	}
	log.Info("placement written", "dir", out, "seconds", meta.Seconds)
	return nil
}

// parseCounts parses "10,100,1000".
func parseCounts(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("-workers %q: %w", s, err)
		}
		if n < 2 {
			return nil, fmt.Errorf("-workers %q: %d workers cannot lose one", s, n)
		}
		ns = append(ns, n)
	}
	return ns, nil
}
