// Package budget is the poll budget the stack and its bill are sized for, and what
// follows from it: how many workers a fleet needs (fetcher time, and the per-host
// politeness limit when most of the list is on one host), the largest fleet's worker
// count (the stack's maxWorkers), and the staleness a fleet running at its budget shows,
// from which the stale-repos alarm and the workers' scaling steps are set. The CDK app
// (infra) and the cost model (bench/storecost) both read it, so the fleet the bill
// prices is one the stack neither scales out of nor alarms on.
package budget

import (
	"math"
	"time"
)

// Budget is a fleet's sizing target and the figures its sizing needs.
type Budget struct {
	// PollsPerDay is the mean polls per repo per day the fleet is sized for.
	PollsPerDay float64
	// ChangesPerRepoDay is how many of those polls find a change: 13% of repos change in
	// a month, about 4 times each (the freshness benchmark's population).
	ChangesPerRepoDay float64
	// Fetchers are each worker's concurrent fetches (MIRRORFLEET_FETCHERS).
	Fetchers int
	// NoChangePollSeconds and ChangePollSeconds are a poll's wall time: TLS and the ref
	// advertisement, and a fetch that brings a change (stated guesses).
	NoChangePollSeconds, ChangePollSeconds float64
	// Utilisation is the share of fetcher time a sized fleet plans to use (clones,
	// bursts, failures take the rest).
	Utilisation float64
	// HostRate and HostConcurrency are each worker's politeness per upstream host:
	// fetch starts a second and fetches at once (worker.DefaultConfig()).
	HostRate        float64
	HostConcurrency int
	// OneHostShare is the share of the list on its largest host (a GitHub-heavy list).
	OneHostShare float64
	// HostUtilisation is the share of the per-host rate a sized fleet plans to use: the
	// token bucket admits the rate only when that host's repos are due evenly.
	HostUtilisation float64
	// DormantRevisits is how many mean revisit intervals a dormant repo waits between
	// polls under the default policy (bayes): it polls repos by their estimated change
	// rate, and the repos that never change, half of the population, take the longest
	// steps. Measured by the freshness benchmark at the budget's poll rate: their share
	// of the repos over their share of the polls (bench/results/freshness.json, which a
	// test holds it to). They set the fleet's p99 and maximum staleness.
	DormantRevisits float64
	// DesignRepos is the largest fleet the defaults are sized for.
	DesignRepos int
	// HookPeak is how many times a day's mean push rate the forges' webhooks may arrive
	// at in a burst (a bot or a release pushing to many repos at once; a stated guess).
	HookPeak float64
}

// MinHookRate is the least throttle of the public webhook route, requests a second.
const MinHookRate = 100

// Default is the budget the stack's defaults and the bill assume: half a poll per repo
// a day on average (the stack's pollsPerDay, the workers' MIRRORFLEET_POLL_BUDGET),
// chosen with the bill (bench/storecost, ADR 24) for the cost goals at a million
// repos; what it gives in freshness is bench/freshness's.
func Default() Budget {
	return Budget{
		PollsPerDay:         0.5,
		ChangesPerRepoDay:   0.13 * 4 / (730.0 / 24),
		Fetchers:            10,
		NoChangePollSeconds: 1.5,
		ChangePollSeconds:   6,
		Utilisation:         0.5,
		HostRate:            2,
		HostConcurrency:     4,
		OneHostShare:        0.8,
		HostUtilisation:     0.8,
		DormantRevisits:     14.2,
		DesignRepos:         1_000_000,
		HookPeak:            100,
	}
}

// Revisit is the mean time between two polls of a repo at the budget.
func (b Budget) Revisit() time.Duration {
	return time.Duration(float64(24*time.Hour) / b.PollsPerDay)
}

// TailStaleness is the p99 (and about the maximum) of the time since repos' last
// successful fetch in a fleet polling at exactly its budget: a dormant repo's revisit.
// A fleet with spare capacity polls faster (nothing throttles the workers but the
// per-host limit and the minimum interval) and shows less.
func (b Budget) TailStaleness() time.Duration {
	return time.Duration(float64(b.Revisit()) * b.DormantRevisits)
}

// StaleAfter is the stale-repos alarm's threshold on the maximum staleness: twice what
// a fleet at its budget shows, so that fleet is not in ALARM; a repo past it has missed
// a dormant repo's revisit twice over.
func (b Budget) StaleAfter() time.Duration { return 2 * b.TailStaleness() }

// ScaleOutAbove and ScaleInBelow are the workers' scaling steps on p99 staleness: one
// more worker while the fleet is half as stale again as its budget allows (two more past
// StaleAfter), one fewer while it is twice as fresh. A fleet at its budget sits between.
func (b Budget) ScaleOutAbove() time.Duration { return b.TailStaleness() * 3 / 2 }

// ScaleInBelow: see ScaleOutAbove.
func (b Budget) ScaleInBelow() time.Duration { return b.TailStaleness() / 2 }

// PollsPerDayOf is how many polls repos repos make a day at the budget, and how many
// of them find a change.
func (b Budget) PollsPerDayOf(repos int) (polls, changes float64) {
	changes = math.Min(b.PollsPerDay, b.ChangesPerRepoDay) * float64(repos)
	return b.PollsPerDay * float64(repos), changes
}

// FetcherWorkers is the workers whose fetcher time the polls of repos repos fill at the
// planned utilisation (fractional).
func (b Budget) FetcherWorkers(repos int) float64 {
	polls, changes := b.PollsPerDayOf(repos)
	busy := (polls-changes)*b.NoChangePollSeconds + changes*b.ChangePollSeconds
	return busy / (float64(b.Fetchers) * 86400 * b.Utilisation)
}

// PerHostRate is the fetch starts a second one worker makes on one host: its rate
// limit, or fewer when its concurrency limit binds first (fetches at once / a fetch's
// wall time).
func (b Budget) PerHostRate() float64 {
	return math.Min(b.HostRate, float64(b.HostConcurrency)/b.NoChangePollSeconds)
}

// HostWorkers is the workers the largest host's share of the polls needs under the
// per-host limit (fractional): each worker polls a host at most PerHostRate a second.
func (b Budget) HostWorkers(repos int) float64 {
	polls, _ := b.PollsPerDayOf(repos)
	return polls * b.OneHostShare / (b.PerHostRate() * 86400 * b.HostUtilisation)
}

// Workers is the workers a fleet of repos repos needs at the budget: enough fetcher
// time and enough per-host starts, and never fewer than min.
func (b Budget) Workers(repos, min int) int {
	need := math.Ceil(math.Max(b.FetcherWorkers(repos), b.HostWorkers(repos)) - 1e-9)
	return max(min, int(need))
}

// MaxWorkers is the autoscaling maximum: what the design's largest fleet needs.
func (b Budget) MaxWorkers() int { return b.Workers(b.DesignRepos, 1) }

// PollCapacity is how many polls a day workers workers make when nothing throttles
// them (the deployed default): the least of their fetcher time at full use, the largest
// host's per-host limit scaled to the whole list, and the minimum interval's cap.
func (b Budget) PollCapacity(repos, workers int, minInterval time.Duration) float64 {
	w := float64(workers)
	fetchers := w * float64(b.Fetchers) * 86400 / b.NoChangePollSeconds
	host := math.Inf(1)
	if b.OneHostShare > 0 {
		host = w * b.PerHostRate() * 86400 / b.OneHostShare
	}
	capped := math.Inf(1)
	if minInterval > 0 {
		capped = float64(repos) * float64(24*time.Hour) / float64(minInterval)
	}
	return math.Min(fetchers, math.Min(host, capped))
}

// HookRate is the public webhook route's throttle, requests a second: the design
// fleet's pushes (one delivery each, when every repo has a hook) at HookPeak times their
// mean rate, and never below MinHookRate. Past it API Gateway answers 429, and GitHub
// does not deliver again by itself: the push waits for the repo's next poll.
func (b Budget) HookRate() int {
	_, changes := b.PollsPerDayOf(b.DesignRepos)
	return max(MinHookRate, int(math.Ceil(changes/86400*b.HookPeak)))
}

// BareWorkersPerRepo is the workers a repo needs to be polled at exactly the budget
// with every fetcher and the per-host limit fully used, no headroom: a fleet with fewer
// falls behind its budget, whatever its staleness says yet. Linear in the repos; the
// on-demand twin keeps the fleet this large while Spot has no capacity.
func (b Budget) BareWorkersPerRepo() float64 {
	full := b
	full.Utilisation, full.HostUtilisation = 1, 1
	const n = 1_000_000 // per repo, without rounding
	return math.Max(full.FetcherWorkers(n), full.HostWorkers(n)) / n
}
