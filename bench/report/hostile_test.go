package main

import (
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// hostileFixture has distinct figures, one attack not refused and one chaos run that
// lost a repo, so the test can tell the report shows what the JSON says.
func hostileFixture() results.Hostile {
	return results.Hostile{
		Meta:   results.Meta{Date: "2026-11-25T08:00:00Z", GitCommit: "abc1234", Seconds: 321},
		Limits: []results.HostileLimit{{Name: "--max-pack-bytes", Value: "256M (default 8G)"}},
		Upstreams: []results.HostileAttack{
			{Name: "lying-count", What: "a pack header claiming 2^31−1 objects", Refused: true, Outcome: "over_limit",
				Detail: "over_limit: pack declares 2147483647 objects", Seconds: 0.13, HeapPeakMiB: 3.4, RSSPeakMiB: 22.7},
			{Name: "endless-pack", What: "blobs without end", Refused: true, Outcome: "over_limit", Seconds: 8.74, HeapPeakMiB: 43.6},
			{Name: "odd-one", What: "something new", Refused: false, Outcome: "synced (not refused)", Seconds: 2.5, HeapPeakMiB: 77.7},
		},
		List: results.HostileList{Bytes: 20_000_058, PackBytes: 20_111, Lines: 10_000_002, BadLines: 10_000_000, Kept: 50, Applied: 2,
			Seconds: 12.3, HeapPeakMiB: 11.7, RSSPeakMiB: 32.8},
		Clients: []results.HostileAttack{
			{Name: "slowloris", What: "5000 connections never ending their headers", Refused: true, Outcome: "closed by the server",
				Detail: "an honest GET /v1/status during the attack: 200 after 9.8 s", Seconds: 10.4, HeapPeakMiB: 8.2, Sent: 5000, Handled: 5000},
		},
		Chaos: []results.HostileChaos{
			{Store: "bbolt", Rounds: 24, Kills: map[string]int{"popped/clone": 2, "reported/fetch": 3}, Restarts: 22, CoordinatorCrashes: 17,
				StoreErrors: map[string]int{}, Repos: 184},
			{Store: "DynamoDB Local, 25% of calls throttled", Rounds: 25, Kills: map[string]int{"popped/clone": 1}, Restarts: 21,
				CoordinatorCrashes: 18, StoreCalls: 12290, Throttled: 2644, StoreErrors: map[string]int{"heartbeat": 72, "tick": 42},
				Repos: 185, Lost: 1},
		},
		Notes: []string{"The attacker runs in the measured process."},
	}
}

func TestHostileSectionShowsTheJSON(t *testing.T) {
	v := hostileFixture()
	r := &Report{Results: t.TempDir(), Out: t.TempDir()}
	if err := results.Write(r.Results, "hostile", v); err != nil {
		t.Fatal(err)
	}
	md, meta, err := hostileSection(r)
	if err != nil {
		t.Fatal(err)
	}
	if meta != v.Meta {
		t.Errorf("meta %+v", meta)
	}
	for _, want := range []string{
		"## 6. Hostile inputs",
		"**4 of 5 attacks refused; the highest heap peak under any was 78 MiB (`odd-one`); chaos: 2 runs, 1 repos lost.**",
		"| `lying-count` | a pack header claiming 2^31−1 objects | yes | `over_limit` | 130 ms | 3.4 MiB | 23 MiB |",
		"| `odd-one` | something new | **no** | `synced (not refused)` | 2.5 s | 78 MiB | — |",
		"- `lying-count`: over_limit: pack declares 2147483647 objects",
		"10,000,002 lines in 19.1 MiB (19.6 KiB in git)", "counted 10,000,000 bad lines, kept 50", "heap peak 12 MiB, RSS peak 33 MiB",
		"| `slowloris` | 5000 connections never ending their headers | yes | 5,000 | 5,000 | closed by the server | 10.4 s | 8.2 MiB | — |",
		"`slowloris`: an honest GET /v1/status during the attack: 200 after 9.8 s",
		"| bbolt | ±0 s | 24 | 5 | 22 | 17 | — | 0 | 184 | **0** | 0 | 0 | held |",
		"| DynamoDB Local, 25% of calls throttled | ±0 s | 25 | 1 | 21 | 18 | 2,644 of 12,290 | 114 | 185 | **1** | 0 | 0 | held |",
		"`popped/clone` 2, `reported/fetch` 3.",
		"| `--max-pack-bytes` | 256M (default 8G) |",
		"- The benchmark ran for 321 s.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q\n%s", want, md)
		}
	}
}

// The serving attacks (issue 23) with their goals: one met, one missed, one not run.
func TestHostileSectionShowsServing(t *testing.T) {
	v := hostileFixture()
	v.Serving = &results.HostileServing{MirrorBytes: 35 << 20, PeakFrontRSSMiB: 300.4, Scenarios: []results.HostileServe{
		{Name: "abandoned", What: "100 fetches dropped", Sent: 100, Refused: 12, Outcome: "0 git processes 5 s after the clients left",
			Detail: "an honest clone: 200", Seconds: 7.25, FrontRSSPeakMiB: 61.2, GitProcessesAfter: 0},
		{Name: "filter-spam", What: "1500 clones", Sent: 1500, Outcome: "at most 900 cache files", Seconds: 95, FrontRSSPeakMiB: 300.4,
			GitProcessesAfter: -1, CacheFilesPeak: 900, CacheEntryBound: 500},
	}}
	r := &Report{Results: t.TempDir(), Out: t.TempDir()}
	if err := results.Write(r.Results, "hostile", v); err != nil {
		t.Fatal(err)
	}
	md, _, err := hostileSection(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### Clients of the git front",
		"(35.0 MiB mirror",
		"0 git processes 5 s after abandoned requests (0: meets the goal)",
		"at most 256 MiB over every attack (300 MiB: **misses the goal**)",
		"(900 files for a bound of 500, 1.80×: meets the goal)",
		"| `abandoned` | 100 fetches dropped | 100 | 12 | 0 git processes 5 s after the clients left | 0 | 7.2 s | 61 MiB |",
		"| `filter-spam` | 1500 clones | 1,500 | 0 | at most 900 cache files | — | 95.0 s | 300 MiB |",
		"`abandoned`: an honest clone: 200",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q\n%s", want, md)
		}
	}
	// Results from before the serving attacks have no such part.
	v.Serving = nil
	results.Write(r.Results, "hostile", v)
	if md, _, _ := hostileSection(r); strings.Contains(md, "Clients of the git front") {
		t.Error("a serving part without serving results")
	}
}
