package main

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// Realism is how the realistic population differs from the plain one: repos of every
// age, so an active repo's history often reaches its first commit, and dormant repos
// that were worked on for a while before they went quiet, so a long history is no sign
// of activity. The rates of the active repos and the dormant share are the plain
// population's (the same Targets), so the two are compared on what a first clone shows.
type Realism struct {
	// YoungShare of the repos were created in the last year; ages are exponential (a
	// forge growing at a steady rate), at most MaxAgeDays. GitHub's 100-millionth
	// repository, in 2018: one in three had been created that year.
	YoungShare float64
	MaxAgeDays float64
	// A dormant repo was worked on for a log-normal time (median LifeMedianDays, σ
	// LifeSigma) with a log-normal number of commits (median CommitsMedian, σ
	// CommitsSigma), then left at least a year before day 0. Kalliamvakou et al., "The
	// Promises and Perils of Mining GitHub" (MSR 2014): the median project has 6 commits
	// over 9.9 days of activity, and most are personal and inactive.
	LifeMedianDays, LifeSigma   float64
	CommitsMedian, CommitsSigma float64
}

var realism = Realism{YoungShare: 1.0 / 3, MaxAgeDays: 17 * 365, LifeMedianDays: 9.9, LifeSigma: 2, CommitsMedian: 6, CommitsSigma: 1.5}

// NewRealisticPopulation is NewPopulation with ages: the same rates (the same seed
// draws the same active set and rates), and each repo's age and, for a dormant one, how
// long it was worked on and how many commits it got.
func NewRealisticPopulation(n int, seed uint64, t Targets, r Realism) Population {
	p := NewPopulation(n, seed, t)
	rng := rand.New(rand.NewPCG(seed, 0xa9e))
	g := -math.Log(1-r.YoungShare) / 365 // per day: P(age < 365) = YoungShare
	age := func(atLeast float64) float64 {
		// Exponential ages above atLeast (memoryless), at most MaxAgeDays.
		for {
			if a := atLeast + rng.ExpFloat64()/g; a <= r.MaxAgeDays {
				return a
			}
			if atLeast >= r.MaxAgeDays {
				return r.MaxAgeDays
			}
		}
	}
	p.Age = make([]float64, n)
	p.Life = make([]float64, n)
	p.Commits = make([]int, n)
	for i, rate := range p.Rates {
		if rate > 0 {
			p.Age[i] = age(0)
			p.Quiet[i] = min(p.Quiet[i], p.Age[i])
			continue
		}
		p.Life[i] = min(r.LifeMedianDays*math.Exp(r.LifeSigma*rng.NormFloat64()), r.MaxAgeDays-365)
		p.Commits[i] = max(1, int(math.Round(r.CommitsMedian*math.Exp(r.CommitsSigma*rng.NormFloat64()))))
		p.Age[i] = age(p.Life[i] + 365)
		p.Quiet[i] = p.Age[i] - p.Life[i]
	}
	return p
}

// realisticPast draws the history before day 0 of repo i of a realistic population:
// an active repo pushed at its rate since it was made (its newest push Quiet days ago);
// a dormant one got its commits in pushes spread over its working life, the last Quiet
// days ago. Both begin with the repo's first commit, Age days ago.
func (p Population) realisticPast(i int, rate float64, rng *rand.Rand, b Batch) (past []float64, newest float64, born bool) {
	birth := -p.Age[i]
	newest = math.Inf(-1)
	keep := func(c []float64) {
		for _, a := range c {
			a = max(a, birth)
			newest = max(newest, a)
			past = append(past, a)
		}
	}
	if rate > 0 {
		for at := -p.Quiet[i]; at > max(birth, -pastDays); at -= rng.ExpFloat64() / rate {
			keep(b.commits(rng, at))
		}
	} else {
		end := -p.Quiet[i]
		keep(b.commits(rng, end))
		for left := p.Commits[i] - 1; left > 0 && len(past) < p.Commits[i]; {
			c := b.commits(rng, birth+rng.Float64()*(end-birth))
			if len(c) > left {
				c = c[:left]
			}
			left -= len(c)
			keep(c)
		}
	}
	past = append(past, birth)
	newest = max(newest, birth)
	past = slices.DeleteFunc(past, func(a float64) bool { return a <= -pastDays })
	slices.SortFunc(past, func(a, b float64) int { return cmp.Compare(b, a) })
	return past, newest, birth > -pastDays
}

// describeRealism measures what a first clone at day 0 shows of the realistic population.
func describeRealism(p Population, up Upstream) *results.FreshnessRealism {
	d := &results.FreshnessRealism{YoungShare: realism.YoungShare, MaxAgeDays: realism.MaxAgeDays,
		DormantLifeMedianDays: realism.LifeMedianDays, DormantCommitsMedian: realism.CommitsMedian}
	var activeN, dormantN []float64
	young, activeRoot, dormantRoot, long := 0, 0, 0, 0
	for i, rate := range p.Rates {
		if p.Age[i] < 365 {
			young++
		}
		times, _, root := historyAt(up[i], 0, 0)
		if rate > 0 {
			activeN = append(activeN, float64(len(times)))
			if root {
				activeRoot++
			}
			continue
		}
		dormantN = append(dormantN, float64(len(times)))
		if root {
			dormantRoot++
		}
		if p.Life[i] > 365 {
			long++
		}
	}
	n := float64(len(p.Rates))
	d.MeasuredYoungShare = float64(young) / n
	if len(activeN) > 0 {
		d.ActiveRootShare = float64(activeRoot) / float64(len(activeN))
		slices.Sort(activeN)
		d.ActiveMedianCommits = activeN[len(activeN)/2]
	}
	if len(dormantN) > 0 {
		d.DormantRootShare = float64(dormantRoot) / float64(len(dormantN))
		d.DormantYearLongShare = float64(long) / float64(len(dormantN))
		slices.Sort(dormantN)
		d.DormantMedianCommits = dormantN[len(dormantN)/2]
	}
	return d
}
