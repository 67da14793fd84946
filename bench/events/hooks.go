package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
	"github.com/mirrorfleet/mirrorfleet/shared/gittest"
)

// hookOptions sizes the hook measurement.
type hookOptions struct {
	repos, hooked, pushes, syncs, workers int
	log                                   *slog.Logger
}

const hookSecret = "bench-hook-secret"

// measureHooks runs a local fleet of o.repos mirrors with the default tick, heartbeat
// and minimum interval (so it polls while it is measured), then pushes o.pushes times
// over the first o.hooked repos, each push followed by a signed GitHub push webhook, and
// times from the hook's POST until `git ls-remote` of the repo's clone URL on the fleet
// shows the new commit. Then o.syncs more pushes, each followed by `repos sync` instead.
func measureHooks(ctx context.Context, o hookOptions) (results.EventsHooks, error) {
	out := results.EventsHooks{Repos: o.repos, HookedRepos: o.hooked, Pushes: o.pushes, Syncs: o.syncs, Workers: o.workers,
		GoalP50Ms: 1000, GoalP99Ms: 3000}
	work, err := os.MkdirTemp("", "bench-events-hooks-")
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
		dir := filepath.Join(served, fmt.Sprintf("h%04d.git", i))
		if err := git(srv.Home, "", "init", "-q", "--bare", "-b", "main", dir); err != nil {
			return out, err
		}
		if err := gittest.ImportCommits(srv.Home, dir, gittest.Commits{Branch: "main", N: 2, Start: t0, Step: time.Minute}); err != nil {
			return out, err
		}
		urls = append(urls, srv.URL+"/"+filepath.Base(dir))
	}
	d := fleet.Defaults()
	f, err := fleet.Start(ctx, fleet.Config{Data: filepath.Join(work, "data"), Listen: "127.0.0.1:0", Workers: o.workers,
		Token: sseToken, AllowPrivateHosts: true, Warmup: coordinator.NoWarmup, Tick: d.Tick, Heartbeat: d.Heartbeat,
		MinInterval: d.MinInterval, HostConcurrency: -1, HostRate: -1, WebhookSecret: hookSecret, Log: o.log})
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
	if err := waitOK(ctx, f, len(urls), 10*time.Minute); err != nil {
		return out, err
	}
	paths := make([]string, len(urls))
	for i, id := range ids {
		var repo struct {
			CloneURL string `json:"clone_url"`
		}
		if err := call(ctx, http.MethodGet, base+"/v1/repos/"+id, nil, &repo); err != nil {
			return out, err
		}
		paths[i] = repo.CloneURL
	}

	push := func(p, i int) (string, error) {
		dir := filepath.Join(served, fmt.Sprintf("h%04d.git", i))
		if err := gittest.ImportCommits(srv.Home, dir, gittest.Commits{Branch: "main", N: 1, Start: t0.Add(time.Duration(p+10) * time.Minute)}); err != nil {
			return "", err
		}
		return gitOut(srv.Home, dir, "rev-parse", "refs/heads/main")
	}
	// served waits until ls-remote of the clone URL shows head on main.
	servedAt := func(i int, head string, from time.Time) (time.Duration, error) {
		deadline := from.Add(time.Minute)
		for time.Now().Before(deadline) {
			refs, err := gitOut(srv.Home, "", "ls-remote", paths[i], "refs/heads/main")
			if err == nil && strings.HasPrefix(refs, head) {
				return time.Since(from), nil
			}
			time.Sleep(10 * time.Millisecond)
		}
		return 0, fmt.Errorf("repo %d: %s not served within a minute", i, head)
	}

	var hookMs, syncMs []float64
	for p := range o.pushes {
		i := p % o.hooked
		head, err := push(p, i)
		if err != nil {
			return out, err
		}
		sent := time.Now()
		if err := sendHook(ctx, base, urls[i]+".git", fmt.Sprintf("bench-%d", p)); err != nil {
			return out, err
		}
		took, err := servedAt(i, head, sent)
		if err != nil {
			return out, fmt.Errorf("hook %d: %w", p, err)
		}
		hookMs = append(hookMs, ms(took))
	}
	for s := range o.syncs {
		i := s % o.hooked
		head, err := push(o.pushes+s, i)
		if err != nil {
			return out, err
		}
		sent := time.Now()
		if err := syncRepo(ctx, base, ids[i]); err != nil {
			return out, err
		}
		took, err := servedAt(i, head, sent)
		if err != nil {
			return out, fmt.Errorf("sync %d: %w", s, err)
		}
		syncMs = append(syncMs, ms(took))
	}
	out.HookToServedMs, out.SyncToServedMs = summarize(hookMs), summarize(syncMs)
	out.Notes = append(out.Notes,
		fmt.Sprintf("tick %v, heartbeat %v, minimum interval %v: the fleet polls its %d repos while the hooks are timed", d.Tick, d.Heartbeat, d.MinInterval, o.repos),
		"each figure is from the POST of the hook (or of the sync) to the first `git ls-remote` of the clone URL that shows the pushed commit, polled every 10 ms")
	return out, nil
}

// sendHook POSTs a signed GitHub push webhook for the repo at cloneURL.
func sendHook(ctx context.Context, base, cloneURL, delivery string) error {
	body, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "repository": map[string]any{"clone_url": cloneURL}})
	m := hmac.New(sha256.New, []byte(hookSecret))
	m.Write(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/hooks/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("hook: %s", resp.Status)
	}
	return nil
}
