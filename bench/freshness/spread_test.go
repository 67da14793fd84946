package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"slices"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

func TestTheSameSeedGivesTheSameResultsWhateverThePool(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := options{n: 150, seeds: []uint64{1, 2}, budgets: []float64{0.5}, days: days{warmup: 30, window: 20, drain: 10, cold: 10},
		drift: 0.1, signals: true, realism: true}
	encode := func(parallel int, seeds []uint64) []byte {
		o.parallel, o.seeds = parallel, seeds
		return encoded(t, withSpread(measure(log, o)))
	}
	one, four := encode(1, []uint64{1, 2}), encode(4, []uint64{1, 2})
	if string(one) != string(four) {
		t.Fatal("seeds 1 and 2 on one simulation at a time and on four at once differ")
	}
	var res results.Freshness
	if err := json.Unmarshal(one, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Goals) == 0 || res.Goals[0].Seeds != 2 {
		t.Fatalf("no spread over two seeds: goals %d", len(res.Goals))
	}
	// Every section's default policy runs over both seeds; the policies it is compared
	// with, on the first alone.
	for _, name := range results.Sections {
		sec := *res.Section(name)
		def := slices.IndexFunc(sec, func(r results.FreshnessRun) bool { return r.Default })
		if def < 0 || sec[def].Spread == nil || sec[def].Spread.Seeds != 2 {
			t.Errorf("section %s: %d rows, no default row over two seeds", name, len(sec))
		}
		for _, r := range sec {
			if comparison(r.Policy) && (r.Spread == nil || r.Spread.Seeds != 1) {
				t.Errorf("section %s: %s over %+v seeds, want the first alone", name, r.Policy, r.Spread)
			}
		}
	}
	// The bound run as a policy is a bound per section and budget, and the cold start
	// has a goal against it.
	for _, sec := range []string{"runs", "coldstart", "runs_realistic", "coldstart_realistic"} {
		if x, ok := res.BoundOf(sec, results.EvidenceCloned, 0.5); !ok || x.Budget != 0.5 || x.Ratio <= 0 || x.Spread == nil {
			t.Errorf("no bound %q of %s at 0.5: %+v", results.EvidenceCloned, sec, x)
		}
	}
	if !slices.ContainsFunc(res.Goals, func(g results.FreshnessGoal) bool {
		return g.Section == "coldstart" && g.Of == boundName("coldstart", results.EvidenceCloned) && g.Value > 0 && g.Seeds == 2 && len(g.PerSeed) == 2
	}) {
		t.Error("no cold start goal against the bound that clones blind")
	}
	// Every goal of the table, each against one reference.
	for _, g := range boundGoals {
		if !slices.ContainsFunc(res.Goals, func(h results.FreshnessGoal) bool {
			return h.Section == g.section && h.Of == boundName(g.section, g.evidence) && h.Target == g.target
		}) {
			t.Errorf("no goal for %s against %q", g.section, boundName(g.section, g.evidence))
		}
	}
	// A seed's figures are its own: seed 1 run alone gives the figures it gave with seed 2,
	// and what -first writes of a run of both is that run of seed 1 alone, byte for byte.
	seed1 := encode(2, []uint64{1})
	var alone results.Freshness
	if err := json.Unmarshal(seed1, &alone); err != nil {
		t.Fatal(err)
	}
	o.parallel, o.seeds = 2, []uint64{1, 2}
	if first := encoded(t, alone1(measure(log, o))); string(first) != string(seed1) {
		t.Error("the first seed's results of a run of two are not those of a run of it alone")
	}
	for _, name := range results.Sections {
		for k, r := range *alone.Section(name) {
			if b := (*res.Section(name))[k]; r.Policy != b.Policy || r.LagMeanH != b.LagMeanH || r.Polls != b.Polls {
				t.Fatalf("seed 1's %s %s at %g: %v alone, %v with seed 2", name, r.Policy, r.Budget, r.LagMeanH, b.LagMeanH)
			}
		}
	}
	// A simulation's figures are its own: the optimum alone gives the figures it gave
	// among every policy, though its place in the job list moved.
	o.only = "optimum"
	var opt results.Freshness
	if err := json.Unmarshal(encode(2, []uint64{1}), &opt); err != nil {
		t.Fatal(err)
	}
	for _, name := range results.Sections {
		for _, r := range *opt.Section(name) {
			k := slices.IndexFunc(*alone.Section(name), func(b results.FreshnessRun) bool { return b.Policy == r.Policy && b.Budget == r.Budget })
			if k < 0 || (*alone.Section(name))[k].LagMeanH != r.LagMeanH {
				t.Fatalf("the optimum's %s at %g: %v alone, not what it was among the others", name, r.Budget, r.LagMeanH)
			}
		}
	}
}

// encoded is res as JSON, without its metadata (the time it took, the machine).
func encoded(t *testing.T, res results.Freshness) []byte {
	t.Helper()
	res.Meta = results.Meta{}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// alone1 is the first seed's results alone, after the study over all was made of them.
func alone1(all []results.Freshness) results.Freshness {
	first := alone(all[0])
	withSpread(all)
	return first
}

func TestSpreadAndGoals(t *testing.T) {
	s := stat([]float64{1, 2, 3, 6})
	if s.Mean != 3 || s.Min != 1 || s.Max != 6 || math.Abs(s.SD-math.Sqrt(14.0/3)) > 1e-12 {
		t.Fatalf("stat %+v", s)
	}
	if s := stat([]float64{2}); s.SD != 0 || s.Mean != 2 {
		t.Fatalf("one value: %+v", s)
	}
	seed := func(def, opt, ratio float64) results.Freshness {
		return results.Freshness{Setup: results.FreshnessSetup{Budgets: []float64{0.5}},
			Runs:    []results.FreshnessRun{{Policy: "bayes", Budget: 0.5, LagMeanH: def, LagP99H: 2 * def}},
			Optimum: []results.FreshnessAnalytic{{Section: "runs", Policy: "optimum", Budget: 0.5, LagMeanH: opt, LagP99H: 2 * opt}},
			Bound:   []results.FreshnessBound{{Section: "runs", Evidence: results.EvidenceCloned, Budget: 0.5, LagMeanH: ratio * opt, Ratio: ratio}}}
	}
	all := []results.Freshness{seed(10.3, 10, 1), seed(11, 10, 1)}
	for k := range all {
		all[k].Goals = goals(all[k])
	}
	res := withSpread(all)
	i := slices.IndexFunc(res.Goals, func(g results.FreshnessGoal) bool { return g.Goal == "mean / bound" && g.Section == "runs" })
	if i < 0 {
		t.Fatalf("no goal for runs: %+v", res.Goals)
	}
	g := res.Goals[i]
	if math.Abs(g.Value-1.03) > 1e-12 || g.Seeds != 2 || math.Abs(g.Spread.Max-1.1) > 1e-12 || g.Met || g.MetMean ||
		len(g.PerSeed) != 2 || math.Abs(g.PerSeed[1]-1.1) > 1e-12 {
		t.Fatalf("goal %+v", g)
	}
	if r := res.Runs[0]; r.Spread == nil || r.Spread.LagMeanH.Mean != 10.65 || all[0].Runs[0].Spread != nil {
		t.Fatalf("row spread %+v (the first seed's own rows must stay as they were)", r.Spread)
	}
	// A seed's value is over its own bound: a seed whose bound is higher by as much as
	// its lag meets the goal as well.
	all = []results.Freshness{seed(10.3, 10, 1), seed(11.33, 10, 1.1)}
	for k := range all {
		all[k].Goals = goals(all[k])
	}
	res = withSpread(all)
	if g := res.Goals[i]; math.Abs(g.Spread.Mean-1.03) > 1e-9 || !g.MetMean {
		t.Fatalf("goal over each seed's own bound: %+v", g)
	}
}

func TestParseSeeds(t *testing.T) {
	for in, want := range map[string][]uint64{"": {7}, "1-5": {1, 2, 3, 4, 5}, "3,1": {3, 1}, "1-2,2,9": {1, 2, 9}} {
		got, err := parseSeeds(in, 7)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"x", "5-1", "1-", "-3"} {
		if _, err := parseSeeds(in, 1); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
