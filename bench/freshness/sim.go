package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// runConfig is one simulation: a poll budget and the measured stretch of time (days).
type runConfig struct {
	Budget      float64 // polls per repo per day
	Warmup      float64
	Window      float64
	Drain       float64
	MinInterval float64 // days between two polls of one repo, as the worker enforces
	Seed        uint64
}

// run polls the population at a fixed budget, taking repos from the worker's own queue in
// the order the scheduler's priorities give, and measures what a user of the mirror sees.
func run(pop Population, commits [][]float64, sched scheduler, cfg runConfig, rng *rand.Rand) results.FreshnessRun {
	n := len(pop.Rates)
	ws, we := cfg.Warmup, cfg.Warmup+cfg.Window
	end := we + cfg.Drain
	ids := make([]string, n)
	index := make(map[string]int, n)
	q := worker.NewQueue()
	for i := range n {
		ids[i] = strconv.Itoa(i)
		index[ids[i]] = i
		q.Push(ids[i], sched.start(i, rng), time.Time{})
	}
	cursor := make([]int, n)
	lastCommit := make([]float64, n)
	lastPoll := make([]float64, n)
	stats := make([]priority.Stats, n)
	for i := range n {
		lastCommit[i] = -pop.Quiet[i]
	}

	var m meter
	m.ws, m.we = ws, we
	res := results.FreshnessRun{Policy: sched.name(), Budget: cfg.Budget}
	dormantPolls, changedPolls := 0, 0
	dt := 1 / (cfg.Budget * float64(n))
	for k := 0; ; k++ {
		now := float64(k) * dt
		if now > end {
			break
		}
		id, old, ok := q.Pop(at(now))
		if !ok {
			res.IdlePolls++
			continue
		}
		i := index[id]
		res.Polls++
		if pop.Rates[i] == 0 {
			dormantPolls++
		}
		ts := commits[i]
		c := cursor[i]
		changed := c < len(ts) && ts[c] <= now
		if changed {
			changedPolls++
			first := ts[c]
			for ; c < len(ts) && ts[c] <= now; c++ {
				m.commit(ts[c], now)
			}
			lastCommit[i] = ts[c-1]
			cursor[i] = c
			m.stale(first, now)
		}
		stats[i] = stats[i].Observe(time.Duration((now-lastPoll[i])*86400*float64(time.Second)), changed)
		lastPoll[i] = now
		p, again := sched.next(i, old, seen{now: now, changed: changed, lastCommit: lastCommit[i], stats: stats[i]})
		if again {
			q.Push(id, p, at(now+cfg.MinInterval))
		}
	}
	// Commits still unmirrored at the end count with the lag they have so far.
	for i, ts := range commits {
		c := cursor[i]
		if c < len(ts) && ts[c] <= end {
			m.stale(ts[c], end)
			for ; c < len(ts) && ts[c] <= end; c++ {
				if m.commit(ts[c], end) {
					res.Censored++
				}
			}
		}
	}
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
	res.Freshness = 1 - m.staleDays/(float64(n)*cfg.Window)
	res.AgeMeanH = m.ageDays / (float64(n) * cfg.Window) * 24
	if res.Polls > 0 {
		res.DormantPolls = float64(dormantPolls) / float64(res.Polls)
		res.ChangingPolls = float64(changedPolls) / float64(res.Polls)
	}
	return res
}

// meter accumulates lag, staleness and age over the measured window [ws, we).
type meter struct {
	ws, we    float64
	lags      []float32 // days, one per commit made in the window
	staleDays float64   // Σ over repos of the time they lacked a commit
	ageDays   float64   // Σ over repos of ∫ age dt (age: time since the oldest missing commit)
}

// commit records a commit made at t and mirrored at seen; it reports whether t was in the window.
func (m *meter) commit(t, seen float64) bool {
	if t < m.ws || t >= m.we {
		return false
	}
	m.lags = append(m.lags, float32(seen-t))
	return true
}

// stale records that a repo lacked the commit made at first until seen.
func (m *meter) stale(first, seen float64) {
	a, b := max(first, m.ws), min(seen, m.we)
	if a >= b {
		return
	}
	m.staleDays += b - a
	m.ageDays += ((b-first)*(b-first) - (a-first)*(a-first)) / 2
}

// quantile of sorted values (nearest rank).
func quantile(sorted []float32, q float64) float32 {
	if len(sorted) == 0 {
		return float32(math.NaN())
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}
