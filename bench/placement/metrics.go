package main

import "math/bits"

// countLoads returns the number of keys of each worker number below n.
func countLoads(owners []int32, n int) []int {
	loads := make([]int, n)
	for _, w := range owners {
		loads[w]++
	}
	return loads
}

// peakMean is the largest load over the mean load, for the loads of every worker.
func peakMean(loads []int, keys int) float64 {
	if len(loads) == 0 || keys == 0 {
		return 0
	}
	peak := 0
	for _, l := range loads {
		peak = max(peak, l)
	}
	return float64(peak) * float64(len(loads)) / float64(keys)
}

// movement compares the owners of every key before and after a change that involves
// worker w (the newcomer of a join, the leaver of a leave). moved counts keys whose owner
// changed; stray counts those among them that moved between two other workers, which a
// consistent scheme never does.
func movement(before, after []int32, w int32) (moved, stray int) {
	for i, b := range before {
		a := after[i]
		if a == b {
			continue
		}
		moved++
		if a != w && b != w {
			stray++
		}
	}
	return moved, stray
}

// ratio is x/ideal, or 0 where there is no ideal to compare with.
func ratio(x, ideal float64) float64 {
	if ideal == 0 {
		return 0
	}
	return x / ideal
}

// uniformPeakMean places the keys on n workers independently and uniformly at random
// (a fresh hash of the key per trial, multiplied down to [0, n)) and returns peak/mean:
// the balance of an ideal hash-based placement, i.e. sampling noise alone.
func uniformPeakMean(hs []uint64, n int, trial int) float64 {
	loads := make([]int, n)
	seed := trialSeed(trial)
	for _, h := range hs {
		w, _ := bits.Mul64(mix(h^seed), uint64(n))
		loads[w]++
	}
	return peakMean(loads, len(hs))
}

// trialSeed is the seed of key set number trial, shared by the noise floor and the
// resampled peak/mean so that both see the same key sets.
func trialSeed(trial int) uint64 { return mix(uint64(trial+1) * golden) }
