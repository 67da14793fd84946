package main

import (
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
)

// seedRun is one seed's populations, upstreams, simulations and references.
type seedRun struct {
	o                        options
	seed                     uint64
	setup                    results.FreshnessSetup
	pop, real                Population
	steady, drifting         Upstream
	realSteady, realDrifting Upstream
	jobs                     []job
	runs                     [][]results.FreshnessRun
	bounds                   [][]results.FreshnessBound // by task, in a fixed order whatever order they are computed in
	desc                     results.FreshnessPopulation
	tables                   map[tableKey]func() *rateTable // each learned on first use
	optimum                  map[string]func() sectionOptimum
}

// sectionOptimum is the closed-form optimum of a section's window, and optimum04's.
type sectionOptimum struct {
	n          int
	sqrt, exp4 optimumAlloc
}

// lags is the optimum's mean and p99 lag at a budget, hours.
func (o sectionOptimum) lags(budget float64) (meanH, p99H float64) {
	return o.sqrt.lag(budget * float64(o.n))
}

// section is a section of rows without signals: its population, upstream and window.
type section struct {
	name string
	pop  Population
	up   Upstream
	w    window
}

// sections are the seed's sections without signals that were run.
func (sr *seedRun) sections() []section {
	d := sr.o.days
	stat, cold := window{d.warmup, d.warmup + d.window}, window{0, d.cold}
	var out []section
	for _, s := range []section{
		{"runs", sr.pop, sr.steady, stat}, {"coldstart", sr.pop, sr.steady, cold}, {"drift", sr.pop, sr.drifting, stat},
		{"runs_realistic", sr.real, sr.realSteady, stat}, {"coldstart_realistic", sr.real, sr.realSteady, cold},
		{"drift_realistic", sr.real, sr.realDrifting, stat},
	} {
		if s.up != nil {
			out = append(out, s)
		}
	}
	return out
}

// sectionNamed is the section called name (a signal section's is its population's).
func (sr *seedRun) sectionNamed(name string) (section, bool) {
	if i := sectionIndex(name); i >= 0 {
		name = "runs"
		if signalSections[i].Drift {
			name = "drift"
		}
	}
	for _, s := range sr.sections() {
		if s.name == name {
			return s, true
		}
	}
	return section{}, false
}

// opt is the closed-form optimum of the named section (a signal section's: its
// population's, without the signal).
func (sr *seedRun) opt(name string) optimumLags {
	if i := sectionIndex(name); i >= 0 {
		name = "runs"
		if signalSections[i].Drift {
			name = "drift"
		}
	}
	return sr.optimum[name]().lags
}

// stream numbers the random stream of the job's simulation by what it simulates (the
// policy, the section, the budget), not by its place in the job list, so a section's
// figures do not move when jobs are added; with policy "", the stream its section and
// budget share (the signals' deliveries, the same for every policy).
func (j job) stream(policy string) uint64 {
	section := "runs"
	if j.signal != nil {
		section = j.signal.Section
	} else if j.drift {
		section = "drift"
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%s|%v|%g", policy, section, j.realistic, j.budget)
	return h.Sum64()
}

// tableKey names a rate table: the population (plain or realistic) and the day.
type tableKey struct {
	real bool
	day  float64
}

// draw is the function that draws the plain or the realistic population of this
// fleet's size with a seed, up to day.
func (sr *seedRun) draw(real bool, day float64) func(uint64) Upstream {
	n := sr.o.n
	if real {
		return func(s uint64) Upstream {
			return NewRealisticPopulation(n, s, targets, realism).NewUpstream(s^0x5ea1, day+1, 0, batch, targets)
		}
	}
	return func(s uint64) Upstream { return NewPopulation(n, s, targets).NewUpstream(s, day+1, 0, batch, targets) }
}

// job is one simulation: a policy at a budget in a section.
type job struct {
	k         int
	budget    float64
	make      func() scheduler
	pop       Population
	up        Upstream
	drift     bool
	realistic bool
	signal    *signals
}

func newSeedRun(log *slog.Logger, o options, seed uint64) *seedRun {
	n, d := o.n, o.days
	sr := &seedRun{o: o, seed: seed}
	sr.pop = NewPopulation(n, seed, targets)
	end := d.warmup + d.window + d.drain
	sr.steady = sr.pop.NewUpstream(seed, end, 0, batch, targets)
	sr.setup = results.FreshnessSetup{Repos: n, Seed: seed, Seeds: o.seeds, WarmupDays: d.warmup, WindowDays: d.window, DrainDays: d.drain,
		MinIntervalMin: 5, Budgets: o.budgets, ColdStartDays: d.cold,
		Batch: results.FreshnessBatch{MeanCommits: batch.MeanCommits, NewestDelayMin: batch.NewestDelayMin, GapMin: batch.GapMin,
			Sigma: batch.Sigma, BranchShare: batch.BranchShare, BranchDelayDays: batch.BranchDelayDays},
		HistoryWindowDays: fetch.HistoryWindow.Hours() / 24, MaxHistoryCommits: fetch.MaxHistoryCommits, MaxNewCommits: fetch.MaxNewCommits,
		MinRate: priority.MinRate, GuardRate: priority.GuardRate,
		NewStepExp: priority.NewExp, NewSpanDays: priority.NewSpan.Hours() / 24}
	if o.drift > 0 {
		sr.setup.DriftPerMonth, sr.setup.DriftBudgets = o.drift, o.budgets
		sr.drifting = sr.pop.NewUpstream(seed^0xd1f7, end, o.drift, batch, targets)
	}
	if o.realism {
		sr.real = NewRealisticPopulation(n, seed, targets, realism)
		sr.realSteady = sr.real.NewUpstream(seed^0x5ea1, end, 0, batch, targets)
		if o.drift > 0 {
			sr.realDrifting = sr.real.NewUpstream(seed^0x5ea1^0xd1f7, end, o.drift, batch, targets)
		}
	}
	sr.desc = describe(sr.pop, sr.steady, d.warmup, d.warmup+d.window)
	log.Info("population", "seed", seed, "repos", n, "sigma", sr.desc.Sigma, "mu", sr.desc.Mu, "top_share", sr.desc.MeasuredTopShare,
		"monthly_changed", sr.desc.MeasuredMonthly, "window_commits", sr.desc.WindowCommits)
	sr.optimum = map[string]func() sectionOptimum{}
	for _, s := range sr.sections() {
		sr.optimum[s.name] = sync.OnceValue(func() sectionOptimum {
			return sectionOptimum{n: n, sqrt: newOptimumAlloc(s.up, s.w, 0.5, nil), exp4: newOptimumAlloc(s.up, s.w, 0.4, nil)}
		})
	}

	wanted := func(s scheduler) bool { return o.only == "" || slices.Contains(strings.Split(o.only, ","), s.name()) }
	for _, u := range []struct {
		pop       Population
		up        Upstream
		drift     bool
		realistic bool
	}{{sr.pop, sr.steady, false, false}, {sr.pop, sr.drifting, true, false}, {sr.real, sr.realSteady, false, true}, {sr.real, sr.realDrifting, true, true}} {
		if u.up == nil {
			continue
		}
		for _, b := range o.budgets {
			for _, mk := range schedulers(u.up, nil) {
				if s := mk(); wanted(s) && simulatedIn(s.name(), u.drift, u.realistic) && (seed == o.seeds[0] || !comparison(s.name())) {
					sr.jobs = append(sr.jobs, job{len(sr.jobs), b, mk, u.pop, u.up, u.drift, u.realistic, nil})
				}
			}
		}
	}
	// The rate tables of the measured days, shared by the bounds and the bound run as a
	// policy.
	sr.tables = map[tableKey]func() *rateTable{}
	for _, real := range []bool{false, true} {
		for _, day := range []float64{d.cold / 2, d.warmup + d.window/2} {
			sr.tables[tableKey{real, day}] = sync.OnceValue(func() *rateTable { return learnTable(sr.draw(real, day), seed, day) })
		}
	}
	// Each section's information bound run as a policy, the reference of its goals: the
	// all-evidence table in the stationary sections, the filter of push times in the
	// drifting ones; with a signal, knowing which repos it covers.
	tablesOf := func(real bool) []dayTable {
		var tables []dayTable
		for _, day := range []float64{d.cold / 2, d.warmup + d.window/2} {
			tables = append(tables, dayTable{day, sr.tables[tableKey{real, day}]})
		}
		return tables
	}
	filters := map[bool]func() *filterStart{} // by population (realistic or not): shared by every budget and signal
	for _, real := range []bool{false, true} {
		pop, up := sr.pop, sr.drifting
		if real {
			pop, up = sr.real, sr.realDrifting
		}
		filters[real] = sync.OnceValue(func() *filterStart {
			return newFilterStart(pop, up, o.drift, rand.New(rand.NewPCG(seed, 0xf17)))
		})
	}
	boundOf := func(up Upstream, drift, real bool) func() scheduler {
		if drift {
			return func() scheduler { return &filtered{up: up, from: filters[real]} }
		}
		return func() scheduler { return &informed{up: up, tables: tablesOf(real)} }
	}
	addBound := func(mk func() scheduler, pop Population, up Upstream, drift, real bool, sg *signals) {
		if up == nil || !wanted(mk()) {
			return
		}
		for _, b := range o.budgets {
			sr.jobs = append(sr.jobs, job{len(sr.jobs), b, mk, pop, up, drift, real, sg})
		}
	}
	for _, u := range []struct {
		pop         Population
		up          Upstream
		drift, real bool
	}{{sr.pop, sr.steady, false, false}, {sr.pop, sr.drifting, true, false}, {sr.real, sr.realSteady, false, true}, {sr.real, sr.realDrifting, true, true}} {
		addBound(boundOf(u.up, u.drift, u.real), u.pop, u.up, u.drift, u.real, nil)
	}
	if o.signals {
		sr.setup.HookStretch, sr.setup.FeedStretch, sr.setup.SignalMemoryDays, sr.setup.OrgMeanRepos = hookStretch, feedStretch, signalMemory, 1+orgExtra
		sr.setup.OwnerLevelShare, sr.setup.OwnerRepos = ownerLevelShare, ownerRepos
		for _, sg := range signalSections {
			up := sr.steady
			if sg.Drift {
				if sr.drifting == nil {
					continue
				}
				up = sr.drifting
			}
			sr.setup.Signals = append(sr.setup.Signals, sg.doc())
			for _, b := range o.budgets {
				mk := func() scheduler { return production{defaultPolicy()} }
				if wanted(mk()) {
					sr.jobs = append(sr.jobs, job{len(sr.jobs), b, mk, sr.pop, up, sg.Drift, false, &sg})
				}
			}
			addBound(boundOf(up, sg.Drift, false), sr.pop, up, sg.Drift, false, &sg)
		}
	}
	sr.runs = make([][]results.FreshnessRun, len(sr.jobs))
	return sr
}

// simulatedIn says whether a policy is simulated in the sections of a population
// (drifting or not, realistic or not). Every section has the production policies; the
// references are closed forms (results.FreshnessAnalytic), and the optimum is also
// simulated where its closed form is checked against it: the stationary and the drift
// sections. Round-robin and Software Heritage's policy, which at these budgets is
// round-robin, are simulated in the plain stationary sections only.
func simulatedIn(policy string, drift, realistic bool) bool {
	switch policy {
	case "uniform", "swh":
		return !drift && !realistic
	case "optimum":
		return drift || !realistic
	}
	return true
}

// comparison says whether a policy is one the default is compared with, not a reference:
// over several seeds those run on the first alone (their rows are its), and the spread
// over the seeds is the default policy's, the optimum's and the bounds'.
func comparison(policy string) bool {
	switch policy {
	case "uniform", "swh", "cbrt", "rate":
		return true
	}
	return false
}

// tasks are the seed's simulations and references.
func (sr *seedRun) tasks(log *slog.Logger) []task {
	o, d := sr.o, sr.o.days
	end := d.warmup + d.window + d.drain
	var out []task
	for _, j := range sr.jobs {
		cost := j.budget
		if j.make().name() == "bayes" {
			cost *= 5 // it learns its prior and weighs every repo's evidence
		}
		out = append(out, task{cost, func() {
			s := j.make()
			rng := rand.New(rand.NewPCG(sr.seed, j.stream(s.name())))
			if sw, ok := s.(*swh); ok {
				sw.rng = rng
			}
			cfg := runConfig{Budget: j.budget, End: end, MinInterval: sr.setup.MinIntervalMin / (24 * 60),
				Windows: []window{{d.warmup, d.warmup + d.window}}}
			if !j.drift && j.signal == nil {
				cfg.Windows = append(cfg.Windows, window{0, d.cold})
			}
			if j.signal != nil {
				cfg.Signal, cfg.Orgs = j.signal, orgs(o.n, sr.seed)
				cfg.Covered = covered(cfg.Orgs, sr.seed, j.signal.Share)
				cfg.Deliveries = j.signal.deliveries(j.up, cfg.Covered, ownerLevel(cfg.Orgs, sr.seed), end, rand.New(rand.NewPCG(sr.seed, j.stream("")^0xde1)))
			}
			rs := run(j.pop, j.up, s, cfg, rng)
			section := ""
			if j.signal != nil {
				section = j.signal.Section
			}
			for k, r := range rs {
				log.Info("run", "seed", sr.seed, "section", section, "realistic", j.realistic, "drift", j.drift, "signal_fetches", r.SignalFetches, "window", cfg.Windows[k], "policy", r.Policy, "budget", r.Budget,
					"lag_mean_h", round(r.LagMeanH), "lag_p99_h", round(r.LagP99H), "dormant_polls", round(r.DormantPolls),
					"censored", r.Censored, "signalling_lag_h", round(r.SignallingLagMeanH), "silent_lag_h", round(r.SilentLagMeanH))
			}
			sr.runs[j.k] = rs
		}})
	}
	var refs []func() []results.FreshnessBound
	stat, cold := window{d.warmup, d.warmup + d.window}, window{0, d.cold}
	// The bounds from push counts, and the drift bound with each drifting signal's, share
	// one random stream: one task.
	refs = append(refs, func() []results.FreshnessBound {
		brng := rand.New(rand.NewPCG(sr.seed, 0xb0))
		var xs []results.FreshnessBound
		for _, b := range []struct {
			section string
			day     float64
			w       window
		}{{"coldstart", d.cold / 2, cold}, {"runs", d.warmup + d.window/2, stat}} {
			for _, x := range bound(sr.pop, sr.steady, b.day, b.w, o.budgets, sr.opt(b.section), 2, brng) {
				x.Section = b.section
				xs = append(xs, x)
			}
		}
		if sr.drifting != nil {
			var charges []signalCharge
			if o.signals {
				charges = sr.charges(sr.signalSections(true), sr.drifting)
			}
			for _, x := range driftBound(sr.pop, sr.drifting, o.drift, stat, o.budgets, sr.opt("drift"), brng, charges...) {
				if x.Section == "" {
					x.Section = "drift"
				}
				xs = append(xs, x)
			}
		}
		return xs
	})
	if sr.realDrifting != nil {
		refs = append(refs, func() []results.FreshnessBound {
			xs := driftBound(sr.real, sr.realDrifting, o.drift, stat, o.budgets, sr.opt("drift_realistic"), rand.New(rand.NewPCG(sr.seed, 0xb1)))
			for k := range xs {
				xs[k].Section = "drift_realistic"
			}
			return xs
		})
	}
	// The bounds with everything a first clone and the fetches show, for both populations.
	for _, b := range []struct {
		section string
		day     float64
		w       window
		real    bool
	}{{"coldstart", d.cold / 2, cold, false}, {"runs", d.warmup + d.window/2, stat, false},
		{"coldstart_realistic", d.cold / 2, cold, true}, {"runs_realistic", d.warmup + d.window/2, stat, true}} {
		if b.real && !o.realism {
			continue
		}
		refs = append(refs, func() []results.FreshnessBound {
			up := sr.steady
			if b.real {
				up = sr.realSteady
			}
			var charges []signalCharge
			if b.section == "runs" && o.signals {
				charges = sr.charges(sr.signalSections(false), sr.steady)
			}
			xs := infoBound(sr.tables[tableKey{b.real, b.day}](), up, b.day, b.w, o.budgets, sr.opt(b.section), charges...)
			for k := range xs {
				if xs[k].Section == "" {
					xs[k].Section = b.section
				}
			}
			return xs
		})
	}
	// Each signal section's optimum that knows every rate and which repos the signal
	// covers: what estimating the rates costs beside its bound.
	if o.signals {
		refs = append(refs, func() []results.FreshnessBound {
			var xs []results.FreshnessBound
			for _, sg := range signalSections {
				s, ok := sr.sectionNamed(sg.Section)
				if !ok {
					continue
				}
				c := sr.charges([]signals{sg}, s.up)[0]
				a := newOptimumAlloc(s.up, s.w, 0.5, c.missed)
				for _, b := range o.budgets {
					polls := b * float64(o.n)
					fetches := c.fetchesPerDay(s.w)
					m, _ := lagOver(s.up, s.w, a.freq(polls-fetches), c.missed, c.delay, s.w.To)
					om, _ := sr.opt(sg.Section)(b)
					xs = append(xs, results.FreshnessBound{Section: sg.Section, Evidence: results.EvidenceRates, Budget: b,
						LagMeanH: m, Ratio: m / om, SignalFetchShare: fetches / polls})
				}
			}
			return xs
		})
	}
	sr.bounds = make([][]results.FreshnessBound, len(refs))
	for k, f := range refs {
		out = append(out, task{1, func() {
			sr.bounds[k] = f()
			for _, x := range sr.bounds[k] {
				log.Info("bound", "seed", sr.seed, "section", x.Section, "evidence", x.Evidence, "budget", x.Budget,
					"ratio", round(x.Ratio), "lag_mean_h", round(x.LagMeanH), "dormant_polls", round(x.DormantPolls))
			}
		}})
	}
	return out
}

// sectionIndex is the index of the signal section named in signalSections.
func sectionIndex(name string) int {
	return slices.IndexFunc(signalSections, func(s signals) bool { return s.Section == name })
}

// signalSections are the sections with signals on the drifting population or not.
func (sr *seedRun) signalSections(drift bool) []signals {
	var out []signals
	for _, sg := range signalSections {
		if sg.Drift == drift {
			out = append(out, sg)
		}
	}
	return out
}

// charges are what each signal leaves to the polls of a closed-form bound on up
// (signalCharge): it knows which repos are covered (the bounds run as policies know
// what the signal has shown: coverage).
func (sr *seedRun) charges(sigs []signals, up Upstream) []signalCharge {
	var out []signalCharge
	org := orgs(sr.o.n, sr.seed)
	for _, sg := range sigs {
		out = append(out, sg.charge(up, covered(org, sr.seed, sg.Share)))
	}
	return out
}

// simBounds are the bounds run as policies, one per section and budget, over the
// closed-form optimum of the same section.
func (sr *seedRun) simBounds() []results.FreshnessBound {
	var out []results.FreshnessBound
	for _, j := range sr.jobs {
		rs := sr.runs[j.k]
		if len(rs) == 0 || rs[0].Policy != boundPolicy {
			continue
		}
		var names []string
		switch {
		case j.signal != nil:
			names = []string{j.signal.Section}
		case j.drift && j.realistic:
			names = []string{"drift_realistic"}
		case j.drift:
			names = []string{"drift"}
		case j.realistic:
			names = []string{"runs_realistic", "coldstart_realistic"}
		default:
			names = []string{"runs", "coldstart"}
		}
		evidence := results.EvidenceCloned
		if j.drift {
			evidence = results.EvidenceFiltered
		}
		seen := []float64{sr.o.days.warmup + sr.o.days.window/2, sr.o.days.cold / 2}
		for k, name := range names {
			om, op := sr.opt(name)(j.budget)
			x := results.FreshnessBound{Section: name, Evidence: evidence, Budget: j.budget,
				SeenDays: sr.setup.HistoryWindowDays + seen[k], LagMeanH: rs[k].LagMeanH, Ratio: rs[k].LagMeanH / om,
				DormantPolls: rs[k].DormantPolls}
			if op > 0 {
				x.P99 = rs[k].LagP99H / op
			}
			if rs[k].Polls > 0 {
				x.SignalFetchShare = float64(rs[k].SignalFetches) / float64(rs[k].Polls)
			}
			out = append(out, x)
		}
	}
	return out
}

// result is the seed's results, once its tasks ran.
func (sr *seedRun) result() results.Freshness {
	o, d := sr.o, sr.o.days
	def, _ := priority.ByName("")
	res := results.Freshness{Setup: sr.setup, Population: sr.desc}
	for _, s := range sr.sections() {
		opt := sr.optimum[s.name]()
		for _, b := range o.budgets {
			m, p := opt.sqrt.lag(b * float64(o.n))
			m4, p4 := opt.exp4.lag(b * float64(o.n))
			res.Optimum = append(res.Optimum,
				results.FreshnessAnalytic{Section: s.name, Policy: "optimum", Budget: b, LagMeanH: m, LagP99H: p},
				results.FreshnessAnalytic{Section: s.name, Policy: "optimum04", Budget: b, LagMeanH: m4, LagP99H: p4})
		}
	}
	if o.realism {
		rd := describe(sr.real, sr.realSteady, d.warmup, d.warmup+d.window)
		rd.Realism = describeRealism(sr.real, sr.realSteady)
		res.PopulationRealistic = &rd
	}
	for _, xs := range sr.bounds {
		res.Bound = append(res.Bound, xs...)
	}
	for _, j := range sr.jobs {
		rs := sr.runs[j.k]
		for k := range rs {
			rs[k].Default = rs[k].Policy == def.Name()
		}
		if rs[0].Policy == boundPolicy {
			continue // bounds (simBounds)
		}
		if j.signal != nil {
			sec := res.SignalSection(j.signal.Section)
			*sec = append(*sec, rs[0])
			continue
		}
		if j.realistic {
			if j.drift {
				res.DriftRealistic = append(res.DriftRealistic, rs[0])
			} else {
				res.RunsRealistic = append(res.RunsRealistic, rs[0])
				res.ColdStartRealistic = append(res.ColdStartRealistic, rs[1])
			}
			continue
		}
		if j.drift {
			res.Drift = append(res.Drift, rs[0])
		} else {
			res.Runs = append(res.Runs, rs[0])
			res.ColdStart = append(res.ColdStart, rs[1])
		}
	}
	res.Bound = append(res.Bound, sr.simBounds()...)
	for _, p := range policyDocs {
		p.Default = p.Name == def.Name()
		res.Policies = append(res.Policies, p)
	}
	res.Goals = goals(res)
	return res
}
