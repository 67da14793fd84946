// Command maintenance measures what keeping a mirror fresh reads of it once it has
// left the page cache: a poll that finds nothing (and `repos sync` of an unchanged
// repo, the same call), maintenance of an unchanged mirror, a fetch of a small change,
// maintenance of the changed mirror step by step, the scrub, and a clone served with
// and without a bitmap. Before each measured operation (each git step, for
// maintenance) the mirror's files are evicted from the page cache; what is resident
// after it is what it read (mincore). It also measures how many mirrors one
// CPU-second maintains, unchanged and changed, and checks that the schedule keeps up
// with a fleet. It writes bench/results/maintenance.json.
//
//	go run ./bench/maintenance -out bench/results
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/repogen"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/infra/budget"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/pagecache"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
)

type config struct {
	out                        string
	sizeMB                     int
	changes                    int
	unchangedRuns, changedRuns int
	repos, workers, workerCPU  int
	changedShare, scrubDays    float64
}

func main() {
	var cfg config
	flag.StringVar(&cfg.out, "out", "bench/results", "directory to write maintenance.json into")
	flag.IntVar(&cfg.sizeMB, "size-mb", 64, "pack size of the generated repository, in MiB")
	flag.IntVar(&cfg.changes, "changes", 3, "small changes fetched (a go-git pack each) before the changed mirror's maintenance")
	flag.IntVar(&cfg.unchangedRuns, "unchanged-runs", 2000, "maintenance runs of the unchanged mirror timed for the throughput")
	flag.IntVar(&cfg.changedRuns, "changed-runs", 8, "change, fetch and maintenance rounds timed for the throughput")
	flag.IntVar(&cfg.repos, "repos", 1_000_000, "fleet size of the schedule check")
	flag.IntVar(&cfg.workers, "workers", budget.Default().MaxWorkers(), "worker tasks of the schedule check (the stack's maxWorkers, infra/budget)")
	flag.IntVar(&cfg.workerCPU, "worker-cpu", 256, "Fargate CPU units of a worker task (infra/props.go WorkerCPU)")
	// bench/storecost's model: 13% of repos change in a month, 4 times each.
	flag.Float64Var(&cfg.changedShare, "changed-share", 0.13*4/30, "share of the mirrors that changed since the day before")
	flag.Float64Var(&cfg.scrubDays, "scrub-days", 90, "scrub period (--scrub-every) in days")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, cfg); err != nil {
		log.Error("maintenance bench", "err", err)
		os.Exit(1)
	}
}

type bench struct {
	log    *slog.Logger
	dir    string   // the mirror
	cold   []string // pack names at the end of the last maintenance: the old packs
	full   bool     // the maintenance being measured is a scrub
	steps  []results.MaintenanceStep
	runs   int // git steps run in the measured operation
	m      *mirror.Mirrorer
	target fetch.Target
}

func run(ctx context.Context, log *slog.Logger, cfg config) error {
	res := results.Maintenance{Meta: results.Collect(), PageCache: "mincore"}
	git, err := gitcmd.Find(ctx)
	if err != nil {
		return err
	}
	if res.GitVersion, err = repogen.GitOutput(ctx, "", "--version"); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "maintbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	upRoot, root := filepath.Join(work, "up"), filepath.Join(work, "mirrors")
	for _, d := range []string{upRoot, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := pagecache.Check(root); err != nil {
		return fmt.Errorf("cannot measure reads here: %w", err)
	}
	upDir := filepath.Join(upRoot, "example.org", "big.git")
	start := time.Now()
	gen, err := repogen.Create(ctx, upDir, repogen.PlanFor(int64(cfg.sizeMB)<<20), 11)
	if err != nil {
		return err
	}
	log.Info("generated", "took", time.Since(start).Round(time.Millisecond))
	srv, stopSrv, err := gittest.Serve(upRoot)
	if err != nil {
		return err
	}
	defer stopSrv()

	b := &bench{log: log, target: fetch.Target{ID: "big", URL: srv.URL + "/example.org/big.git"}}
	b.m, err = mirror.New(mirror.Config{Root: root, Git: git, AroundStep: b.aroundStep})
	if err != nil {
		return err
	}
	defer b.m.Close()
	if b.dir, err = b.m.Path(b.target); err != nil {
		return err
	}
	if _, err := b.m.Sync(ctx, b.target); err != nil {
		return fmt.Errorf("clone: %w", err)
	}
	if _, err := b.maintain(ctx, fetch.MaintainRequest{}); err != nil {
		return fmt.Errorf("first maintenance: %w", err)
	}
	b.steps = nil
	if res.Repo.PackBytes, _, err = repogen.PackBytes(b.dir); err != nil {
		return err
	}
	out, err := repogen.GitOutput(ctx, "", "--git-dir="+b.dir, "rev-list", "--count", "--all")
	if err != nil {
		return err
	}
	res.Repo.Commits, _ = strconv.Atoi(out)
	refs, err := repogen.RefsOf(ctx, b.dir)
	if err != nil {
		return err
	}
	res.Repo.Refs = len(strings.Split(refs, "\n"))
	res.Repo.SmallPacks = cfg.changes

	add := func(s results.MaintenanceScenario, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		log.Info("measured", "scenario", s.Name, "read", s.ReadBytes, "old_pack_read", s.OldPackReadBytes, "cpu", s.CPUSeconds)
		res.Scenarios = append(res.Scenarios, s)
		return nil
	}
	sync := func() error {
		r, err := b.m.Sync(ctx, b.target)
		if err == nil && r.Changed {
			err = errors.New("the unchanged repo changed")
		}
		return err
	}
	if err := add(b.measure("poll, no change", "Mirrorer.Sync of an unchanged repo: a worker's poll, and `repos sync` of it (the same call): one ref advertisement compared with the mirror's refs", sync)); err != nil {
		return err
	}
	if err := add(b.measure("maintenance, unchanged", "Mirrorer.Maintain of a mirror whose fingerprint (HEAD, packed-refs, loose refs, pack names) is the one its last maintenance left",
		func() error {
			return b.expect(ctx, fetch.MaintainRequest{}, func(m fetch.Maintenance) bool { return m.Unchanged })
		})); err != nil {
		return err
	}
	for i := range cfg.changes {
		if err := repogen.PushSmallChange(ctx, upDir, gen); err != nil {
			return err
		}
		f := func() error {
			r, err := b.m.Sync(ctx, b.target)
			if err == nil && !r.Changed {
				err = errors.New("the change was not fetched")
			}
			return err
		}
		if i == 0 {
			if err := add(b.measure("fetch of a small change", "Mirrorer.Sync after one small commit upstream: go-git's negotiation walks up to 100 commits back from every local ref for its haves (commits only, from the packs: go-git does not use the commit-graph), then the new pack is written and the new commits and tip times read back; no blob is read", f)); err != nil {
				return err
			}
		} else if err := f(); err != nil {
			return err
		}
	}
	if err := add(b.measure("maintenance, changed", fmt.Sprintf("Mirrorer.Maintain after %d fetches (a go-git pack and loose refs each): only what the change needs", cfg.changes),
		func() error {
			return b.expect(ctx, fetch.MaintainRequest{}, func(m fetch.Maintenance) bool { return !m.Unchanged && !m.Fscked })
		})); err != nil {
		return err
	}
	b.full = true
	scrub := fetch.MaintainRequest{ScrubSince: time.Now().Add(time.Hour)}
	if err := add(b.measure("scrub", "Mirrorer.Maintain when the mirror's scrub slot began (once per --scrub-every, after a failure, or asked for after a corrupt fetch): repack with a bitmap, commit-graph from all refs, connectivity check. The mirror is otherwise unchanged: without the fsck, this is what the old daily run (ADR 11) read of every mirror every day",
		func() error { return b.expect(ctx, scrub, func(m fetch.Maintenance) bool { return m.Fscked }) })); err != nil {
		return err
	}
	b.full = false
	if err := add(b.measure("clone served, with bitmap", "git clone --mirror of the mirror just scrubbed (upload-pack and pack-objects over file://, as the front runs them)", b.clone(ctx))); err != nil {
		return err
	}
	if err := repogen.PushSmallChange(ctx, upDir, gen); err != nil {
		return err
	}
	if _, err := b.m.Sync(ctx, b.target); err != nil {
		return err
	}
	if _, err := b.maintain(ctx, fetch.MaintainRequest{}); err != nil {
		return err
	}
	b.steps = nil
	if err := add(b.measure("clone served, no bitmap", "the same clone after a change's maintenance (which writes no bitmap)", b.clone(ctx))); err != nil {
		return err
	}

	// The old daily run (ADR 11) on a changed mirror, for comparison: every step of the
	// scrub, whatever changed.
	for range cfg.changes {
		if err := repogen.PushSmallChange(ctx, upDir, gen); err != nil {
			return err
		}
		if _, err := b.m.Sync(ctx, b.target); err != nil {
			return err
		}
	}
	b.full = true
	if err := add(b.measure("old daily run, changed", fmt.Sprintf("the whole run of ADR 11 (every day on every mirror) after %d fetches: what a changed mirror's maintenance read before (its fsck ran weekly)", cfg.changes),
		func() error {
			_, err := mirror.Maintain(ctx, git, b.dir, mirror.MaintainOptions{Full: true, Around: b.aroundStep})
			return err
		})); err != nil {
		return err
	}
	b.full = false
	if _, err := b.maintain(ctx, fetch.MaintainRequest{}); err != nil { // the state catches up
		return err
	}

	if res.Throughput, err = b.throughput(ctx, cfg, upDir, gen); err != nil {
		return err
	}
	for _, s := range res.Scenarios {
		if s.Name == "scrub" {
			res.Throughput.ScrubCPUSeconds = s.CPUSeconds
			res.Throughput.ScrubPerCPUSecond = 1 / s.CPUSeconds
			for _, st := range s.Steps {
				if st.Name != "fsck" {
					res.Throughput.OldDailyCPUSeconds += st.CPUSeconds
				}
			}
		}
	}
	res.Schedule = schedule(cfg, res.Throughput)
	res.NewerGit = newerGit
	res.Notes = []string{
		"Reads are pages found in the page cache after the operation, of files that existed before it (files it wrote are not counted); the kernel's read-ahead rounds them up (on EFS the NFS client reads ahead too, in up to 1 MiB).",
		"Each git step of a maintenance run is measured from an evicted cache, on its own: a run's read_bytes is the sum of its steps', what each would read cold. Outside the steps, Mirrorer.Maintain reads only HEAD, packed-refs, the loose refs, its state file and the pack directory's listing (the unchanged scenario).",
		"Old packs are the packs of the last maintenance: the cold data. The packs a fetch adds are new (just written, and in the cache in practice).",
		"CPU is user+system time of this process and its children over the operation; a fetch's includes the in-process upstream server's git http-backend.",
		fmt.Sprintf("The schedule assumes %.2f%% of the mirrors changed since the day before (bench/storecost's model: 13%% of repos change in a month, 4 times each) and a scrub per %.0f days; scrub CPU grows with a mirror's size (measured here on a %.0f MiB pack).", cfg.changedShare*100, cfg.scrubDays, float64(res.Repo.PackBytes)/(1<<20)),
	}
	res.Meta.Finish()
	if err := results.Write(cfg.out, "maintenance", res); err != nil {
		return err
	}
	log.Info("written", "path", filepath.Join(cfg.out, "maintenance.json"))
	return nil
}

// newerGit is what later git releases change in these steps, from git's release notes
// and documentation.
var newerGit = []string{
	"git 2.47 writes incremental multi-pack indexes (`git multi-pack-index write --incremental`, 2024-08): a new layer over the new packs only, instead of one index rewritten from every pack's .idx. Its `expire` and `repack` refuse an incremental chain, so the roll-up here would move to `git multi-pack-index compact` (documented from 2.55).",
	"Later releases add reachability bitmaps per incremental layer (the 2.55 manual documents `write --incremental` together with `--bitmap`): a bitmap for the new packs would no longer walk the whole history, so the bitmap, kept for the scrub here, could follow every change.",
	"git 2.51 keeps cruft packs out of the multi-pack index (`repack.MIDXMustContainCruft`) and can build packs by path walk; neither changes what is read here.",
	"None of them changes the connectivity check: `git fsck --connectivity-only` walks every reachable commit and tree, so a scrub reads a mirror whole in any version.",
}

// maintain runs Mirrorer.Maintain and records the cold packs it leaves.
func (b *bench) maintain(ctx context.Context, req fetch.MaintainRequest) (fetch.Maintenance, error) {
	r, err := b.m.Maintain(ctx, b.target, req)
	if err == nil {
		b.cold = packNames(b.dir)
	}
	return r, err
}

// expect runs maintenance and checks what it did.
func (b *bench) expect(ctx context.Context, req fetch.MaintainRequest, ok func(fetch.Maintenance) bool) error {
	r, err := b.maintain(ctx, req)
	if err == nil && !ok(r) {
		err = fmt.Errorf("maintenance did %+v", r)
	}
	return err
}

// clone returns an operation that clones the mirror as a client of the front would.
func (b *bench) clone(ctx context.Context) func() error {
	return func() error {
		dst, err := os.MkdirTemp("", "maintbench-clone-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dst)
		b.runs++
		return repogen.GitRun(ctx, "", "clone", "-q", "--mirror", "--no-local", "file://"+b.dir, filepath.Join(dst, "c"))
	}
}

// aroundStep measures one git step of a maintenance run on its own: the mirror is
// evicted before it, and what is resident after it was read.
func (b *bench) aroundStep(name string, step func() error) error {
	b.runs++
	if err := pagecache.EvictTree(b.dir); err != nil {
		return err
	}
	before, err := pagecache.ResidentTree(b.dir)
	if err != nil {
		return err
	}
	cpu0, t0 := cpuSeconds(), time.Now()
	err = step()
	cpu, wall := cpuSeconds()-cpu0, time.Since(t0).Seconds()
	after, rerr := pagecache.ResidentTree(b.dir)
	if err == nil {
		err = rerr
	}
	files, read, old := b.reads(before, after)
	b.steps = append(b.steps, results.MaintenanceStep{Name: name, Command: command(name, b.full), ReadBytes: read,
		OldPackReadBytes: old, CPUSeconds: cpu, WallSeconds: wall, Files: files, Why: why(name, b.full)})
	return err
}

// measure runs op on the evicted mirror and reports what it read.
func (b *bench) measure(name, desc string, op func() error) (results.MaintenanceScenario, error) {
	s := results.MaintenanceScenario{Name: name, Description: desc}
	b.steps, b.runs = nil, 0
	if err := pagecache.EvictTree(b.dir); err != nil {
		return s, err
	}
	before, err := pagecache.ResidentTree(b.dir)
	if err != nil {
		return s, err
	}
	for _, f := range before {
		if b.isCold(f.Path) {
			s.OldPackBytes += f.Size
		}
	}
	cpu0, t0 := cpuSeconds(), time.Now()
	err = op()
	s.CPUSeconds, s.WallSeconds = cpuSeconds()-cpu0, time.Since(t0).Seconds()
	if err != nil {
		return s, err
	}
	after, err := pagecache.ResidentTree(b.dir)
	if err != nil {
		return s, err
	}
	s.GitRuns, s.Steps = b.runs, b.steps
	if len(b.steps) == 0 {
		s.Files, s.ReadBytes, s.OldPackReadBytes = b.reads(before, after)
		return s, nil
	}
	byPath := map[string]int{}
	for _, st := range b.steps {
		s.ReadBytes += st.ReadBytes
		s.OldPackReadBytes += st.OldPackReadBytes
		for _, f := range st.Files {
			if i, ok := byPath[f.Path]; ok {
				s.Files[i].Read = max(s.Files[i].Read, f.Read)
				continue
			}
			byPath[f.Path] = len(s.Files)
			s.Files = append(s.Files, f)
		}
	}
	return s, nil
}

// reads are the files of before (all evicted) with pages resident in after.
func (b *bench) reads(before, after []pagecache.File) (files []results.MaintenanceFile, read, old int64) {
	existed := map[string]bool{}
	for _, f := range before {
		existed[f.Path] = true
	}
	for _, f := range after {
		if !existed[f.Path] || f.Resident == 0 {
			continue
		}
		cold := b.isCold(f.Path)
		files = append(files, results.MaintenanceFile{Path: f.Path, Size: f.Size, Read: f.Resident, OldPack: cold})
		read += f.Resident
		if cold {
			old += f.Resident
		}
	}
	return files, read, old
}

func (b *bench) isCold(rel string) bool {
	dir, name := filepath.Split(rel)
	if dir != "objects/pack/" {
		return false
	}
	for _, p := range b.cold {
		if p == name {
			return true
		}
	}
	return false
}

// throughput times maintenance of the unchanged mirror, and of the mirror after
// one change, in CPU seconds (nothing evicted: CPU, not reads).
func (b *bench) throughput(ctx context.Context, cfg config, upDir string, gen *repogen.Generator) (results.MaintenanceThroughput, error) {
	var t results.MaintenanceThroughput
	saved := b.m
	defer func() { b.m = saved }()
	quiet, err := mirror.New(mirror.Config{Root: filepath.Dir(filepath.Dir(filepath.Dir(b.dir))), Git: mustGit(ctx)})
	if err != nil {
		return t, err
	}
	defer quiet.Close()
	b.m = quiet
	cpu0 := cpuSeconds()
	for range cfg.unchangedRuns {
		r, err := b.m.Maintain(ctx, b.target, fetch.MaintainRequest{})
		if err != nil || !r.Unchanged {
			return t, fmt.Errorf("unchanged run: %+v, %v", r, err)
		}
	}
	t.UnchangedRuns = cfg.unchangedRuns
	t.UnchangedCPUSeconds = (cpuSeconds() - cpu0) / float64(cfg.unchangedRuns)
	t.UnchangedPerCPUSecond = 1 / t.UnchangedCPUSeconds
	var total float64
	for range cfg.changedRuns {
		if err := repogen.PushSmallChange(ctx, upDir, gen); err != nil {
			return t, err
		}
		if _, err := b.m.Sync(ctx, b.target); err != nil {
			return t, err
		}
		c := cpuSeconds()
		r, err := b.m.Maintain(ctx, b.target, fetch.MaintainRequest{})
		if err != nil || r.Unchanged || r.Fscked {
			return t, fmt.Errorf("changed run: %+v, %v", r, err)
		}
		total += cpuSeconds() - c
	}
	t.ChangedRuns = cfg.changedRuns
	t.ChangedCPUSeconds = total / float64(cfg.changedRuns)
	t.ChangedPerCPUSecond = 1 / t.ChangedCPUSeconds
	return t, nil
}

// schedule is the maintenance CPU a fleet needs a day, against what its workers have.
func schedule(cfg config, t results.MaintenanceThroughput) results.MaintenanceSchedule {
	n := float64(cfg.repos)
	s := results.MaintenanceSchedule{Repos: cfg.repos, Workers: cfg.workers, WorkerVCPU: float64(cfg.workerCPU) / 1024,
		ChangedShare: cfg.changedShare, ScrubDays: cfg.scrubDays}
	s.ScrubsPerDay = n / cfg.scrubDays
	s.ChangedPerDay = n * cfg.changedShare
	s.UnchangedPerDay = n - s.ChangedPerDay - s.ScrubsPerDay
	s.CPUSecondsPerDay = s.UnchangedPerDay*t.UnchangedCPUSeconds + s.ChangedPerDay*t.ChangedCPUSeconds + s.ScrubsPerDay*t.ScrubCPUSeconds
	s.CapacityCPUSecondsPerDay = float64(cfg.workers) * s.WorkerVCPU * 86400
	s.Share = s.CPUSecondsPerDay / s.CapacityCPUSecondsPerDay
	s.OldCPUSecondsPerDay = n * t.OldDailyCPUSeconds
	s.OldShare = s.OldCPUSecondsPerDay / s.CapacityCPUSecondsPerDay
	return s
}

func mustGit(ctx context.Context) gitcmd.Git {
	g, _ := gitcmd.Find(ctx)
	return g
}

// cpuSeconds is the user+system time of this process and of its waited-for children.
func cpuSeconds() float64 {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// packNames are the .pack files of the repository at dir.
func packNames(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "pack-*.pack"))
	for i, p := range m {
		m[i] = filepath.Base(p)
	}
	return m
}

// command is the git command line of a step, as mirror.Maintain runs it.
func command(name string, full bool) string {
	switch name {
	case "pack-refs":
		return "git pack-refs --all --prune"
	case "repack":
		return "git repack --geometric=2 -d --write-midx --write-bitmap-index"
	case "midx-write":
		return "git multi-pack-index write"
	case "midx-repack":
		return "git multi-pack-index repack --batch-size=<2 × the new packs' bytes>"
	case "midx-expire":
		return "git multi-pack-index expire"
	case "commit-graph":
		if full {
			return "git commit-graph write --split --reachable"
		}
		return "git commit-graph write --split --stdin-packs (the new packs)"
	case "fsck":
		return "git fsck --connectivity-only --no-dangling"
	}
	return "git " + name
}

// why says why a step reads what it reads (git's own behaviour; the figures show
// how much).
func why(name string, full bool) string {
	switch {
	case name == "pack-refs":
		return "peels the loose refs (the changed tips) to write packed-refs' ^ lines: reads those objects, in the new packs; the refs already packed keep the peeled values they have"
	case name == "repack":
		return "the bitmap covers every object reachable from the selected commits: pack-objects walks the whole history (every commit and tree, and the header of every object), so it reads the old packs through; even without the bitmap, --geometric's pack-objects --stdin-packs walks the new commits' trees into the old packs"
	case name == "midx-write":
		return "the multi-pack index is written from the packs' .idx files; no pack data"
	case name == "midx-repack":
		return "the objects of the packs below the batch size are listed from the index and packed with pack-objects (no history walk): reads those small packs, and the base of any delta whose base it does not carry"
	case name == "midx-expire":
		return "deletes the packs whose objects all live in newer packs and rewrites the index: .idx files only"
	case name == "commit-graph" && full:
		return "starts from every ref and walks every reachable commit, parsing each from the packs without the graph (git 2.39) to find those not yet in it: reads every commit of the old packs (read-ahead brings in the pages around them)"
	case name == "commit-graph":
		return "reads the commits of the new packs (their .idx lists them), and each boundary commit's parent, which git 2.39 parses from its pack without the graph: a few pages of an old pack when the parent is there"
	case name == "fsck":
		return "connectivity-only still walks every reachable commit and tree (blobs only by their index entry): reads the old packs through"
	}
	return ""
}
