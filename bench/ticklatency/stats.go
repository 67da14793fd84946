package main

import (
	"math"
	"slices"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of xs: the smallest
// sample with at least p% of the samples at or below it. With fewer than 100 samples
// the 99th percentile is therefore the maximum. NaN for no samples.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// round keeps JSON readable: three significant decimals of a millisecond are plenty.
func round(x float64) float64 { return math.Round(x*1000) / 1000 }

// summarize turns measured ticks into a Latency.
func summarize(ts []tickResult) results.Latency {
	xs := make([]float64, len(ts))
	var sum, read, sweep, writes float64
	var heap uint64
	for i, t := range ts {
		heap = max(heap, t.heap)
		xs[i] = ms(t.dur)
		sum += xs[i]
		// The probe counts every repo record the store served; the sweep's are apart.
		read += float64(t.read - t.rep.SweepRead)
		sweep += float64(t.rep.SweepRead)
		writes += float64(t.rep.Writes)
	}
	if len(ts) == 0 {
		return results.Latency{}
	}
	n := float64(len(ts))
	return results.Latency{
		Samples: len(ts), P50Ms: round(percentile(xs, 50)), P99Ms: round(percentile(xs, 99)),
		MeanMs: round(sum / n), MaxMs: round(slices.Max(xs)), ReposRead: round(read / n), SweepRead: round(sweep / n),
		Writes: round(writes / n), PeakHeapMiB: mib(heap),
	}
}

// membership summarises joins or deaths, each a sample: its ticks' time, reads, moves
// and writes summed, and the cost per moved repo.
func membership(cs []change) results.Membership {
	ts := make([]tickResult, len(cs))
	ticks, slowest := 0, 0.0
	for i, c := range cs {
		ts[i] = c.total()
		ticks += len(c)
		for _, t := range c {
			slowest = max(slowest, ms(t.dur))
		}
	}
	m := results.Membership{Latency: summarize(ts), SlowestTickMs: round(slowest)}
	var moved float64
	per := make([]float64, 0, len(ts))
	for _, t := range ts {
		moved += float64(t.rep.Moved)
		if t.rep.Moved > 0 {
			per = append(per, float64(t.dur.Microseconds())/float64(t.rep.Moved))
		}
	}
	if len(ts) > 0 {
		m.Moved = round(moved / float64(len(ts)))
		m.Ticks = round(float64(ticks) / float64(len(ts)))
	}
	if len(per) > 0 {
		m.UsPerMovedP50 = round(percentile(per, 50))
	}
	return m
}
