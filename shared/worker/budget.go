package worker

import (
	"math"
	"time"
)

// The poll budget (Config.PollBudget) is polls per repo per day, averaged over the
// fleet. Each worker spends PollsPerDay(budget, the repos it holds), so the fleet's
// workers together poll budget × its repos a day. It is the pace at which the freshness
// benchmark takes repos from its queue, and as there, the queue's order allocates it:
// the policy steps each repo's priority by 1/√ of its change rate (shared/priority),
// and a budgeted poll goes to the repo first in line. The budget only sets how fast the
// line moves. First clones and asked-for fetches (hooks, feeds, syncs) are not counted
// and never wait for it; a poll waits while the budget is spent.

// BudgetBurst is how much of an unspent budget a worker may save: a twentieth of an
// hour's (one poll at least), so that polls stay within 1.05× the budget over any hour.
const BudgetBurst = 3 * time.Minute

// PollsPerDay is what a poll budget of budget polls per repo per day allows repos
// repos: the pace of the worker's polls and of the freshness benchmark's.
func PollsPerDay(budget float64, repos int) float64 { return budget * float64(repos) }

// pollBudget is a worker's token bucket over its budgeted polls. Pure: the caller
// passes the time and the repos it holds.
type pollBudget struct {
	budget float64 // polls per repo per day; <= 0: none
	tokens float64
	since  time.Time // when tokens was counted; zero: never (full)
}

// ready reports whether a budgeted poll may start at now for a worker holding repos
// repos, counting the bucket up to now first.
func (b *pollBudget) ready(now time.Time, repos int) bool {
	if b.budget <= 0 {
		return true
	}
	b.tokens, b.since = b.holds(now, repos), now
	return b.tokens >= 1
}

// take spends one poll.
func (b *pollBudget) take() {
	if b.budget > 0 {
		b.tokens--
	}
}

// holds is what the bucket holds at now: full before its first poll.
func (b *pollBudget) holds(now time.Time, repos int) float64 {
	rate := b.rate(repos)
	burst := math.Max(1, rate*BudgetBurst.Seconds())
	switch {
	case b.since.IsZero():
		return burst
	case now.After(b.since):
		return math.Min(burst, b.tokens+now.Sub(b.since).Seconds()*rate)
	}
	return b.tokens
}

// rate is the budget's polls per second for repos repos; 0 without a budget.
func (b *pollBudget) rate(repos int) float64 {
	if b.budget <= 0 {
		return 0
	}
	return PollsPerDay(b.budget, repos) / 86400
}

// wait is how long from now until a budgeted poll may start (0: at once, or no budget).
func (b *pollBudget) wait(now time.Time, repos int) time.Duration {
	rate := b.rate(repos)
	if rate <= 0 {
		return 0
	}
	tokens := b.holds(now, repos)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / rate * float64(time.Second))
}
