package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// tickFixture has two sizes and two worker counts; every figure differs, so a table
// that shows the wrong cell's number fails.
func tickFixture() results.TickLatency {
	lat := func(p50, p99, read, writes float64, n int) results.Latency {
		return results.Latency{Samples: n, P50Ms: p50, P99Ms: p99, MeanMs: p50 * 1.1, MaxMs: p99, ReposRead: read, Writes: writes}
	}
	cell := func(repos, workers int, base float64) results.TickCell {
		c := results.TickCell{Repos: repos, Workers: workers,
			Quiet:      lat(0.137+base, 1.75+base, 0, 0, 200),
			NaiveQuiet: lat(12.6*float64(repos)/1000+base, 19.4*float64(repos)/1000+base, float64(repos), 0, 30),
			FullScan:   lat(11.3*float64(repos)/1000+base, 15.2*float64(repos)/1000+base, float64(repos), 0, 30),
			Join: results.Membership{Latency: lat(22.4+base, 31.7+base, float64(repos)*0.64, 4, 8),
				Moved: float64(repos / (workers + 1)), UsPerMovedP50: 243 + base},
			Death: results.Membership{Latency: lat(6.41+base, 9.87+base, float64(repos/workers)+0.5, 4, 8),
				Moved: float64(repos/workers) + 0.5, UsPerMovedP50: 71.5 + base, Ticks: 3, SlowestTickMs: 2.25 + base},
		}
		c.Quiet.SweepRead = 0.62 * float64(repos) / 1000
		c.Join.SweepRead = float64(workers) / 4
		for i, k := range []int{10, 100, 1000} {
			f := float64(i + 1)
			c.Changes = append(c.Changes,
				results.ChangeLatency{Kind: "add", K: k, Latency: lat(0.789*f*f+base, 7.24*f+base, float64(k), 1+f, 50), Decisions: float64(k)},
				results.ChangeLatency{Kind: "delete", K: k, Latency: lat(0.655*f*f+base, 6.12*f+base, float64(k), 2+f, 40), Decisions: float64(k)})
		}
		return c
	}
	return results.TickLatency{
		Meta:    results.Meta{Date: "2026-01-02T03:04:05Z", GitCommit: "abc1234", Seconds: 143},
		Seed:    7,
		Store:   "bbolt (NoSync, temp dir)",
		Repos:   []int{1000, 100000},
		Workers: []int{10, 100},
		NotRun:  []string{"1000000 repos: over -max-repos 100000"},
		Kinds: []results.ChangeKind{{Name: "add", Description: "k repos added"},
			{Name: "delete", Description: "k repos deleted"}},
		Notes: []string{"Only Tick is timed."},
		Setup: []results.SetupTiming{{Store: "bbolt", Repos: 1000, Seconds: 0.12}, {Store: "bbolt", Repos: 100000, Seconds: 13.94},
			{Store: "bbolt", Repos: 100000, Workers: 10, Seconds: 12.46}, {Store: "bbolt", Repos: 100000, Workers: 100, Seconds: 14.29}},
		Cells: []results.TickCell{
			cell(1000, 10, 0), cell(1000, 100, 5.001), cell(100000, 10, 0.021), cell(100000, 100, 5.002),
		},
		Dynamo: &results.TickDynamo{Cells: []results.TickCell{cell(1000, 10, 3.333), cell(5000, 10, 4.444)}},
	}
}

func renderTick(t *testing.T, v results.TickLatency) (string, *Report) {
	t.Helper()
	r := &Report{Results: t.TempDir(), Out: t.TempDir()}
	if err := results.Write(r.Results, "ticklatency", v); err != nil {
		t.Fatal(err)
	}
	md, meta, err := tickLatencySection(r)
	if err != nil {
		t.Fatal(err)
	}
	if meta != v.Meta {
		t.Errorf("meta %+v, want %+v", meta, v.Meta)
	}
	return md, r
}

func TestTickLatencySectionShowsTheNumbers(t *testing.T) {
	md, r := renderTick(t, tickFixture())
	if !strings.HasPrefix(md, "## 5. Coordinator tick latency\n") {
		t.Errorf("section starts %q", md[:min(len(md), 40)])
	}
	for _, want := range []string{
		// quiet table: p50, p99, repos read, sweep read, naive p50/p99/read, full scan, naive/ours
		"| 1,000 | 10 | 200 | 0.137 | 1.75 | 0% | 0 | 0.6 | 12.6 | 19.4 | 1,000 | 11.3 | 92× |",
		"| 100,000 | 100 | 200 | 5.14 | 6.75 | 0% | 0 | 62 | 1265 | 1945 | 100,000 | 1135 | 246× |",
		// add table at 1,000 × 10: k = 0 is the quiet tick, then k = 10, 100, 1000
		"| 1,000 | 10 | 0.137 / 1.75 | 0.789 / 7.24 | 3.16 / 14.5 | 7.10 / 21.7 | 4 | 50, 50, 50 |",
		// delete table at 100,000 × 10
		"| 100,000 | 10 | 0.158 / 1.77 | 0.676 / 6.14 | 2.64 / 12.3 | 5.92 / 18.4 | 5 | 40, 40, 40 |",
		// join and death at 100,000 × 100: moved, read, read / moved, sweep read, ticks,
		// p50, p99, slowest tick (a one-tick change's is its slowest sample), µs per moved
		"| 100,000 | 100 | join | 990 | 64,000 | 65× | 25 | 1 | 27.4 | 36.7 | 36.7 | 248 | 8 |",
		"| 100,000 | 100 | death | 1,000.5 | 1,000.5 | 1.0× | 0 | 3 | 11.4 | 14.9 | 7.25 | 76.5 | 8 |",
		// DynamoDB Local row starts with its quiet tick, its worker reads and adds
		"| 1,000 | 10 | 3.47 / 5.08 | 0% | 4.12 / 10.6 |",
		// and compares its sizes: quiet 3.47 → 4.58 ms, naive 15.9 → 67.4 ms
		"From 1,000 to 5,000 repos at 10 workers the quiet tick's p50 goes from 3.47 ms to 4.58 ms (1.3×), the naive tick's from 15.9 ms to 67.4 ms (4.2×).",
		"**Not run:** 1000000 repos: over -max-repos 100000.",
		"- Only Tick is timed.",
		"- At 100,000 repos, creating the repos took 13.9 s and joining the workers and assigning the repos 12.5 s at 10 workers, 14.3 s at 100 workers.",
		"- Seed 7; the run took 143 s.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q", want)
		}
	}
	for _, w := range []string{"10", "100"} {
		file := "ticklatency-" + w + "-workers.svg"
		if !strings.Contains(md, "(plots/"+file+")") {
			t.Errorf("section does not show %s", file)
		}
		svg, err := os.ReadFile(filepath.Join(r.Out, "plots", file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(svg), "<svg") || !strings.Contains(string(svg), "naive tick") {
			t.Errorf("%s is not the chart with the naive baseline", file)
		}
	}
}

func TestTickLatencyConclusionFollowsTheData(t *testing.T) {
	v := tickFixture()
	md, _ := renderTick(t, v)
	for _, want := range []string{
		"At 10 workers, from 1,000 to 100,000 repos (100× more)",
		"the quiet tick's p50 goes from 0.137 ms to 0.158 ms (1.2×)",
		"the naive tick's goes from 12.6 ms to 1260 ms (100×)",
		"flat in the number of repos",
		"0.158 ms at k = 0, 0.810 ms at k = 10, 3.18 ms at k = 100, 7.12 ms at k = 1,000 (about 6.96 µs per decision)",
		"a join reads 64,000 repos to move 9,090 (7.0× as many)",
		"**A membership change reads up to 65× what it moves**", // 64,000 read for 990 moved at 100 workers
		// quiet ticks across workers at the largest size measured at both: 0.158 → 5.139 ms
		"at 100,000 repos, 0.158 ms at 10 workers and 5.14 ms at 100 (33×; the goal is at most 3×)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("conclusion lacks %q", want)
		}
	}
	if strings.Contains(md, "grows with the number of repos") || strings.Contains(md, "read what they move") {
		t.Error("flat data reported as growing, or a 7× read as reading what moves")
	}

	// Joins that read what they move are said to.
	w := tickFixture()
	for i := range w.Cells {
		w.Cells[i].Join.ReposRead = w.Cells[i].Join.Moved
	}
	md, _ = renderTick(t, w)
	if !strings.Contains(md, "Joins and deaths read what they move") {
		t.Error("joins reading what they move not said")
	}
	// The goal is 1.5 × moved + 100: a small change may read its 100 more and meet it,
	// not one more.
	for _, c := range []struct {
		read float64
		met  bool
	}{{175, true}, {176, false}} {
		for i := range w.Cells {
			w.Cells[i].Death.Moved, w.Cells[i].Death.ReposRead = 50, c.read
		}
		md, _ = renderTick(t, w)
		if strings.Contains(md, "Joins and deaths read what they move") != c.met {
			t.Errorf("deaths reading %g for 50 moved: goal met %v not said so", c.read, c.met)
		}
	}

	// One that grows by fractions of a millisecond, far less than the repos, is said to
	// grow slowly.
	s := tickFixture()
	for i := range s.Cells {
		if s.Cells[i].Repos == 100000 {
			s.Cells[i].Quiet.P50Ms = 0.5
		}
	}
	md, _ = renderTick(t, s)
	if !strings.Contains(md, "grows slowly with the number of repos") || strings.Contains(md, "**The quiet tick grows") {
		t.Error("a slowly growing quiet tick not said so")
	}

	// A quiet tick that grows tenfold with the repos must be called out.
	for i := range v.Cells {
		if v.Cells[i].Repos == 100000 {
			v.Cells[i].Quiet.P50Ms *= 10
		}
	}
	md, _ = renderTick(t, v)
	if !strings.Contains(md, "**The quiet tick grows with the number of repos**") || strings.Contains(md, "flat in the number of repos") {
		t.Error("growing quiet ticks not called out")
	}
	if !strings.Contains(md, "by the anti-entropy sweep's paced slices: up to 62 repo records a tick") ||
		strings.Contains(md, "which the indexes should prevent") {
		t.Error("quiet ticks that read nothing of their own grow by the sweep's reads: not said so")
	}
	// Reads of its own are the indexes' failure.
	for i := range v.Cells {
		v.Cells[i].Quiet.ReposRead = 3
	}
	md, _ = renderTick(t, v)
	if !strings.Contains(md, "which the indexes should prevent") {
		t.Error("quiet ticks growing with reads of their own not blamed on the indexes")
	}
}

func TestTickLatencyDynamoSkipped(t *testing.T) {
	v := tickFixture()
	v.Dynamo = &results.TickDynamo{Skipped: "MIRRORFLEET_DYNAMODB_ENDPOINT not set"}
	md, _ := renderTick(t, v)
	if !strings.Contains(md, "### On DynamoDB Local\n\nNot run: MIRRORFLEET_DYNAMODB_ENDPOINT not set.") {
		t.Error("skipped DynamoDB grid not explained")
	}
}

// A sparse grid (1M repos only at 100 and 1,000 workers) compares each worker count over
// the sizes it has, and the workers at the largest size that has the fewest and the most.
func TestTickLatencySparseGrid(t *testing.T) {
	v := tickFixture()
	v.Repos, v.Workers, v.NotRun = []int{1000, 100000, 1000000}, []int{10, 100, 1000}, nil
	big := func(w int, p50 float64) results.TickCell {
		c := v.Cells[3]
		c.Repos, c.Workers, c.Quiet.P50Ms = 1000000, w, p50
		return c
	}
	v.Cells = append(v.Cells, big(100, 6.5), big(1000, 9.25))
	x := v.Cells[2]
	x.Workers, x.Quiet.P50Ms = 1000, 0.4
	v.Cells = append(v.Cells, x)
	md, _ := renderTick(t, v)
	for _, want := range []string{
		"at 100 workers, from 1,000 to 1,000,000 repos (1000× more)",
		"at 1,000 workers, from 100,000 to 1,000,000 repos (10× more)",
		"at 100,000 repos, 0.158 ms at 10 workers and 0.400 ms at 1,000 (2.5×; the goal is at most 3×)",
		"quiet ticks grow little",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("sparse grid conclusion lacks %q", want)
		}
	}
}

func TestTickLatencyBulkAddAndHeap(t *testing.T) {
	v := tickFixture()
	v.BulkAdd = []results.TickBulkAdd{
		{Store: "bbolt", Repos: 1000000, Workers: 100, TicksUntilAssigned: 26, Ticks: 28, SlowestTickMs: 4321, TicksCut: 19, PeakHeapMiB: 187.5, Seconds: 95},
		{Store: "DynamoDB Local", Repos: 100000, Workers: 100, TicksUntilAssigned: 9, Ticks: 11, SlowestTickMs: 8765, TicksCut: 3, PeakHeapMiB: 41.25, Seconds: 240},
	}
	for i := range v.Cells {
		v.Cells[i].Quiet.PeakHeapMiB = 10 + float64(i)
		v.Cells[i].Join.PeakHeapMiB = 20 + float64(i)
	}
	md, _ := renderTick(t, v)
	for _, want := range []string{
		"| bbolt | 1,000,000 | 100 | 26 | 28 | 19 | 4321 | 188 | 95 |",
		"| DynamoDB Local | 100,000 | 100 | 9 | 11 | 3 | 8765 | 41.2 | 240 |",
		"The slowest tick of any bulk add took 8.77 s (DynamoDB Local, 100,000 repos, 100 workers); the largest heap was 188 MiB (bbolt, 1,000,000 repos, 100 workers).",
		"| 100,000 | 100 | 13.0 | 0.000 | 23.0 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q", want)
		}
	}
	if md, _ := renderTick(t, tickFixture()); strings.Contains(md, "### Bulk add") || strings.Contains(md, "### Peak heap") {
		t.Error("bulk add or heap sections without data")
	}
}

// The restart paragraph gives each store's time to its next heartbeat and longest gap and
// says whether the worst is within one heartbeat interval, by the data.
func TestTickLatencyRestartBacklog(t *testing.T) {
	v := tickFixture()
	v.RestartBacklog = []results.RestartBacklog{
		{Store: "bbolt", Entries: 100000, HeartbeatS: 10, Heartbeats: 6, NextHeartbeatS: 0.02, FirstCallS: 0.41, LongestCallS: 1.2, LongestGapS: 1.21, Applied: 100000, CaughtUp: true, EntriesPerSecond: 20000, Seconds: 5},
		{Store: "DynamoDB Local", Entries: 100000, HeartbeatS: 10, Heartbeats: 40, NextHeartbeatS: 0.35, FirstCallS: 5.3, LongestCallS: 5.61, LongestGapS: 5.7, Applied: 61000, EntriesPerSecond: 300, Seconds: 300},
	}
	v.Cells[0].QuietWorkerReads = 0.07
	v.Dynamo.Cells[0].QuietWorkerReads = 0.2
	md, _ := renderTick(t, v)
	for _, want := range []string{"### A worker restarted under a backlog", "| 1,000 | 10 | 200 | 0.137 | 1.75 | 7% |", "| 1,000 | 10 | 3.47 / 5.08 | 20% |", "| DynamoDB Local | 100,000 | 40 | 0.35 | 5.30 | 5.61 | 5.70 | 10 | no (61,000 acked) |",
		"The next heartbeat after the restart came after 0.35 s and the longest gap was 5.70 s, on DynamoDB Local: within one heartbeat interval (10 s)."} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	v.RestartBacklog[1].LongestGapS = 12
	if md, _ := renderTick(t, v); !strings.Contains(md, "longest gap was 12.00 s, on DynamoDB Local: **not** within one heartbeat interval") {
		t.Error("a gap over the interval is not called out")
	}
	v.RestartBacklog[1].LongestGapS, v.RestartBacklog[1].NextHeartbeatS = 5.7, 11
	if md, _ := renderTick(t, v); !strings.Contains(md, "**not** within one heartbeat interval") {
		t.Error("a first heartbeat later than the interval is not called out")
	}
	v.RestartBacklog = nil
	if md, _ := renderTick(t, v); strings.Contains(md, "restarted under a backlog") {
		t.Error("a run without the measurement still has its paragraph")
	}
}
