package main

import (
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestPercentile(t *testing.T) {
	t.Parallel()
	seq := func(n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(n - i) // descending: the helper must sort
		}
		return xs
	}
	for _, c := range []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{[]float64{7}, 50, 7},
		{[]float64{7}, 99, 7},
		{seq(100), 50, 50},
		{seq(100), 99, 99},
		{seq(100), 100, 100},
		{seq(10), 50, 5},
		{seq(10), 99, 10}, // under 100 samples p99 is the maximum
		{seq(200), 99, 198},
		{[]float64{3, 1, 2}, 50, 2},
	} {
		if got := percentile(c.xs, c.p); got != c.want {
			t.Errorf("percentile(%v, %g) = %g, want %g", c.xs, c.p, got, c.want)
		}
	}
	if !math.IsNaN(percentile(nil, 50)) {
		t.Error("percentile of no samples should be NaN")
	}
	xs := []float64{3, 1, 2}
	percentile(xs, 50)
	if !slices.Equal(xs, []float64{3, 1, 2}) {
		t.Errorf("percentile reordered its input: %v", xs)
	}
}

func boltFleet(t *testing.T) *fleet {
	t.Helper()
	st, err := bolt.OpenWith(filepath.Join(t.TempDir(), "store.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newFleet(st, 1)
}

// settledFleet is a bbolt fleet set up with repos repos on workers workers.
func settledFleet(t *testing.T, repos, workers int) *fleet {
	t.Helper()
	f := boltFleet(t)
	if _, err := f.setup(t.Context(), repos, workers, true); err != nil {
		t.Fatal(err)
	}
	return f
}

// checkSettled verifies that the store holds exactly repos repos, all owned by the
// ring owner of their key, and workers active workers that make up the ring.
func checkSettled(t *testing.T, f *fleet, repos, workers int) {
	t.Helper()
	ctx := t.Context()
	counts, err := f.st.CountRepos(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	if total != repos || counts[store.RepoPending] != 0 {
		t.Errorf("repo counts %v: want %d repos, none pending", counts, repos)
	}
	ws, err := f.st.ListWorkers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	active := 0
	for _, w := range ws {
		if w.State == store.WorkerActive {
			active++
		}
	}
	if active != workers || len(ws) != workers {
		t.Errorf("%d workers, %d active: want %d, all active", len(ws), active, workers)
	}
	sr, err := f.st.GetRing(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rg, err := ring.FromStore(sr)
	if err != nil {
		t.Fatal(err)
	}
	if rg.Len() != workers {
		t.Errorf("ring has %d members, want %d", rg.Len(), workers)
	}
	all, err := scanAll(ctx, f.st)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != repos {
		t.Errorf("scan found %d repos, want %d", len(all), repos)
	}
	for _, r := range all {
		if want, _ := rg.Owner(ring.KeyHash(store.RingKey(r.URL, r.Salt))); r.Owner != want {
			t.Fatalf("repo %s owned by %q, ring says %q", r.ID, r.Owner, want)
		}
	}
}

func TestSetupProducesASettledFleet(t *testing.T) {
	t.Parallel()
	f := settledFleet(t, 1500, 7)
	ctx := t.Context()
	checkSettled(t, f, 1500, 7)
	// A settled fleet's tick reads no repo and writes nothing.
	ts, err := quietTicks(ctx, f, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range ts {
		if tr.read != 0 || tr.rep.Writes != 0 || tr.dur <= 0 {
			t.Errorf("quiet tick read %d repos, wrote %d times, took %v", tr.read, tr.rep.Writes, tr.dur)
		}
	}
}

func TestChangeTicksDecideExactlyK(t *testing.T) {
	t.Parallel()
	f := settledFleet(t, 300, 5)
	ctx := t.Context()
	// What the tick will find: k new repos waiting in the needs-decision index.
	if _, err := f.createRepos(ctx, 25); err != nil {
		t.Fatal(err)
	}
	need, _, err := f.st.ListReposNeedingDecision(ctx, store.NeedOwner, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(need) != 25 {
		t.Fatalf("%d repos need a decision, want 25", len(need))
	}
	if _, err := f.settle(ctx, 10); err != nil {
		t.Fatal(err)
	}
	adds, dels, err := changeTicks(ctx, f, 40, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(adds) != 2 || len(dels) != 2 {
		t.Fatalf("%d add and %d delete ticks, want 2 each", len(adds), len(dels))
	}
	for i := range adds {
		a, d := adds[i].rep, dels[i].rep
		if a.Assigned != 40 || a.Moved != 40 || d.Deleted != 40 || adds[i].read != 40 || dels[i].read != 40 {
			t.Errorf("round %d: add assigned %d moved %d read %d; delete deleted %d read %d: want 40 each",
				i, a.Assigned, a.Moved, adds[i].read, d.Deleted, dels[i].read)
		}
	}
	if _, err := f.settle(ctx, 10); err != nil {
		t.Fatal(err)
	}
	checkSettled(t, f, 325, 5)
}

func TestMembershipTicksMoveAboutOneNth(t *testing.T) {
	t.Parallel()
	const repos, workers = 1200, 4
	f := settledFleet(t, repos, workers)
	ctx := t.Context()
	joins, deaths, err := membershipTicks(ctx, f, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range joins {
		// A join takes exactly 1/(n+1) of the key space; a death moves the victim's repos.
		j, d := joins[i].total(), deaths[i].total()
		if j.rep.Moved < repos/(workers+1)/2 || j.rep.Moved > repos/(workers+1)*2 {
			t.Errorf("join %d moved %d repos, want about %d", i, j.rep.Moved, repos/(workers+1))
		}
		if d.rep.Moved < repos/(workers+1)/2 || d.rep.Moved > repos/(workers+1)*2 {
			t.Errorf("death %d moved %d repos, want about %d", i, d.rep.Moved, repos/(workers+1))
		}
		// The store served the change what moves; the sweep's slice waits for the next tick.
		if d.read != d.rep.Moved || d.rep.SweepRead != 0 {
			t.Errorf("death %d read %d repos (%d by the sweep), moved %d: it should read only the dead worker's",
				i, d.read, d.rep.SweepRead, d.rep.Moved)
		}
		if j.read < j.rep.Moved || float64(j.read) > 1.5*float64(j.rep.Moved)+100 {
			t.Errorf("join %d read %d repos but moved %d", i, j.read, j.rep.Moved)
		}
	}
	checkSettled(t, f, repos, workers)
}

// A join or death that moves more than a tick's caps is followed over its ticks, and
// summed: every tick but the last leaves scans, and together they read what they move.
func TestMembershipChangeOverSeveralTicks(t *testing.T) {
	t.Parallel()
	const repos, workers = 1200, 4
	f := settledFleet(t, repos, workers)
	ctx := t.Context()
	f.coord.Config.MaxMoves, f.coord.Config.ReadPage = 60, 30
	joins, deaths, err := membershipTicks(ctx, f, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []change{joins[0], deaths[0]} {
		tot := c.total()
		if len(c) < 2 || c[len(c)-1].rep.ScansLeft != 0 || c[0].rep.ScansLeft == 0 ||
			tot.rep.Moved < repos/(workers+1)/2 || float64(tot.read-tot.rep.SweepRead) > 1.5*float64(tot.rep.Moved)+100 {
			t.Errorf("change of %d ticks (scans left after the first: %d): moved %d, read %d (%d by the sweep)",
				len(c), c[0].rep.ScansLeft, tot.rep.Moved, tot.read, tot.rep.SweepRead)
		}
	}
	m := membership(deaths)
	if m.Samples != 1 || m.Ticks < 2 || m.SlowestTickMs <= 0 || m.SlowestTickMs > m.MaxMs || m.Moved != float64(deaths[0].total().rep.Moved) {
		t.Errorf("death summary %+v", m)
	}
	checkSettled(t, f, repos, workers)
}

func TestBaselineReadsEveryRepo(t *testing.T) {
	t.Parallel()
	f := settledFleet(t, 700, 3)
	ctx := t.Context()
	naive, scans, err := baseline(ctx, f, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range naive {
		if naive[i].read != 700 || scans[i].read != 700 {
			t.Errorf("naive tick read %d, scan read %d: want 700 each", naive[i].read, scans[i].read)
		}
	}
	// The probe is back to the indexed reads afterwards.
	q, err := quietTicks(ctx, f, 1)
	if err != nil || q[0].read != 0 {
		t.Errorf("tick after the baseline read %v repos (err %v), want 0", q, err)
	}
}

func tinyReps(int) reps {
	return reps{quiet: 5, changes: map[int]int{10: 2, 100: 1, 1000: 1}, naive: 2, cycles: 1}
}

func TestRunWritesTheGrid(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	// dynamoMax 0: the DynamoDB part has its own test.
	o := options{out: out, maxRepos: 200, dynamoMax: 0, seed: 1, repos: []int{200, 5000}, workers: []int{2, 3}, reps: tinyReps}
	if err := run(t.Context(), quietLog(), o); err != nil {
		t.Fatal(err)
	}
	var res results.TickLatency
	if err := results.Read(out, "ticklatency", &res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Repos, []int{200}) || len(res.NotRun) != 1 || !strings.Contains(res.NotRun[0], "5000") {
		t.Errorf("repos %v, not run %q: want [200] and 5000 not run", res.Repos, res.NotRun)
	}
	if res.Dynamo == nil || res.Dynamo.Skipped == "" {
		t.Errorf("dynamo part %+v: want skipped with a reason", res.Dynamo)
	}
	if len(res.Cells) != 2 {
		t.Fatalf("%d cells, want 2", len(res.Cells))
	}
	if len(res.BulkAdd) != 2 {
		t.Fatalf("%d bulk adds, want one per cell", len(res.BulkAdd))
	}
	for i, b := range res.BulkAdd {
		if b.Store != "bbolt" || b.Repos != 200 || b.Workers != o.workers[i] || b.TicksUntilAssigned == 0 ||
			b.Ticks < b.TicksUntilAssigned || b.SlowestTickMs <= 0 || b.PeakHeapMiB <= 0 {
			t.Errorf("bulk add %d: %+v", i, b)
		}
	}
	for i, c := range res.Cells {
		if c.Repos != 200 || c.Workers != o.workers[i] {
			t.Errorf("cell %d is %d repos × %d workers", i, c.Repos, c.Workers)
		}
		if c.Quiet.Samples != 5 || c.Quiet.P50Ms <= 0 || c.Quiet.P99Ms < c.Quiet.P50Ms || c.Quiet.ReposRead != 0 || c.Quiet.PeakHeapMiB <= 0 {
			t.Errorf("cell %d quiet %+v", i, c.Quiet)
		}
		// k = 1000 is more than the fleet: left out.
		var got []string
		for _, ch := range c.Changes {
			got = append(got, ch.Kind+"/"+strconv.Itoa(ch.K))
			if ch.Decisions != float64(ch.K) || ch.ReposRead != float64(ch.K) {
				t.Errorf("cell %d %s k=%d: %g decisions, %g repos read", i, ch.Kind, ch.K, ch.Decisions, ch.ReposRead)
			}
		}
		if want := []string{"add/10", "add/100", "delete/10", "delete/100"}; !slices.Equal(got, want) {
			t.Errorf("cell %d changes %v, want %v", i, got, want)
		}
		if c.NaiveQuiet.ReposRead != 200 || c.FullScan.ReposRead != 200 {
			t.Errorf("cell %d baseline read %g / %g repos, want 200", i, c.NaiveQuiet.ReposRead, c.FullScan.ReposRead)
		}
		if c.Join.Moved == 0 || c.Death.Moved == 0 || c.Join.UsPerMovedP50 <= 0 {
			t.Errorf("cell %d join %+v death %+v", i, c.Join, c.Death)
		}
	}
}

func TestDynamoCellShowsTheSameShape(t *testing.T) {
	// Not dynamotest.Endpoint: it sets the environment, which a parallel test may not.
	ep := os.Getenv(dynamotest.EndpointEnv)
	if ep == "" {
		t.Skip("DynamoDB Local not running: set " + dynamotest.EndpointEnv + " (make test starts it)")
	}
	if testing.Short() {
		t.Skip("DynamoDB Local round trips: not in -short")
	}
	t.Parallel()
	cell, bulk, err := dynamoCell(t.Context(), quietLog(), ep, 60, 2, 1,
		reps{quiet: 3, changes: map[int]int{10: 1}, naive: 1, cycles: 1})
	if err != nil {
		t.Fatal(err)
	}
	if cell.Quiet.Samples != 3 || cell.Quiet.ReposRead != 0 || cell.NaiveQuiet.ReposRead != 60 {
		t.Errorf("quiet %+v naive %+v", cell.Quiet, cell.NaiveQuiet)
	}
	if len(cell.Changes) != 2 || cell.Changes[0].Decisions != 10 {
		t.Errorf("changes %+v", cell.Changes)
	}
	if bulk.Store != "DynamoDB Local" || bulk.Repos != 60 || bulk.TicksUntilAssigned == 0 || bulk.SlowestTickMs <= 0 {
		t.Errorf("bulk add %+v", bulk)
	}
}

func TestGridKeepsHundredToHundredThousandReposAWorker(t *testing.T) {
	t.Parallel()
	var got []string
	for _, n := range repoSizes {
		for _, w := range workerCounts {
			if gridCell(n, w) {
				got = append(got, strconv.Itoa(n)+"x"+strconv.Itoa(w))
			}
		}
	}
	want := []string{"1000x10", "10000x10", "10000x100", "100000x10", "100000x100", "100000x1000", "1000000x10", "1000000x100", "1000000x1000"}
	if !slices.Equal(got, want) {
		t.Errorf("grid %v, want %v", got, want)
	}
}

// The restart measurement writes its backlog, restarts the worker and follows it until it
// acked every entry, timing each heartbeat call.
func TestRestartBacklogCatchesUp(t *testing.T) {
	st, err := bolt.OpenWith(filepath.Join(t.TempDir(), "r.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := restartBacklog(t.Context(), quietLog(), st, "bbolt", 2500)
	if err != nil {
		t.Fatal(err)
	}
	if !r.CaughtUp || r.Applied != 2500 || r.Heartbeats < 1 || r.LongestCallS < r.FirstCallS || r.HeartbeatS != 10 ||
		r.NextHeartbeatS > r.FirstCallS {
		t.Fatalf("restart measurement: %+v", r)
	}
}

// The heartbeat log's gaps: from the restart to the first accepted heartbeat, and the
// longest between two.
func TestBeatLogGaps(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &beatLog{at: []time.Time{start.Add(300 * time.Millisecond), start.Add(2 * time.Second), start.Add(9500 * time.Millisecond), start.Add(10 * time.Second)}}
	if first, longest := b.gaps(start); first != 0.3 || longest != 7.5 {
		t.Errorf("gaps = %v, %v; want 0.3, 7.5", first, longest)
	}
	if first, longest := (&beatLog{}).gaps(start); first != 0 || longest != 0 {
		t.Errorf("no heartbeats: gaps = %v, %v", first, longest)
	}
}
