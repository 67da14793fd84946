// Package ring is the consistent-hash ring that assigns repos to fetch workers.
//
// A key is hashed (KeyHash) onto a circle of 2^64 positions and belongs to the first
// token clockwise from it: the token with the smallest Pos >= hash, wrapping to the first
// token. A token owns the arc (previous token's Pos, Pos].
//
// Token positions are not hashes of member names. The coordinator stores the ring, so
// positions are chosen to balance arcs exactly: a joining member carves exactly 1/(n+1)
// of the circle out of the members with the largest shares, and a leaving member's arcs go
// to the members with the smallest shares or next to its arcs (see Add and Remove). A join
// moves exactly 1/(n+1) of the key space, all of it to the newcomer; a leave moves
// exactly the leaver's share. Shares stay near the mean (at most 1+1/MaxDonors of it
// after joins, 1+1/MaxDonors+1/LeaveSlack with leaves), so load imbalance is mostly the
// sampling noise of the keys. Tokens grow with the members, to about MaxDonors per
// member, and plateau under join/leave churn; bench/results/placement.json (the
// report's placement section) has the shares and token counts measured.
//
// A *Ring is immutable: Add and Remove return a new ring, so any number of goroutines may
// look keys up concurrently.
package ring

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Validation and membership errors; returned errors wrap one of these.
var (
	ErrHash            = errors.New("ring: unknown hash function")
	ErrEmptyID         = errors.New("ring: empty member id")
	ErrDuplicateMember = errors.New("ring: duplicate member")
	ErrNotMember       = errors.New("ring: not a member")
	ErrUnknownMember   = errors.New("ring: token for unknown member")
	ErrUnsorted        = errors.New("ring: tokens not sorted by position")
	ErrDuplicatePos    = errors.New("ring: duplicate token position")
	ErrNoTokens        = errors.New("ring: member owns no token")
	ErrTooManyMembers  = errors.New("ring: too many members")
)

// Ring is an immutable consistent-hash ring. The zero value and nil are empty rings.
type Ring struct {
	members []store.Member // sorted by ID; a member's index is its owner number
	pos     []uint64       // token positions, strictly ascending
	owner   []uint32       // owner[i] indexes members; kept apart from pos so lookups scan dense memory
}

// New returns an empty ring.
func New() *Ring { return &Ring{} }

// FromStore loads a stored ring. It rejects a ring written with another hash, unsorted or
// duplicate positions, tokens of unknown members and members without tokens. Adjacent
// tokens of the same member are merged, which changes no key's owner.
func FromStore(sr store.Ring) (*Ring, error) {
	if sr.Hash != HashID && (sr.Hash != "" || len(sr.Tokens) > 0) {
		return nil, fmt.Errorf("%w: %q (want %q)", ErrHash, sr.Hash, HashID)
	}
	if len(sr.Members) > math.MaxUint32 {
		return nil, ErrTooManyMembers
	}
	members := slices.Clone(sr.Members)
	slices.SortFunc(members, func(a, b store.Member) int { return strings.Compare(a.ID, b.ID) })
	for i, m := range members {
		if m.ID == "" {
			return nil, ErrEmptyID
		}
		if i > 0 && members[i-1].ID == m.ID {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateMember, m.ID)
		}
	}
	r := &Ring{members: members, pos: make([]uint64, len(sr.Tokens)), owner: make([]uint32, len(sr.Tokens))}
	used := make([]bool, len(members))
	for i, t := range sr.Tokens {
		if i > 0 && t.Pos == sr.Tokens[i-1].Pos {
			return nil, fmt.Errorf("%w: %d", ErrDuplicatePos, t.Pos)
		}
		if i > 0 && t.Pos < sr.Tokens[i-1].Pos {
			return nil, fmt.Errorf("%w: %d after %d", ErrUnsorted, t.Pos, sr.Tokens[i-1].Pos)
		}
		m, ok := r.index(t.Member)
		if !ok {
			return nil, fmt.Errorf("%w: %q at %d", ErrUnknownMember, t.Member, t.Pos)
		}
		r.pos[i], r.owner[i] = t.Pos, m
		used[m] = true
	}
	for i, u := range used {
		if !u {
			return nil, fmt.Errorf("%w: %q", ErrNoTokens, members[i].ID)
		}
	}
	r.pos, r.owner = mergeRuns(r.pos, r.owner)
	return r, nil
}

// Tokens returns the tokens to store, sorted by position.
func (r *Ring) Tokens() []store.Token {
	if r == nil {
		return nil
	}
	ts := make([]store.Token, len(r.pos))
	for i, p := range r.pos {
		ts[i] = store.Token{Pos: p, Member: r.members[r.owner[i]].ID}
	}
	return ts
}

// Members returns the members sorted by ID.
func (r *Ring) Members() []store.Member {
	if r == nil {
		return nil
	}
	return slices.Clone(r.members)
}

// Len returns the number of members.
func (r *Ring) Len() int {
	if r == nil {
		return 0
	}
	return len(r.members)
}

// NumTokens returns the number of tokens (virtual nodes).
func (r *Ring) NumTokens() int {
	if r == nil {
		return 0
	}
	return len(r.pos)
}

// Has reports whether id is a member.
func (r *Ring) Has(id string) bool {
	_, ok := r.index(id)
	return ok
}

// Owner returns the member owning hash h: the owner of the first token clockwise from h.
// It returns "", false on an empty ring. It does not allocate.
func (r *Ring) Owner(h uint64) (string, bool) {
	if r == nil || len(r.pos) == 0 {
		return "", false
	}
	return r.members[r.owner[r.search(h)]].ID, true
}

// Lookup returns the member owning key (a store.RingKey).
func (r *Ring) Lookup(key string) (string, bool) { return r.Owner(KeyHash(key)) }

// Shares returns each member's fraction of the circle; the fractions sum to 1.
func (r *Ring) Shares() map[string]float64 {
	out := make(map[string]float64, r.Len())
	if r.Len() == 0 {
		return out
	}
	if len(r.pos) == 1 {
		out[r.members[r.owner[0]].ID] = 1
		return out
	}
	for i := range r.pos {
		out[r.members[r.owner[i]].ID] += float64(r.arcLen(i)) / (1 << 64)
	}
	return out
}

// search returns the index of the first token with pos >= h, wrapping to 0. Written out
// rather than via sort.Search so the hot path has no closure call per step.
func (r *Ring) search(h uint64) int {
	lo, hi := 0, len(r.pos)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if r.pos[mid] < h {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(r.pos) {
		return 0
	}
	return lo
}

// index returns the owner number of member id.
func (r *Ring) index(id string) (uint32, bool) {
	if r == nil {
		return 0, false
	}
	i, ok := slices.BinarySearchFunc(r.members, id, func(m store.Member, id string) int { return strings.Compare(m.ID, id) })
	return uint32(i), ok
}

// prev returns the index of the token before token i, wrapping.
func (r *Ring) prev(i int) int {
	if i == 0 {
		return len(r.pos) - 1
	}
	return i - 1
}

// next returns the index of the token after token i, wrapping.
func (r *Ring) next(i int) int {
	if i == len(r.pos)-1 {
		return 0
	}
	return i + 1
}

// arcLen returns the length of token i's arc. With a single token the arc is the whole
// circle, 2^64, which does not fit: callers handle that case first (it yields 0 here).
func (r *Ring) arcLen(i int) uint64 {
	return r.pos[i] - r.pos[r.prev(i)] // wraps mod 2^64, which is the circle's arithmetic
}

// shares returns each member's share of the circle in units of 2^-64. It needs at least
// two tokens, so that no share is the whole circle.
func (r *Ring) shares() []uint64 {
	s := make([]uint64, len(r.members))
	for i := range r.pos {
		s[r.owner[i]] += r.arcLen(i)
	}
	return s
}

// mergeRuns drops every token whose successor (circularly) has the same owner: the
// successor's arc then extends back over it, so no key changes owner. A ring owned by a
// single member keeps only its last token.
func mergeRuns(pos []uint64, owner []uint32) ([]uint64, []uint32) {
	n := len(pos)
	if n <= 1 {
		return pos, owner
	}
	first := owner[0] // compared with the last token after slot 0 may be overwritten
	w := 0
	for i := 0; i < n; i++ {
		next := first
		if i+1 < n {
			next = owner[i+1]
		}
		if owner[i] == next {
			continue
		}
		pos[w], owner[w] = pos[i], owner[i]
		w++
	}
	if w == 0 {
		pos[0], owner[0] = pos[n-1], owner[n-1]
		w = 1
	}
	return pos[:w:w], owner[:w:w]
}
