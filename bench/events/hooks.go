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
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
)

// hookOptions sizes the hook measurement.
type hookOptions struct {
	repos, hooked, pushes, syncs, workers int
	log                                   *slog.Logger
}

const hookSecret = "bench-hook-secret"

// measureHooks runs a local fleet of o.repos mirrors with the default tick, heartbeat
// and minimum interval (so it polls while it is measured), then pushes o.pushes+o.syncs
// times over the first o.hooked repos, each push followed by a signed GitHub push webhook
// or, for o.syncs of them spread evenly among the others, by `repos sync`, and times from
// that POST until `git ls-remote` of the repo's clone URL on the fleet shows the new
// commit. Interleaved, hooks and syncs meet the same fleet: the same polls in flight,
// the same coordinator and heartbeat phases.
func measureHooks(ctx context.Context, o hookOptions) (results.EventsHooks, error) {
	out := results.EventsHooks{Repos: o.repos, HookedRepos: o.hooked, Pushes: o.pushes, Syncs: o.syncs, Workers: o.workers,
		GoalP50Ms: 1000, GoalP99Ms: 3000, Interleaved: true}
	d := fleet.Defaults()
	lf, err := startFleet(ctx, "h", o.repos, 2, fleet.Config{Workers: o.workers, AllowPrivateHosts: true,
		Warmup: coordinator.NoWarmup, Tick: d.Tick, Heartbeat: d.Heartbeat, MinInterval: d.MinInterval,
		HostConcurrency: -1, HostRate: -1, WebhookSecret: hookSecret, Log: o.log}, 10*time.Minute)
	if err != nil {
		return out, err
	}
	defer lf.stop()
	paths := make([]string, len(lf.ids))
	for i, id := range lf.ids {
		var repo struct {
			CloneURL string `json:"clone_url"`
		}
		if err := call(ctx, http.MethodGet, lf.base+"/v1/repos/"+id, nil, &repo); err != nil {
			return out, err
		}
		paths[i] = repo.CloneURL
	}
	// servedAt waits until ls-remote of the clone URL shows head on main.
	servedAt := func(i int, head string, from time.Time) (time.Duration, error) {
		deadline := from.Add(time.Minute)
		for time.Now().Before(deadline) {
			refs, err := gitOut(lf.srv.Home, "", "ls-remote", paths[i], "refs/heads/main")
			if err == nil && strings.HasPrefix(refs, head) {
				return time.Since(from), nil
			}
			time.Sleep(10 * time.Millisecond)
		}
		return 0, fmt.Errorf("repo %d: %s not served within a minute", i, head)
	}

	var hookMs, syncMs []float64
	total := o.pushes + o.syncs
	for p := range total {
		i := p % o.hooked
		head, err := lf.push(lf.dir("h", i), p)
		if err != nil {
			return out, err
		}
		sync := isSync(p, o.syncs, total)
		sent := time.Now()
		if sync {
			err = syncRepo(ctx, lf.base, lf.ids[i])
		} else {
			err = sendHook(ctx, lf.base, lf.urls[i]+".git", fmt.Sprintf("bench-%d", p))
		}
		if err != nil {
			return out, err
		}
		took, err := servedAt(i, head, sent)
		if err != nil {
			return out, fmt.Errorf("push %d (sync %v): %w", p, sync, err)
		}
		if sync {
			syncMs = append(syncMs, ms(took))
		} else {
			hookMs = append(hookMs, ms(took))
		}
	}
	out.HookToServedMs, out.SyncToServedMs = summarize(hookMs), summarize(syncMs)
	out.Notes = append(out.Notes,
		fmt.Sprintf("tick %v, heartbeat %v, minimum interval %v: the fleet polls its %d repos while the hooks are timed", d.Tick, d.Heartbeat, d.MinInterval, o.repos),
		"hooks and sync requests interleaved (a sync every few pushes), so both meet the same polls and the same tick and heartbeat phases",
		"each figure is from the POST of the hook (or of the sync) to the first `git ls-remote` of the clone URL that shows the pushed commit, polled every 10 ms")
	return out, nil
}

// isSync says whether push p of total is followed by a sync request rather than a hook:
// syncs of them, spread evenly.
func isSync(p, syncs, total int) bool {
	return total > 0 && (p+1)*syncs/total > p*syncs/total
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
