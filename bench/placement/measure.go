package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// newWorkerID is the worker that joins in every run.
const newWorkerID = "worker-new"

// scheme is a placement scheme under test.
type scheme struct {
	name   string
	build  func(ids []string) (placer, error) // worker number i is ids[i]
	leaver func(n int) int32                  // which of n workers leaves
	note   string                             // how it deviates from the common procedure
}

func middle(n int) int32 { return int32(n / 2) }

// schemes returns the schemes in report order; ours first.
func schemes(cfg config) []scheme {
	return []scheme{
		{name: "ours", build: newOurs, leaver: middle},
		{
			name:   fmt.Sprintf("plain-%d", cfg.vnodes),
			build:  func(ids []string) (placer, error) { return newPlainRing(ids, cfg.vnodes), nil },
			leaver: middle,
		},
		{
			name:   "jump",
			build:  newJump,
			leaver: func(n int) int32 { return int32(n - 1) },
			note:   "leave removes the last bucket: jump hash cannot remove any other",
		},
		{name: "rendezvous", build: newRendezvous, leaver: middle},
		{
			name: "bounded-loads",
			build: func(ids []string) (placer, error) {
				return newBoundedLoads(newPlainRing(ids, cfg.vnodes), cfg.loadFactor, cfg.keys), nil
			},
			leaver: middle,
			note: fmt.Sprintf("on a %d-vnode ring, c = %g; keys placed in index order, and all placed again after a join or leave; "+
				"lookup = placing one key against the running loads; memory excludes the per-key assignment "+
				"(4 B/key) that later lookups would need", cfg.vnodes, cfg.loadFactor),
		},
	}
}

// config is one run of the program.
type config struct {
	keys       int
	workers    []int
	vnodes     int
	loadFactor float64
	trials     int                                                    // key sets per worker count, for the noise floor and resampling
	lookupRuns int                                                    // lookup benchmark runs; the fastest counts
	bench      func(p placer, hs []uint64) (ns float64, allocs int64) // cost of one lookup
}

// keyHashes returns the hashes of keys repo URLs, as the coordinator hashes them.
func keyHashes(keys int) []uint64 {
	hs := make([]uint64, keys)
	for i := range hs {
		hs[i] = ring.KeyHash(store.RingKey(fmt.Sprintf("https://host/org/repo-%d", i), 0))
	}
	return hs
}

func workerIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("worker-%04d", i)
	}
	return ids
}

// measure runs every scheme at every worker count.
func measure(ctx context.Context, log *slog.Logger, cfg config) (results.Placement, error) {
	out := results.Placement{
		Keys:    cfg.keys,
		Workers: cfg.workers,
		Params: results.PlacementParams{
			VNodes:     cfg.vnodes,
			LoadFactor: cfg.loadFactor,
			MemMethod:  "heap: runtime.MemStats.HeapAlloc after GC, after building minus before",
			LookupRuns: cfg.lookupRuns,
		},
		Goal: results.PlacementGoal{Scheme: "ours", PeakMean: 1.05, MovedRatio: 1.1},
	}
	hs := keyHashes(cfg.keys)
	ss := schemes(cfg)
	for _, s := range ss {
		out.Schemes = append(out.Schemes, s.name)
	}
	for _, n := range cfg.workers {
		out.Noise = append(out.Noise, noise(hs, n, cfg.trials))
		for _, s := range ss {
			if err := ctx.Err(); err != nil {
				return out, fmt.Errorf("placement: %w", err)
			}
			log.Info("measuring", "scheme", s.name, "workers", n, "keys", len(hs))
			res, err := measureOne(s, n, hs, cfg)
			if err != nil {
				return out, fmt.Errorf("%s at %d workers: %w", s.name, n, err)
			}
			log.Info("measured", "scheme", s.name, "workers", n, "peak_mean", res.PeakMean,
				"join_ratio", res.JoinRatio, "leave_ratio", res.LeaveRatio, "lookup_ns", res.LookupNs, "mem_bytes", res.MemBytes)
			out.Runs = append(out.Runs, res)
		}
	}
	return out, nil
}

// noise is the balance of uniform random placements of the same keys on n workers.
func noise(hs []uint64, n, trials int) results.PlacementNoise {
	nz := results.PlacementNoise{Workers: n, Trials: trials, MeanKeys: float64(len(hs)) / float64(n)}
	for t := range trials {
		pm := uniformPeakMean(hs, n, t)
		nz.PeakMean += pm / float64(trials)
		nz.PeakMeanMax = max(nz.PeakMeanMax, pm)
		if t == 0 || pm < nz.PeakMeanMin {
			nz.PeakMeanMin = pm
		}
	}
	return nz
}

// measureOne builds scheme s with n workers, places every key, then places them again
// after worker n joins and after the leaver leaves, and times lookups.
func measureOne(s scheme, n int, hs []uint64, cfg config) (results.PlacementResult, error) {
	ids := workerIDs(n)
	p, mem, err := heapSize(func() (placer, error) { return s.build(ids) })
	if err != nil {
		return results.PlacementResult{}, fmt.Errorf("build: %w", err)
	}
	base := make([]int32, len(hs))
	p.place(hs, base)
	loads := countLoads(base, n)

	res := results.PlacementResult{Scheme: s.name, Workers: n, PeakMean: peakMean(loads, len(hs)), MemBytes: mem, Note: s.note}
	if sh, ok := p.(sharer); ok {
		res.SharePeakMean = sh.sharePeakMean()
		res.KeySetsPeakMean = resampledPeakMean(p, hs, n, cfg.trials)
	}
	if t, ok := p.(tokener); ok {
		res.Tokens = t.numTokens()
	}

	after := make([]int32, len(hs))
	joined, err := p.join(int32(n), newWorkerID)
	if err != nil {
		return res, err
	}
	joined.place(hs, after)
	res.JoinMoved, res.JoinStray = movement(base, after, int32(n))
	res.JoinIdeal = float64(len(hs)) / float64(n+1)
	res.JoinRatio = ratio(float64(res.JoinMoved), res.JoinIdeal)

	leaver := s.leaver(n)
	left, err := p.leave(leaver)
	if err != nil {
		return res, err
	}
	left.place(hs, after)
	res.Leaver = ids[leaver]
	res.LeaveMoved, res.LeaveStray = movement(base, after, leaver)
	res.LeaveIdeal = loads[leaver]
	res.LeaveRatio = ratio(float64(res.LeaveMoved), float64(res.LeaveIdeal))

	res.LookupNs, res.LookupAllocs = cfg.bench(p, hs)
	return res, nil
}

// resampledPeakMean is the mean peak/mean of p over trials fresh key sets as large as hs:
// the same uniform hashes as the noise floor's, placed by p instead of at random.
func resampledPeakMean(p placer, hs []uint64, n, trials int) float64 {
	if trials == 0 {
		return 0
	}
	keys, owners := make([]uint64, len(hs)), make([]int32, len(hs))
	sum := 0.0
	for t := range trials {
		seed := trialSeed(t)
		for i, h := range hs {
			keys[i] = mix(h ^ seed)
		}
		p.place(keys, owners)
		sum += peakMean(countLoads(owners, n), len(hs))
	}
	return sum / float64(trials)
}

// heapSize returns what build returns and how much live heap it added.
func heapSize(build func() (placer, error)) (placer, int64, error) {
	var before, after runtime.MemStats
	settle()
	runtime.ReadMemStats(&before)
	p, err := build()
	settle()
	runtime.ReadMemStats(&after)
	return p, int64(after.HeapAlloc) - int64(before.HeapAlloc), err
}

// settle collects garbage until the live heap stops shrinking: sync.Pool contents (the
// logger's buffers, for one) survive one collection as the victim cache.
func settle() {
	var m runtime.MemStats
	last := uint64(math.MaxUint64)
	for range 5 {
		runtime.GC()
		runtime.ReadMemStats(&m)
		if m.HeapAlloc >= last {
			return
		}
		last = m.HeapAlloc
	}
}

var sink int

// bestLookup runs bench runs times and keeps the fastest: other load on the machine only
// ever adds time.
func bestLookup(bench func(placer, []uint64) (float64, int64), runs int) func(placer, []uint64) (float64, int64) {
	return func(p placer, hs []uint64) (float64, int64) {
		best, allocs := math.Inf(1), int64(0)
		for range max(runs, 1) {
			ns, a := bench(p, hs)
			best, allocs = min(best, ns), max(allocs, a)
		}
		return best, allocs
	}
}

// benchLookup times lookups of the key hashes in order (at 1000 workers most miss the
// CPU caches, as the coordinator's would) with testing.Benchmark.
func benchLookup(p placer, hs []uint64) (float64, int64) {
	r := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			sink += p.lookup(hs[i])
			if i++; i == len(hs) {
				i = 0
			}
		}
	})
	if r.N == 0 {
		return 0, 0
	}
	return float64(r.T.Nanoseconds()) / float64(r.N), r.AllocsPerOp()
}
