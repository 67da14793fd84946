package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/repogen"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/membudget"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
)

// The burst: burstMirrors first mirrors of one ~160k-object repository (20,000 commits
// over 2,000 text files, a ~140 MB pack) started at once in one process, with a
// burstBudget memory budget and with none.
const (
	burstMirrors = 6
	burstBudget  = 384 << 20
)

// burstPlan is the burst's repository: the import of issue 26's trial.
var burstPlan = repogen.Plan{Commits: 20_000, TextFiles: 2_000, BinaryBytes: 100 << 20, BinaryMax: 2 << 20,
	TagEvery: 50, BranchEvery: 2_500}

// burst runs the burst section.
func (b *bench) burst(ctx context.Context) (*results.FetchCostBurst, error) {
	out := &results.FetchCostBurst{Meta: results.Collect(), Mirrors: burstMirrors, BudgetBytes: burstBudget}
	gitDir := filepath.Join(b.served, "burst.git")
	ready := filepath.Join(b.work, "burst.generated")
	if _, err := os.Stat(ready); err != nil {
		// Generated once per work directory (-work keeps it for the next run).
		start := time.Now()
		_ = os.RemoveAll(gitDir)
		if _, err := repogen.Create(ctx, gitDir, burstPlan, 4); err != nil {
			return nil, err
		}
		out.Repo.GenerateSeconds = time.Since(start).Seconds()
		if err := os.WriteFile(ready, nil, 0o644); err != nil {
			return nil, err
		}
	}
	out.Repo.TextFiles, out.Repo.BinaryBytes = burstPlan.TextFiles, burstPlan.BinaryBytes
	var err error
	if out.Repo.PackBytes, _, err = repogen.PackBytes(gitDir); err != nil {
		return nil, err
	}
	if out.Repo.Commits, err = gitInt(ctx, "--git-dir="+gitDir, "rev-list", "--count", "--all"); err != nil {
		return nil, err
	}
	if out.Repo.Refs, err = refCount(ctx, gitDir); err != nil {
		return nil, err
	}
	if out.Repo.Objects, err = inPackObjects(ctx, gitDir); err != nil {
		return nil, err
	}
	// One upstream under burstMirrors names: each is a repo of its own to the Mirrorer.
	var urls []string
	for i := range burstMirrors {
		name := fmt.Sprintf("burst-%d.git", i+1)
		link := filepath.Join(b.served, name)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(gitDir, link); err != nil {
				return nil, err
			}
		}
		u, err := policy.Normalize(b.serverURL + "/" + name)
		if err != nil {
			return nil, err
		}
		urls = append(urls, u)
	}
	b.log.Info("burst repository", "pack_mb", mb(out.Repo.PackBytes), "objects", out.Repo.Objects, "commits", out.Repo.Commits)
	for _, r := range []struct {
		run    *results.FetchCostBurstRun
		budget int64
	}{{&out.Unbudgeted, 0}, {&out.Budgeted, burstBudget}} {
		if *r.run, err = b.burstRun(ctx, gitDir, urls, r.budget); err != nil {
			return nil, err
		}
	}
	out.TreeRSSOverBudget = float64(out.Budgeted.TreeRSSBytes) / float64(burstBudget)
	if out.Unbudgeted.WallSeconds > 0 {
		out.TimeRatio = out.Budgeted.WallSeconds / out.Unbudgeted.WallSeconds
	}
	out.Meta.Finish()
	return out, nil
}

// burstRun runs one burst in a measured child and checks every mirror it made.
func (b *bench) burstRun(ctx context.Context, upstream string, urls []string, budget int64) (results.FetchCostBurstRun, error) {
	root := filepath.Join(b.work, "burst", fmt.Sprintf("budget-%d", budget))
	if err := os.RemoveAll(root); err != nil {
		return results.FetchCostBurstRun{}, err
	}
	p, stdout := b.child("burst", root, strings.Join(urls, ","), "-budget", fmt.Sprint(budget))
	u, err := b.meter.measure(ctx, p, true)
	if err != nil {
		return results.FetchCostBurstRun{}, err
	}
	var r burstResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return results.FetchCostBurstRun{}, fmt.Errorf("burst child output %q: %w", stdout.String(), err)
	}
	if err := sameRefs(ctx, upstream, r.Paths...); err != nil {
		return results.FetchCostBurstRun{}, err
	}
	run := results.FetchCostBurstRun{BudgetBytes: budget, GoMemLimitBytes: r.GoMemLimit, Completed: len(r.Paths),
		WallSeconds: u.Wall.Seconds(), CPUSeconds: u.CPU.Seconds(), MaxRSSBytes: u.MaxRSS, TreeRSSBytes: u.TreeRSS,
		PeakReservedBytes: r.PeakReserved, MaxWaiting: r.MaxWaiting}
	b.log.Info("burst", "budget_mb", mb(budget), "completed", run.Completed, "wall", u.Wall.Round(time.Millisecond),
		"tree_rss_mb", mb(u.TreeRSS), "peak_reserved_mb", mb(r.PeakReserved), "max_waiting", r.MaxWaiting)
	if run.Completed != len(urls) {
		return run, fmt.Errorf("burst: %d of %d mirrors made", run.Completed, len(urls))
	}
	return run, os.RemoveAll(root)
}

// burstResult is what the burst child reports.
type burstResult struct {
	Paths        []string `json:"paths"` // the mirrors made
	GoMemLimit   int64    `json:"gomemlimit"`
	PeakReserved int64    `json:"peak_reserved"`
	MaxWaiting   int      `json:"max_waiting"`
}

// burstChild starts a first mirror of every URL at once through one Mirrorer, each
// admitted by a memory pool of budget bytes (0: none) exactly as a worker admits its
// fetches: it reserves membudget.Start before it starts and grows at its pack header.
func burstChild(ctx context.Context, log *slog.Logger, root string, urls []string, budget int64) (burstResult, error) {
	var res burstResult
	m, err := mirror.New(mirror.Config{Root: root, Client: policy.HTTPClient(0), Logger: log})
	if err != nil {
		return res, fmt.Errorf("mirrorer: %w", err)
	}
	defer m.Close()
	var pool *membudget.Pool
	if budget > 0 {
		pool = membudget.NewPool(budget)
		if lim := membudget.SetGoMemLimit(budget); lim < 1<<62 {
			res.GoMemLimit = lim
		}
	}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				res.MaxWaiting = max(res.MaxWaiting, pool.Stats().Waiting)
			}
		}
	}()
	var wg sync.WaitGroup
	paths := make([]string, len(urls))
	errs := make([]error, len(urls))
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := fetch.Target{ID: fmt.Sprintf("burst-%d", i+1), URL: u}
			fctx := ctx
			if pool != nil {
				start := membudget.Start(0, 0)
				var f *membudget.Fetch
				if fctx, f, errs[i] = pool.Admit(ctx, start, start, membudget.PerObject); errs[i] != nil {
					return
				}
				defer f.Release()
			}
			r, err := m.Sync(fctx, t)
			if err == nil && !r.Cloned {
				err = errors.New("not a first mirror")
			}
			if errs[i] = err; err == nil {
				paths[i], errs[i] = m.Path(t)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	res.PeakReserved = pool.Stats().Peak
	for _, p := range paths {
		if p != "" {
			res.Paths = append(res.Paths, p)
		}
	}
	return res, errors.Join(errs...)
}
