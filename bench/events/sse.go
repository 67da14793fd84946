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
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/events"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// sseOptions sizes the SSE measurement.
type sseOptions struct {
	repos, pushes, workers int
	log                    *slog.Logger
}

// benchToken is the fleets' API token.
const benchToken = "bench-events-token"

// received is one event as the client parsed it, with when.
type received struct {
	ev events.Event
	at time.Time
}

// measureSSE runs a local fleet of o.repos mirrors of repositories served by git
// http-backend, reads GET /v1/events, and pushes o.pushes times (a commit on main, one
// repo after another, each followed by a sync request); for each push it takes the time
// from the mirror's ref update to the client holding the event.
func measureSSE(ctx context.Context, o sseOptions) (results.EventsSSE, error) {
	out := results.EventsSSE{Repos: o.repos, Pushes: o.pushes, Workers: o.workers, GoalMs: 100}
	lf, err := startFleet(ctx, "r", o.repos, 3, fleet.Config{Workers: o.workers, Fetchers: 4, AllowPrivateHosts: true,
		Tick: 200 * time.Millisecond, Heartbeat: 200 * time.Millisecond, Warmup: coordinator.NoWarmup, MinInterval: time.Hour,
		HostConcurrency: -1, HostRate: -1, Log: o.log}, 2*time.Minute)
	if err != nil {
		return out, err
	}
	defer lf.stop()
	f, base, ids, urls := lf.f, lf.base, lf.ids, lf.urls

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

	var refToEvent, writeToEvent, pubToEvent []float64
	for p := range o.pushes {
		i := p % len(urls)
		head, err := lf.push(lf.dir("r", i), p)
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
		written, updated, err := refTimes(f, ids[i], urls[i])
		if err != nil {
			return out, err
		}
		refToEvent = append(refToEvent, ms(r.at.Sub(updated)))
		writeToEvent = append(writeToEvent, ms(r.at.Sub(written)))
		pubToEvent = append(pubToEvent, ms(r.at.Sub(r.ev.At)))
	}
	wr := summarize(writeToEvent)
	out.RefToEventMs, out.RefWriteToEventMs, out.PublishToEventMs = summarize(refToEvent), &wr, summarize(pubToEvent)
	out.Notes = append(out.Notes,
		"one push at a time: a commit on main, then POST /v1/repos/{id}/sync; the fetch's start (tick, heartbeat) is not in the figures",
		"ref update = the rename that puts the new refs/heads/main in place, when readers see it (the mtime of refs/heads/); "+
			"ref written = the mtime of the ref file, written to a temp file and fsynced before that rename; "+
			"event = parsed by an SSE client on the same machine; file times have the kernel's coarse clock (a few ms)",
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

// refTimes are when the mirror's refs/heads/main was written (its loose ref file's
// mtime: the temp file the fetch wrote and fsynced before renaming it) and when the
// rename put it in place (the mtime of refs/heads/, which the rename changes; the bench
// repos have no other branch). A mirror whose refs are packed has only packed-refs,
// both times then.
func refTimes(f *fleet.Fleet, id, url string) (written, updated time.Time, err error) {
	dir, err := f.Mirror.Path(fetch.Target{ID: id, URL: url})
	if err != nil {
		return written, updated, err
	}
	if fi, err := os.Stat(filepath.Join(dir, "refs", "heads", "main")); err == nil {
		di, err := os.Stat(filepath.Join(dir, "refs", "heads"))
		if err != nil {
			return written, updated, err
		}
		return fi.ModTime(), di.ModTime(), nil
	}
	fi, err := os.Stat(filepath.Join(dir, "packed-refs"))
	if err != nil {
		return written, updated, fmt.Errorf("%s: no ref file", dir)
	}
	return fi.ModTime(), fi.ModTime(), nil
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
	req.Header.Set("Authorization", "Bearer "+benchToken)
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
