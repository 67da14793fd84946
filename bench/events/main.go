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
	hookRepos := flag.Int("hook-repos", 1000, "repos of the hook measurement's fleet")
	hooked := flag.Int("hooked", 50, "repos the hook measurement pushes to")
	hookPushes := flag.Int("hook-pushes", 200, "pushes followed by a webhook")
	syncs := flag.Int("syncs", 50, "pushes followed by a sync request")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res := results.Events{Meta: results.Collect()}
	sse, err := measureSSE(context.Background(), sseOptions{repos: *repos, pushes: *pushes, workers: *workers, log: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "events: sse:", err)
		os.Exit(1)
	}
	res.SSE = &sse
	hooks, err := measureHooks(context.Background(), hookOptions{repos: *hookRepos, hooked: *hooked, pushes: *hookPushes,
		syncs: *syncs, workers: *workers, log: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "events: hooks:", err)
		os.Exit(1)
	}
	res.Hooks = &hooks
	fmt.Fprintf(os.Stderr, "events: hook → served p50 %.0f ms, p99 %.0f ms; sync → served p50 %.0f ms, p99 %.0f ms\n",
		hooks.HookToServedMs.P50, hooks.HookToServedMs.P99, hooks.SyncToServedMs.P50, hooks.SyncToServedMs.P99)
	res.Meta.Finish()
	var old results.Events
	if results.Read(*out, "events", &old) == nil {
		res.AWSHook = old.AWSHook // measured by the functions e2e tier, not here
	}
	if err := results.Write(*out, "events", res); err != nil {
		fmt.Fprintln(os.Stderr, "events:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "events: ref → SSE event p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d pushes; written to %s\n",
		sse.RefToEventMs.P50, sse.RefToEventMs.P99, sse.RefToEventMs.Max, sse.Pushes, filepath.Join(*out, "events.json"))
}
