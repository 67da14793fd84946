package ring

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// MaxDonors bounds how many members give key space to a joining member, and how many
// receive a leaving member's space. Each of them costs at most one new token per change,
// so it trades balance (more donors: flatter shares) against token count. Changing it
// changes which ring a sequence of joins produces, not how stored rings are read.
const MaxDonors = 64

// LeaveSlack bounds how far above the water level a leave may push a member next to one
// of the leaving member's arcs: mean/LeaveSlack. Absorbing whole arcs into neighbours is
// what keeps the token count from growing with every join/leave cycle
// (TestChurnKeepsTokenCount), at the cost of shares up to about 1+1/LeaveSlack of the
// mean after leaves.
const LeaveSlack = 64

// insert is a token created by a change.
type insert struct {
	pos   uint64
	owner uint32
}

// Add returns a ring with m added. With n members the newcomer takes exactly 1/(n+1) of
// the circle, carved out of the (up to MaxDonors) members with the largest shares: they
// are cut down to a common level (water-filling), each giving its part from its largest
// arcs. Keys only ever move to the newcomer. The first member gets one token at
// KeyHash(m.ID) and owns the whole circle.
func (r *Ring) Add(m store.Member) (*Ring, error) {
	if m.ID == "" {
		return nil, ErrEmptyID
	}
	at, found := r.index(m.ID)
	if found {
		return nil, fmt.Errorf("%w: %q", ErrDuplicateMember, m.ID)
	}
	n := r.Len()
	if n == 0 {
		return &Ring{members: []store.Member{m}, pos: []uint64{KeyHash(m.ID)}, owner: []uint32{0}}, nil
	}
	if n >= math.MaxUint32 {
		return nil, ErrTooManyMembers
	}
	nc := uint32(n) // the newcomer's owner number until rebuild renumbers everyone
	own := slices.Clone(r.owner)
	var ins []insert
	if len(r.pos) == 1 {
		// The sole member owns all 2^64 positions, a share uint64 cannot hold: split the
		// circle in halves directly.
		ins = append(ins, insert{r.pos[0] + 1<<63, nc})
	} else {
		shares := r.shares()
		t, _ := bits.Div64(1, 0, uint64(n+1)) // floor(2^64 / (n+1))
		donors := r.byShare(shares, -1, true)
		donors = donors[:min(len(donors), MaxDonors)]
		ins = r.carve(own, donors, fill(shares, donors, t), nc)
	}

	members := slices.Insert(slices.Clone(r.members), int(at), m)
	renum := make([]uint32, n+1)
	for o := range uint32(n) {
		renum[o] = o
		if o >= at {
			renum[o] = o + 1
		}
	}
	renum[nc] = at
	return r.rebuild(members, renum, own, ins), nil
}

// AddAll adds several members at once (a cold start): one at a time in ID order, so the
// result depends only on the set of members.
func (r *Ring) AddAll(ms ...store.Member) (*Ring, error) {
	ms = slices.Clone(ms)
	slices.SortFunc(ms, func(a, b store.Member) int { return strings.Compare(a.ID, b.ID) })
	if r == nil {
		r = New()
	}
	for _, m := range ms {
		var err error
		if r, err = r.Add(m); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Remove returns a ring without member id. Its arcs go to receivers raised to a common
// level (water-filling) so they receive exactly its share: the (up to MaxDonors) members
// with the smallest shares, plus the owners of the tokens next to its arcs. Neighbours
// are preferred when handing out arcs, because a neighbour's part merges into its own
// arc instead of costing a token; without that, every join/leave cycle would add tokens
// for ever. Only the removed member's keys move. Removing the last member yields an
// empty ring.
func (r *Ring) Remove(id string) (*Ring, error) {
	x, ok := r.index(id)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotMember, id)
	}
	n := r.Len()
	if n == 1 {
		return New(), nil
	}
	members := slices.Delete(slices.Clone(r.members), int(x), int(x)+1)
	renum := make([]uint32, n)
	for o := range uint32(n) {
		renum[o] = o
		if o > x {
			renum[o] = o - 1
		}
	}
	own := slices.Clone(r.owner)
	if n == 2 {
		// The other member takes the whole circle, a share uint64 cannot hold.
		for i := range own {
			own[i] = 1 - x
		}
		return r.rebuild(members, renum, own, nil), nil
	}
	// n >= 3, so every share, and every level below, is under 2^64 (tokens are merged,
	// so each member has a positive share).
	shares := r.shares()
	cand := make([]bool, n)
	for _, o := range r.byShare(shares, int(x), false)[:min(n-1, MaxDonors)] {
		cand[o] = true
	}
	var arcs []int // x's tokens
	for i, o := range r.owner {
		if o == x {
			arcs = append(arcs, i)
			cand[r.owner[r.prev(i)]] = true
			cand[r.owner[r.next(i)]] = true
		}
	}
	rcv := r.byShare(shares, int(x), false)
	rcv = slices.DeleteFunc(rcv, func(o uint32) bool { return !cand[o] })
	gets := fill(shares, rcv, shares[x])
	var level uint64
	for k, g := range gets {
		level = max(level, shares[rcv[k]]+g)
	}
	mean, _ := bits.Div64(1, 0, uint64(n-1))
	ins := r.spread(own, shares, arcs, rcv, gets, satAdd(level, mean/LeaveSlack))
	return r.rebuild(members, renum, own, ins), nil
}

// byShare returns the member numbers except skip, by share (descending if desc), ties by
// ID so that changes are deterministic.
func (r *Ring) byShare(shares []uint64, skip int, desc bool) []uint32 {
	idx := make([]uint32, 0, len(shares))
	for i := range shares {
		if i != skip {
			idx = append(idx, uint32(i))
		}
	}
	slices.SortFunc(idx, func(a, b uint32) int {
		c := cmp.Compare(shares[a], shares[b])
		if desc {
			c = -c
		}
		if c != 0 {
			return c
		}
		return cmp.Compare(a, b) // member numbers follow ID order
	})
	return idx
}

// fill water-fills total over the members in order, whose shares are sorted (descending
// when giving, ascending when receiving): it finds the level that the first k of them
// are moved to so that together they give (receive) exactly total, and returns each
// one's amount. The integer remainder goes one unit each to the first members.
// Shares sum to at most 2^64, so the running sums below fit; overflow means "past total".
func fill(shares []uint64, order []uint32, total uint64) []uint64 {
	gap := func(a, b uint64) uint64 {
		if a > b {
			return a - b
		}
		return b - a
	}
	var acc uint64 // amount moved when the first k members reach member k-1's share
	k := 1
	for k < len(order) {
		hi, lo := bits.Mul64(uint64(k), gap(shares[order[k-1]], shares[order[k]]))
		next, carry := bits.Add64(acc, lo, 0)
		if hi != 0 || carry != 0 || next >= total {
			break
		}
		acc = next
		k++
	}
	q, rem := (total-acc)/uint64(k), (total-acc)%uint64(k)
	amounts := make([]uint64, k)
	for i := range k {
		amounts[i] = gap(shares[order[i]], shares[order[k-1]]) + q
		if uint64(i) < rem {
			amounts[i]++
		}
	}
	return amounts
}

// carve moves gives[i] of key space from donors[i] to the newcomer nc, largest arcs
// first: whole arcs change owner, and the last one is split by a new token at
// prev+remainder so the newcomer gets its start. Each donor adds at most one token.
func (r *Ring) carve(own []uint32, donors []uint32, gives []uint64, nc uint32) []insert {
	slot := make([]int32, len(r.members))
	for i := range slot {
		slot[i] = -1
	}
	for i, d := range donors[:len(gives)] {
		slot[d] = int32(i)
	}
	arcs := make([][]int, len(gives))
	for i, o := range r.owner {
		if s := slot[o]; s >= 0 {
			arcs[s] = append(arcs[s], i)
		}
	}
	var ins []insert
	for s, g := range gives {
		a := arcs[s]
		slices.SortFunc(a, func(i, j int) int {
			if c := cmp.Compare(r.arcLen(j), r.arcLen(i)); c != 0 {
				return c
			}
			return cmp.Compare(i, j)
		})
		for _, i := range a {
			if g == 0 {
				break
			}
			l := r.arcLen(i)
			if l <= g {
				own[i] = nc
				g -= l
				continue
			}
			ins = append(ins, insert{r.pos[r.prev(i)] + g, nc})
			g = 0
		}
	}
	return ins
}

// spread hands the leaving member's arcs to the receivers, gets[k] to rcv[k] (their
// water-filled amounts, summing to the arcs' total); ceiling is the water level plus
// mean/LeaveSlack. An arc (prev, p] is cut into pieces:
// a front piece for the owner of prev and a back piece for the owner of the token after p
// cost no token (they extend those owners' arcs), every other piece costs one. So:
//  1. arcs the two neighbours can absorb whole go first, smallest first so that as many
//     as possible merge away; here a neighbour may go up to ceiling, since arcs are
//     about mean/MaxDonors long and rarely fit under the level exactly;
//  2. the neighbours take what is left of their amounts from the remaining arcs' ends;
//  3. the receivers' remaining amounts fill the middles, in order.
//
// What a neighbour takes beyond its amount is left unused by others, so the amounts left
// in step 3 always cover what is left of the arcs.
func (r *Ring) spread(own []uint32, shares []uint64, arcs []int, rcv []uint32, gets []uint64, ceiling uint64) []insert {
	strict := make([]uint64, len(r.members)) // water-filled amount still open
	allow := make([]uint64, len(r.members))  // what step 1 may still give a neighbour
	for k, g := range gets {
		strict[rcv[k]] = g
	}
	for _, i := range arcs {
		for _, o := range [2]uint32{r.owner[r.prev(i)], r.owner[r.next(i)]} {
			if s := shares[o]; s < ceiling {
				allow[o] = ceiling - s
			}
		}
	}
	take := func(o uint32, want uint64, byAllow bool) uint64 {
		g := min(strict[o], want)
		if byAllow {
			g = min(allow[o], want)
		}
		strict[o] -= min(strict[o], g)
		allow[o] -= min(allow[o], g)
		return g
	}
	type cut struct{ front, back uint64 }
	cuts := make([]cut, len(arcs))
	order := make([]int, len(arcs)) // indexes into arcs, shortest arc first
	for k := range order {
		order[k] = k
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(r.arcLen(arcs[a]), r.arcLen(arcs[b])); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for pass := 0; pass < 2; pass++ {
		for _, a := range order {
			i := arcs[a]
			c, l := &cuts[a], r.arcLen(i)
			if c.front+c.back == l {
				continue
			}
			y, z := r.owner[r.prev(i)], r.owner[r.next(i)]
			if pass == 0 {
				room := allow[y]
				if z != y {
					room = satAdd(room, allow[z])
				}
				if room >= l {
					c.front = take(y, l, true)
					c.back = take(z, l-c.front, true)
				}
				continue
			}
			c.front = take(y, l, false)
			c.back = take(z, l-c.front, false)
		}
	}
	type piece struct {
		owner uint32
		n     uint64
	}
	var ins []insert
	var pieces []piece
	k := 0
	for a, i := range arcs {
		c, l, base := cuts[a], r.arcLen(i), r.pos[r.prev(i)]
		pieces = pieces[:0]
		if c.front > 0 {
			pieces = append(pieces, piece{r.owner[r.prev(i)], c.front})
		}
		for rest := l - c.front - c.back; rest > 0; {
			for strict[rcv[k]] == 0 {
				k++ // capacities sum to the arcs' total, so this never runs off the end
			}
			g := take(rcv[k], rest, false)
			pieces = append(pieces, piece{rcv[k], g})
			rest -= g
		}
		if c.back > 0 {
			pieces = append(pieces, piece{r.owner[r.next(i)], c.back})
		}
		// Each piece but the last ends at a new token; the last one keeps token i.
		var end uint64
		for _, pc := range pieces[:len(pieces)-1] {
			end += pc.n
			ins = append(ins, insert{base + end, pc.owner})
		}
		own[i] = pieces[len(pieces)-1].owner
	}
	return ins
}

// satAdd returns a+b, or the largest uint64 if that overflows.
func satAdd(a, b uint64) uint64 {
	if s, carry := bits.Add64(a, b, 0); carry == 0 {
		return s
	}
	return math.MaxUint64
}

// rebuild makes the changed ring: the old tokens with owners own (renumbered by renum for
// the new member list) plus the inserted tokens, then merges same-owner neighbours. It
// is O(T log T) for T tokens.
func (r *Ring) rebuild(members []store.Member, renum, own []uint32, ins []insert) *Ring {
	slices.SortFunc(ins, func(a, b insert) int { return cmp.Compare(a.pos, b.pos) })
	t := len(r.pos) + len(ins)
	pos, owner := make([]uint64, 0, t), make([]uint32, 0, t)
	j := 0
	for i, p := range r.pos {
		// Inserted positions lie strictly inside arcs, so they never equal an old one.
		for ; j < len(ins) && ins[j].pos < p; j++ {
			pos, owner = append(pos, ins[j].pos), append(owner, renum[ins[j].owner])
		}
		pos, owner = append(pos, p), append(owner, renum[own[i]])
	}
	for ; j < len(ins); j++ {
		pos, owner = append(pos, ins[j].pos), append(owner, renum[ins[j].owner])
	}
	pos, owner = mergeRuns(pos, owner)
	return &Ring{members: members, pos: pos, owner: owner}
}
