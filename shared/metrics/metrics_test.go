package metrics

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// The names are a contract with the dashboards and alarms: changing one is a breaking
// change, and this table is where it shows.
func TestNames(t *testing.T) {
	want := map[string]string{
		LeaderTerm:     "mirrorfleet_leader_term",
		Ticks:          "mirrorfleet_ticks_total",
		TickDuration:   "mirrorfleet_tick_duration_seconds",
		WorkersByState: "mirrorfleet_workers_by_state",
		ReposByState:   "mirrorfleet_repos_by_state",
		ReposMoved:     "mirrorfleet_repos_moved_total",
		ReposOffOwner:  "mirrorfleet_repos_off_owner_total",
		StalenessP50:   "mirrorfleet_staleness_p50_seconds",
		StalenessP99:   "mirrorfleet_staleness_p99_seconds",
		StalenessMax:   "mirrorfleet_staleness_max_seconds",
		FetchSuccesses: "mirrorfleet_fetch_successes_total",
		FetchFailures:  "mirrorfleet_fetch_failures_total",
		FetchDuration:  "mirrorfleet_fetch_duration_seconds",
		BytesFetched:   "mirrorfleet_bytes_fetched_total",
		QueueDepth:     "mirrorfleet_queue_depth",
		// the unit suffix once, also when the name ends in it
		MaintenanceRuns:    "mirrorfleet_maintenance_runs_total",
		MaintenanceSeconds: "mirrorfleet_maintenance_seconds",
		MirrorsRecloned:    "mirrorfleet_mirrors_recloned_total",
		MirrorPacks:        "mirrorfleet_mirror_packs",
		// the memory budget
		MemoryBudget:            "mirrorfleet_memory_budget_bytes",
		MemoryReserved:          "mirrorfleet_memory_reserved_bytes",
		MemoryHeap:              "mirrorfleet_memory_heap_bytes",
		FetchesWaitingForMemory: "mirrorfleet_fetches_waiting_for_memory",
		// the git front
		ServeRequests:         "mirrorfleet_serve_requests_total",
		ServeBytes:            "mirrorfleet_serve_bytes_total",
		ServeRejected:         "mirrorfleet_serve_rejected_total",
		PackCacheHits:         "mirrorfleet_pack_cache_hits_total",
		PackCacheMisses:       "mirrorfleet_pack_cache_misses_total",
		PackGenerationSeconds: "mirrorfleet_pack_generation_seconds",
		// git processes
		GitProcesses:  "mirrorfleet_git_processes_total",
		GitFailures:   "mirrorfleet_git_failures_total",
		GitCpuSeconds: "mirrorfleet_git_cpu_seconds_total",
		// outgoing events
		EventsPublished: "mirrorfleet_events_published_total",
		EventsDelivered: "mirrorfleet_events_delivered_total",
		EventsRetried:   "mirrorfleet_events_retried_total",
		EventsDropped:   "mirrorfleet_events_dropped_total",
		// incoming push webhooks
		Polls:               "mirrorfleet_polls_total",
		PollsFound:          "mirrorfleet_polls_found_total",
		HookPushesAnnounced: "mirrorfleet_hook_pushes_announced_total",
		HookPushesLost:      "mirrorfleet_hook_pushes_lost_total",
		HookPushesOutside:   "mirrorfleet_hook_pushes_outside_total",
		// forge feeds
		FeedsUncovered: "mirrorfleet_feeds_uncovered_total",
	}
	ds := Defs()
	if len(ds) != len(want) {
		t.Errorf("%d metrics defined, %d expected", len(ds), len(want))
	}
	for _, d := range ds {
		if got := d.PromName(); got != want[d.Name] {
			t.Errorf("%s: Prometheus name %q, want %q", d.Name, got, want[d.Name])
		}
		if d.Help == "" || d.Unit == "" {
			t.Errorf("%s: no help or unit", d.Name)
		}
		if l, ok := Lookup(d.Name); !ok || l.Name != d.Name {
			t.Errorf("Lookup(%s) = %+v, %v", d.Name, l, ok)
		}
	}
	ds[0].Dims = append(ds[0].Dims, "x") // Defs hands out copies
	if d, _ := Lookup(ds[0].Name); len(d.Dims) != 0 {
		t.Error("Defs shares its slices")
	}
}

func find(samples []Sample, name, state string) (Sample, bool) {
	for _, s := range samples {
		if s.Name == name && s.Dims[DimState] == state {
			return s, true
		}
	}
	return Sample{}, false
}

func TestFromReport(t *testing.T) {
	leader := coordinator.Report{Coordinator: "c1", Leader: true, Term: 7, Moved: 3, SweepFound: 2,
		WorkersByState: map[store.WorkerState]int{store.WorkerActive: 2, store.WorkerSuspect: 1, "retired": 4}}
	got := FromReport(leader, 1500*time.Millisecond, nil)
	want := map[string]float64{Ticks: 1, TickDuration: 1.5, LeaderTerm: 7, ReposMoved: 3, ReposOffOwner: 2}
	for name, v := range want {
		if s, ok := find(got, name, ""); !ok || s.Value != v {
			t.Errorf("%s = %+v (found %v), want %v", name, s, ok, v)
		}
	}
	states := map[string]float64{"joining": 0, "active": 2, "suspect": 1, "dead": 0, "draining": 0, "retired": 4}
	n := 0
	for _, s := range got {
		if s.Name == WorkersByState {
			n++
			if v, ok := states[s.Dims[DimState]]; !ok || s.Value != v {
				t.Errorf("WorkersByState %v = %v", s.Dims, s.Value)
			}
		}
	}
	if n != len(states) {
		t.Errorf("%d WorkersByState samples, want %d (zeros included)", n, len(states))
	}
	if err := NewPrometheus().Record(got...); err != nil {
		t.Errorf("FromReport made invalid samples: %v", err)
	}

	follower := FromReport(coordinator.Report{Coordinator: "c2", Term: 7}, time.Millisecond, nil)
	var names []string
	for _, s := range follower {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{Ticks, TickDuration}) {
		t.Errorf("follower tick reported %v, want only Ticks and TickDuration", names)
	}
	if s := FromReport(coordinator.Report{Ignored: "worker w1 heartbeated since"}, time.Millisecond, nil); s != nil {
		t.Errorf("ignored firing reported %v", s)
	}
	stopped := FromReport(coordinator.Report{Leader: true, Term: 2}, 0, nil)
	if _, ok := find(stopped, WorkersByState, "active"); ok {
		t.Error("a tick that never read the workers reported WorkersByState")
	}
	// A failed tick is not a tick: the no-tick alarm must see a coordinator that fails
	// every minute. Its duration is still reported.
	failed := FromReport(leader, time.Second, errors.New("store unreachable"))
	if _, ok := find(failed, Ticks, ""); ok {
		t.Error("a failed tick reported Ticks")
	}
	if _, ok := find(failed, TickDuration, ""); !ok {
		t.Error("a failed tick did not report its duration")
	}
}

func TestWorkerAndRepoSamples(t *testing.T) {
	ok := Fetch(true, 2*time.Second, 1024)
	bad := Fetch(false, -time.Second, -5)
	if ok[0].Name != FetchSuccesses || bad[0].Name != FetchFailures {
		t.Errorf("outcomes %v / %v", ok[0], bad[0])
	}
	if ok[1].Value != 2 || ok[2].Value != 1024 || bad[1].Value != 0 || bad[2].Value != 0 {
		t.Errorf("fetch samples %v / %v", ok, bad)
	}
	q := Queue("w1", 42)
	if q.Name != QueueDepth || q.Value != 42 || q.Dims[DimWorker] != "w1" {
		t.Errorf("Queue = %+v", q)
	}
	repos := ReposByStateSamples(map[store.RepoState]int{store.RepoOK: 10, store.RepoFailing: 2})
	if len(repos) != 7 {
		t.Errorf("%d ReposByState samples, want all 7 states", len(repos))
	}
	if s, _ := find(repos, ReposByState, "ok"); s.Value != 10 {
		t.Errorf("ok = %v", s.Value)
	}
	if s, found := find(repos, ReposByState, "gone"); !found || s.Value != 0 {
		t.Errorf("gone = %v, %v", s.Value, found)
	}
}

func TestInvalidSamplesReportedValidKept(t *testing.T) {
	bad := []Sample{
		{Name: "NoSuchMetric", Value: 1},
		{Name: WorkersByState, Value: 1},                                                // no State
		{Name: Ticks, Value: 1, Dims: map[string]string{DimState: "x"}},                 // extra dimension
		{Name: WorkersByState, Value: 1, Dims: map[string]string{DimState: ""}},         // empty value
		{Name: Ticks, Value: -1},                                                        // counters only go up
		{Name: LeaderTerm, Value: math.NaN()},                                           // not JSON, not a value
		{Name: QueueDepth, Value: math.Inf(1), Dims: map[string]string{DimWorker: "w"}}, // ditto
	}
	for _, rec := range []interface{ Record(...Sample) error }{NewPrometheus(), NewEMF(&strings.Builder{}, "", nil)} {
		err := rec.Record(append(bad, Sample{Name: Ticks, Value: 1})...)
		if err == nil {
			t.Fatalf("%T accepted invalid samples", rec)
		}
		for _, s := range bad {
			if !strings.Contains(err.Error(), s.Name) {
				t.Errorf("%T: error %q does not mention %s", rec, err, s.Name)
			}
		}
		if n := len(strings.Split(err.Error(), "\n")); n != len(bad) {
			t.Errorf("%T: %d errors for %d bad samples", rec, n, len(bad))
		}
		var joined interface{ Unwrap() []error }
		if !errors.As(err, &joined) {
			t.Errorf("%T: errors not joined", rec)
		}
	}
}

func TestComputeStaleness(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(ds ...time.Duration) []time.Time {
		var out []time.Time
		for _, d := range ds {
			if d < 0 {
				out = append(out, time.Time{}) // never succeeded
				continue
			}
			out = append(out, now.Add(-d))
		}
		return out
	}
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, time.Duration(i)*time.Second)
	}
	var thousand []time.Duration
	for i := 1000; i >= 1; i-- { // unsorted input
		thousand = append(thousand, time.Duration(i)*time.Minute)
	}
	tests := []struct {
		name string
		in   []time.Time
		want Staleness
	}{
		{"empty", nil, Staleness{}},
		{"only never", ago(-1, -1), Staleness{Never: 2}},
		{"one", ago(time.Hour), Staleness{P50: time.Hour, P99: time.Hour, Max: time.Hour, Repos: 1}},
		{"two", ago(time.Minute, time.Hour), Staleness{P50: time.Minute, P99: time.Hour, Max: time.Hour, Repos: 2}},
		{"four, nearest rank", ago(4*time.Second, time.Second, 3*time.Second, 2*time.Second),
			Staleness{P50: 2 * time.Second, P99: 4 * time.Second, Max: 4 * time.Second, Repos: 4}},
		{"hundred", ago(hundred...), Staleness{P50: 50 * time.Second, P99: 99 * time.Second, Max: 100 * time.Second, Repos: 100}},
		{"thousand unsorted", ago(thousand...), Staleness{P50: 500 * time.Minute, P99: 990 * time.Minute, Max: 1000 * time.Minute, Repos: 1000}},
		{"never left out", ago(time.Minute, -1, 2*time.Minute, -1), Staleness{P50: time.Minute, P99: 2 * time.Minute, Max: 2 * time.Minute, Repos: 2, Never: 2}},
		{"future counts as fresh", []time.Time{now.Add(time.Hour), now.Add(-time.Hour)}, Staleness{P50: 0, P99: time.Hour, Max: time.Hour, Repos: 2}},
	}
	for _, tc := range tests {
		in := slices.Clone(tc.in)
		if got := ComputeStaleness(now, tc.in); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("%s: input modified", tc.name)
		}
	}
	if s := (Staleness{Never: 3}).Samples(); s != nil {
		t.Errorf("no successes reported %v", s)
	}
	s := Staleness{P50: time.Second, P99: time.Minute, Max: time.Hour, Repos: 3}.Samples()
	if len(s) != 3 || s[0].Name != StalenessP50 || s[0].Value != 1 || s[1].Value != 60 || s[2].Name != StalenessMax || s[2].Value != 3600 {
		t.Errorf("Samples = %+v", s)
	}
}

func TestMergeStaleness(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	// silent: for a suspect, how long the coordinator has seen it silent; the worker's
	// own heartbeat timestamp is off by as much, which must change nothing.
	w := func(id string, state store.WorkerState, silent time.Duration, s Staleness) store.Worker {
		wk := store.Worker{ID: id, State: state, HeartbeatAt: now.Add(-silent - 11*time.Minute), Staleness: store.Staleness(s)}
		if state == store.WorkerSuspect {
			wk.SilentSince = now.Add(-silent)
		}
		return wk
	}
	a := Staleness{Repos: 100, P50: time.Minute, P99: 10 * time.Minute, Max: 20 * time.Minute, Never: 1}
	b := Staleness{Repos: 100, P50: time.Hour, P99: 2 * time.Hour, Max: 3 * time.Hour, Never: 2}
	for _, tc := range []struct {
		name    string
		workers []store.Worker
		want    Staleness
	}{
		{"none", nil, Staleness{}},
		{"one worker: its own figures, whatever its clock says", []store.Worker{w("a", store.WorkerActive, 0, a)}, a},
		{"a suspect's aged by its silence", []store.Worker{w("a", store.WorkerSuspect, 5*time.Minute, a)},
			Staleness{Repos: 100, Never: 1, P50: 6 * time.Minute, P99: 15 * time.Minute, Max: 25 * time.Minute}},
		{"alike workers: the same figures", []store.Worker{w("a", store.WorkerActive, 0, a), w("a2", store.WorkerJoining, 0, a)},
			Staleness{Repos: 200, Never: 2, P50: time.Minute, P99: 10 * time.Minute, Max: 20 * time.Minute}},
		// Half the repos are a's (all at most 20 min stale): the 100th of 200 is at most
		// a's max. At most one of b's is above its P99, which is within the top 1%.
		{"unlike workers: upper bounds", []store.Worker{w("a", store.WorkerActive, 0, a), w("b", store.WorkerActive, 0, b)},
			Staleness{Repos: 200, Never: 3, P50: 20 * time.Minute, P99: 2 * time.Hour, Max: 3 * time.Hour}},
		{"dead and draining left out", []store.Worker{w("a", store.WorkerActive, 0, a), w("b", store.WorkerDead, time.Hour, b),
			w("c", store.WorkerDraining, 0, b)}, a},
		{"only never", []store.Worker{w("n", store.WorkerActive, 0, Staleness{Never: 4})}, Staleness{Never: 4}},
	} {
		if got := MergeStaleness(now, tc.workers); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// The merged percentiles bound the true ones from above, on random fleets.
func TestMergeStalenessBoundsTheTruth(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		var all []time.Time
		var workers []store.Worker
		for i := range 1 + rng.IntN(6) {
			var mine []time.Time
			scale := time.Duration(1+rng.IntN(100)) * time.Minute
			for range 1 + rng.IntN(300) {
				mine = append(mine, now.Add(-time.Duration(rng.Float64()*float64(scale))))
			}
			all = append(all, mine...)
			workers = append(workers, store.Worker{ID: fmt.Sprint(i), State: store.WorkerActive, HeartbeatAt: now,
				Staleness: store.Staleness(ComputeStaleness(now, mine))})
		}
		truth, got := ComputeStaleness(now, all), MergeStaleness(now, workers)
		if got.Repos != truth.Repos || got.Max != truth.Max || got.P50 < truth.P50 || got.P99 < truth.P99 || got.P99 > got.Max {
			t.Fatalf("trial %d: merged %+v, true %+v", trial, got, truth)
		}
	}
}
