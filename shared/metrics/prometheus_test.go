package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value finds the metric of family name whose labels include want, and returns its
// gauge or counter value, or its histogram's sample count and sum.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (v, sum float64) {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no %s in the scrape", name)
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), 0
		case m.Counter != nil:
			return m.GetCounter().GetValue(), 0
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), m.GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("%s has no series with labels %v", name, want)
	return 0, 0
}

func TestPrometheusScrape(t *testing.T) {
	p := NewPrometheus()
	rec := func(s ...Sample) {
		t.Helper()
		if err := p.Record(s...); err != nil {
			t.Fatal(err)
		}
	}
	rec(FromReport(coordinator.Report{Leader: true, Term: 3, Moved: 5, WorkersByState: map[store.WorkerState]int{store.WorkerActive: 4}}, 2*time.Second, nil)...)
	rec(FromReport(coordinator.Report{Leader: true, Term: 4, Moved: 1, WorkersByState: map[store.WorkerState]int{store.WorkerActive: 3, store.WorkerDead: 1}}, time.Second, nil)...)
	rec(ReposByStateSamples(map[store.RepoState]int{store.RepoOK: 90, store.RepoPending: 10})...)
	rec(Staleness{P50: time.Minute, P99: time.Hour, Max: 2 * time.Hour, Repos: 100}.Samples()...)
	rec(Fetch(true, 3*time.Second, 1000)...)
	rec(Fetch(true, time.Second, 24)...)
	rec(Fetch(false, 500*time.Millisecond, 0)...)
	rec(Queue("w1", 7), Queue("w2", 9), Queue("w1", 5))
	rec(Maintenance(2*time.Second, false)...)
	rec(Maintenance(time.Second, true)...)
	rec(Packs("w1", 17))
	rec(Memory(384<<20, 100<<20, 200<<20, 2)...)
	rec(Memory(384<<20, 50<<20, 180<<20, 0)...)
	rec(ServeRequest(200, 5000)...)
	rec(ServeRequest(200, 1000)...)
	rec(ServeRequest(429, 10)...)
	rec(PackCache(true, 0)...)
	rec(PackCache(false, 1.5)...)
	rec(EventPublished(), EventPublished())
	rec(EventDelivery(SinkWebhook, EventsDelivered, 2)...)
	rec(EventDelivery(SinkWebhook, EventsRetried, 3)...)
	rec(EventDelivery(SinkSSE, EventsDropped, 1)...)
	rec(EventDelivery(SinkSSE, EventsDropped, 0)...)
	rec(HookPush("github.com", HookPushesAnnounced), HookPush("github.com", HookPushesAnnounced), HookPush("github.com", HookPushesLost))
	rec(HookPush("gitlab.com", HookPushesLost), HookPush("gitlab.com", HookPushesOutside))
	rec(FeedUncovered())
	rec(Poll("github.com"), Poll("github.com"), Poll("gitlab.com"), PollFound("github.com"))
	rec(GitProcess("upload-pack", false, 1500*time.Millisecond)...)
	rec(GitProcess("upload-pack", true, 500*time.Millisecond)...)
	rec(GitProcess("repack", false, 0)...)

	fams := scrape(t, p.Handler())
	for _, d := range Defs() {
		if _, ok := fams[d.PromName()]; !ok {
			t.Errorf("%s (%s) not exposed", d.Name, d.PromName())
		}
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"mirrorfleet_ticks_total", nil, 2},
		{"mirrorfleet_events_published_total", nil, 2},
		{"mirrorfleet_events_retried_total", map[string]string{"sink": "webhook"}, 3},
		{"mirrorfleet_events_dropped_total", map[string]string{"sink": "sse"}, 1},
		{"mirrorfleet_polls_total", map[string]string{"host": "github.com"}, 2},
		{"mirrorfleet_polls_total", map[string]string{"host": "gitlab.com"}, 1},
		{"mirrorfleet_polls_found_total", map[string]string{"host": "github.com"}, 1},
		{"mirrorfleet_hook_pushes_announced_total", map[string]string{"host": "github.com"}, 2},
		{"mirrorfleet_hook_pushes_lost_total", map[string]string{"host": "github.com"}, 1},
		{"mirrorfleet_hook_pushes_lost_total", map[string]string{"host": "gitlab.com"}, 1},
		{"mirrorfleet_hook_pushes_outside_total", map[string]string{"host": "gitlab.com"}, 1},
		{"mirrorfleet_maintenance_runs_total", nil, 2},
		{"mirrorfleet_mirrors_recloned_total", nil, 1},
		{"mirrorfleet_mirror_packs", map[string]string{"worker": "w1"}, 17},
		{"mirrorfleet_leader_term", nil, 4},
		{"mirrorfleet_repos_moved_total", nil, 6},
		{"mirrorfleet_workers_by_state", map[string]string{"state": "active"}, 3},
		{"mirrorfleet_workers_by_state", map[string]string{"state": "dead"}, 1},
		{"mirrorfleet_workers_by_state", map[string]string{"state": "suspect"}, 0},
		{"mirrorfleet_repos_by_state", map[string]string{"state": "ok"}, 90},
		{"mirrorfleet_repos_by_state", map[string]string{"state": "gone"}, 0},
		{"mirrorfleet_staleness_p50_seconds", nil, 60},
		{"mirrorfleet_staleness_p99_seconds", nil, 3600},
		{"mirrorfleet_staleness_max_seconds", nil, 7200},
		{"mirrorfleet_fetch_successes_total", nil, 2},
		{"mirrorfleet_fetch_failures_total", nil, 1},
		{"mirrorfleet_bytes_fetched_total", nil, 1024},
		{"mirrorfleet_queue_depth", map[string]string{"worker": "w1"}, 5},
		{"mirrorfleet_queue_depth", map[string]string{"worker": "w2"}, 9},
		{"mirrorfleet_serve_requests_total", map[string]string{"status": "2xx"}, 2},
		{"mirrorfleet_serve_requests_total", map[string]string{"status": "4xx"}, 1},
		{"mirrorfleet_serve_bytes_total", nil, 6010},
		{"mirrorfleet_serve_rejected_total", nil, 1},
		{"mirrorfleet_pack_cache_hits_total", nil, 1},
		{"mirrorfleet_pack_cache_misses_total", nil, 1},
		{"mirrorfleet_git_processes_total", map[string]string{"command": "upload-pack"}, 2},
		{"mirrorfleet_git_processes_total", map[string]string{"command": "repack"}, 1},
		{"mirrorfleet_git_failures_total", map[string]string{"command": "upload-pack"}, 1},
		{"mirrorfleet_git_cpu_seconds_total", map[string]string{"command": "upload-pack"}, 2},
	}
	for _, c := range checks {
		if got, _ := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if n, sum := value(t, fams, "mirrorfleet_fetch_duration_seconds", nil); n != 3 || sum != 4.5 {
		t.Errorf("fetch duration histogram: %v observations summing to %v, want 3 and 4.5", n, sum)
	}
	if n, sum := value(t, fams, "mirrorfleet_pack_generation_seconds", nil); n != 1 || sum != 1.5 {
		t.Errorf("pack generation histogram: %v observations summing to %v, want 1 and 1.5", n, sum)
	}
	if n, sum := value(t, fams, "mirrorfleet_tick_duration_seconds", nil); n != 2 || sum != 3 {
		t.Errorf("tick duration histogram: %v observations summing to %v", n, sum)
	}
	if fams["mirrorfleet_ticks_total"].GetType() != dto.MetricType_COUNTER ||
		fams["mirrorfleet_queue_depth"].GetType() != dto.MetricType_GAUGE ||
		fams["mirrorfleet_fetch_duration_seconds"].GetType() != dto.MetricType_HISTOGRAM {
		t.Error("metric types wrong")
	}

	problems, err := testutil.GatherAndLint(p.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("promlint: %s: %s", pr.Metric, pr.Text)
	}
}

// Each sink has its own registry: two fleets in one process neither clash nor mix.
func TestPrometheusNoGlobalState(t *testing.T) {
	a, b := NewPrometheus(), NewPrometheus()
	if err := a.Record(Sample{Name: Ticks, Value: 5}); err != nil {
		t.Fatal(err)
	}
	if err := b.Record(Sample{Name: Ticks, Value: 1}); err != nil {
		t.Fatal(err)
	}
	if got, _ := value(t, scrape(t, a.Handler()), "mirrorfleet_ticks_total", nil); got != 5 {
		t.Errorf("a: ticks %v, want 5", got)
	}
	if got, _ := value(t, scrape(t, b.Handler()), "mirrorfleet_ticks_total", nil); got != 1 {
		t.Errorf("b: ticks %v, want 1", got)
	}
}
