package main

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// runConfig is one simulation: a poll budget, how long the fleet runs from its first
// day, and the stretches of time measured.
type runConfig struct {
	Budget      float64  // polls per repo per day
	End         float64  // days simulated
	Windows     []window // the lag of the pushes made in each is measured
	MinInterval float64  // days between two polls of one repo, as the worker enforces
	// Signal, if set, is a change signal some repos send (hooks or a feed): Deliveries are
	// when each reaches the worker, Covered which repos send it.
	Signal     *signals
	Deliveries []delivery
	Covered    []bool
	Orgs       []int // each repo's organization
}

// Fall-back polling of repos that signal their pushes is the worker's decision
// (worker.RepoState.Stretch): a signalled push is fetched at once, so polls of such a
// repo are there only for the signals that get lost, and its step is stretched by 1/√
// of the loss the worker has counted (worker.HookLoss), or by worker.FeedStretch for a
// repo a feed covers. A repo counts as hooked from its first hook until a poll finds a
// push before its hook (worker.HookState), and a repo with no hook of its own counts as
// hooked while its organization's hooks cover it (worker.OwnerHooks: an owner-level
// hook, or hooks of ownerRepos of its repos) until a poll finds a push of it first. A
// repo that may be hooked is stretched by what the worker learned of the repos at its
// level (worker.HookLoss.Missed); a poll's find of a repo whose organization showed
// nothing marks the organization (worker.OwnerHooks.FoundAt).
const (
	hookStretch  = worker.HookStretch // at the loss assumed before any is counted
	ownerRepos   = worker.OwnerRepos
	feedStretch  = worker.FeedStretch
	signalMemory = float64(worker.HookMemory / (24 * time.Hour)) // days
)

// view is what the worker's step reads of the worker for repo i at day now.
func (c runConfig) view(sig *signalled, prior *priority.Prior, i int, now float64) worker.View {
	v := worker.View{Now: at(now), Prior: prior}
	if sig != nil {
		v.FeedCovered, v.Owner, v.HookLoss = sig.feed && c.Covered[i], sig.owner(i), sig.loss
	}
	return v
}

// schedPolicy is a scheduler as the simulated worker's policy (worker.Config.Policy).
// What the scheduler reads besides the worker's inputs (the repo, the day, its newest
// commit as a day) is set before each fetch; a repo it never polls again gets +Inf.
type schedPolicy struct {
	s          scheduler
	i          int
	now        float64
	lastCommit float64
}

func (p *schedPolicy) Name() string { return p.s.name() }

// ReadsBelief is whether the scheduler is a worker policy that reads the repos' beliefs
// (priority.BeliefReader): the others do not pay for them.
func (p *schedPolicy) ReadsBelief() bool {
	if pr, ok := p.s.(production); ok {
		if r, ok := pr.p.(priority.BeliefReader); ok {
			return r.ReadsBelief()
		}
	}
	return false
}

// ReadsStats is whether the scheduler is a worker policy: the others (the references,
// round-robin) read nothing of a repo's stats, so the step keeps none for them.
func (p *schedPolicy) ReadsStats() bool {
	_, ok := p.s.(production)
	return ok
}

func (p *schedPolicy) Next(in priority.Input) float64 {
	o := seen{now: p.now, changed: in.Changed, lastCommit: p.lastCommit, prior: in.Prior}
	var (
		next  float64
		again bool
	)
	if pr, ok := p.s.(production); ok {
		// Only a worker policy reads the stats: passed on by reference, apart, they
		// are not copied, and in does not move to the heap.
		next, again = pr.nextWith(in.Old, o, &in.Stats)
	} else {
		next, again = p.s.next(p.i, in.Old, o)
	}
	if !again {
		return math.Inf(1)
	}
	return next
}

// window is a measured stretch of days [From, To).
type window struct{ From, To float64 }

// run starts a fleet on day 0 with every repo still to clone, polls the upstream at a
// fixed budget, taking repos from the worker's own queue in the order the scheduler's
// priorities give, and measures what a user of the mirror sees in each window. The
// worker's own step (worker.Step) decides on each fetch, the scheduler as its policy.
// A poll tells it only what a worker would know: on the first clone the history's
// commit times (bounded as the mirror bounds them), on later polls the times of the
// commits it brought; never the pushes' times, which the lag is measured from.
func run(pop Population, up Upstream, sched scheduler, cfg runConfig, rng *rand.Rand) []results.FreshnessRun {
	out, _ := runTo(pop, up, sched, cfg, rng, false)
	return out
}

// runTo is run, and the day it ended: cfg.End, or sooner once every push made in a
// window is mirrored, unless drainAll.
func runTo(pop Population, up Upstream, sched scheduler, cfg runConfig, rng *rand.Rand, drainAll bool) ([]results.FreshnessRun, float64) {
	n := len(pop.Rates)
	ids := make([]string, n)
	q := worker.NewQueue()
	for i := range n {
		ids[i] = strconv.Itoa(i)
		if c, ok := sched.(cloner); ok {
			q.PushNew(ids[i], c.cloneStep()) // as a worker queues repos added in bulk
		} else {
			q.Push(ids[i], sched.start(i, rng), time.Time{})
		}
	}
	changes := regimeChanges(up)
	follower, _ := sched.(rateFollower)
	w, aware := sched.(coverageAware)
	if aware && cfg.Signal != nil {
		w.watch(cfg.Signal.shownBy(up, cfg.Orgs, cfg.Covered, cfg.Deliveries))
	}
	commits := false
	if r, ok := sched.(commitsReader); ok {
		commits = r.readsCommits()
	}

	cursor := make([]int, n) // first push not mirrored yet
	cloned := make([]bool, n)
	lastCommit := make([]float64, n)
	held := make([]worker.RepoState, n) // the worker's state of each repo
	for i := range held {
		held[i].Phase = worker.Queued
	}
	pol := &schedPolicy{s: sched}
	wcfg := worker.DefaultConfig()
	wcfg.Policy, wcfg.MinInterval = pol, time.Duration(cfg.MinInterval*86400*float64(time.Second))
	for i := range lastCommit {
		lastCommit[i] = math.Inf(-1)
	}
	prior := priority.DefaultPrior()
	withEvidence := 0
	var scores priority.Scores
	learns := sched.name() == "bayes" // only it reads the prior; the others need not pay for it
	// What each repo's stats say between its polls, for its scores and the fits (a
	// saving only).
	var memos []priority.Memo
	if learns {
		memos = make([]priority.Memo, n)
	}

	meters := make([]meter, len(cfg.Windows))
	for k, w := range cfg.Windows {
		meters[k] = meter{ws: w.From, we: w.To, run: results.FreshnessRun{Policy: sched.name(), Budget: cfg.Budget}}
	}
	var sig *signalled
	if cfg.Signal != nil {
		sig = newSignalled(cfg.Orgs, cfg.Deliveries, cfg.Signal.Period > 0, held)
	}
	// What the worker reads when a signal arrives: the queue's front tells when the
	// poll a hook pre-empts was due (worker.Step).
	sigView := func(i int, day float64) worker.View {
		v := cfg.view(sig, prior, i, day)
		v.Front = q.Min()
		return v
	}
	// The run ends once every push made in a window is mirrored: past that, nothing it
	// measures can change but what the worker learns, which is read as the last window
	// ends. due[i] is how many of repo i's pushes were made before the last window's
	// end; unseen counts the repos with some of those still unmirrored.
	measuredTo := 0.0
	for _, w := range cfg.Windows {
		measuredTo = max(measuredTo, w.To)
	}
	due := make([]int, n)
	unseen := 0
	for i, life := range up {
		due[i] = life.pushedBefore(measuredTo)
		if due[i] > 0 {
			unseen++
		}
	}
	var (
		all []priority.Stats // the cloned repos' stats and memos at a fit
		ms  []*priority.Memo
	)
	learned := prior                            // the prior as the last window ends
	dt := 1 / worker.PollsPerDay(cfg.Budget, n) // the pace a worker holds a poll budget at
	ended := cfg.End
	for k := 0; ; k++ {
		now := float64(k) * dt
		if now > cfg.End {
			break
		}
		if now >= measuredTo && unseen == 0 && !drainAll {
			ended = now
			break
		}
		for len(changes) > 0 && changes[0].at <= now {
			c := changes[0]
			changes = changes[1:]
			if follower == nil {
				continue
			}
			cur, queued := q.Priority(ids[c.repo])
			if p, ok := follower.rateChanged(c.repo, c.rate, q.Min(), cur, queued, rng); ok {
				q.Push(ids[c.repo], p, time.Time{})
			}
		}
		if learns && prior.Due(at(now), withEvidence) {
			all, ms = all[:0], ms[:0]
			for i := range held { // by index: a repo's state is large
				if cloned[i] {
					all, ms = append(all, held[i].Rec.Stats), append(ms, &memos[i])
				}
			}
			prior = priority.FitWith(all, ms, prior, at(now), &scores)
			scores.Fade()
			if now < measuredTo {
				learned = prior
			}
		}
		var (
			id       string
			old      float64
			ok       bool
			signaled bool
		)
		if sig != nil {
			sig.arrive(now, sigView)
			if i, got := sig.next(); got {
				// Fetched now, whatever its place in the queue: its next poll is a step from
				// the queue's front, where a poll made now would be.
				id, old, ok, signaled = ids[i], q.Min(), true, true
				if p, in := q.Priority(id); in {
					old = min(old, p)
				}
				q.Remove(id)
			}
		}
		if !ok {
			id, old, ok = q.Pop(at(now))
		}
		if !ok {
			for k := range meters {
				if now >= meters[k].ws && now < meters[k].we {
					meters[k].run.IdlePolls++
				}
			}
			continue
		}
		i, err := strconv.Atoi(id) // ids[i] is i in decimal: cheaper than a map
		if err != nil {
			panic(err)
		}
		life := up[i]
		c := cursor[i]
		for c < len(life.Pushes) && life.Pushes[c].At <= now {
			c++
		}
		brought := life.Pushes[cursor[i]:c]
		rate := math.NaN() // read only when a window measures the poll
		for k := range meters {
			m := &meters[k]
			if now >= m.ws && now < m.we {
				m.run.Polls++
				if signaled {
					m.run.SignalFetches++
				}
				if math.IsNaN(rate) {
					rate = life.RateAt(now)
				}
				if rate == 0 {
					m.dormantPolls++
				}
				if len(brought) > 0 {
					m.changedPolls++
				}
			}
			if len(brought) > 0 {
				for _, p := range brought {
					if m.push(p, now) && cfg.Covered != nil && cfg.Covered[i] {
						m.signalling(p, now)
					}
				}
				m.stale(brought[0].At, now)
			}
		}
		for _, p := range brought {
			lastCommit[i] = max(lastCommit[i], p.Authored[0])
		}
		wasCloned := cloned[i]
		var res fetch.Result
		if !cloned[i] {
			lastCommit[i] = max(lastCommit[i], life.Newest)
			times, since, root := historyAt(life, c, now)
			res = fetch.Result{Cloned: true, Changed: true, Commits: commitsAt(times), HistorySince: at(since), HistoryFromRoot: root}
			cloned[i] = true
			withEvidence++
		} else {
			res = fetch.Result{Changed: len(brought) > 0}
			if commits {
				res.Commits = commitsAt(newCommits(brought))
			}
		}
		if !math.IsInf(lastCommit[i], -1) {
			res.LastCommitAt = at(lastCommit[i])
		}
		if cursor[i] < due[i] && c >= due[i] {
			unseen--
		}
		cursor[i] = c
		// The worker's fetch: taken at old (a signalled repo answers its signal), a
		// mirror there or not, and what it brought; the poll's score reads the repo's
		// memo.
		pol.i, pol.now, pol.lastCommit = i, now, lastCommit[i]
		v := cfg.view(sig, prior, i, now)
		worker.Step(&wcfg, v, &held[i], worker.PollDue{Prio: old})
		worker.Step(&wcfg, v, &held[i], worker.Checked{Cloned: wasCloned})
		a := worker.Step(&wcfg, v, &held[i], worker.Fetched{Res: res})
		if learns && a.Learn {
			scores.AddWith(prior, a.Learning.Evidence, a.Learning.Poll, &memos[i])
		}
		if st := held[i].Rec.PollStretch; aware && st > 1 && a.Queue.Op == worker.QueueAt {
			// A bound allocates its covered repos' polls itself: the worker's fall-back
			// stretch is taken back off its step.
			a.Queue.Prio = old + (a.Queue.Prio-old)/st
		}
		if sig != nil {
			sig.loss.Count(a.Found)
			sig.loss.CountMaybe(a.Maybe)
			if a.OwnerFound {
				sig.ownerOf(i).FoundAt = at(now)
			}
		}
		if !math.IsInf(a.Queue.Prio, 1) {
			q.Push(id, a.Queue.Prio, a.Queue.NotBefore)
		}
	}
	// Pushes still unmirrored at the end count with the lag they have so far.
	for i, life := range up {
		for _, p := range life.Pushes[cursor[i]:] {
			if p.At > cfg.End {
				break
			}
			for k := range meters {
				if meters[k].push(p, cfg.End) {
					meters[k].run.Censored += len(p.Authored)
					if cfg.Covered != nil && cfg.Covered[i] {
						meters[k].signalling(p, cfg.End)
					}
				}
			}
		}
		if c := cursor[i]; c < len(life.Pushes) && life.Pushes[c].At <= cfg.End {
			for k := range meters {
				meters[k].stale(life.Pushes[c].At, cfg.End)
			}
		}
	}
	out := make([]results.FreshnessRun, len(meters))
	for k := range meters {
		out[k] = meters[k].result(n)
		if learns {
			out[k].LearnedHazardPerMonth = learned.Hazard * 30
			out[k].LearnedDormantShare = learned.Weights[0]
		}
	}
	return out, ended
}

// historyAt is what a first clone at day now lists of the history: the times of the
// newest commits pushed by then, back to the history window or the mirror's bound, where
// that listing begins, and whether it reached the repo's first commit.
func historyAt(life RepoLife, pushed int, now float64) (times []time.Time, since float64, root bool) {
	window := fetch.HistoryWindow.Hours() / 24
	var all []float64
	for _, p := range life.Pushes[:pushed] {
		all = append(all, p.Authored...)
	}
	all = append(all, life.Past...)
	slices.SortFunc(all, func(a, b float64) int { return cmp.Compare(b, a) })
	since = now - window
	for k, a := range all {
		if a <= since {
			return times, since, false
		}
		if k == fetch.MaxHistoryCommits {
			return times, all[k-1], false // the walk stopped here: the listing covers only what it reached
		}
		times = append(times, at(a))
	}
	if life.Born && len(all) > 0 {
		return times, all[len(all)-1], true
	}
	return times, since, false
}

// commitsAt are commits at these times, as a fetch's result lists them.
func commitsAt(times []time.Time) []fetch.Commit {
	out := make([]fetch.Commit, len(times))
	for k, t := range times {
		out[k] = fetch.Commit{Author: t}
	}
	return out
}

// newCommits lists the commit times a fetch of these pushes brings, bounded as the
// mirror bounds them.
func newCommits(pushes []Push) []time.Time {
	var out []time.Time
	for _, p := range pushes {
		for _, a := range p.Authored {
			if len(out) == fetch.MaxNewCommits {
				return out
			}
			out = append(out, at(a))
		}
	}
	return out
}

// regimeChange is a repo drawing a new rate.
type regimeChange struct {
	at   float64
	repo int
	rate float64
}

func regimeChanges(up Upstream) []regimeChange {
	var out []regimeChange
	for i, l := range up {
		for _, r := range l.Regimes[1:] {
			out = append(out, regimeChange{r.From, i, r.Rate})
		}
	}
	slices.SortFunc(out, func(a, b regimeChange) int { return cmp.Compare(a.at, b.at) })
	return out
}

// meter accumulates lag, staleness and age over the measured window [ws, we).
type meter struct {
	ws, we       float64
	lags         []float32 // days, one per commit pushed in the window
	staleDays    float64   // Σ over repos of the time they lacked a push
	ageDays      float64   // Σ over repos of ∫ age dt (age: time since the oldest missing push)
	dormantPolls int
	changedPolls int
	firstCommits int     // commits of pushes that were a repo's first after a change of rate
	firstLag     float64 // their total lag, days
	covCommits   int     // commits of repos that send a signal (signal sections)
	covLag       float64 // their total lag, days
	run          results.FreshnessRun
}

// signalling records that a push counted by push came from a repo that sends signals.
func (m *meter) signalling(p Push, seen float64) {
	m.covCommits += len(p.Authored)
	m.covLag += (seen - p.At) * float64(len(p.Authored))
}

// push records a push made at p.At and mirrored at seen, once per commit it carried; it
// reports whether the push was in the window.
func (m *meter) push(p Push, seen float64) bool {
	if p.At < m.ws || p.At >= m.we {
		return false
	}
	for range p.Authored {
		m.lags = append(m.lags, float32(seen-p.At))
	}
	if p.First {
		m.firstCommits += len(p.Authored)
		m.firstLag += (seen - p.At) * float64(len(p.Authored))
	}
	return true
}

// stale records that a repo lacked the push made at first until seen.
func (m *meter) stale(first, seen float64) {
	a, b := max(first, m.ws), min(seen, m.we)
	if a >= b {
		return
	}
	m.staleDays += b - a
	m.ageDays += ((b-first)*(b-first) - (a-first)*(a-first)) / 2
}

// result is the window's figures for n repos.
func (m *meter) result(n int) results.FreshnessRun {
	res := m.run
	lags := m.lags
	res.Commits = len(lags)
	if len(lags) > 0 {
		sum := 0.0
		for _, l := range lags {
			sum += float64(l)
		}
		res.LagMeanH = sum / float64(len(lags)) * 24
		slices.Sort(lags)
		res.LagP50H = float64(quantile(lags, 0.50)) * 24
		res.LagP99H = float64(quantile(lags, 0.99)) * 24
	}
	if m.firstCommits > 0 {
		res.FirstPushShare = float64(m.firstCommits) / float64(len(lags))
		res.FirstPushLagH = m.firstLag / float64(m.firstCommits) * 24
	}
	if m.covCommits > 0 && len(lags) > 0 {
		res.SignallingCommitShare = float64(m.covCommits) / float64(len(lags))
		res.SignallingLagMeanH = m.covLag / float64(m.covCommits) * 24
		if rest := len(lags) - m.covCommits; rest > 0 {
			res.SilentLagMeanH = (res.LagMeanH/24*float64(len(lags)) - m.covLag) / float64(rest) * 24
		}
	}
	days := m.we - m.ws
	res.Freshness = 1 - m.staleDays/(float64(n)*days)
	res.AgeMeanH = m.ageDays / (float64(n) * days) * 24
	if res.Polls > 0 {
		res.DormantPolls = float64(m.dormantPolls) / float64(res.Polls)
		res.ChangingPolls = float64(m.changedPolls) / float64(res.Polls)
	}
	return res
}

// quantile of sorted values (nearest rank).
func quantile(sorted []float32, q float64) float32 {
	if len(sorted) == 0 {
		return float32(math.NaN())
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}
