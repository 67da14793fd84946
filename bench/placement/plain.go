package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/mirrorfleet/mirrorfleet/shared/ring"
)

// plainRing is the classic consistent-hash ring (Karger et al.): every worker has a fixed
// number of virtual nodes at hashed positions, and a key belongs to the first virtual node
// clockwise from its hash. Positions depend only on the worker's ID, so a membership
// change only adds or removes that worker's nodes.
type plainRing struct {
	pos     []uint64 // token positions, ascending
	owner   []int32  // worker number of each token; apart from pos so searches scan dense memory
	vnodes  int
	workers int
}

type token struct {
	pos   uint64
	owner int32
}

// vnodePos is the position of virtual node v of worker id.
func vnodePos(id string, v int) uint64 { return ring.KeyHash(id + "#" + strconv.Itoa(v)) }

func newPlainRing(ids []string, vnodes int) *plainRing {
	ts := make([]token, 0, len(ids)*vnodes)
	for w, id := range ids {
		ts = appendVNodes(ts, int32(w), id, vnodes)
	}
	return plainFromTokens(ts, vnodes, len(ids))
}

func appendVNodes(ts []token, w int32, id string, vnodes int) []token {
	for v := range vnodes {
		ts = append(ts, token{vnodePos(id, v), w})
	}
	return ts
}

// plainFromTokens sorts the tokens; ties (practically never, with 64-bit positions) are
// broken by worker number so the ring does not depend on insertion order.
func plainFromTokens(ts []token, vnodes, workers int) *plainRing {
	slices.SortFunc(ts, func(a, b token) int {
		if c := cmp.Compare(a.pos, b.pos); c != 0 {
			return c
		}
		return cmp.Compare(a.owner, b.owner)
	})
	r := &plainRing{pos: make([]uint64, len(ts)), owner: make([]int32, len(ts)), vnodes: vnodes, workers: workers}
	for i, t := range ts {
		r.pos[i], r.owner[i] = t.pos, t.owner
	}
	return r
}

func (r *plainRing) tokens() []token {
	ts := make([]token, len(r.pos))
	for i := range r.pos {
		ts[i] = token{r.pos[i], r.owner[i]}
	}
	return ts
}

// search returns the index of the first token at or after h, wrapping to 0.
func (r *plainRing) search(h uint64) int {
	i, _ := slices.BinarySearch(r.pos, h)
	if i == len(r.pos) {
		return 0
	}
	return i
}

func (r *plainRing) ownerOf(h uint64) int32 { return r.owner[r.search(h)] }

func (r *plainRing) place(hs []uint64, out []int32) { placeParallel(hs, out, r.ownerOf) }

func (r *plainRing) lookup(h uint64) int { return int(r.ownerOf(h)) }

func (r *plainRing) join(w int32, id string) (placer, error) {
	return r.joined(w, id)
}

func (r *plainRing) joined(w int32, id string) (*plainRing, error) {
	if slices.Contains(r.owner, w) {
		return nil, fmt.Errorf("join: worker %d is already on the ring", w)
	}
	return plainFromTokens(appendVNodes(r.tokens(), w, id, r.vnodes), r.vnodes, r.workers+1), nil
}

func (r *plainRing) leave(w int32) (placer, error) { return r.left(w) }

func (r *plainRing) left(w int32) (*plainRing, error) {
	ts := slices.DeleteFunc(r.tokens(), func(t token) bool { return t.owner == w })
	if len(ts) == len(r.pos) {
		return nil, fmt.Errorf("leave: no worker %d", w)
	}
	return plainFromTokens(ts, r.vnodes, r.workers-1), nil
}

// sharePeakMean measures the arcs: token i owns (pos[i-1], pos[i]].
func (r *plainRing) sharePeakMean() float64 {
	if len(r.pos) == 0 {
		return 0
	}
	share := map[int32]float64{}
	for i, p := range r.pos {
		prev := r.pos[(i+len(r.pos)-1)%len(r.pos)]
		share[r.owner[i]] += float64(p-prev) / (1 << 64) // mod 2^64 is the circle's arithmetic
	}
	peak := 0.0
	for _, s := range share {
		peak = max(peak, s)
	}
	return peak * float64(r.workers)
}

func (r *plainRing) numTokens() int { return len(r.pos) }

// maxWorker returns the largest worker number on the ring.
func (r *plainRing) maxWorker() int32 {
	m := int32(-1)
	for _, o := range r.owner {
		m = max(m, o)
	}
	return m
}
