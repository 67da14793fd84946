package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/membudget"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// childArg as the first argument runs this binary as a measured child: one go-git
// operation in a process of its own, so that its rusage is that operation's alone,
// measured exactly as the git CLI's processes are.
const childArg = "__fetchcost_child"

// policy is the worker's URL policy, with the loopback server allowed.
var policy = urlpolicy.Policy{AllowPrivateHosts: true}

// childResult is what a child reports on stdout.
type childResult struct {
	Path    string  `json:"path"` // the mirror's directory
	Cloned  bool    `json:"cloned"`
	Changed bool    `json:"changed"`
	Polls   int     `json:"polls"`   // poll: syncs made
	Seconds float64 `json:"seconds"` // poll: how long the loop ran
}

// childMain runs "sync" (one Mirrorer.Sync), "poll" (Syncs back to back, each of
// which must find no change), "burst" (burst.go) or "list" (go-git's ref listing alone, back to back) and
// prints a childResult.
func childMain(args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if len(args) == 0 {
		log.Error("child: no operation")
		return 2
	}
	op := args[0]
	fs := flag.NewFlagSet(childArg+" "+op, flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "", "mirror root")
	url := fs.String("url", "", "upstream URL (normalized)")
	id := fs.String("id", "bench", "repo id")
	dur := fs.Duration("for", 3*time.Second, "poll: how long to poll")
	budget := fs.Int64("budget", 0, "burst: memory budget in bytes (0: none)")
	heapProfile := fs.String("heap-profile", "", "write the heap profile taken at the largest heap seen (sampled every 100 ms) to this file")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *heapProfile != "" {
		defer profileHeapPeak(*heapProfile, log)()
	}
	var res any
	var err error
	if op == "burst" {
		// -url is a comma-separated list of URLs here.
		res, err = burstChild(context.Background(), log, *root, strings.Split(*url, ","), *budget)
	} else {
		res, err = runChild(context.Background(), log, op, *root, fetch.Target{ID: *id, URL: *url}, *dur)
	}
	if err != nil {
		log.Error("child", "op", op, "err", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		log.Error("child: write result", "err", err)
		return 1
	}
	return 0
}

func runChild(ctx context.Context, log *slog.Logger, op, root string, t fetch.Target, dur time.Duration) (childResult, error) {
	if op == "list" {
		return listLoop(ctx, t.URL, dur)
	}
	// The worker's construction: its policy's HTTP client, its defaults.
	m, err := mirror.New(mirror.Config{Root: root, Client: policy.HTTPClient(0), Logger: log})
	if err != nil {
		return childResult{}, fmt.Errorf("mirrorer: %w", err)
	}
	defer m.Close()
	path, err := m.Path(t)
	if err != nil {
		return childResult{}, fmt.Errorf("mirror path: %w", err)
	}
	switch op {
	case "sync":
		r, err := m.Sync(ctx, t)
		if err != nil {
			return childResult{}, fmt.Errorf("sync: %w", err)
		}
		return childResult{Path: path, Cloned: r.Cloned, Changed: r.Changed}, nil
	case "poll":
		return pollLoop(ctx, m, t, path, dur)
	}
	return childResult{}, fmt.Errorf("unknown child operation %q", op)
}

// pollLoop syncs back to back for dur, as a worker polling one unchanged repo would.
func pollLoop(ctx context.Context, m *mirror.Mirrorer, t fetch.Target, path string, dur time.Duration) (childResult, error) {
	res := childResult{Path: path}
	start := time.Now()
	for time.Since(start) < dur {
		r, err := m.Sync(ctx, t)
		if err != nil {
			return res, fmt.Errorf("poll %d: %w", res.Polls, err)
		}
		if r.Changed || r.Cloned {
			return res, errors.New("a no-change poll found a change")
		}
		res.Polls++
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// listLoop lists the upstream's refs with go-git back to back for dur: the part of a
// no-change Sync that is the ref advertisement alone, without the mirror's side.
func listLoop(ctx context.Context, url string, dur time.Duration) (childResult, error) {
	var res childResult
	rem := git.NewRemote(memory.NewStorage(), &gitconfig.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{url}})
	// The same client as the Mirrorer's; go-git's own transport (no Mirrorer here).
	client.InstallProtocol("http", githttp.NewClient(policy.HTTPClient(0)))
	start := time.Now()
	for time.Since(start) < dur {
		refs, err := rem.ListContext(ctx, &git.ListOptions{})
		if err != nil {
			return res, fmt.Errorf("list %d: %w", res.Polls, err)
		}
		if len(refs) == 0 {
			return res, errors.New("list: no refs")
		}
		res.Polls++
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// profileHeapPeak writes a heap profile to path each time the heap in use reaches a
// new high, until the returned function is called: what holds the memory at the peak.
func profileHeapPeak(path string, log *slog.Logger) func() {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var peak int64
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if h := membudget.HeapInUse(); h > peak+peak/20 {
				peak = h
				f, err := os.Create(path)
				if err != nil {
					log.Warn("heap profile", "err", err)
					return
				}
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
	}()
	return func() { close(stop); <-done }
}

// isChild reports whether this process was started as a measured child.
func isChild() bool { return len(os.Args) > 1 && os.Args[1] == childArg }
