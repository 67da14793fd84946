package budget

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// The budget's figures, by hand.
func TestDefaultBudget(t *testing.T) {
	b := Default()
	if b.Revisit() != 48*time.Hour {
		t.Errorf("revisit %v, want 48h", b.Revisit())
	}
	tail := time.Duration(14.2 * float64(48*time.Hour)) // 681.6 h
	if b.TailStaleness() != tail || b.StaleAfter() != 2*tail || b.ScaleOutAbove() != tail*3/2 || b.ScaleInBelow() != tail/2 {
		t.Errorf("tail %v, alarm %v, out above %v, in below %v", b.TailStaleness(), b.StaleAfter(), b.ScaleOutAbove(), b.ScaleInBelow())
	}
	// 1M repos, 80% on one host, half a poll a day: 400,000 polls a day on that host; a
	// worker starts 2 a second there, of which it plans to use 80%: 138,240 a day → 2.9
	// → 3.
	if got := b.HostWorkers(1_000_000); math.Abs(got-400_000/138_240.0) > 1e-9 {
		t.Errorf("host workers at 1M: %v", got)
	}
	if got := b.MaxWorkers(); got != 3 {
		t.Errorf("maxWorkers %d, want 3", got)
	}
	// Fetcher time at 1M: ≈ 500,000 polls × 1.5 s (and 17,100 changes × 6 s) over 10 ×
	// 86,400 × 50%: 1.9, below the host's 2.9.
	if got := b.FetcherWorkers(1_000_000); got < 1.8 || got > 2 {
		t.Errorf("fetcher workers at 1M: %v", got)
	}
	if got := b.Workers(10_000, 1); got != 1 {
		t.Errorf("10k repos: %d workers, want 1", got)
	}
	if got := b.Workers(100_000, 1); got != 1 { // host: 0.29
		t.Errorf("100k repos: %d workers, want 1", got)
	}
	// Unthrottled, one worker polls the big host twice a second: 172,800 a day there,
	// 216,000 for the whole list; 10 fetchers could do 576,000.
	if got := b.PollCapacity(10_000, 1, 5*time.Minute); math.Abs(got-216_000) > 1e-6 {
		t.Errorf("poll capacity at 10k on 1 worker: %v, want 216,000", got)
	}
	if got := b.PollCapacity(100, 1, 5*time.Minute); got != 100*288 {
		t.Errorf("the minimum interval caps 100 repos at %v, want %d", got, 100*288)
	}
	// A concurrency limit that binds first: 4 at once at 4 s each is 1 a second.
	slow := b
	slow.NoChangePollSeconds = 4
	if got := slow.PerHostRate(); got != 1 {
		t.Errorf("per-host rate with 4 s polls: %v, want 1", got)
	}
}

// The politeness figures are the worker's defaults.
func TestBudgetIsTheWorkersDefaults(t *testing.T) {
	b, w := Default(), worker.DefaultConfig()
	if b.HostRate != w.HostRate || b.HostConcurrency != w.HostConcurrency || b.Fetchers != w.Fetchers {
		t.Errorf("budget host rate %v, concurrency %d, fetchers %d; the worker's %v, %d, %d",
			b.HostRate, b.HostConcurrency, b.Fetchers, w.HostRate, w.HostConcurrency, w.Fetchers)
	}
}

// DormantRevisits is what the freshness benchmark measured for the default policy at the
// budget's poll rate: a re-run that moves it fails here until the constant follows.
func TestDormantRevisitsIsTheFreshnessMeasurement(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "bench", "results", "freshness.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Population struct {
			DormantShare float64 `json:"dormant_share"`
		} `json:"population"`
		Runs []struct {
			Policy           string  `json:"policy"`
			Budget           float64 `json:"budget"`
			Default          bool    `json:"default"`
			DormantPollShare float64 `json:"dormant_poll_share"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	b := Default()
	found := false
	for _, r := range f.Runs {
		if !r.Default || r.Budget != b.PollsPerDay {
			continue
		}
		found = true
		got := f.Population.DormantShare / r.DormantPollShare
		if math.Abs(got-b.DormantRevisits)/b.DormantRevisits > 0.05 {
			t.Errorf("freshness.json: dormant repos wait %.2f mean revisits at %g polls a day (policy %s), budget says %.2f",
				got, r.Budget, r.Policy, b.DormantRevisits)
		}
	}
	if !found {
		t.Fatalf("freshness.json has no run of the default policy at %g polls a day", b.PollsPerDay)
	}
}

// The webhook route's throttle: 100 a second at the design fleet (its pushes average
// 0.2 a second), growing with a fleet past five million repos.
func TestHookRate(t *testing.T) {
	b := Default()
	if got := b.HookRate(); got != MinHookRate {
		t.Errorf("hook rate %d at 1M repos, want the floor %d", got, MinHookRate)
	}
	b.DesignRepos = 20_000_000
	if got := b.HookRate(); got < 300 || got > 500 {
		t.Errorf("hook rate %d at 20M repos, want 100 × their mean of 4 a second", got)
	}
}

// The bare worker count is below the sized one (no headroom) and grows with the repos:
// at 1M somewhat fewer than the budget sizes.
func TestBareWorkers(t *testing.T) {
	b := Default()
	bare := b.BareWorkersPerRepo() * float64(b.DesignRepos)
	if sized := float64(b.MaxWorkers()); bare >= sized || bare < sized*0.7 {
		t.Errorf("bare workers %.2f at 1M, sized %v", bare, sized)
	}
	if h := b.HostWorkers(b.DesignRepos) * b.HostUtilisation; math.Abs(h-bare) > 1e-9 {
		t.Errorf("bare %.4f, want the per-host limit's %.4f at full use", bare, h)
	}
}
