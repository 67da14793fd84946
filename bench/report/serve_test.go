package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// serveFixture has two states whose figures all differ: one meets both goals, the
// other misses the clone-time goal.
func serveFixture() results.Serve {
	run := func(server string, wall, cpu float64, rss int64, hits, misses int, disk int64) results.ServeRun {
		return results.ServeRun{Server: server, Runs: 2, WallSeconds: wall, WallAll: []float64{wall, wall}, ServerCPUSeconds: cpu,
			PeakServerRSSBytes: rss, CacheHits: hits, CacheMisses: misses, CacheDiskBytes: disk}
	}
	pair := func(f, k results.ServeRun) results.ServePair {
		return results.ServePair{Front: f, Backend: k, WallRatio: f.WallSeconds / k.WallSeconds, CPURatio: f.ServerCPUSeconds / k.ServerCPUSeconds}
	}
	state := func(name string, packs int, bitmap bool, cloneFront float64) results.ServeState {
		return results.ServeState{Name: name, Packs: packs, Bitmap: bitmap,
			Clone:      pair(run("mirrorfleet serve", cloneFront, 4.2, 310<<20, 0, 2, 130<<20), run("git http-backend", 10, 4.0, 300<<20, 0, 0, 0)),
			Concurrent: pair(run("mirrorfleet serve", 31, 6.3, 420<<20, 19, 1, 131<<20), run("git http-backend", 60, 42, 2100<<20, 0, 0, 0)),
			Fetch:      pair(run("mirrorfleet serve", 0.41, 0.12, 40<<20, 0, 1, 1<<20), run("git http-backend", 0.39, 0.11, 38<<20, 0, 0, 0)),
			Shallow:    pair(run("mirrorfleet serve", 2.2, 1.1, 90<<20, 0, 2, 5<<20), run("git http-backend", 2.0, 1.0, 88<<20, 0, 0, 0)),
		}
	}
	return results.Serve{
		Meta:       results.Meta{Date: "2026-01-02T03:04:05Z", GitCommit: "abc1234", Seconds: 600, Cores: 2},
		GitVersion: "git version 2.39.5",
		Repo:       results.ServeRepo{PackBytes: 126 << 20, Commits: 5040, Refs: 730},
		Clients:    20, CloneRuns: 2, LoadStart: 1.5, LoadEnd: 2.5,
		States: []results.ServeState{state("unmaintained", 2, false, 10.8), state("maintained", 1, true, 12.5)},
		Notes:  []string{"Client and servers share one machine."},
	}
}

func TestServeSection(t *testing.T) {
	r := &Report{Results: t.TempDir(), Out: t.TempDir()}
	if err := results.Write(r.Results, "serve", serveFixture()); err != nil {
		t.Fatal(err)
	}
	md, meta, err := serveSection(r)
	if err != nil {
		t.Fatal(err)
	}
	if meta.GitCommit != "abc1234" {
		t.Errorf("meta %+v", meta)
	}
	for _, want := range []string{
		"## 7. Serving clones",
		"126 MiB of packs, 5,040 commits, 730 refs",
		"- **unmaintained:** cold clone 1.08× http-backend's time (meets the 1.1× goal); 20 concurrent clones 0.15× its server CPU (meets the 0.2× goal).",
		"- **maintained:** cold clone 1.25× http-backend's time (misses the 1.1× goal)",
		"### unmaintained mirror (pack files: 2, no bitmap)",
		"### maintained mirror (pack files: 1, bitmap)",
		"| cold full clone (median of 2) | 10.8 s | 10.0 s | 1.08× | 4.20 s | 4.00 s | 1.05× | 310 MiB | 300 MiB | 0 / 2 (0 %) | 130 MiB |",
		"| 20 identical clones at once | 31.0 s | 60.0 s | 0.52× | 6.30 s | 42.0 s | 0.15× | 420 MiB | 2100 MiB | 19 / 20 (95 %) | 131 MiB |",
		"| fetch after a small change | 410 ms | 390 ms | 1.05× |",
		"| shallow clone, depth 1 (median of 2) | 2.20 s | 2.00 s | 1.10× |",
		"Load average 1.5 at the start, 2.5 at the end, on 2 cores; the run took 10 min.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q\n%s", want, md)
		}
	}
	os.Remove(filepath.Join(r.Results, "serve.json"))
	if _, _, err := serveSection(r); err == nil {
		t.Error("no error without serve.json")
	}
}

// The slow-client part (issue 23): the clone meets the goal, the fetch misses it.
func TestServeSectionSlowClient(t *testing.T) {
	v := serveFixture()
	v.Slow = &results.ServeSlow{RateBytesPerSecond: 8 << 10, Runs: 2,
		Clone: results.ServeSlowOp{What: "git clone --mirror", ResponseBytes: 126 << 20, AloneSeconds: 3.1, WithSlowSeconds: 2.9, Ratio: 2.9 / 3.1, SlowBytes: 40 << 10},
		Fetch: results.ServeSlowOp{What: "v2 fetch", ResponseBytes: 60 << 20, AloneSeconds: 1.0, WithSlowSeconds: 1.5, Ratio: 1.5, SlowBytes: 12 << 10}}
	r := &Report{Results: t.TempDir(), Out: t.TempDir()}
	if err := results.Write(r.Results, "serve", v); err != nil {
		t.Fatal(err)
	}
	md, _, err := serveSection(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### One slow client",
		"The maintained mirror, a fresh front",
		"reading at 8.0 KiB/s",
		"(median of 2). Goal: at most 1.1× the time alone.",
		"| git clone --mirror | 126 MiB | 3.10 s | 2.90 s | 0.94× | meets | 40.0 KiB |",
		"| v2 fetch | 60.0 MiB | 1.00 s | 1.50 s | 1.50× | misses | 12.0 KiB |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q\n%s", want, md)
		}
	}
	v.Slow = nil
	results.Write(r.Results, "serve", v)
	if md, _, _ := serveSection(r); strings.Contains(md, "One slow client") {
		t.Error("a slow-client part without its results")
	}
}
