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
			// exponential with the same rate; no repo is older than ten years.
			p.Quiet[i] = min(rng.ExpFloat64()/p.Rates[i], 3650)
		} else {
			// Dormant: last touched between one and eight years ago (log-uniform).
			p.Quiet[i] = 365 * math.Exp(rng.Float64()*math.Log(8))
		}
	}
	return p
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

// Commits draws each repo's commit times in [0, end) days, from its own random stream so
// that every policy sees exactly the same upstream history.
func (p Population) Commits(seed uint64, end float64) [][]float64 {
	out := make([][]float64, len(p.Rates))
	for i, rate := range p.Rates {
		if rate <= 0 {
			continue
		}
		rng := rand.New(rand.NewPCG(seed, uint64(i)+1))
		var ts []float64
		for t := rng.ExpFloat64() / rate; t < end; t += rng.ExpFloat64() / rate {
			ts = append(ts, t)
		}
		out[i] = ts
	}
	return out
}

// DriftingCommits is Commits for a population whose repos change behaviour: at rate
// perMonth per repo, a repo draws a new rate from the same mixture (so dormant repos wake
// up and busy ones go quiet), keeping the population's shape while no repo's past
// predicts its future for long.
func (p Population) DriftingCommits(seed uint64, end, perMonth float64, t Targets) [][]float64 {
	out := make([][]float64, len(p.Rates))
	for i, rate := range p.Rates {
		rng := rand.New(rand.NewPCG(seed^0xd1f7, uint64(i)+1))
		var ts []float64
		for at := 0.0; at < end; {
			next := min(at+rng.ExpFloat64()*30/perMonth, end)
			if rate > 0 {
				for c := at + rng.ExpFloat64()/rate; c < next; c += rng.ExpFloat64() / rate {
					ts = append(ts, c)
				}
			}
			at = next
			rate = 0
			if rng.Float64() >= t.Dormant {
				rate = math.Exp(p.Mu + p.Sigma*rng.NormFloat64())
			}
		}
		out[i] = ts
	}
	return out
}
