package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// costRepos is how many repos the worker-side costs are measured over.
const costRepos = 10000

// measureCosts measures what the default policy costs a worker: memory per owned repo,
// the time of its decisions and of learning its prior, and reading commit times from
// real mirrors.
func measureCosts(ctx context.Context, log *slog.Logger) (results.FreshnessCosts, error) {
	pol := defaultPolicy()
	c := results.FreshnessCosts{Policy: pol.Name(), ReposMeasured: costRepos}
	var err error
	if c.BytesPerRepo, err = workerBytesPerRepo(ctx, costRepos); err != nil {
		return c, fmt.Errorf("worker memory: %w", err)
	}
	stats := clonedStats(costRepos)
	prior := priority.Fit(stats, nil, at(0), nil)
	now := at(0)
	in := priority.Input{Old: 1, Cloned: true, Stats: stats[len(stats)/3], Prior: prior, Now: now}
	c.NextNs = nsPerOp(func() { pol.Next(in) })
	poll := priority.Poll{Prev: now.Add(-6 * time.Hour), Now: now, Changed: true,
		Commits: []time.Time{now.Add(-time.Hour), now.Add(-70 * time.Minute), now.Add(-30 * time.Hour)}}
	c.FoldNs = nsPerOp(func() { priority.Fold(stats[len(stats)/3], poll, prior) })
	var sc priority.Scores
	c.ScoreNs = nsPerOp(func() { sc.Add(prior, stats[len(stats)/3], poll) })
	c.FitMs = nsPerOp(func() { priority.Fit(stats, prior, now, nil) }) / 1e6
	log.Info("worker costs", "bytes_per_repo", c.BytesPerRepo, "next_ns", c.NextNs, "fold_ns", c.FoldNs, "score_ns", c.ScoreNs, "fit_ms", c.FitMs)
	if c.Walks, err = measureWalks(ctx, log, walkRepos); err != nil {
		return c, fmt.Errorf("commit walks: %w", err)
	}
	return c, nil
}

func nsPerOp(f func()) float64 {
	r := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			f()
		}
	})
	return float64(r.T.Nanoseconds()) / float64(max(r.N, 1))
}

// clonedStats are the stats of n simulated repos just after their first clone.
func clonedStats(n int) []priority.Stats {
	pop := NewPopulation(n, 99, targets)
	up := pop.NewUpstream(99, 1, 0, batch, targets)
	out := make([]priority.Stats, n)
	for i, life := range up {
		times, since, root := historyAt(life, 0, 0)
		out[i] = priority.Fold(priority.Stats{}, priority.Poll{Now: at(0), Changed: true, Commits: times,
			Since: at(since), FromRoot: root, LastCommitAt: at(life.Newest)}, nil)
	}
	return out
}

// workerBytesPerRepo is the heap a real worker keeps per owned repo: its record (with
// the policy's stats) and queue entry, after it took n repos from its outbox.
func workerBytesPerRepo(ctx context.Context, n int) (float64, error) {
	dir, err := os.MkdirTemp("", "freshness-costs-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	st, err := bolt.OpenWith(filepath.Join(dir, "s.db"), bolt.Options{NoSync: true})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	clk := clock.NewVirtual(at(0))
	w := worker.New(worker.Config{ID: "w1"}, st, nil, nil, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := w.Heartbeat(ctx); err != nil {
		return 0, err
	}
	el, err := st.CASElection(ctx, 0, store.Election{Term: 1, VotedFor: "bench"})
	if err != nil {
		return 0, err
	}
	stats := clonedStats(n)
	for lo := 0; lo < n; lo += 40 { // Apply takes at most 99 items: a repo and its outbox entry each
		var muts []store.Mutation
		var entries []store.OutboxEntry
		for i := lo; i < min(lo+40, n); i++ {
			url := fmt.Sprintf("https://git.example.org/org-%d/repo-%d", i%97, i)
			id := store.RepoID(url)
			if _, _, err := st.CreateRepo(ctx, store.Repo{ID: id, URL: url, State: store.RepoPending, Stats: stats[i]}); err != nil {
				return 0, err
			}
			muts = append(muts, store.AssignRepo{ID: id, Owner: "w1", State: store.RepoOK, Priority: float64(i)})
			entries = append(entries, store.OutboxEntry{Op: store.OpAdd, RepoID: id, URL: url, Epoch: 1})
		}
		muts = append(muts, store.AppendOutbox{Worker: "w1", ExpectHead: uint64(lo), Entries: entries})
		if err := st.Apply(ctx, el.Term, muts); err != nil {
			return 0, err
		}
	}
	before := heap()
	if err := w.Heartbeat(ctx); err != nil {
		return 0, err
	}
	after := heap()
	if got := len(w.Owned()); got != n {
		return 0, fmt.Errorf("worker owns %d repos, want %d", got, n)
	}
	runtime.KeepAlive(w)
	return float64(after-before) / float64(n), nil
}

func heap() uint64 {
	var m runtime.MemStats
	for range 2 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// walkRepo is a generated repository the walks are measured on.
type walkRepo struct {
	name            string
	commits, branch int // commits on main; a release branch every branch commits
	tags            int // annotated tags on main
}

var walkRepos = []walkRepo{{"small", 200, 50, 4}, {"medium", 2000, 100, 30}, {"large", 20000, 200, 300}}

// measureWalks mirrors generated repositories over a local git http-backend with the
// worker's Mirrorer, pushes a few commits, fetches them, and times the commit walks a
// sync makes (a first clone's history listing, a fetch's new commits) against reading
// every commit of the history with go-git.
func measureWalks(ctx context.Context, log *slog.Logger, repos []walkRepo) ([]results.FreshnessWalk, error) {
	work, err := os.MkdirTemp("", "freshness-walks-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	served, home := filepath.Join(work, "served"), filepath.Join(work, "home")
	for _, d := range []string{served, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	srv, stop, err := gittest.Serve(served)
	if err != nil {
		return nil, err
	}
	defer stop()
	m, err := mirror.New(mirror.Config{Root: filepath.Join(work, "mirrors"),
		Client: urlpolicy.Policy{AllowPrivateHosts: true}.HTTPClient(0)})
	if err != nil {
		return nil, err
	}
	defer m.Close()

	var out []results.FreshnessWalk
	start := time.Now().Add(-4 * 365 * 24 * time.Hour).Truncate(time.Hour)
	for _, r := range repos {
		dir := filepath.Join(served, r.name+".git")
		if err := generate(home, dir, r, start); err != nil {
			return nil, fmt.Errorf("%s: %w", r.name, err)
		}
		tg := fetch.Target{ID: r.name, URL: srv.URL + "/" + r.name + ".git"}
		if _, err := m.Sync(ctx, tg); err != nil {
			return nil, fmt.Errorf("%s: clone: %w", r.name, err)
		}
		mdir, err := m.Path(tg)
		if err != nil {
			return nil, err
		}
		before, err := refs(home, mdir)
		if err != nil {
			return nil, err
		}
		packs, err := mirror.Packs(mdir)
		if err != nil {
			return nil, err
		}
		// A push: 3 commits on main and a new branch of 2 off an old commit.
		now := time.Now().Truncate(time.Second)
		for _, c := range []gittest.Commits{
			{Branch: "main", N: 3, Start: now.Add(-time.Hour), Step: time.Minute},
			{Branch: "topic", From: fmt.Sprintf("main~%d", r.commits/2), N: 2, Start: now.Add(-30 * time.Minute), Step: time.Minute},
		} {
			if err := gittest.ImportCommits(home, dir, c); err != nil {
				return nil, err
			}
		}
		res, err := m.Sync(ctx, tg)
		if err != nil {
			return nil, fmt.Errorf("%s: fetch: %w", r.name, err)
		}
		w := results.FreshnessWalk{Repo: r.name, Refs: len(before), NewCommits: len(res.Commits)}
		var hist []fetch.Commit
		w.HistoryMs = nsPerOp(func() { hist, err = mirror.HistoryOf(mdir, now) }) / 1e6
		if err != nil {
			return nil, err
		}
		w.HistoryListed = len(hist)
		var fresh []fetch.Commit
		w.NewWalkMs = nsPerOp(func() { fresh, err = mirror.NewCommitsOf(mdir, before, packs) }) / 1e6
		if err != nil || len(fresh) != len(res.Commits) {
			return nil, fmt.Errorf("%s: new commits %d, the sync listed %d: %v", r.name, len(fresh), len(res.Commits), err)
		}
		w.NewVisited = len(fresh)
		w.FullWalkMs = nsPerOp(func() { w.Commits, err = countAll(mdir) }) / 1e6
		if err != nil {
			return nil, err
		}
		log.Info("commit walks", "repo", r.name, "commits", w.Commits, "refs", w.Refs, "new", w.NewCommits, "new_ms", w.NewWalkMs,
			"history_listed", w.HistoryListed, "history_ms", w.HistoryMs, "full_ms", w.FullWalkMs)
		out = append(out, w)
	}
	return out, nil
}

// generate makes a bare repository with r's history, a commit an hour from start:
// main, release branches off it, annotated tags on it.
func generate(home, dir string, r walkRepo, start time.Time) error {
	if _, err := gitIn(home, "", "init", "-q", "--bare", "-b", "main", dir); err != nil {
		return err
	}
	if err := gittest.ImportCommits(home, dir, gittest.Commits{Branch: "main", N: r.commits, Start: start, Step: time.Hour}); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(r.commits), 1))
	for k := r.branch; k < r.commits; k += r.branch {
		c := gittest.Commits{Branch: fmt.Sprintf("release-%d", k), From: fmt.Sprintf("main~%d", r.commits-k), N: 1,
			Start: start.Add(time.Duration(k)*time.Hour + 30*time.Minute)}
		if err := gittest.ImportCommits(home, dir, c); err != nil {
			return err
		}
	}
	for t := range r.tags {
		at := fmt.Sprintf("main~%d", rng.IntN(r.commits))
		if _, err := gitIn(home, dir, "tag", "-a", "-m", "release", fmt.Sprintf("v%d", t), at); err != nil {
			return err
		}
	}
	return nil
}

// gitIn runs git in dir (a bare repository) with gittest's isolated environment.
func gitIn(home, dir string, args ...string) (string, error) {
	if dir != "" {
		args = append([]string{"--git-dir=" + dir}, args...)
	}
	cmd := exec.Command("git", args...)
	cmd.Env = gittest.Env(home)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// refs are the mirror's refs, name → hash.
func refs(home, dir string) (map[string]string, error) {
	out, err := gitIn(home, dir, "for-each-ref", "--format=%(refname) %(objectname)")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if name, h, ok := strings.Cut(line, " "); ok {
			m[name] = h
		}
	}
	return m, nil
}

// countAll reads every commit reachable from the mirror's refs with go-git.
func countAll(dir string) (int, error) {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return 0, err
	}
	iter, err := repo.Log(&git.LogOptions{All: true})
	if err != nil {
		return 0, err
	}
	n := 0
	err = iter.ForEach(func(*object.Commit) error { n++; return nil })
	return n, err
}
