package metrics

import (
	"slices"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Staleness summarises how long ago repos were last fetched successfully: P50, P99 and
// Max over Repos (those with a last success); Never counts those that never succeeded,
// left out of the percentiles. A worker computes its own at each heartbeat (the store
// keeps it on the worker's record); the coordinator merges them into the fleet's.
type Staleness store.Staleness

// ComputeStaleness computes staleness percentiles at now from each repo's last-success
// time. Percentiles are nearest-rank (the smallest value with at least p of the repos at
// or below it), so every figure is some repo's real staleness. A zero time means the repo
// never succeeded: it is counted in Never rather than given an "age" of two thousand
// years that would pin Max forever (ReposByState shows those repos as pending, cloning
// or failing). A time after now (clock skew between workers) counts as fresh. The input
// is not modified.
func ComputeStaleness(now time.Time, lastSuccess []time.Time) Staleness {
	ages := make([]time.Duration, 0, len(lastSuccess))
	var s Staleness
	for _, t := range lastSuccess {
		if t.IsZero() {
			s.Never++
			continue
		}
		ages = append(ages, max(now.Sub(t), 0))
	}
	s.Repos = len(ages)
	if s.Repos == 0 {
		return s
	}
	slices.Sort(ages)
	s.P50, s.P99, s.Max = rank(ages, 50), rank(ages, 99), ages[len(ages)-1]
	return s
}

// rank is the nearest-rank p-th percentile of sorted: element ceil(p/100·n), 1-based.
func rank(sorted []time.Duration, p int) time.Duration {
	n := len(sorted)
	i := (p*n + 99) / 100 // ceil(p·n/100) in integers: exact, no float rounding
	return sorted[min(max(i, 1), n)-1]
}

// Samples reports the percentiles in seconds. With no repo that ever succeeded there
// is no staleness to speak of, and nothing is reported rather than a reassuring 0.
func (s Staleness) Samples() []Sample {
	if s.Repos == 0 {
		return nil
	}
	return []Sample{
		{Name: StalenessP50, Value: s.P50.Seconds()},
		{Name: StalenessP99, Value: s.P99.Seconds()},
		{Name: StalenessMax, Value: s.Max.Seconds()},
	}
}

// MergeStaleness is the fleet's staleness at now from the summaries the workers sent
// with their heartbeats: no repo record is read, so it costs the same at any fleet size.
//
// A suspect worker's summary is aged by its silence, since SilentSince (the
// coordinator's own clock): its repos keep getting staler. A heartbeating worker's is
// taken as it is, at most one heartbeat old; the worker's timestamps are never
// compared with now (ADR 3), so a worker whose clock is off skews nothing. Dead and draining workers are left out: their repos have moved, or
// move at the next tick, and their new owners report them. Max is exact (the largest
// aged maximum). A percentile of the union cannot be recovered from per-worker
// percentiles, so P50 and P99 are upper bounds: the smallest candidate value v (some
// worker's aged P50, P99 or Max) such that no more than the percentile's share of the
// fleet's repos can be staler than v — a worker has at most half its repos above its
// P50, at most 1% above its P99 and none above its Max. With one worker, or with
// workers alike, that is the exact figure.
func MergeStaleness(now time.Time, workers []store.Worker) Staleness {
	type part struct {
		n             int
		p50, p99, max time.Duration
	}
	var parts []part
	var out Staleness
	for _, w := range workers {
		if w.State == store.WorkerDead || w.State == store.WorkerDraining {
			continue
		}
		s := w.Staleness
		out.Never += s.Never
		if s.Repos == 0 {
			continue
		}
		var age time.Duration
		if w.State == store.WorkerSuspect && !w.SilentSince.IsZero() {
			age = max(now.Sub(w.SilentSince), 0)
		}
		p := part{n: s.Repos, p50: s.P50 + age, p99: s.P99 + age, max: s.Max + age}
		parts = append(parts, p)
		out.Repos += p.n
		out.Max = max(out.Max, p.max)
	}
	if out.Repos == 0 {
		return out
	}
	var candidates []time.Duration
	for _, p := range parts {
		candidates = append(candidates, p.p50, p.p99, p.max)
	}
	slices.Sort(candidates)
	// above bounds, in hundredths of a repo, how many repos can be staler than v.
	above := func(v time.Duration) int {
		n := 0
		for _, p := range parts {
			switch {
			case v < p.p50:
				n += 100 * p.n
			case v < p.p99:
				n += 50 * p.n
			case v < p.max:
				n += p.n
			}
		}
		return n
	}
	// The candidates are sorted and above is non-increasing: the first one with few
	// enough repos above it. Max always qualifies (nothing is above it).
	percentile := func(pct int) time.Duration {
		for _, v := range candidates {
			if above(v) <= (100-pct)*out.Repos {
				return v
			}
		}
		return out.Max
	}
	out.P50, out.P99 = percentile(50), percentile(99)
	return out
}
