package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// population is how often repos change: a share never does, the rest push at rates
// drawn from a log-normal (per day). It is the freshness benchmark's population
// (bench/results/freshness.json), whose shape follows public hosting data; the bill uses
// it for which mirrors a lifecycle window sees read, which a single mean cannot tell.
type population struct {
	Source       string
	DormantShare float64
	Mu, Sigma    float64 // of ln(pushes per day)
}

// populationFrom reads freshness.json in dir.
func populationFrom(dir string) (population, error) {
	path := filepath.Join(dir, "freshness.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return population{}, fmt.Errorf("the bill's change rates come from %s (go run ./bench/freshness -out %s): %w", path, dir, err)
	}
	var f struct {
		Meta struct {
			Date string `json:"date"`
		} `json:"meta"`
		Population struct {
			DormantShare float64 `json:"dormant_share"`
			Sigma        float64 `json:"lognormal_sigma"`
			Mu           float64 `json:"lognormal_mu"`
		} `json:"population"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return population{}, fmt.Errorf("%s: %w", path, err)
	}
	p := population{Source: "bench/results/freshness.json (" + f.Meta.Date + ")", DormantShare: f.Population.DormantShare,
		Mu: f.Population.Mu, Sigma: f.Population.Sigma}
	if p.Sigma <= 0 || p.DormantShare < 0 || p.DormantShare >= 1 {
		return population{}, fmt.Errorf("%s: no population", path)
	}
	return p, nil
}

// quantiles are the rates of n equally likely repos (dormant ones at 0): the population
// as a sum the bill can take over any function of a repo's rate.
func (p population) quantiles(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		u := (float64(i) + 0.5) / float64(n)
		if u < p.DormantShare {
			continue
		}
		v := (u - p.DormantShare) / (1 - p.DormantShare)
		out[i] = math.Exp(p.Mu + p.Sigma*math.Sqrt2*math.Erfinv(2*v-1))
	}
	return out
}

// mean is the population's mean of f(rate).
func (p population) mean(f func(rate float64) float64) float64 {
	const n = 2000
	sum := 0.0
	for _, r := range p.quantiles(n) {
		sum += f(r)
	}
	return sum / n
}

// changedWithin is the share of repos that push at least once in days.
func (p population) changedWithin(days float64) float64 {
	return p.mean(func(r float64) float64 { return 1 - math.Exp(-r*days) })
}
