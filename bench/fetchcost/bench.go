package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/repogen"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
)

// defaultLargeMB is the large repository's pack size unless -large-mb says otherwise.
const defaultLargeMB = 500

// spec is one repository size and how often its operations are repeated (medians
// over runs; the large size is too slow to repeat within the time budget).
type spec struct {
	name                 string
	target               int64 // pack bytes
	cloneRuns, fetchRuns int
	seed                 uint64
}

func specsFor(names []string, largeMB int) ([]spec, error) {
	all := map[string]spec{
		"small":  {name: "small", target: 1 << 20, cloneRuns: 5, fetchRuns: 5, seed: 1},
		"medium": {name: "medium", target: 50 << 20, cloneRuns: 3, fetchRuns: 3, seed: 2},
		"large":  {name: "large", target: int64(largeMB) << 20, cloneRuns: 2, fetchRuns: 3, seed: 3},
	}
	var out []spec
	for _, n := range names {
		s, ok := all[strings.TrimSpace(n)]
		if !ok {
			return nil, fmt.Errorf("unknown size %q (want small, medium or large)", n)
		}
		out = append(out, s)
	}
	if largeMB <= 0 {
		return nil, fmt.Errorf("-large-mb must be positive, not %d", largeMB)
	}
	return out, nil
}

// bench holds what every measurement shares: the server and where things go.
type bench struct {
	log       *slog.Logger
	work      string // mirrors under <work>/<size>/
	served    string // upstream repositories, <served>/<size>.git
	home      string // HOME of the git CLI (empty: no user config)
	self      string // this binary, re-run as the go-git child
	meter     meter
	serverURL string
	pollFor   time.Duration
}

// upstream is a generated repository on the server.
type upstream struct {
	gitDir string
	url    string // as the policy normalizes it
	gen    *repogen.Generator
}

// mirrorPair is one go-git and one CLI mirror of the same upstream.
type mirrorPair struct {
	goGitRoot string // the Mirrorer's root
	goGitDir  string // the mirror under it
	cliDir    string
}

func (b *bench) size(ctx context.Context, sp spec) (results.FetchCostSize, error) {
	out := results.FetchCostSize{Name: sp.name, TargetBytes: sp.target}
	up, err := b.generate(ctx, sp, &out.Repo)
	if err != nil {
		return out, err
	}
	var mp mirrorPair
	if out.Clone, mp, err = b.clones(ctx, sp, up); err != nil {
		return out, fmt.Errorf("initial mirror: %w", err)
	}
	if out.Fetch, err = b.fetches(ctx, sp, up, mp); err != nil {
		return out, fmt.Errorf("fetch: %w", err)
	}
	if out.Polls, err = b.polls(ctx, up, mp); err != nil {
		return out, fmt.Errorf("polls: %w", err)
	}
	return out, nil
}

// generate creates the upstream repository of sp and describes it into repo.
func (b *bench) generate(ctx context.Context, sp spec, repo *results.FetchCostRepo) (upstream, error) {
	start := time.Now()
	p := repogen.PlanFor(sp.target)
	up := upstream{gitDir: filepath.Join(b.served, sp.name+".git")}
	var err error
	if up.gen, err = repogen.Create(ctx, up.gitDir, p, sp.seed); err != nil {
		return up, err
	}
	repo.GenerateSeconds = time.Since(start).Seconds()
	repo.TextFiles, repo.BinaryBytes = p.TextFiles, p.BinaryBytes
	if repo.PackBytes, _, err = repogen.PackBytes(up.gitDir); err != nil {
		return up, err
	}
	if repo.Commits, err = gitInt(ctx, "--git-dir="+up.gitDir, "rev-list", "--count", "--all"); err != nil {
		return up, err
	}
	if repo.Refs, err = refCount(ctx, up.gitDir); err != nil {
		return up, err
	}
	if repo.Objects, err = inPackObjects(ctx, up.gitDir); err != nil {
		return up, err
	}
	if up.url, err = policy.Normalize(b.serverURL + "/" + sp.name + ".git"); err != nil {
		return up, fmt.Errorf("URL policy: %w", err)
	}
	b.log.Info("generated", "size", sp.name, "pack_mb", mb(repo.PackBytes), "commits", repo.Commits,
		"objects", repo.Objects, "refs", repo.Refs, "took", time.Since(start).Round(time.Millisecond))
	return up, nil
}

// gitInt runs git and returns its output as a number.
func gitInt(ctx context.Context, args ...string) (int, error) {
	out, err := repogen.GitOutput(ctx, "", args...)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(out)
	if err != nil {
		return 0, fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return n, nil
}

func refCount(ctx context.Context, gitDir string) (int, error) {
	out, err := repogen.RefsOf(ctx, gitDir)
	if err != nil {
		return 0, err
	}
	return len(strings.Split(out, "\n")), nil
}

func inPackObjects(ctx context.Context, gitDir string) (int, error) {
	out, err := repogen.GitOutput(ctx, "", "--git-dir="+gitDir, "count-objects", "-v")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "in-pack: "); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("count-objects: no in-pack line in %q", out)
}

// clones measures the initial mirror sp.cloneRuns times each way, alternating which
// goes first, and keeps the last pair of mirrors for the fetches and polls.
func (b *bench) clones(ctx context.Context, sp spec, up upstream) (results.FetchCostPair, mirrorPair, error) {
	var gg, cli []usage
	var mp mirrorPair
	for i := range sp.cloneRuns {
		dir := filepath.Join(b.work, sp.name, fmt.Sprintf("clone-%d", i))
		if i > 0 {
			if err := os.RemoveAll(filepath.Dir(mp.cliDir)); err != nil {
				return results.FetchCostPair{}, mp, err
			}
			if err := os.RemoveAll(mp.goGitRoot); err != nil {
				return results.FetchCostPair{}, mp, err
			}
		}
		mp = mirrorPair{goGitRoot: filepath.Join(dir, "gogit"), cliDir: filepath.Join(dir, "cli", sp.name+".git")}
		var ug, uc usage
		err := inTurn(i%2 == 0, func() error {
			var err error
			ug, mp.goGitDir, err = b.goGitSync(ctx, mp.goGitRoot, sp.name, up.url, true)
			return err
		}, func() error {
			var err error
			uc, err = b.meter.measure(ctx, b.git("", "clone", "--mirror", "--quiet", up.url, mp.cliDir), true)
			return err
		})
		if err != nil {
			return results.FetchCostPair{}, mp, err
		}
		if err := sameRefs(ctx, up.gitDir, mp.goGitDir, mp.cliDir); err != nil {
			return results.FetchCostPair{}, mp, err
		}
		gg, cli = append(gg, ug), append(cli, uc)
		b.log.Info("initial mirror", "size", sp.name, "run", i+1, "gogit", ug.Wall.Round(time.Millisecond),
			"cli", uc.Wall.Round(time.Millisecond), "gogit_rss_mb", mb(ug.MaxRSS), "cli_rss_mb", mb(uc.MaxRSS))
	}
	pair, err := b.pairOf(mp, summarize("Mirrorer.Sync (clone)", gg), summarize("git clone --mirror", cli))
	return pair, mp, err
}

// fetches pushes a small change upstream sp.fetchRuns times and measures each
// mirror's catching up.
func (b *bench) fetches(ctx context.Context, sp spec, up upstream, mp mirrorPair) (results.FetchCostPair, error) {
	var gg, cli []usage
	for i := range sp.fetchRuns {
		if err := repogen.PushSmallChange(ctx, up.gitDir, up.gen); err != nil {
			return results.FetchCostPair{}, err
		}
		var ug, uc usage
		err := inTurn(i%2 == 0, func() error {
			var err error
			ug, _, err = b.goGitSync(ctx, mp.goGitRoot, sp.name, up.url, false)
			return err
		}, func() error {
			var err error
			uc, err = b.meter.measure(ctx, b.git(mp.cliDir, "fetch", "--prune", "--quiet"), true)
			return err
		})
		if err != nil {
			return results.FetchCostPair{}, err
		}
		if err := sameRefs(ctx, up.gitDir, mp.goGitDir, mp.cliDir); err != nil {
			return results.FetchCostPair{}, err
		}
		gg, cli = append(gg, ug), append(cli, uc)
		b.log.Info("fetch", "size", sp.name, "run", i+1, "gogit", ug.Wall.Round(time.Millisecond),
			"cli", uc.Wall.Round(time.Millisecond))
	}
	return b.pairOf(mp, summarize("Mirrorer.Sync (fetch)", gg), summarize("git fetch --prune", cli))
}

// inTurn runs a then b, or b then a: alternating the order spreads the noise of a
// shared machine (and of a warm page cache) over both sides.
func inTurn(aFirst bool, a, b func() error) error {
	if !aFirst {
		a, b = b, a
	}
	if err := a(); err != nil {
		return err
	}
	return b()
}

// pairOf completes both sides with the mirrors' disk figures and the ratios.
func (b *bench) pairOf(mp mirrorPair, gg, cli results.FetchCostRun) (results.FetchCostPair, error) {
	for _, s := range []struct {
		run *results.FetchCostRun
		dir string
	}{{&gg, mp.goGitDir}, {&cli, mp.cliDir}} {
		var err error
		if s.run.DiskBytes, s.run.ApparentBytes, err = diskUsage(s.dir); err != nil {
			return results.FetchCostPair{}, err
		}
		if s.run.PackBytes, _, err = repogen.PackBytes(s.dir); err != nil {
			return results.FetchCostPair{}, err
		}
	}
	return pairFor(gg, cli), nil
}

// pairFor computes go-git's ratios over the CLI.
func pairFor(gg, cli results.FetchCostRun) results.FetchCostPair {
	return results.FetchCostPair{GoGit: gg, CLI: cli, Ratio: results.FetchCostRatios{
		Wall:    results.Ratio(gg.WallSeconds, cli.WallSeconds),
		CPU:     results.Ratio(gg.CPUSeconds, cli.CPUSeconds),
		MaxRSS:  results.Ratio(float64(gg.MaxRSSBytes), float64(cli.MaxRSSBytes)),
		TreeRSS: results.Ratio(float64(gg.TreeRSSBytes), float64(cli.TreeRSSBytes)),
		Disk:    results.Ratio(float64(gg.DiskBytes), float64(cli.DiskBytes)),
	}}
}

// summarize takes the medians of runs.
func summarize(command string, runs []usage) results.FetchCostRun {
	var wall, cpu, rss, tree []float64
	for _, u := range runs {
		wall = append(wall, u.Wall.Seconds())
		cpu = append(cpu, u.CPU.Seconds())
		rss = append(rss, float64(u.MaxRSS))
		tree = append(tree, float64(u.TreeRSS))
	}
	return results.FetchCostRun{
		Command:        command,
		Runs:           len(runs),
		WallSeconds:    results.Median(wall),
		WallSecondsAll: wall,
		CPUSeconds:     results.Median(cpu),
		MaxRSSBytes:    int64(results.Median(rss)),
		TreeRSSBytes:   int64(results.Median(tree)),
	}
}

// polls measures back-to-back no-change polls, each way, for b.pollFor.
func (b *bench) polls(ctx context.Context, up upstream, mp mirrorPair) (results.FetchCostPolls, error) {
	var out results.FetchCostPolls
	before, err := repogen.RefsOf(ctx, mp.cliDir)
	if err != nil {
		return out, err
	}
	if out.GoGit, err = b.goGitPolls(ctx, "poll", "Mirrorer.Sync (no change)", mp.goGitRoot, up.url); err != nil {
		return out, err
	}
	if out.GoGitList, err = b.goGitPolls(ctx, "list", "go-git Remote.List", "", up.url); err != nil {
		return out, err
	}
	if out.GitFetch, err = b.cliPolls(ctx, "git fetch --prune", mp.cliDir, "fetch", "--prune", "--quiet"); err != nil {
		return out, err
	}
	if out.LsRemote, err = b.cliPolls(ctx, "git ls-remote", "", "ls-remote", up.url); err != nil {
		return out, err
	}
	if after, err := repogen.RefsOf(ctx, mp.cliDir); err != nil || after != before {
		return out, fmt.Errorf("no-change git fetch changed the mirror's refs (err %v)", err)
	}
	out.RateVsFetch = results.Ratio(out.GoGit.PerSecond, out.GitFetch.PerSecond)
	out.RateVsLsRemote = results.Ratio(out.GoGit.PerSecond, out.LsRemote.PerSecond)
	out.CPUVsFetch = results.Ratio(out.GoGit.CPUMillisPerPoll, out.GitFetch.CPUMillisPerPoll)
	out.CPUVsLsRemote = results.Ratio(out.GoGit.CPUMillisPerPoll, out.LsRemote.CPUMillisPerPoll)
	b.log.Info("polls", "gogit_per_s", round1(out.GoGit.PerSecond), "gogit_list_per_s", round1(out.GoGitList.PerSecond), "git_fetch_per_s", round1(out.GitFetch.PerSecond),
		"ls_remote_per_s", round1(out.LsRemote.PerSecond))
	return out, nil
}

// goGitPolls runs a go-git poll loop (op poll or list) in one child process, as a
// worker would.
func (b *bench) goGitPolls(ctx context.Context, op, name, root, url string) (results.FetchCostPoll, error) {
	p, stdout := b.child(op, root, url, "-for", b.pollFor.String())
	u, err := b.meter.measure(ctx, p, false)
	if err != nil {
		return results.FetchCostPoll{}, err
	}
	var r childResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return results.FetchCostPoll{}, fmt.Errorf("go-git child output %q: %w", stdout.String(), err)
	}
	return pollFigures(name, r.Polls, r.Seconds, u.CPU, u.MaxRSS), nil
}

// cliPolls runs git with args back to back for b.pollFor, one process tree a poll,
// started directly; one more poll through the launcher gives the peak RSS.
func (b *bench) cliPolls(ctx context.Context, name, dir string, args ...string) (results.FetchCostPoll, error) {
	p := b.git(dir, args...)
	var cpu time.Duration
	n := 0
	start := time.Now()
	for time.Since(start) < b.pollFor {
		u, err := measureDirect(ctx, p)
		if err != nil {
			return results.FetchCostPoll{}, err
		}
		cpu += u.CPU
		n++
	}
	seconds := time.Since(start).Seconds()
	u, err := b.meter.measure(ctx, p, false)
	if err != nil {
		return results.FetchCostPoll{}, err
	}
	return pollFigures(name, n, seconds, cpu, u.MaxRSS), nil
}

func pollFigures(command string, polls int, seconds float64, cpu time.Duration, rss int64) results.FetchCostPoll {
	return results.FetchCostPoll{
		Command:          command,
		Polls:            polls,
		Seconds:          seconds,
		PerSecond:        results.Ratio(float64(polls), seconds),
		CPUMillisPerPoll: results.Ratio(float64(cpu.Milliseconds()), float64(polls)),
		MaxRSSBytes:      rss,
	}
}

// goGitSync runs one Mirrorer.Sync in a child process and returns its usage and the
// mirror's directory. clone says whether the sync must create the mirror or update it.
func (b *bench) goGitSync(ctx context.Context, root, id, url string, clone bool) (usage, string, error) {
	p, stdout := b.child("sync", root, url, "-id", id)
	u, err := b.meter.measure(ctx, p, true)
	if err != nil {
		return u, "", err
	}
	var r childResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return u, "", fmt.Errorf("go-git child output %q: %w", stdout.String(), err)
	}
	if r.Cloned != clone || !r.Changed {
		return u, "", fmt.Errorf("go-git sync: cloned=%v changed=%v, want cloned=%v changed", r.Cloned, r.Changed, clone)
	}
	return u, r.Path, nil
}

// child is op run by a go-git child of this binary; it writes its result to stdout.
func (b *bench) child(op, root, url string, extra ...string) (proc, *bytes.Buffer) {
	var stdout bytes.Buffer
	args := append([]string{b.self, childArg, op, "-root", root, "-url", url}, extra...)
	return proc{args: args, stdout: &stdout}, &stdout
}

// git is a git CLI command in the isolated environment (no user or system config).
func (b *bench) git(dir string, args ...string) proc {
	return proc{args: append([]string{"git"}, args...), dir: dir, env: gittest.Env(b.home)}
}

// sameRefs fails unless every mirror has exactly the upstream's refs.
func sameRefs(ctx context.Context, upstream string, mirrors ...string) error {
	want, err := repogen.RefsOf(ctx, upstream)
	if err != nil {
		return err
	}
	for _, m := range mirrors {
		got, err := repogen.RefsOf(ctx, m)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("mirror %s does not have the upstream's refs", m)
		}
	}
	return nil
}

// drop removes a size's repositories and mirrors.
func (b *bench) drop(sp spec) {
	for _, d := range []string{filepath.Join(b.work, sp.name), filepath.Join(b.served, sp.name+".git")} {
		if err := os.RemoveAll(d); err != nil {
			b.log.Warn("cleanup", "dir", d, "err", err)
		}
	}
}

// notes are the caveats stored with the results.
func notes(specs []spec, largeMB int) []string {
	n := []string{
		"Client and server share one machine: a poll's wall time includes git http-backend's work (a CGI process per request); CPU per poll is the client's alone.",
		"git speaks protocol v2 by default (two requests per ls-remote or no-change fetch); go-git v5 speaks v0 (one request, the full ref advertisement).",
		"\"Peak RSS, largest process\" is ru_maxrss, which for git is its largest single process; git clone and fetch run remote-http, fetch-pack and index-pack at once, so \"all processes\" (their summed RSS, sampled every 10 ms) is the fair comparison. go-git is one process.",
		"Each measured command is started by a small launcher program, because at exec Linux passes the peak RSS of the process that forks on to the new one; started by the benchmark itself, every command would report at least the benchmark's memory.",
		"The wall time of an initial mirror includes process start; go-git's is Mirrorer.Sync in a fresh process (New, clone into a temp dir, LastCommitAt, pack-refs, rename, size walk).",
	}
	for _, s := range specs {
		if s.name == "large" && largeMB != defaultLargeMB {
			n = append(n, fmt.Sprintf("The large repository was generated at %d MB (-large-mb), not %d MB.", largeMB, defaultLargeMB))
		}
	}
	return n
}

func mb(n int64) float64 { return float64(n*10>>20) / 10 }

func round1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }
