package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// heldRepos is a worker's state of n repos it holds, none fetched yet.
func heldRepos(n int) []worker.RepoState {
	out := make([]worker.RepoState, n)
	for i := range out {
		out[i].Phase = worker.Queued
	}
	return out
}

// stretch is the factor the worker puts on repo i's poll step at day now.
func (c runConfig) stretch(s *signalled, i int, now float64) float64 {
	return s.repos[i].Stretch(c.view(s, nil, i, now))
}

// fetched steps a fetch of repo i at day now, as run does (a signalled repo's answers
// its signal, another's is a poll), and counts what it tells of the hooks.
func (c runConfig) fetched(s *signalled, i int, now float64, changed bool) {
	cfg := worker.DefaultConfig()
	v := c.view(s, priority.DefaultPrior(), i, now)
	worker.Step(&cfg, v, &s.repos[i], worker.PollDue{})
	worker.Step(&cfg, v, &s.repos[i], worker.Checked{Cloned: true})
	a := worker.Step(&cfg, v, &s.repos[i], worker.Fetched{Res: fetch.Result{Changed: changed}})
	s.loss.Count(a.Found)
}

func TestCoverageIsPerOrganizationAndNested(t *testing.T) {
	org := orgs(20000, 3)
	a, b := covered(org, 3, 0.3), covered(org, 3, 0.6)
	n30, n60 := 0, 0
	byOrg := map[int]bool{}
	for i := range org {
		if a[i] && !b[i] {
			t.Fatalf("repo %d covered at 30%% but not at 60%%", i)
		}
		if c, ok := byOrg[org[i]]; ok && c != a[i] {
			t.Fatalf("organization %d is partly covered", org[i])
		}
		byOrg[org[i]] = a[i]
		if a[i] {
			n30++
		}
		if b[i] {
			n60++
		}
	}
	if s := float64(n30) / 20000; math.Abs(s-0.3) > 0.03 {
		t.Errorf("30%% section covers %.3f of the repos", s)
	}
	if s := float64(n60) / 20000; math.Abs(s-0.6) > 0.03 {
		t.Errorf("60%% section covers %.3f of the repos", s)
	}
	if per := 20000 / float64(len(byOrg)); math.Abs(per-(1+orgExtra)) > 0.2 {
		t.Errorf("%.2f repos per organization, want %g", per, 1+orgExtra)
	}
}

func TestDeliveries(t *testing.T) {
	up := Upstream{
		{Pushes: []Push{{At: 0.995}, {At: 1.0}, {At: 2.0}}},
		{Pushes: []Push{{At: 1.5}}},
	}
	cov := []bool{true, false}
	rng := rand.New(rand.NewPCG(1, 2))
	// Hooks: one delivery per push of a covered repo, within the delay.
	h := signals{DelayMin: 1.0 / 86400, DelayMax: 10.0 / 86400}
	ds := h.deliveries(up, cov, []bool{true, false}, 10, rng)
	if len(ds) != 3 {
		t.Fatalf("hooks: %d deliveries, want 3: %+v", len(ds), ds)
	}
	for k, d := range ds {
		p := up[0].Pushes[k].At
		if d.repo != 0 || !d.owner || d.at < p+h.DelayMin || d.at > p+h.DelayMax {
			t.Errorf("delivery %+v for a push at %v", d, p)
		}
	}
	// All lost.
	h.Loss = 1
	if ds := h.deliveries(up, cov, []bool{true, false}, 10, rng); len(ds) != 0 {
		t.Errorf("%d deliveries with every hook lost", len(ds))
	}
	// A feed: one listing per probe names the repo once, at the probe after the push.
	f := signals{Period: 0.01}
	ds = f.deliveries(up, []bool{true, true}, []bool{false, false}, 10, rng)
	if len(ds) != 3 || ds[0].repo != 0 || math.Abs(ds[0].at-1.0) > 1e-12 || ds[1].at != 1.5 || ds[2].at != 2.0 {
		t.Fatalf("feed deliveries %+v", ds)
	}
}

func TestSignalledRepoIsFetchedFirstOncePerBurst(t *testing.T) {
	s := newSignalled([]int{1, 2, 3}, []delivery{{at: 1.0, repo: 0}, {at: 1.1, repo: 0}, {at: 1.2, repo: 2}, {at: 5, repo: 1}}, false, heldRepos(3))
	s.arrive(2, nowOnly)
	if i, ok := s.next(); !ok || i != 0 {
		t.Fatalf("first fetch %d %v, want repo 0", i, ok)
	}
	if i, ok := s.next(); !ok || i != 2 {
		t.Fatalf("second fetch %d %v, want repo 2 (repo 0's burst coalesced)", i, ok)
	}
	if _, ok := s.next(); ok {
		t.Fatal("a fetch with nothing signalled")
	}
	cfg := runConfig{Covered: []bool{true, true, true}}
	cfg.fetched(s, 0, 2, false) // the fetches the signals asked for
	cfg.fetched(s, 2, 2, false)
	// The worker's decision: a hooked repo is stretched until its hooks stop for
	// HookMemory; repo 1 has sent none yet.
	if got := cfg.stretch(s, 0, 3); got != hookStretch {
		t.Errorf("hooked repo: stretch %v, want %v", got, hookStretch)
	}
	if got := cfg.stretch(s, 1, 3); got != 1 {
		t.Errorf("repo with no hook yet: stretch %v, want 1", got)
	}
	if got := cfg.stretch(s, 0, 1.1+signalMemory+1); got != 1 {
		t.Errorf("hooks stopped a memory ago: stretch %v, want 1", got)
	}
	// A poll that finds a push no hook announced unhooks the repo, as on a worker, until
	// its next hook.
	cfg.fetched(s, 0, 3, true)
	if got := cfg.stretch(s, 0, 3); got != 1 || s.loss.Lost != 1 {
		t.Errorf("after a push found by a poll: stretch %v, lost %d", got, s.loss.Lost)
	}
	s.arrive(6, nowOnly) // repo 1's hook
	if got := cfg.stretch(s, 1, 6); got <= 1 {
		t.Errorf("after its first hook: stretch %v", got)
	}
	// A feed's repos are known covered; a feed names no hook.
	f := newSignalled([]int{1, 2, 3}, []delivery{{at: 1.0, repo: 0}}, true, heldRepos(3))
	f.arrive(2, nowOnly)
	if got := cfg.stretch(f, 1, 3); got != feedStretch {
		t.Errorf("feed: stretch %v, want %v", got, feedStretch)
	}
}

func TestOwnerLevelIsPerOrganization(t *testing.T) {
	org := orgs(20000, 3)
	lvl := ownerLevel(org, 3)
	byOrg := map[int]bool{}
	for i, o := range org {
		if v, ok := byOrg[o]; ok && v != lvl[i] {
			t.Fatalf("organization %d is partly owner-level", o)
		}
		byOrg[o] = lvl[i]
	}
	n := 0
	for _, v := range byOrg {
		if v {
			n++
		}
	}
	if s := float64(n) / float64(len(byOrg)); math.Abs(s-ownerLevelShare) > 0.03 {
		t.Errorf("%.3f of the organizations owner-level, want %g", s, ownerLevelShare)
	}
	if again := ownerLevel(org, 3); fmt.Sprint(again) != fmt.Sprint(lvl) {
		t.Error("the draw differs for one seed")
	}
}

// A quiet repo of an organization whose hook is set on it is stretched from the
// organization's first hook, before its own, until a poll finds a push no hook
// announced; that find is not a lost hook. Per-repo hooks make the organization
// covered from the second repo's.
func TestQuietRepoOfAHookedOrganization(t *testing.T) {
	// Repos 0, 1, 2 in organization 7 (hook set on it), repos 3, 4, 5 in organization 8
	// (hooks set per repo).
	org := []int{7, 7, 7, 8, 8, 8}
	s := newSignalled(org, []delivery{{at: 1.0, repo: 0, owner: true}, {at: 2.0, repo: 3}, {at: 3.0, repo: 4}}, false, heldRepos(6))
	cfg := runConfig{Covered: []bool{true, true, true, true, true, true}}
	if got := cfg.stretch(s, 1, 0.5); got != 1 {
		t.Fatalf("before any hook: stretch %v", got)
	}
	s.arrive(1, nowOnly)
	if got := cfg.stretch(s, 1, 1.5); got != hookStretch {
		t.Errorf("quiet repo after its organization's hook: stretch %v, want %v", got, hookStretch)
	}
	cfg.fetched(s, 1, 1.5, true) // a poll found a push no hook announced
	if got := cfg.stretch(s, 1, 1.6); got != 1 || s.loss.Lost != 0 || s.loss.Outside != 1 {
		t.Errorf("after a poll found a push: stretch %v, loss %+v (want 1, none lost, one outside)", got, s.loss)
	}
	if got := cfg.stretch(s, 2, 1.6); got != hookStretch {
		t.Errorf("the other quiet repo: stretch %v, want %v", got, hookStretch)
	}
	// Per-repo hooks: one repo's is not the organization's, two repos' are.
	s.arrive(2, nowOnly)
	if got := cfg.stretch(s, 5, 2.5); got != 1 {
		t.Errorf("one repo of a per-repo organization hooked: stretch %v, want 1", got)
	}
	s.arrive(3, nowOnly)
	if got := cfg.stretch(s, 5, 3.5); got != hookStretch {
		t.Errorf("two repos of a per-repo organization hooked: stretch %v, want %v", got, hookStretch)
	}
}

func TestSignalsCutTheLagWithinTheBudget(t *testing.T) {
	pop := NewPopulation(600, 5, targets)
	up := pop.NewUpstream(5, 120, 0, batch, targets)
	base := runConfig{Budget: 0.5, End: 120, MinInterval: 5.0 / (24 * 60), Windows: []window{{60, 100}}}
	poll := run(pop, up, production{defaultPolicy()}, base, rand.New(rand.NewPCG(5, 1)))[0]
	sg := signals{Section: "hooks60", Share: 0.6, DelayMin: 1.0 / 86400, DelayMax: 10.0 / 86400, Loss: 0.01}
	cfg := base
	cfg.Signal, cfg.Orgs = &sg, orgs(600, 5)
	cfg.Covered = covered(cfg.Orgs, 5, sg.Share)
	cfg.Deliveries = sg.deliveries(up, cfg.Covered, ownerLevel(cfg.Orgs, 5), cfg.End, rand.New(rand.NewPCG(5, 2)))
	hooked := run(pop, up, production{defaultPolicy()}, cfg, rand.New(rand.NewPCG(5, 1)))[0]
	if hooked.Polls != poll.Polls {
		t.Errorf("signals changed the fetches made: %d, poll-only %d", hooked.Polls, poll.Polls)
	}
	if hooked.SignalFetches == 0 || hooked.SignallingCommitShare == 0 {
		t.Fatalf("no signal fetch: %+v", hooked)
	}
	if hooked.SignallingLagMeanH >= hooked.SilentLagMeanH/2 {
		t.Errorf("signalled commits wait %.2f h, the others %.2f h", hooked.SignallingLagMeanH, hooked.SilentLagMeanH)
	}
	if hooked.LagMeanH >= poll.LagMeanH*0.8 {
		t.Errorf("hooks from 60%% of the repos: mean lag %.2f h, poll-only %.2f h", hooked.LagMeanH, poll.LagMeanH)
	}
}

func TestRealisticPopulation(t *testing.T) {
	const n = 20000
	plain, real := NewPopulation(n, 7, targets), NewRealisticPopulation(n, 7, targets, realism)
	up := real.NewUpstream(7, 120, 0, batch, targets)
	young, activeRoot, dormantLong, dormant, active := 0, 0, 0, 0, 0
	for i := range n {
		if plain.Rates[i] != real.Rates[i] {
			t.Fatalf("repo %d: rate %v, plain %v (the same seed must give the same rates)", i, real.Rates[i], plain.Rates[i])
		}
		if real.Age[i] < 365 {
			young++
		}
		l := up[i]
		if l.Newest > 0 || (len(l.Past) == 0 && real.Quiet[i] < pastDays) || (len(l.Past) > 0 && l.Past[len(l.Past)-1] < -real.Age[i]-1e-9) {
			t.Fatalf("repo %d: history of %d commits, newest %v, for age %v", i, len(l.Past), l.Newest, real.Age[i])
		}
		if real.Rates[i] > 0 {
			active++
			_, _, root := historyAt(l, 0, 0)
			if root {
				activeRoot++
			}
			continue
		}
		dormant++
		if real.Quiet[i] < 365 || len(l.Pushes) > 0 {
			t.Fatalf("dormant repo %d touched %v days ago, %d pushes in the run", i, real.Quiet[i], len(l.Pushes))
		}
		if real.Life[i] > 365 {
			dormantLong++
		}
	}
	// A third of the active repos are under a year old (the dormant ones are older: they
	// were left a year at least), most active repos' first clone reaches the root, and
	// some dormant repos were worked on for over a year.
	if s := float64(young) / float64(active); math.Abs(s-1.0/3) > 0.05 {
		t.Errorf("%.3f of repos under a year old per active repo", s)
	}
	if s := float64(activeRoot) / float64(active); s < 0.3 {
		t.Errorf("only %.3f of active repos show their root commit", s)
	}
	if dormantLong == 0 {
		t.Error("no dormant repo was worked on for over a year")
	}
}

// boundOf1 is the all-evidence bound on the draw of seed 1 at budget 1 over the pushes
// of [day−10, day+10), learned from other draws.
func boundOf1(draw func(uint64) Upstream, day float64, charges ...signalCharge) []results.FreshnessBound {
	up := draw(1)
	w := window{day - 10, day + 10}
	opt := func(b float64) (float64, float64) { return newOptimumAlloc(up, w, 0.5, nil).lag(b * float64(len(up))) }
	return infoBound(learnTable(draw, 1, day), up, day, w, []float64{1}, opt, charges...)
}

func TestInfoBound(t *testing.T) {
	const n, day = 3000, 60.0
	plain := func(seed uint64) Upstream {
		return NewPopulation(n, seed, targets).NewUpstream(seed, day+11, 0, batch, targets)
	}
	real := func(seed uint64) Upstream {
		return NewRealisticPopulation(n, seed, targets, realism).NewUpstream(seed, day+11, 0, batch, targets)
	}
	up, w := plain(1), window{day - 10, day + 10}
	opt := func(b float64) (float64, float64) { return newOptimumAlloc(up, w, 0.5, nil).lag(b * n) }
	counts := bound(NewPopulation(n, 1, targets), up, day, w, []float64{1}, opt, 2, rand.New(rand.NewPCG(1, 2)))[0]
	p, r := boundOf1(plain, day)[0], boundOf1(real, day)[0]
	t.Logf("plain: counts %.3f, all evidence %.3f (dormant polls %.3f); realistic: all evidence %.3f", counts.Ratio, p.Ratio, p.DormantPolls, r.Ratio)
	// In the plain population the root flag tells dormant repos apart, so knowing it must
	// beat knowing the counts alone; a bound is never under the optimum.
	if p.Ratio < 1 || r.Ratio < 1 {
		t.Errorf("a bound under the optimum: %.3f, %.3f", p.Ratio, r.Ratio)
	}
	if p.Ratio >= counts.Ratio {
		t.Errorf("all evidence %.3f, counts alone %.3f", p.Ratio, counts.Ratio)
	}
}

// TestSignalBound: a signal that covers nothing leaves the bound as it is; hooks that
// lose a share ℓ of the pushes of the repos they cover cut the lag, the more the more
// they cover, and a feed (missing nothing) cuts it further; each is charged the polls
// its fetches take.
func TestSignalBound(t *testing.T) {
	const n, day = 3000, 60.0
	plain := func(seed uint64) Upstream {
		return NewPopulation(n, seed, targets).NewUpstream(seed, day+11, 0, batch, targets)
	}
	up := plain(1)
	org := orgs(n, 1)
	hooks := signals{Section: "h", Loss: 0.01, DelayMin: 1.0 / 86400, DelayMax: 10.0 / 86400}
	feed := signals{Section: "f", Period: 5.0 / (24 * 60)}
	none, c30, c60 := make([]bool, n), covered(org, 1, 0.3), covered(org, 1, 0.6)
	xs := boundOf1(plain, day, hooks.charge(up, none), hooks.charge(up, c30), hooks.charge(up, c60), feed.charge(up, c30))
	t.Logf("plain %.3f, nothing covered %.3f, hooks 30%% %.3f, 60%% %.3f, feed 30%% %.3f", xs[0].Ratio, xs[1].Ratio, xs[2].Ratio, xs[3].Ratio, xs[4].Ratio)
	if math.Abs(xs[1].Ratio-xs[0].Ratio) > 1e-12 || xs[1].SignalFetchShare != 0 {
		t.Errorf("a signal covering nothing moved the bound: %.6f, plain %.6f", xs[1].Ratio, xs[0].Ratio)
	}
	if !(xs[2].Ratio < xs[0].Ratio && xs[3].Ratio < xs[2].Ratio && xs[4].Ratio < xs[2].Ratio) {
		t.Errorf("bounds out of order: plain %.3f, hooks 30%% %.3f, 60%% %.3f, feed 30%% %.3f", xs[0].Ratio, xs[2].Ratio, xs[3].Ratio, xs[4].Ratio)
	}
	if xs[3].Ratio <= 0 || xs[4].Ratio <= 0 {
		t.Errorf("a bound at or under zero: %.3f, %.3f", xs[3].Ratio, xs[4].Ratio)
	}
	// The signals' fetches are charged: the more a signal covers, the more of the budget
	// it takes; without the charge the bound would be lower by that share.
	if !(xs[2].SignalFetchShare > 0 && xs[3].SignalFetchShare > xs[2].SignalFetchShare) {
		t.Errorf("signal fetches charged: %.4f at 30%%, %.4f at 60%%", xs[2].SignalFetchShare, xs[3].SignalFetchShare)
	}
	free := hooks.charge(up, c60)
	free.fetches = nil
	if y := boundOf1(plain, day, free)[1]; !(y.LagMeanH < xs[3].LagMeanH) {
		t.Errorf("uncharged bound %.4f h, charged %.4f h", y.LagMeanH, xs[3].LagMeanH)
	}
}

// TestLagOver: one repo polled once a day waits a uniform share of it: half a day on
// average, 0.99 of it at the p99; a repo whose pushes a signal all announces takes no
// polls and waits the signal's delay.
func TestLagOver(t *testing.T) {
	var pushes []Push
	for k := range 1000 {
		pushes = append(pushes, Push{At: float64(k) / 100, Authored: []float64{0}})
	}
	up := Upstream{{Pushes: pushes, Regimes: []Regime{{0, 100}}}, {Pushes: pushes, Regimes: []Regime{{0, 100}}}}
	w := window{0, 10}
	daily := func(int, float64) float64 { return 1 }
	mean, p99 := lagOver(up[:1], w, daily, nil, 0, 10)
	if math.Abs(mean-12) > 1e-9 || math.Abs(p99-0.99*24) > 1e-6 {
		t.Errorf("one repo polled daily: mean %.4f h, p99 %.4f h; want 12, 23.76", mean, p99)
	}
	// Repo 0 fully signalled (a minute's delay), repo 1 polled daily.
	missed := func(i int) float64 { return float64(i) }
	mean, p99 = lagOver(up, w, daily, missed, 1.0/1440, 10)
	if want := (12 + 1.0/60) / 2; math.Abs(mean-want) > 1e-9 || math.Abs(p99-0.98*24) > 1e-6 {
		t.Errorf("half signalled: mean %.4f h, p99 %.4f h; want %.4f, 23.52", mean, p99, want)
	}
	// The optimum of two repos at 100 and 1 pushes a day with 11 polls a day: f ∝ √λ,
	// 10 and 1 a day; a push waits 1/(2f).
	slow := Upstream{up[0], {Pushes: pushes[:10], Regimes: []Regime{{0, 1}}}}
	mean, _ = newOptimumAlloc(slow, w, 0.5, nil).lag(11)
	if want := (1000*0.05 + 10*0.5) / 1010 * 24; math.Abs(mean-want) > 1e-9 {
		t.Errorf("optimum of two repos: %.6f h, want %.6f", mean, want)
	}
}

// TestCloneEvidenceCountsThePushesUpToTheDay: the evidence at a day is the clone's
// history and every push made by then, its silence since the newest of them.
func TestCloneEvidenceCountsThePushesUpToTheDay(t *testing.T) {
	up := NewPopulation(400, 5, targets).NewUpstream(5, 60, 0, batch, targets)
	for i, l := range up {
		c := clonedEvidence(l)
		for _, day := range []float64{0, 0.5, 7, 33.3, 59} {
			e := c.at(l, day)
			n, newest := 0, c.newest
			for _, p := range l.Pushes {
				if p.At <= day {
					n, newest = n+1, p.At
				}
			}
			quiet := day - c.since
			if !math.IsInf(newest, -1) {
				quiet = day - newest
			}
			if e.pushes != c.pushes+n || e.quiet != quiet || e.span != day-c.since || e.root != c.root {
				t.Fatalf("repo %d day %g: %+v, want %d pushes, quiet %g", i, day, e, c.pushes+n, quiet)
			}
		}
	}
}

// TestCloneEvidenceKnowsTheQuietOfAnEmptyListing: a first clone whose history lists no
// commit still shows when the repo last changed (the worker reads it as
// fetch.Result.LastCommitAt), and so does the bound's evidence: its silence is the
// time since that commit, not the listing's span.
func TestCloneEvidenceKnowsTheQuietOfAnEmptyListing(t *testing.T) {
	up := NewPopulation(2000, 5, targets).NewUpstream(5, 60, 0, batch, targets)
	empty := 0
	for i, l := range up {
		if times, _, _ := historyAt(l, 0, 0); len(times) > 0 {
			continue
		}
		empty++
		c := clonedEvidence(l)
		if e := c.at(l, 0); e.pushes != 0 || e.quiet != -l.Newest || e.span != -c.since {
			t.Fatalf("repo %d, listing empty, last changed on day %.0f: %+v, want no push over %.0f days, quiet %.0f", i, l.Newest, e, -c.since, -l.Newest)
		}
	}
	if empty == 0 {
		t.Fatal("no first clone lists an empty history: nothing was tested")
	}
}

// TestTheBoundRunAsAPolicy: the all-evidence table run as a policy clones every repo
// first, as the worker does, and in the stationary window comes close to the static
// bound of the same table; in the cold start it pays for cloning blind.
func TestTheBoundRunAsAPolicy(t *testing.T) {
	const n = 3000
	pop := NewPopulation(n, 3, targets)
	cfg := runConfig{Budget: 0.5, End: 120, Windows: []window{{60, 90}, {0, 30}}}
	up := pop.NewUpstream(3, cfg.End, 0, batch, targets)
	draw := func(s uint64) Upstream { return NewPopulation(n, s, targets).NewUpstream(s, 76, 0, batch, targets) }
	steady, cold := learnTable(draw, 3, 75), learnTable(draw, 3, 15)
	pol := &informed{up: up, tables: []dayTable{{15, func() *rateTable { return cold }}, {75, func() *rateTable { return steady }}}}
	b := run(pop, up, pol, cfg, rand.New(rand.NewPCG(1, 2)))
	w := cfg.Windows[0]
	cf := func(b float64) (float64, float64) { return newOptimumAlloc(up, w, 0.5, nil).lag(b * n) }
	static := infoBound(steady, up, 75, w, []float64{cfg.Budget}, cf)[0].Ratio
	m, _ := cf(cfg.Budget)
	sim := b[0].LagMeanH / m
	cm, _ := newOptimumAlloc(up, cfg.Windows[1], 0.5, nil).lag(cfg.Budget * n)
	t.Logf("stationary: static bound %.3f, run as a policy %.3f; cold start %.3f", static, sim, b[1].LagMeanH/cm)
	if b[1].Censored != 0 || b[1].Commits == 0 {
		t.Fatalf("cold start: %+v", b[1])
	}
	if sim < 0.9*static || sim > 1.2*static {
		t.Errorf("run as a policy %.3f × the optimum, static bound %.3f", sim, static)
	}
	uni := run(pop, up, uniform{}, cfg, rand.New(rand.NewPCG(1, 2)))
	if !(b[1].LagMeanH < uni[1].LagMeanH/2) {
		t.Errorf("cold start %.2f h, uniform's %.2f h", b[1].LagMeanH, uni[1].LagMeanH)
	}
}

// TestTheDriftBoundRunAsAPolicy: the filter of push times run as a policy clones every
// repo first, fetches every push, and comes within range of its closed form; with a
// feed that covers some repos it never polls them once cloned, their pushes fetched by
// the feed alone.
func TestTheDriftBoundRunAsAPolicy(t *testing.T) {
	const n = 2000
	pop := NewPopulation(n, 3, targets)
	cfg := runConfig{Budget: 0.5, End: 160, MinInterval: 5.0 / (24 * 60), Windows: []window{{100, 140}}}
	up := pop.NewUpstream(3, cfg.End, 0.1, batch, targets)
	start := sync.OnceValue(func() *filterStart { return newFilterStart(pop, up, 0.1, rand.New(rand.NewPCG(3, 7))) })
	pol := &filtered{up: up, from: start}
	r := run(pop, up, pol, cfg, rand.New(rand.NewPCG(1, 2)))[0]
	w := cfg.Windows[0]
	opt := func(b float64) (float64, float64) { return newOptimumAlloc(up, w, 0.5, nil).lag(b * n) }
	closed := driftBound(pop, up, 0.1, w, []float64{cfg.Budget}, opt, rand.New(rand.NewPCG(3, 7)))[0]
	t.Logf("run as a policy %.2f h, closed form %.2f h", r.LagMeanH, closed.LagMeanH)
	if r.Censored != 0 || r.Commits == 0 || r.LagMeanH < 0.8*closed.LagMeanH || r.LagMeanH > 1.4*closed.LagMeanH {
		t.Fatalf("the filter run as a policy: %+v; closed form %.2f h", r, closed.LagMeanH)
	}
	feed := signals{Section: "feed", Share: 0.7, Period: 5.0 / (24 * 60)}
	cfg.Signal, cfg.Orgs = &feed, orgs(n, 3)
	cfg.Covered = covered(cfg.Orgs, 3, feed.Share)
	cfg.Deliveries = feed.deliveries(up, cfg.Covered, ownerLevel(cfg.Orgs, 3), cfg.End, rand.New(rand.NewPCG(3, 8)))
	covPolls := 0
	pol = &filtered{up: up, from: start}
	cov := &countingCovered{filtered: pol, covered: cfg.Covered, polls: &covPolls}
	rf := run(pop, up, cov, cfg, rand.New(rand.NewPCG(1, 2)))[0]
	if rf.Censored != 0 || rf.SignalFetches == 0 || rf.LagMeanH >= r.LagMeanH/2 {
		t.Fatalf("with a feed: %+v", rf)
	}
	if covPolls != 0 {
		t.Fatalf("%d polls of covered repos after their clone", covPolls)
	}
}

// TestTheFilteredBoundKnowsNoPushAfterItsPoll: the drift bound run as a policy reads
// each repo's belief filtered through the pushes made up to the poll, those it fetches,
// and none after: what it believes at a day is what it would believe had the repo
// never pushed again. Every belief stays a distribution, a repo that wakes up is
// believed faster once its first push is filtered, and runs that share the beliefs at
// day 0 leave them as they found them.
func TestTheFilteredBoundKnowsNoPushAfterItsPoll(t *testing.T) {
	const n, end = 400, 120.0
	pop := NewPopulation(n, 4, targets)
	up := pop.NewUpstream(4, end, 0.1, batch, targets)
	start := newFilterStart(pop, up, 0.1, rand.New(rand.NewPCG(4, 9)))
	day0 := slices.Clone(start.b)
	f := start.filter()
	rng := rand.New(rand.NewPCG(4, 10))
	checked := 0
	var days []float64
	for day := 0.0; day < end; day += rng.Float64() * 3 {
		days = append(days, day)
		// The upstream as it stands at day: every push after it undone.
		past := make(Upstream, len(up))
		for i, l := range up {
			past[i] = l
			past[i].Pushes = l.Pushes[:sort.Search(len(l.Pushes), func(k int) bool { return l.Pushes[k].At > day })]
		}
		then := *start
		then.up = past
		g := then.filter()
		for i := range up {
			got := f.mean(i, day)
			want := 0.0
			for _, d := range days { // the same steps
				want = g.mean(i, d)
			}
			if got != want {
				t.Fatalf("repo %d at day %.3f: believes %g, %g from the pushes made by then", i, day, got, want)
			}
			sum := 0.0
			for _, w := range f.b[i] {
				sum += w
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Fatalf("repo %d at day %.3f: belief sums to %g", i, day, sum)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("nothing checked")
	}
	woke := 0
	for i, l := range up {
		for k, r := range l.Regimes[1:] {
			if l.Regimes[k].Rate != 0 || r.Rate == 0 || r.From < 10 {
				continue
			}
			// The first push after it woke, if it came before the next change.
			p := slices.IndexFunc(l.Pushes, func(p Push) bool { return p.At >= r.From })
			if p < 0 || (k+2 < len(l.Regimes) && l.Pushes[p].At >= l.Regimes[k+2].From) || l.Pushes[p].At > end {
				continue
			}
			f := start.filter()
			before := f.mean(i, r.From-filterStep)
			if after := f.mean(i, l.Pushes[p].At); !(after > 2*before) {
				t.Errorf("repo %d woke at day %.1f, pushed at %.2f: believed %.2g before, %.2g after", i, r.From, l.Pushes[p].At, before, after)
			}
			woke++
		}
	}
	if woke == 0 {
		t.Fatal("no repo woke up")
	}
	// Two runs sharing the beliefs at day 0 give what a run on beliefs of its own gives.
	cfg := runConfig{Budget: 0.5, End: end, MinInterval: 5.0 / (24 * 60), Windows: []window{{60, 100}}}
	shared := func() *filterStart { return start }
	first := run(pop, up, &filtered{up: up, from: shared}, cfg, rand.New(rand.NewPCG(1, 2)))[0]
	again := run(pop, up, &filtered{up: up, from: shared}, cfg, rand.New(rand.NewPCG(1, 2)))[0]
	own := func() *filterStart { return newFilterStart(pop, up, 0.1, rand.New(rand.NewPCG(4, 9))) }
	alone := run(pop, up, &filtered{up: up, from: sync.OnceValue(own)}, cfg, rand.New(rand.NewPCG(1, 2)))[0]
	if first.Commits == 0 || first != again || first != alone {
		t.Fatalf("runs on shared beliefs %+v and %+v, on their own %+v", first, again, alone)
	}
	if !slices.Equal(start.b, day0) {
		t.Fatal("a run changed the shared beliefs at day 0")
	}
}

// countingCovered counts the steps a filtered bound asks for covered repos.
type countingCovered struct {
	*filtered
	covered []bool
	polls   *int
}

func (c *countingCovered) next(i int, old float64, o seen) (float64, bool) {
	p, ok := c.filtered.next(i, old, o)
	if ok && c.covered[i] {
		*c.polls++
	}
	return p, ok
}

// TestTheTableKnowsTheBusiestRepos: a repo busier than any the table's draws hold falls
// in an empty bin, and is estimated from its own pushes, not at the population's mean.
func TestTheTableKnowsTheBusiestRepos(t *testing.T) {
	const n, day = 2000, 60.0
	draw := func(s uint64) Upstream { return NewPopulation(n, s, targets).NewUpstream(s, day+1, 0, batch, targets) }
	table := learnTable(draw, 1, day)
	busy := evidence{pushes: 4000, span: 400, quiet: 0.05} // ten pushes a day
	if c := table.coarse[busy.key(false)]; c.n != 0 {
		t.Fatalf("the busy repo's bin holds %v draws: not the case tested", c.n)
	}
	if got := table.estimate(busy); got < 5 || got > 20 {
		t.Errorf("a repo with %d pushes over %.0f days estimated at %.4f a day (population mean %.4f)",
			busy.pushes, busy.span, got, table.mean)
	}
	// A bin the draws fill is theirs: the repo's own rate moves it little. The commonest
	// bin of a fresh draw's repos is estimated within 1% of its mean shrunk toward the
	// population's.
	var common evidence
	most := 0.0
	for _, l := range draw(99) {
		if e := evidenceAt(l, day); table.coarse[e.key(false)].n > most {
			common, most = e, table.coarse[e.key(false)].n
		}
	}
	c, f := table.coarse[common.key(false)], table.fine[common.key(true)]
	toMean := (f.sum + 5*(c.sum+5*table.mean)/(c.n+5)) / (f.n + 5)
	if got := table.estimate(common); math.Abs(got-toMean) > 0.01*toMean {
		t.Errorf("%+v (a bin of %.0f draws) estimated at %.5f, %.5f shrunk toward the mean", common, most, got, toMean)
	}
}

// TestTheHookBoundKnowsTheCoverageHooksShowed: a bound with hooks learns which
// organizations send them from their deliveries, as a mirror would: before an
// organization's first delivery its repos are believed covered only with the chance the
// model leaves (all of the share while none of its repos pushed, less with every push
// that went undelivered), from it on every repo of it is, and a feed's coverage is known
// from the start.
func TestTheHookBoundKnowsTheCoverageHooksShowed(t *testing.T) {
	const n, end = 3000, 60.0
	pop := NewPopulation(n, 5, targets)
	up := pop.NewUpstream(5, end, 0, batch, targets)
	org := orgs(n, 5)
	hooks := signalSections[1] // hooks60
	cov := covered(org, 5, hooks.Share)
	ds := hooks.deliveries(up, cov, ownerLevel(org, 5), end, rand.New(rand.NewPCG(5, 6)))
	c := hooks.shownBy(up, org, cov, ds)
	first := map[int]float64{}
	for _, d := range ds {
		if _, ok := first[org[d.repo]]; !ok {
			first[org[d.repo]] = d.at
		}
	}
	unknown := 1 - hooks.Share*(1-hooks.Loss)
	var before, after, silent int
	for i := range up {
		f, shown := first[org[i]]
		if !cov[i] && shown {
			t.Fatalf("repo %d: a delivery from an organization not covered", i)
		}
		if got := c.missed(i, 0); got != unknown {
			t.Fatalf("repo %d at day 0: missed %g, want %g (nothing shown yet)", i, got, unknown)
		}
		if !shown {
			if got := c.missed(i, end); got < unknown {
				t.Fatalf("repo %d, no delivery by day %g: missed %g, under %g", i, end, got, unknown)
			}
			if len(up[i].Pushes) > 0 {
				silent++
				if got := c.missed(i, end); got < 0.95 {
					t.Fatalf("repo %d pushed with no hook: missed %g, want about 1", i, got)
				}
			}
			continue
		}
		if got := c.missed(i, f/2); got < unknown {
			t.Fatalf("repo %d at day %g, before its organization's first hook (%g): missed %g", i, f/2, f, got)
		}
		before++
		if got := c.missed(i, f); got != hooks.Loss {
			t.Fatalf("repo %d at its organization's first hook: missed %g, want %g", i, got, hooks.Loss)
		}
		after++
	}
	if before == 0 || after == 0 || silent == 0 {
		t.Fatalf("checked %d before, %d after a first hook, %d silent pushers", before, after, silent)
	}
	feed := signalSections[4]
	fcov := covered(org, 5, feed.Share)
	fc := feed.shownBy(up, org, fcov, nil)
	for i := range up {
		want := 1.0
		if fcov[i] {
			want = 0
		}
		if got := fc.missed(i, 0); got != want {
			t.Fatalf("feed, repo %d: missed %g at day 0, want %g", i, got, want)
		}
	}
}

// nowOnly is the view of a worker that shows only the time.
func nowOnly(_ int, day float64) worker.View { return worker.View{Now: at(day)} }

// A fleet whose hooks cover most repos learns the hazard its polls alone teach: the
// fetch a hook asked for of a repo polled as uncovered until then is scored as the poll
// it pre-empted (worker.Step), not left out. Left out, the scores of such repos saw
// only their quiet polls, and a new fleet behind hooks learned a hazard many times
// the one the same repos teach without them.
func TestHooksTeachTheHazardPollsTeach(t *testing.T) {
	const n, seed = 2000, 3
	pop := NewPopulation(n, seed, targets)
	up := pop.NewUpstream(seed, 40, 0, batch, targets)
	base := runConfig{Budget: 0.5, End: 40, MinInterval: 5.0 / (24 * 60), Windows: []window{{10, 20}}}
	plain := run(pop, up, production{defaultPolicy()}, base, rand.New(rand.NewPCG(seed, 1)))[0]
	sg := signals{Section: "hooks60", Share: 0.6, DelayMin: 1.0 / 86400, DelayMax: 10.0 / 86400, Loss: 0.01}
	cfg := base
	cfg.Signal, cfg.Orgs = &sg, orgs(n, seed)
	cfg.Covered = covered(cfg.Orgs, seed, sg.Share)
	cfg.Deliveries = sg.deliveries(up, cfg.Covered, ownerLevel(cfg.Orgs, seed), cfg.End, rand.New(rand.NewPCG(seed, 2)))
	hooked := run(pop, up, production{defaultPolicy()}, cfg, rand.New(rand.NewPCG(seed, 1)))[0]
	if plain.LearnedHazardPerMonth <= 0 || hooked.LearnedHazardPerMonth <= 0 {
		t.Fatalf("no hazard learned: %v without hooks, %v with", plain.LearnedHazardPerMonth, hooked.LearnedHazardPerMonth)
	}
	t.Logf("hazard a month: %.3g behind hooks, %.3g without", hooked.LearnedHazardPerMonth, plain.LearnedHazardPerMonth)
	if r := hooked.LearnedHazardPerMonth / plain.LearnedHazardPerMonth; r > 3 || r < 1.0/3 {
		t.Errorf("hazard learned behind hooks %.3g a month, %.3g without (%.1f×): want within 3×",
			hooked.LearnedHazardPerMonth, plain.LearnedHazardPerMonth, r)
	}
}
