package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/events"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
	"github.com/mirrorfleet/mirrorfleet/shared/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// sseOptions sizes the SSE measurement.
type sseOptions struct {
	repos, pushes, workers int
	log                    *slog.Logger
}

const sseToken = "bench-events-token"

// received is one event as the client parsed it, with when.
type received struct {
	ev events.Event
	at time.Time
}

// measureSSE runs a local fleet of o.repos mirrors of repositories served by git
// http-backend, reads GET /v1/events, and pushes o.pushes times (a commit on main, one
// repo after another, each followed by a sync request); for each push it takes the time
// from the mirror's ref file being written to the client holding the event.
func measureSSE(ctx context.Context, o sseOptions) (results.EventsSSE, error) {
	out := results.EventsSSE{Repos: o.repos, Pushes: o.pushes, Workers: o.workers, GoalMs: 100}
	work, err := os.MkdirTemp("", "bench-events-sse-")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(work)
	served := filepath.Join(work, "served")
	if err := os.MkdirAll(served, 0o755); err != nil {
		return out, err
	}
	srv, stop, err := gittest.Serve(served)
	if err != nil {
		return out, err
	}
	defer stop()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	var urls []string
	for i := range o.repos {
		dir := filepath.Join(served, fmt.Sprintf("r%03d.git", i))
		if err := git(srv.Home, "", "init", "-q", "--bare", "-b", "main", dir); err != nil {
			return out, err
		}
		if err := gittest.ImportCommits(srv.Home, dir, gittest.Commits{Branch: "main", N: 3, Start: t0, Step: time.Minute}); err != nil {
			return out, err
		}
		urls = append(urls, srv.URL+"/"+filepath.Base(dir))
	}

	f, err := fleet.Start(ctx, fleet.Config{Data: filepath.Join(work, "data"), Listen: "127.0.0.1:0", Workers: o.workers,
		Fetchers: 4, Token: sseToken, AllowPrivateHosts: true, Tick: 200 * time.Millisecond, Heartbeat: 200 * time.Millisecond,
		Warmup: coordinator.NoWarmup, MinInterval: time.Hour, HostConcurrency: -1, HostRate: -1, Log: o.log})
	if err != nil {
		return out, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = f.Stop(sctx)
	}()
	base := "http://" + f.Addr()
	ids, err := addRepos(ctx, base, urls)
	if err != nil {
		return out, err
	}
	if err := waitOK(ctx, f, len(urls), 2*time.Minute); err != nil {
		return out, err
	}

	// The stream, read by a goroutine that stamps each event as it parses it.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, base+"/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("GET /v1/events: %s", resp.Status)
	}
	got := make(chan received, 1024)
	go func() {
		_ = events.ReadStream(resp.Body, 1<<20, func(m events.Message) error {
			now := time.Now()
			if m.Event != events.Type {
				return nil
			}
			var ev events.Event
			if json.Unmarshal([]byte(m.Data), &ev) == nil {
				got <- received{ev, now}
			}
			return nil
		})
		close(got)
	}()

	var refToEvent, pubToEvent []float64
	for p := range o.pushes {
		i := p % len(urls)
		dir := filepath.Join(served, fmt.Sprintf("r%03d.git", i))
		if err := gittest.ImportCommits(srv.Home, dir, gittest.Commits{Branch: "main", N: 1, Start: t0.Add(time.Duration(p+10) * time.Minute)}); err != nil {
			return out, err
		}
		head, err := gitOut(srv.Home, dir, "rev-parse", "refs/heads/main")
		if err != nil {
			return out, err
		}
		if err := syncRepo(ctx, base, ids[i]); err != nil {
			return out, err
		}
		r, err := waitEvent(got, ids[i], head, time.Minute)
		if err != nil {
			return out, fmt.Errorf("push %d: %w", p, err)
		}
		written, err := refWritten(f, ids[i], urls[i])
		if err != nil {
			return out, err
		}
		refToEvent = append(refToEvent, ms(r.at.Sub(written)))
		pubToEvent = append(pubToEvent, ms(r.at.Sub(r.ev.At)))
	}
	out.RefToEventMs, out.PublishToEventMs = summarize(refToEvent), summarize(pubToEvent)
	out.Notes = append(out.Notes,
		"one push at a time: a commit on main, then POST /v1/repos/{id}/sync; the fetch's start (tick, heartbeat) is not in the figures",
		"ref written = mtime of the mirror's loose ref file refs/heads/main; event = parsed by an SSE client on the same machine",
		fmt.Sprintf("local fleet of %d workers, %d repos on git http-backend, one SSE client", o.workers, o.repos))
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func summarize(xs []float64) results.EventLatencyMs {
	if len(xs) == 0 {
		return results.EventLatencyMs{}
	}
	s := slices.Sorted(slices.Values(xs))
	q := func(p float64) float64 { return s[min(len(s)-1, int(math.Ceil(p*float64(len(s))))-1)] }
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	r := func(x float64) float64 { return math.Round(x*100) / 100 }
	return results.EventLatencyMs{P50: r(q(0.5)), P90: r(q(0.9)), P99: r(q(0.99)), Max: r(s[len(s)-1]), Mean: r(sum / float64(len(s)))}
}

// waitEvent returns the event of repo id whose refs/heads/main moved to head.
func waitEvent(got <-chan received, id, head string, within time.Duration) (received, error) {
	deadline := time.After(within)
	for {
		select {
		case r, ok := <-got:
			if !ok {
				return r, errors.New("event stream ended")
			}
			if r.ev.RepoID != id {
				continue
			}
			for _, ref := range r.ev.Refs {
				if ref.Name == "refs/heads/main" && ref.New == head {
					return r, nil
				}
			}
		case <-deadline:
			return received{}, fmt.Errorf("no event for %s at %s within %v", id, head, within)
		}
	}
}

// refWritten is when the mirror's refs/heads/main was written: its loose ref file (a
// fetch writes refs loose), else packed-refs.
func refWritten(f *fleet.Fleet, id, url string) (time.Time, error) {
	dir, err := f.Mirror.Path(fetch.Target{ID: id, URL: url})
	if err != nil {
		return time.Time{}, err
	}
	for _, p := range []string{"refs/heads/main", "packed-refs"} {
		if fi, err := os.Stat(filepath.Join(dir, p)); err == nil {
			return fi.ModTime(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s: no ref file", dir)
}

func addRepos(ctx context.Context, base string, urls []string) ([]string, error) {
	body, _ := json.Marshal(map[string]any{"urls": urls})
	var res struct {
		Results []struct{ ID, Status string }
	}
	if err := call(ctx, http.MethodPost, base+"/v1/repos", body, &res); err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range res.Results {
		ids = append(ids, r.ID)
	}
	if len(ids) != len(urls) {
		return nil, fmt.Errorf("added %d of %d repos", len(ids), len(urls))
	}
	return ids, nil
}

func syncRepo(ctx context.Context, base, id string) error {
	return call(ctx, http.MethodPost, base+"/v1/repos/"+id+"/sync", nil, nil)
}

func call(ctx context.Context, method, u string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+sseToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s %s", method, u, resp.Status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func waitOK(ctx context.Context, f *fleet.Fleet, n int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		counts, err := f.Store.CountRepos(ctx)
		if err != nil {
			return err
		}
		if counts[store.RepoOK] == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d repos mirrored within %v: %v", counts[store.RepoOK], n, within, counts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func git(home, dir string, args ...string) error {
	_, err := gitOut(home, dir, args...)
	return err
}

func gitOut(home, dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gittest.Env(home)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, b)
	}
	return strings.TrimSpace(string(b)), nil
}
