package main

import (
	"math"
)

// boundedLoads is consistent hashing with bounded loads (Mirrokni, Thorup and
// Zadimoghaddam, 2018) on a plain ring: no worker takes more than ceil(c·keys/workers)
// keys, and a key whose ring owner is full goes to the next virtual node clockwise whose
// worker still has room. The result depends on the order keys arrive in, so every
// placement here places all keys in the same fixed order, and a join or leave places them
// all again.
type boundedLoads struct {
	ring *plainRing
	c    float64 // load factor, > 1
	keys int     // keys per placement, which sets the capacity

	// lookup's running state: it places keys one by one, starting over after keys.
	loads  []int32
	placed int
}

func newBoundedLoads(r *plainRing, c float64, keys int) *boundedLoads {
	return &boundedLoads{ring: r, c: c, keys: keys, loads: make([]int32, r.maxWorker()+1)}
}

// capacity is the most keys one worker may take when k keys are placed.
func (b *boundedLoads) capacity(k int) int32 {
	return int32(math.Ceil(b.c * float64(k) / float64(b.ring.workers)))
}

// next places h given the loads so far: the first token clockwise with room. It always
// finds one, since c > 1 leaves total capacity above the number of keys.
func (b *boundedLoads) next(h uint64, loads []int32, capacity int32) int32 {
	i := b.ring.search(h)
	for loads[b.ring.owner[i]] >= capacity {
		if i++; i == len(b.ring.owner) {
			i = 0
		}
	}
	w := b.ring.owner[i]
	loads[w]++
	return w
}

func (b *boundedLoads) place(hs []uint64, out []int32) {
	loads := make([]int32, len(b.loads))
	capacity := b.capacity(len(hs))
	for i, h := range hs {
		out[i] = b.next(h, loads, capacity)
	}
}

// lookup places the next key as the coordinator would on assigning it, against the loads
// of the keys placed before it in this round; after b.keys keys a new round starts.
func (b *boundedLoads) lookup(h uint64) int {
	if b.placed == b.keys {
		clear(b.loads)
		b.placed = 0
	}
	b.placed++
	return int(b.next(h, b.loads, b.capacity(b.keys)))
}

func (b *boundedLoads) join(w int32, id string) (placer, error) {
	r, err := b.ring.joined(w, id)
	if err != nil {
		return nil, err
	}
	return newBoundedLoads(r, b.c, b.keys), nil
}

func (b *boundedLoads) leave(w int32) (placer, error) {
	r, err := b.ring.left(w)
	if err != nil {
		return nil, err
	}
	return newBoundedLoads(r, b.c, b.keys), nil
}

func (b *boundedLoads) numTokens() int { return b.ring.numTokens() }
