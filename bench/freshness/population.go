package main

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// Targets are the published shape of a forge's activity the population is tuned to.
type Targets struct {
	Dormant        float64 // share of repos with no commits at all during the run
	TopFraction    float64 // the busiest repos ...
	TopShare       float64 // ... hold this share of all commits
	MonthlyChanged float64 // share of repos with at least one commit in a 30-day stretch
}

// Population is the set of simulated upstream repos.
type Population struct {
	Rates []float64 // commits per day; 0 for dormant repos
	Quiet []float64 // days since the newest commit when the run starts
	Sigma float64   // of the log-normal rates of the active repos
	Mu    float64
	// A realistic population (NewRealisticPopulation) also has each repo's age in days
	// and, for a dormant repo, how long it was worked on and its commits; nil otherwise.
	Age     []float64
	Life    []float64
	Commits []int
}

// NewPopulation draws n repos: a Dormant share that never changes, the rest with
// log-normal rates. Sigma is set so the top repos hold TopShare of the expected commits
// (a property of the shape alone), then Mu so that MonthlyChanged of all repos see a
// commit in 30 days.
func NewPopulation(n int, seed uint64, t Targets) Population {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	active := n - int(math.Round(t.Dormant*float64(n)))
	z := make([]float64, active)
	for i := range z {
		z[i] = rng.NormFloat64()
	}
	top := int(math.Round(t.TopFraction * float64(n)))
	sigma := bisect(0.05, 6, func(s float64) float64 { return topShare(z, s, top) - t.TopShare })
	mu := bisect(-30, 10, func(m float64) float64 { return monthlyChanged(z, sigma, m, n) - t.MonthlyChanged })

	p := Population{Rates: make([]float64, n), Quiet: make([]float64, n), Sigma: sigma, Mu: mu}
	// Active repos first in a random order with the dormant ones, so ids carry no meaning.
	perm := rng.Perm(n)
	for k, i := range perm {
		if k < active {
			p.Rates[i] = math.Exp(mu + sigma*z[k])
			// The time since the last commit of a Poisson process seen at a random moment is
			// exponential with the same rate; no repo is older than maxQuietDays, so it is
			// drawn below that (a cap would put every slow repo quiet for longer on one day).
			// The draw is the standard exponential it always was, turned into its uniform, so
			// the seed's other draws are unchanged.
			p.Quiet[i] = truncatedExp(-math.Expm1(-rng.ExpFloat64()), p.Rates[i], maxQuietDays)
		} else {
			// Dormant: last touched between one year and maxQuietDays ago (log-uniform), as
			// far back as an active repo's quiet goes, so that no length of quiet tells the
			// two apart: the fleet must weigh it, as a real one does.
			p.Quiet[i] = 365 * math.Exp(rng.Float64()*math.Log(maxQuietDays/365))
		}
	}
	return p
}

// maxQuietDays is the longest a repo of the population has been quiet when the run
// starts: ten years.
const maxQuietDays = 3650.0

// truncatedExp is draw u (uniform in [0, 1)) of an exponential of rate, below limit.
func truncatedExp(u, rate, limit float64) float64 {
	return -math.Log1p(u*math.Expm1(-rate*limit)) / rate
}

// topShare is the share of expected commits held by the top repos when rates are e^(σz).
func topShare(z []float64, sigma float64, top int) float64 {
	w := make([]float64, len(z))
	total := 0.0
	for i, v := range z {
		w[i] = math.Exp(sigma * v)
		total += w[i]
	}
	slices.SortFunc(w, func(a, b float64) int { return cmp.Compare(b, a) })
	sum := 0.0
	for _, v := range w[:min(top, len(w))] {
		sum += v
	}
	return sum / total
}

// monthlyChanged is the expected share of all n repos with a commit in 30 days.
func monthlyChanged(z []float64, sigma, mu float64, n int) float64 {
	sum := 0.0
	for _, v := range z {
		sum += 1 - math.Exp(-30*math.Exp(mu+sigma*v))
	}
	return sum / float64(n)
}

// bisect finds x in [lo, hi] with f(x) = 0 for an increasing f.
func bisect(lo, hi float64, f func(float64) float64) float64 {
	for range 100 {
		mid := (lo + hi) / 2
		if f(mid) < 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// Batch is how pushes carry commits, and how long before the push each was authored.
// A worker sees only the commits' times, never the push's, so the lag it is judged by
// (from the push) is not what it estimates rates from. The figures are assumptions
// (see the report): most pushes carry one or two commits made in the hour before, a
// few carry a branch worked on for days.
type Batch struct {
	MeanCommits     float64 // commits per push: 1 + geometric
	NewestDelayMin  float64 // the newest commit is authored this long before the push (log-normal median, minutes)
	GapMin          float64 // each earlier commit this long before the next (log-normal median, minutes)
	Sigma           float64 // of both log-normals
	BranchShare     float64 // pushes that bring a branch worked on earlier ...
	BranchDelayDays float64 // ... whose commits are this much older (log-normal median, days, σ = 1)
}

var batch = Batch{MeanCommits: 2, NewestDelayMin: 20, GapMin: 30, Sigma: 1.5, BranchShare: 0.1, BranchDelayDays: 2}

// Push is one push upstream: when it happened and when its commits were authored.
type Push struct {
	At       float64   // day
	Authored []float64 // days, newest first, all before At
	First    bool      // the repo's first push after it changed rate
}

// Regime is a stretch of a repo's life at one push rate.
type Regime struct{ From, Rate float64 }

// RepoLife is everything that happens upstream in one repo.
type RepoLife struct {
	Pushes  []Push    // in [0, end), in order
	Past    []float64 // author times of the commits pushed before day 0, newest first, back to pastDays
	Newest  float64   // the newest commit before day 0 (author time)
	Born    bool      // Past holds the repo's very first commit (its oldest)
	Regimes []Regime  // the rate from each day on; one regime when rates do not drift
}

// Upstream is the upstream history of every repo.
type Upstream []RepoLife

// birthDays is how long a dormant repo was worked on when it was made (mean).
const birthDays = 7

// pastDays is how far back the history before day 0 is drawn: past the longest window a
// first clone lists.
const pastDays = 6 * 365

// NewUpstream draws every repo's pushes in [0, end), each repo from its own random
// stream so that every policy sees exactly the same upstream. With perMonth > 0 a repo
// draws a new rate from the population's mixture at that rate per month (dormant repos
// wake up, busy ones go quiet), keeping the population's shape while no repo's past
// predicts its future for long. Before day 0 every repo keeps its first rate.
func (p Population) NewUpstream(seed uint64, end, perMonth float64, b Batch, t Targets) Upstream {
	out := make(Upstream, len(p.Rates))
	for i, rate := range p.Rates {
		rng := rand.New(rand.NewPCG(seed, uint64(i)+1))
		life := &out[i]
		life.Newest = -p.Quiet[i] // unless its push is in the listed past, below
		// Before day 0: an active repo's newest push Quiet days ago, then back at the same
		// rate. A dormant repo was touched only when it was made: a burst of a few pushes
		// over its first days (most repos are personal and short-lived), the last of them
		// Quiet days ago. A realistic population's repos have ages (realisticPast).
		if p.Age != nil {
			life.Past, life.Newest, life.Born = p.realisticPast(i, rate, rng, b)
		} else if rate > 0 {
			for at, first := -p.Quiet[i], true; at > -pastDays; first = false {
				c := b.commits(rng, at)
				if first {
					life.Newest = c[0]
				}
				life.Past = append(life.Past, c...)
				at -= rng.ExpFloat64() / rate
			}
		} else {
			born := -p.Quiet[i] - rng.ExpFloat64()*birthDays
			life.Past = append(life.Past, born)
			life.Newest = math.Inf(-1)
			for at := -p.Quiet[i]; at > born; at -= rng.ExpFloat64() * birthDays / 3 {
				c := b.commits(rng, at)
				life.Newest = max(life.Newest, c[0])
				for _, a := range c {
					life.Past = append(life.Past, max(a, born))
				}
			}
			life.Born = born > -pastDays
		}
		life.Past = slices.DeleteFunc(life.Past, func(a float64) bool { return a <= -pastDays })
		slices.SortFunc(life.Past, func(a, b float64) int { return cmp.Compare(b, a) })

		life.Regimes = []Regime{{0, rate}}
		for at := 0.0; at < end; {
			next := end
			if perMonth > 0 {
				next = min(at+rng.ExpFloat64()*30/perMonth, end)
			}
			if rate > 0 {
				first := len(life.Regimes) > 1
				for c := at + rng.ExpFloat64()/rate; c < next; c += rng.ExpFloat64() / rate {
					life.Pushes = append(life.Pushes, Push{At: c, Authored: b.commits(rng, c), First: first})
					first = false
				}
			}
			at = next
			if at < end {
				rate = 0
				if rng.Float64() >= t.Dormant {
					rate = math.Exp(p.Mu + p.Sigma*rng.NormFloat64())
				}
				life.Regimes = append(life.Regimes, Regime{at, rate})
			}
		}
	}
	return out
}

// commits draws the author times of the commits of a push at day at, newest first.
func (b Batch) commits(rng *rand.Rand, at float64) []float64 {
	n := 1
	for rng.Float64() > 1/b.MeanCommits {
		n++
	}
	const minute = 1.0 / (24 * 60)
	t := at - b.NewestDelayMin*minute*math.Exp(b.Sigma*rng.NormFloat64())
	if rng.Float64() < b.BranchShare {
		t -= b.BranchDelayDays * math.Exp(rng.NormFloat64())
	}
	out := make([]float64, n)
	for k := range out {
		out[k] = t
		t -= b.GapMin * minute * math.Exp(b.Sigma*rng.NormFloat64())
	}
	return out
}

// pushedBefore is how many of l's pushes were made before day.
func (l RepoLife) pushedBefore(day float64) int {
	k, _ := slices.BinarySearchFunc(l.Pushes, day, func(p Push, t float64) int { return cmp.Compare(p.At, t) })
	return k
}

// RateAt is the repo's push rate at day t.
func (l RepoLife) RateAt(t float64) float64 {
	k, _ := slices.BinarySearchFunc(l.Regimes, t, func(r Regime, t float64) int { return cmp.Compare(r.From, t) })
	if k == len(l.Regimes) || l.Regimes[k].From > t {
		k--
	}
	return l.Regimes[max(k, 0)].Rate
}
