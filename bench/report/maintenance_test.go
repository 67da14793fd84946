package main

import (
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// maintFixture: an unchanged mirror read nothing, a changed one read its new pack, a
// scrub read the old pack through.
func maintFixture() results.Maintenance {
	old := results.MaintenanceFile{Path: "objects/pack/pack-a.pack", Size: 64 << 20, Read: 64 << 20, OldPack: true}
	return results.Maintenance{
		Meta:       results.Meta{Date: "2026-01-02T03:04:05Z", GitCommit: "abc1234", Seconds: 60, Cores: 2},
		GitVersion: "git version 2.39.5", PageCache: "mincore",
		Repo: results.MaintenanceRepo{PackBytes: 64 << 20, Commits: 2600, Refs: 120, SmallPacks: 3},
		Scenarios: []results.MaintenanceScenario{
			{Name: "poll, no change", Description: "a poll", ReadBytes: 2021, OldPackBytes: 64 << 20, CPUSeconds: 0.006},
			{Name: "maintenance, unchanged", Description: "nothing changed", ReadBytes: 2021, OldPackBytes: 64 << 20, CPUSeconds: 0.0005},
			{Name: "maintenance, changed", Description: "after 3 fetches", GitRuns: 5, ReadBytes: 1 << 20, OldPackBytes: 64 << 20, CPUSeconds: 0.05,
				Steps: []results.MaintenanceStep{{Name: "midx-write", Command: "git multi-pack-index write", ReadBytes: 160 << 10, CPUSeconds: 0.008, Why: "idx files only"}}},
			{Name: "scrub", Description: "full run", GitRuns: 4, ReadBytes: 200 << 20, OldPackReadBytes: 192 << 20, OldPackBytes: 64 << 20, CPUSeconds: 0.9,
				Steps: []results.MaintenanceStep{{Name: "fsck", Command: "git fsck --connectivity-only --no-dangling", ReadBytes: 65 << 20, OldPackReadBytes: 64 << 20,
					CPUSeconds: 0.3, Files: []results.MaintenanceFile{old}, Why: "walks everything"}}},
		},
		Throughput: results.MaintenanceThroughput{UnchangedRuns: 2000, UnchangedCPUSeconds: 1.0 / 6000, UnchangedPerCPUSecond: 6000,
			ChangedRuns: 8, ChangedCPUSeconds: 1.0 / 30, ChangedPerCPUSecond: 30, ScrubCPUSeconds: 0.9, ScrubPerCPUSecond: 1.1, OldDailyCPUSeconds: 0.6},
		Schedule: results.MaintenanceSchedule{Repos: 1_000_000, Workers: 10, WorkerVCPU: 0.25, ChangedShare: 0.0173, ScrubDays: 90,
			UnchangedPerDay: 971556, ChangedPerDay: 17333, ScrubsPerDay: 11111, CPUSecondsPerDay: 10800, CapacityCPUSecondsPerDay: 216000,
			Share: 0.05 / 5, OldCPUSecondsPerDay: 600000, OldShare: 2.78},
		NewerGit: []string{"git 2.47 adds incremental multi-pack indexes."},
		Notes:    []string{"Reads are pages found in the page cache."},
	}
}

func TestMaintenanceSection(t *testing.T) {
	r := &Report{Results: t.TempDir(), Out: t.TempDir()}
	if err := results.Write(r.Results, "maintenance", maintFixture()); err != nil {
		t.Fatal(err)
	}
	md, meta, err := maintenanceSection(r)
	if err != nil {
		t.Fatal(err)
	}
	if meta.GitCommit != "abc1234" {
		t.Errorf("meta %+v", meta)
	}
	for _, want := range []string{
		"## 8. Keeping cold mirrors cold",
		"(git version 2.39.5; a generated mirror of 64.0 MiB of packs, 2,600 commits, 120 refs)",
		"| maintenance, unchanged | 0 | 2.0 KiB | 0 B of 64.0 MiB | 0 ms | nothing changed |",
		"| scrub | 4 | 200.0 MiB | 192.0 MiB of 64.0 MiB | 900 ms | full run |",
		"| maintenance, changed | `git multi-pack-index write` | 160.0 KiB | none | 8 ms | idx files only |",
		"| scrub | `git fsck --connectivity-only --no-dangling` | 65.0 MiB | 64.0 MiB of 64.0 MiB | 300 ms | walks everything |",
		"One CPU-second maintains 6000 unchanged mirrors (0.17 ms each, over 2000 runs)",
		"or 30.0 changed ones",
		"**Schedule at 1,000,000 repos** on the stack's 10 workers of 0.25 vCPU (216000 CPU-seconds a day): 971556 unchanged, 17333 changed (1.73 %) and 11111 scrubs (one per 90 days) a day need 10800 CPU-seconds, 1 % of the workers' CPU; the old daily run on every mirror needed 600000, 278 %.",
		"- git 2.47 adds incremental multi-pack indexes.",
		"- Reads are pages found in the page cache.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q\n%s", want, md)
		}
	}
}
