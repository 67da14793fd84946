// Command events measures the event-driven paths of issue 21 on a local fleet and
// writes bench/results/events.json. Its "sse" section (sse.go): from a ref moving in a
// mirror to the mirror.updated event read by a client of GET /v1/events.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

func main() {
	out := flag.String("out", "bench/results", "directory to write events.json into")
	repos := flag.Int("sse-repos", 50, "repos of the SSE measurement's fleet")
	pushes := flag.Int("sse-pushes", 200, "pushes the SSE measurement times")
	workers := flag.Int("workers", 3, "in-process workers")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res := results.Events{Meta: results.Collect()}
	sse, err := measureSSE(context.Background(), sseOptions{repos: *repos, pushes: *pushes, workers: *workers, log: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "events: sse:", err)
		os.Exit(1)
	}
	res.SSE = &sse
	res.Meta.Finish()
	if err := results.Write(*out, "events", res); err != nil {
		fmt.Fprintln(os.Stderr, "events:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "events: ref → SSE event p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d pushes; written to %s\n",
		sse.RefToEventMs.P50, sse.RefToEventMs.P99, sse.RefToEventMs.Max, sse.Pushes, filepath.Join(*out, "events.json"))
}
