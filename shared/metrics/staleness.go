package metrics

import (
	"slices"
	"time"
)

// Staleness summarises how long ago the fleet's repos were last fetched successfully.
type Staleness struct {
	P50, P99, Max time.Duration
	Repos         int // repos with a last success: the population of the percentiles
	Never         int // repos that never succeeded (zero time): left out of the percentiles
}

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
