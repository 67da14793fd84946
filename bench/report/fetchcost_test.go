package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

const mib = 1 << 20

func fcRun(wall, cpu float64, rss, tree, disk int64) results.FetchCostRun {
	return results.FetchCostRun{Runs: 3, WallSeconds: wall, CPUSeconds: cpu, MaxRSSBytes: rss, TreeRSSBytes: tree,
		DiskBytes: disk, PackBytes: disk - mib/2}
}

func fcPoll(perSec, cpuMs float64, rss int64) results.FetchCostPoll {
	return results.FetchCostPoll{PerSecond: perSec, CPUMillisPerPoll: cpuMs, MaxRSSBytes: rss}
}

func fcFixture() results.FetchCost {
	small := results.FetchCostSize{Name: "small", TargetBytes: mib,
		Repo: results.FetchCostRepo{Commits: 150, TextFiles: 40, BinaryBytes: 765076, Objects: 1154, Refs: 10, PackBytes: 1077891, GenerateSeconds: 0.25},
		Clone: results.FetchCostPair{
			GoGit: fcRun(0.49, 0.142, 20*mib, 20*mib, 1159168), CLI: fcRun(0.61, 0.157, 11*mib, 25*mib, 1241088),
			Ratio: results.FetchCostRatios{Wall: 0.8039, CPU: 0.9076, MaxRSS: 1.818, TreeRSS: 0.8, Disk: 0.934}},
		Fetch: results.FetchCostPair{
			GoGit: fcRun(0.211, 0.059, 19*mib, 19*mib, 1282048), CLI: fcRun(0.367, 0.116, 11*mib, 20*mib, 1564672),
			Ratio: results.FetchCostRatios{Wall: 0.5742, CPU: 0.51, MaxRSS: 1.7, TreeRSS: 0.95, Disk: 0.819}},
		Polls: results.FetchCostPolls{GoGit: fcPoll(18.49, 14.53, 16*mib), GoGitList: fcPoll(19.2, 9.5, 14*mib),
			GitFetch: fcPoll(3.22, 85.25, 11*mib), LsRemote: fcPoll(3.73, 58.8, 11*mib),
			RateVsFetch: 5.742, RateVsLsRemote: 4.955, CPUVsFetch: 0.1704, CPUVsLsRemote: 0.2471},
	}
	large := results.FetchCostSize{Name: "large", TargetBytes: 500 * mib,
		Repo: results.FetchCostRepo{Commits: 20000, TextFiles: 3000, BinaryBytes: 470 * mib, Objects: 165778, Refs: 407, PackBytes: 527 * mib, GenerateSeconds: 26.96},
		Clone: results.FetchCostPair{
			GoGit: fcRun(18.12, 12.63, 332*mib, 333*mib, 528*mib), CLI: fcRun(15.08, 11.36, 40*mib, 52*mib, 529*mib),
			Ratio: results.FetchCostRatios{Wall: 1.2016, CPU: 1.1115, MaxRSS: 8.396, TreeRSS: 6.4, Disk: 0.9998}},
		Fetch: results.FetchCostPair{
			GoGit: fcRun(1.368, 1.1, 60*mib, 61*mib, 529*mib), CLI: fcRun(0.398, 0.2, 12*mib, 21*mib, 530*mib),
			Ratio: results.FetchCostRatios{Wall: 3.437, CPU: 5.5, MaxRSS: 5, TreeRSS: 2.905, Disk: 0.998}},
		Polls: results.FetchCostPolls{GoGit: fcPoll(5.91, 118.61, 48*mib), GoGitList: fcPoll(30.5, 12.5, 15*mib),
			GitFetch: fcPoll(3.15, 118.2, 11*mib), LsRemote: fcPoll(5.89, 65.78, 11*mib),
			RateVsFetch: 1.877, RateVsLsRemote: 1.0038, CPUVsFetch: 1.0035, CPUVsLsRemote: 1.8032},
	}
	return results.FetchCost{
		Meta:         results.Meta{Date: "2026-11-22T00:00:00Z", Seconds: 171, Cores: 2},
		LoadStart:    5.74,
		LoadEnd:      1.2,
		GitVersion:   "git version 2.39.5",
		GoGitVersion: "v5.19.3",
		PollSeconds:  3,
		Worker:       results.FetchCostWorker{Fetchers: 10, MinIntervalSeconds: 300, TaskVCPU: 1, TaskMemoryMiB: 2048},
		Sizes:        []results.FetchCostSize{small, large},
		Notes:        []string{"Client and server share one machine."},
		Burst: &results.FetchCostBurst{Mirrors: 6, BudgetBytes: 384 * mib,
			Repo:       results.FetchCostRepo{Commits: 20000, Objects: 163624, PackBytes: 128 * mib},
			Unbudgeted: results.FetchCostBurstRun{Completed: 6, WallSeconds: 145.6, CPUSeconds: 200, TreeRSSBytes: 2022 * mib},
			Budgeted: results.FetchCostBurstRun{BudgetBytes: 384 * mib, GoMemLimitBytes: 480 * mib, Completed: 6, WallSeconds: 167.4,
				CPUSeconds: 190, TreeRSSBytes: 460 * mib, PeakReservedBytes: 368 * mib, MaxWaiting: 4},
			TreeRSSOverBudget: 460.0 / 384, TimeRatio: 167.4 / 145.6},
	}
}

func TestFetchCostSectionShowsTheJSONsNumbers(t *testing.T) {
	dir := t.TempDir()
	if err := results.Write(dir, "fetchcost", fcFixture()); err != nil {
		t.Fatal(err)
	}
	md, meta, err := fetchCostSection(&Report{Results: dir, Out: dir})
	if err != nil {
		t.Fatal(err)
	}
	if meta.Seconds != 171 {
		t.Errorf("meta = %+v", meta)
	}
	for _, want := range []string{
		"## 3. Fetch cost",
		"v5.19.3", "(2.39.5)",
		// repository table
		"| small | 1.0 MiB | 150 | 1,154 | 10 | 40 | 0.7 MiB | 250 ms |",
		"| large | 527 MiB | 20,000 | 165,778 | 407 | 3,000 | 470 MiB | 27.0 s |",
		// headline, in size order
		"- initial mirror, wall time: 0.80× / 1.20×",
		"- initial mirror, peak memory (all processes): 0.80× / 6.40×",
		"- no-change poll, CPU per poll vs `git ls-remote`: 0.25× / 1.80×",
		// per-size tables
		"### large (527 MiB pack)",
		"| Initial mirror: wall time (median of 3) | 18.1 s | 15.1 s | 1.20× |",
		"| Initial mirror: peak RSS, largest process | 332 MiB | 40.0 MiB | 8.40× |",
		"| Initial mirror: peak RSS, all processes | 333 MiB | 52.0 MiB | 6.40× |",
		"| Fetch after a small change: wall time (median of 3) | 1.37 s | 398 ms | 3.44× |",
		"| No-change poll vs `git fetch --prune`: polls/s (ratio above 1: go-git faster) | 18.5 | 3.2 | 5.74× |",
		"| No-change poll vs `git ls-remote`: CPU per poll | 118.6 ms | 65.8 ms | 1.80× |",
		"| Polling: peak RSS (go-git: the polling process; CLI: one `git fetch`) | 48.0 MiB | 11.0 MiB | 4.36× |",
		"`Remote.List`, no mirror opened): 30.5 polls/s, 12.5 ms CPU per poll",
		// interpretation, computed from the figures
		"initial mirror peak memory (large 6.40×)",
		"fetch time (large 3.44×)",
		"fetch time (small 0.57×)",
		"peaked at 333 MiB, the CLI's whole process tree at 52.0 MiB",
		"10 first mirrors of repositories like it would need about 3330 MiB",
		"the default task has 2048 MiB; 6 such clones fit",
		"large: 118.6 ms CPU per go-git poll (`git ls-remote`: 65.8 ms) → about 8.4 polls/s per task, 2,529 repos like it at one poll every 5 min",
		"On the large repository, 89 % of a no-change Sync's CPU",
		"- Client and server share one machine.",
		// burst
		"6 first mirrors of one 163,624-object repository (128 MiB pack, 20,000 commits)",
		"| peak RSS, all processes | 2022 MiB | 460 MiB |",
		"| peak memory reserved by the fetches | — | 368 MiB |",
		"Every mirror completed both times. Peak memory 1.20× the budget (goal ≤ 1.25×: met); time 1.15× that of the burst without a budget (goal ≤ 1.50×: met)",
		"ran 3.0 s each; the run took 171 s",
		"load average 5.7 at the start and 1.2 at the end, on 2 cores: other work competed",
		"![go-git / git CLI ratios per repository size](plots/fetchcost-ratios.svg)",
		"![peak memory of go-git and the git CLI against pack size](plots/fetchcost-memory.svg)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q", want)
		}
	}
	if strings.Contains(md, "NaN") || strings.Contains(md, "Inf") {
		t.Error("section shows NaN or Inf")
	}
	for _, f := range []string{"fetchcost-ratios.svg", "fetchcost-memory.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, "plots", f))
		if err != nil || !strings.Contains(string(b), "<svg") {
			t.Errorf("plot %s: %v", f, err)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}

func TestFetchCostSectionNeedsSizes(t *testing.T) {
	dir := t.TempDir()
	v := fcFixture()
	v.Sizes = nil
	if err := results.Write(dir, "fetchcost", v); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fetchCostSection(&Report{Results: dir, Out: dir}); err == nil {
		t.Fatal("a result without sizes rendered")
	}
}

func TestFcFormats(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{fcRatio(0), "—"}, {fcRatio(0.5), "0.50×"}, {fcRatio(12.4), "12×"},
		{fcSecs(0.0123), "12 ms"}, {fcSecs(2.345), "2.35 s"}, {fcSecs(12.34), "12.3 s"},
		{fcMiB(0), "—"}, {fcMiB(1536 * 1024), "1.5 MiB"}, {fcMiB(20 << 30), "20.0 GiB"},
		{fmtInt(1234567), "1,234,567"}, {fcDuration(300), "5 min"}, {fcDuration(90), "90.0 s"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	quiet := results.FetchCost{Meta: results.Meta{Cores: 2}, LoadStart: 0.4, LoadEnd: 1.9}
	if r := fcLoadRemark(quiet); r != "" {
		t.Errorf("a quiet machine got the remark %q", r)
	}
}
