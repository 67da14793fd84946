package main

import "fmt"

// jump is jump consistent hash (Lamping and Veach, 2014): no state but the bucket count.
// A key's bucket is found by following the bucket counts at which it would move as
// buckets are added one by one; each step draws from a random stream seeded by the key.
// Worker numbers are the buckets, so only the last bucket can leave.
type jump struct{ n int32 }

func newJump(ids []string) (placer, error) { return jump{n: int32(len(ids))}, nil }

// jumpBucket returns the bucket of key among n buckets. With b+1 buckets the key sits in
// bucket b; it next moves when the count exceeds (b+1)/r for r uniform in (0,1], which
// gives each of the n buckets probability 1/n and moves a key only to the new bucket.
func jumpBucket(key uint64, n int32) int32 {
	state, b := key, 0.0
	for {
		state += golden
		r := float64(mix(state)>>11+1) / (1 << 53) // (0, 1]
		next := (b + 1) / r
		if next >= float64(n) {
			return int32(b)
		}
		b = float64(int64(next)) // floor; next < n fits
	}
}

func (j jump) ownerOf(h uint64) int32 { return jumpBucket(h, j.n) }

func (j jump) place(hs []uint64, out []int32) { placeParallel(hs, out, j.ownerOf) }

func (j jump) lookup(h uint64) int { return int(jumpBucket(h, j.n)) }

func (j jump) join(w int32, _ string) (placer, error) {
	if w != j.n {
		return nil, fmt.Errorf("jump: join adds bucket %d, not %d", j.n, w)
	}
	return jump{n: j.n + 1}, nil
}

func (j jump) leave(w int32) (placer, error) {
	if w != j.n-1 || j.n <= 1 {
		return nil, fmt.Errorf("jump: only the last bucket (%d) can leave, not %d", j.n-1, w)
	}
	return jump{n: j.n - 1}, nil
}
