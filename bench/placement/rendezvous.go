package main

import (
	"fmt"
	"slices"
)

// rendezvous is highest-random-weight hashing (Thaler and Ravishankar, 1996): a key
// belongs to the worker with the highest score of (key, worker). A lookup scores every
// worker, so it costs O(workers); the score is one mixer call on the key hash xor a
// precomputed per-worker seed.
type rendezvous struct {
	seeds []uint64
	nums  []int32 // worker number of seeds[i]
}

func newRendezvous(ids []string) (placer, error) {
	r := &rendezvous{seeds: make([]uint64, len(ids)), nums: make([]int32, len(ids))}
	for w, id := range ids {
		r.seeds[w], r.nums[w] = workerSeed(id), int32(w)
	}
	return r, nil
}

// best returns the index of the highest-scoring worker; ties (2^-64 per pair) go to the
// lower index.
func (r *rendezvous) best(h uint64) int {
	top, at := uint64(0), 0
	for i, s := range r.seeds {
		if v := mix(h ^ s); v > top {
			top, at = v, i
		}
	}
	return at
}

func (r *rendezvous) ownerOf(h uint64) int32 { return r.nums[r.best(h)] }

func (r *rendezvous) place(hs []uint64, out []int32) { placeParallel(hs, out, r.ownerOf) }

func (r *rendezvous) lookup(h uint64) int { return int(r.ownerOf(h)) }

func (r *rendezvous) join(w int32, id string) (placer, error) {
	if slices.Contains(r.nums, w) {
		return nil, fmt.Errorf("join: worker %d is already a member", w)
	}
	return &rendezvous{seeds: append(slices.Clip(r.seeds), workerSeed(id)), nums: append(slices.Clip(r.nums), w)}, nil
}

func (r *rendezvous) leave(w int32) (placer, error) {
	i := slices.Index(r.nums, w)
	if i < 0 {
		return nil, fmt.Errorf("leave: no worker %d", w)
	}
	return &rendezvous{
		seeds: slices.Delete(slices.Clone(r.seeds), i, i+1),
		nums:  slices.Delete(slices.Clone(r.nums), i, i+1),
	}, nil
}
