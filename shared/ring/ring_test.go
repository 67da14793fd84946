package ring

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Balance bounds, relative to the mean share. After joins only, the members left out of
// a join's donors keep their share while the mean drops: at most 1+1/MaxDonors. Leaves
// may push a neighbour of the leaving member's arcs up to the level plus 1/LeaveSlack.
// Measured worst cases: 1.0154 (joins to 1000), 1.0214 (3000 random joins/leaves).
const (
	joinPeakBound = 1 + 1.0/MaxDonors + 1e-6
	joinMinBound  = 1 - 1.0/MaxDonors
	anyPeakBound  = 1 + 1.0/MaxDonors + 1.0/LeaveSlack + 1e-6
)

func member(i int) store.Member { return store.Member{ID: fmt.Sprintf("w%04d", i), Slot: i} }

func members(n int) []store.Member {
	ms := make([]store.Member, n)
	for i := range ms {
		ms[i] = member(i)
	}
	return ms
}

func tok(pos uint64, m string) store.Token { return store.Token{Pos: pos, Member: m} }

func mustBuild(t testing.TB, n int) *Ring {
	t.Helper()
	r, err := New().AddAll(members(n)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// circle is 2^64, the length of the whole ring.
var circle = new(big.Int).Lsh(big.NewInt(1), 64)

// exactShares returns each member's arc total as an exact integer (up to 2^64).
func exactShares(r *Ring) map[string]*big.Int {
	out := map[string]*big.Int{}
	ts := r.Tokens()
	for i, tk := range ts {
		l := new(big.Int)
		if len(ts) == 1 {
			l.Set(circle)
		} else {
			l.SetUint64(tk.Pos - ts[(i+len(ts)-1)%len(ts)].Pos)
		}
		if out[tk.Member] == nil {
			out[tk.Member] = new(big.Int)
		}
		out[tk.Member].Add(out[tk.Member], l)
	}
	return out
}

// checkInvariants asserts what every ring must satisfy.
func checkInvariants(t testing.TB, r *Ring) {
	t.Helper()
	ts, ms := r.Tokens(), r.Members()
	if r.Len() != len(ms) || r.NumTokens() != len(ts) {
		t.Fatalf("Len/NumTokens disagree with Members/Tokens")
	}
	if len(ms) == 0 {
		if len(ts) != 0 {
			t.Fatalf("empty ring has %d tokens", len(ts))
		}
		return
	}
	known := map[string]bool{}
	for i, m := range ms {
		if i > 0 && ms[i-1].ID >= m.ID {
			t.Fatalf("members not sorted/unique: %q, %q", ms[i-1].ID, m.ID)
		}
		known[m.ID] = true
	}
	owns := map[string]bool{}
	for i, tk := range ts {
		if i > 0 && ts[i-1].Pos >= tk.Pos {
			t.Fatalf("token %d at %d not above %d", i, tk.Pos, ts[i-1].Pos)
		}
		if !known[tk.Member] {
			t.Fatalf("token %d owned by non-member %q", i, tk.Member)
		}
		if len(ts) > 1 && ts[(i+1)%len(ts)].Member == tk.Member {
			t.Fatalf("tokens %d and %d both %q: not merged", i, (i+1)%len(ts), tk.Member)
		}
		owns[tk.Member] = true
	}
	if len(owns) != len(ms) {
		t.Fatalf("%d of %d members own tokens", len(owns), len(ms))
	}
	sum := 0.0
	for _, s := range r.Shares() {
		sum += s
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Fatalf("shares sum to %v", sum)
	}
	back, err := FromStore(store.Ring{Hash: HashID, Members: ms, Tokens: ts})
	if err != nil {
		t.Fatalf("FromStore of own output: %v", err)
	}
	if !slices.Equal(back.Tokens(), ts) || !slices.Equal(back.Members(), ms) {
		t.Fatalf("store round trip changed the ring")
	}
}

// shareRange returns the largest and smallest share times the member count.
func shareRange(r *Ring) (peak, low float64) {
	low = math.Inf(1)
	for _, s := range r.Shares() {
		peak, low = max(peak, s), min(low, s)
	}
	return peak * float64(r.Len()), low * float64(r.Len())
}

func TestKeyHash(t *testing.T) {
	// Stored rings depend on these values: changing the hash needs a new HashID.
	for _, c := range []struct {
		key  string
		want uint64
	}{
		{"", 0xf52a15e9a9b5e89b},
		{"a", 0x2c0bdbf481420f8},
		{"https://github.com/torvalds/linux", 0x5f8ab657944e7f9e},
	} {
		if got := KeyHash(c.key); got != c.want {
			t.Errorf("KeyHash(%q) = %#x, want %#x", c.key, got, c.want)
		}
	}
	// The first stage is plain FNV-1a 64, so the id names it truthfully.
	f := fnv.New64a()
	f.Write([]byte("https://host/org/repo-1"))
	h := f.Sum64()
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	if got := KeyHash("https://host/org/repo-1"); got != h {
		t.Errorf("KeyHash differs from FNV-1a + splitmix64: %#x vs %#x", got, h)
	}
}

func TestOwnerClockwise(t *testing.T) {
	r, err := FromStore(store.Ring{Hash: HashID,
		Members: []store.Member{{ID: "c"}, {ID: "a"}, {ID: "b"}},
		Tokens:  []store.Token{{Pos: 100, Member: "a"}, {Pos: 200, Member: "b"}, {Pos: 300, Member: "c"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		h    uint64
		want string
	}{
		{0, "a"}, {99, "a"}, {100, "a"}, {101, "b"}, {200, "b"}, {201, "c"}, {300, "c"},
		{301, "a"}, {math.MaxUint64, "a"}, // past the last token: wraps to the first
	} {
		if got, ok := r.Owner(c.h); !ok || got != c.want {
			t.Errorf("Owner(%d) = %q, %v; want %q", c.h, got, ok, c.want)
		}
	}
	one := mustBuild(t, 1)
	for _, h := range []uint64{0, 1, KeyHash("w0000"), math.MaxUint64} {
		if got, ok := one.Owner(h); !ok || got != "w0000" {
			t.Errorf("single member: Owner(%d) = %q, %v", h, got, ok)
		}
	}
	for _, e := range []*Ring{nil, New(), {}} {
		if got, ok := e.Owner(42); ok || got != "" {
			t.Errorf("empty ring: Owner = %q, %v", got, ok)
		}
		if got, ok := e.Lookup("x"); ok || got != "" {
			t.Errorf("empty ring: Lookup = %q, %v", got, ok)
		}
	}
	if got, _ := r.Lookup("k"); got != func() string { s, _ := r.Owner(KeyHash("k")); return s }() {
		t.Errorf("Lookup disagrees with Owner(KeyHash)")
	}
}

// TestOwnerMatchesLinearScan compares the binary search with the definition on a real ring.
func TestOwnerMatchesLinearScan(t *testing.T) {
	r := mustBuild(t, 37)
	ts := r.Tokens()
	rng := rand.New(rand.NewPCG(1, 1))
	hs := []uint64{0, math.MaxUint64}
	for _, tk := range ts {
		hs = append(hs, tk.Pos, tk.Pos-1, tk.Pos+1)
	}
	for range 2000 {
		hs = append(hs, rng.Uint64())
	}
	for _, h := range hs {
		want := ts[0].Member
		for _, tk := range ts {
			if tk.Pos >= h {
				want = tk.Member
				break
			}
		}
		if got, _ := r.Owner(h); got != want {
			t.Fatalf("Owner(%d) = %q, want %q", h, got, want)
		}
	}
}

func TestJoinsExactShares(t *testing.T) {
	n := 2 * MaxDonors
	if testing.Short() {
		n = MaxDonors + 8
	}
	r := New()
	for i := range n {
		var err error
		if r, err = r.Add(member(i)); err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, r)
		k := i + 1
		if k <= MaxDonors {
			// Every member donates: shares are 1/k up to integer rounding.
			want := new(big.Int).Quo(circle, big.NewInt(int64(k)))
			for id, s := range exactShares(r) {
				d := new(big.Int).Sub(s, want)
				if d.CmpAbs(big.NewInt(int64(k))) > 0 { // 1e-9 relative is far looser
					t.Fatalf("n=%d: %s has %v, want %v", k, id, s, want)
				}
			}
			continue
		}
		if p, l := shareRange(r); p > joinPeakBound || l < joinMinBound {
			t.Fatalf("n=%d: shares span [%v, %v] of the mean", k, l, p)
		}
	}
}

func TestJoinMovesExactlyNewcomersShare(t *testing.T) {
	for _, n := range []int{1, 2, 5, MaxDonors, MaxDonors + 1, 150} {
		old := mustBuild(t, n)
		nw, err := old.Add(store.Member{ID: "new"})
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, nw)
		moved := new(big.Int)
		for _, m := range Moves(old, nw) {
			if m.To != "new" || m.From == "new" || m.From == "" {
				t.Fatalf("n=%d: join moved %+v", n, m)
			}
			moved.Add(moved, arcSize(m))
		}
		want := new(big.Int).Quo(circle, big.NewInt(int64(n+1)))
		if moved.Cmp(want) != 0 {
			t.Fatalf("n=%d: join moved %v, want exactly %v", n, moved, want)
		}
		checkMovesAgree(t, old, nw, 20_000)
	}
}

func TestLeaveMovesOnlyLeaversKeys(t *testing.T) {
	for _, n := range []int{1, 2, 3, 10, MaxDonors + 1, 150} {
		old := mustBuild(t, n)
		leaver := member(n / 2).ID
		share := exactShares(old)[leaver]
		nw, err := old.Remove(leaver)
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, nw)
		if nw.Has(leaver) || nw.Len() != n-1 {
			t.Fatalf("n=%d: %q still a member or wrong size", n, leaver)
		}
		moved := new(big.Int)
		for _, m := range Moves(old, nw) {
			if m.From != leaver || m.To == leaver || (m.To == "") != (n == 1) {
				t.Fatalf("n=%d: leave moved %+v", n, m)
			}
			moved.Add(moved, arcSize(m))
		}
		if moved.Cmp(share) != 0 {
			t.Fatalf("n=%d: leave moved %v, leaver had %v", n, moved, share)
		}
		checkMovesAgree(t, old, nw, 20_000)
	}
}

func arcSize(m Move) *big.Int {
	if m.Start == m.End {
		return new(big.Int).Set(circle)
	}
	return new(big.Int).SetUint64(m.End - m.Start)
}

// checkMovesAgree checks Moves and Moved against per-key lookups, at random hashes and at
// every token position and its neighbours (where off-by-one errors live).
func checkMovesAgree(t testing.TB, old, nw *Ring, samples int) {
	t.Helper()
	moves := Moves(old, nw)
	for i := range moves {
		a, b := moves[i], moves[(i+1)%len(moves)]
		if len(moves) > 1 && a.End == b.Start && a.From == b.From && a.To == b.To {
			t.Fatalf("adjacent moves not joined: %+v %+v", a, b)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(old.NumTokens()), uint64(nw.NumTokens())))
	hs := []uint64{0, math.MaxUint64}
	for _, r := range []*Ring{old, nw} {
		for _, tk := range r.Tokens() {
			hs = append(hs, tk.Pos, tk.Pos+1)
		}
	}
	for range samples {
		hs = append(hs, rng.Uint64())
	}
	for _, h := range hs {
		from, to, moved := Moved(old, nw, h)
		var in []Move
		for _, m := range moves {
			if m.Contains(h) {
				in = append(in, m)
			}
		}
		switch {
		case len(in) > 1:
			t.Fatalf("hash %d in %d moves: %+v", h, len(in), in)
		case moved != (len(in) == 1):
			t.Fatalf("hash %d: Moved says %v (%q->%q), Moves lists %+v", h, moved, from, to, in)
		case moved && (in[0].From != from || in[0].To != to):
			t.Fatalf("hash %d: lookup %q->%q, move %+v", h, from, to, in[0])
		}
	}
}

func TestMovesEdgeCases(t *testing.T) {
	a := mustBuild(t, 1)
	b, _ := New().Add(store.Member{ID: "other"})
	pa := a.Tokens()[0].Pos
	cases := []struct {
		name     string
		old, new *Ring
		want     []Move
	}{
		{"both empty", nil, New(), nil},
		{"same", a, a, nil},
		{"from empty", nil, a, []Move{{pa, pa, "", "w0000"}}},
		{"to empty", a, New(), []Move{{pa, pa, "w0000", ""}}},
		{"swap sole member", a, b, []Move{{pa, pa, "w0000", "other"}}},
	}
	for _, c := range cases {
		got := Moves(c.old, c.new)
		if c.name == "swap sole member" && len(got) == 1 {
			// The whole circle in one arc; where it is cut is not part of the contract.
			if got[0].Start == got[0].End && got[0].From == "w0000" && got[0].To == "other" {
				continue
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: Moves = %+v, want %+v", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		m  Move
		h  uint64
		in bool
	}{
		{Move{Start: 10, End: 20}, 10, false},
		{Move{Start: 10, End: 20}, 11, true},
		{Move{Start: 10, End: 20}, 20, true},
		{Move{Start: 10, End: 20}, 21, false},
		{Move{Start: math.MaxUint64 - 5, End: 3}, math.MaxUint64, true},
		{Move{Start: math.MaxUint64 - 5, End: 3}, 0, true},
		{Move{Start: math.MaxUint64 - 5, End: 3}, 3, true},
		{Move{Start: math.MaxUint64 - 5, End: 3}, 4, false},
		{Move{Start: math.MaxUint64 - 5, End: 3}, math.MaxUint64 - 5, false},
		{Move{Start: 7, End: 7}, 7, true},
		{Move{Start: 7, End: 7}, 123, true},
	} {
		if got := c.m.Contains(c.h); got != c.in {
			t.Errorf("%+v.Contains(%d) = %v", c.m, c.h, got)
		}
	}
	checkMovesAgree(t, a, b, 1000)
	checkMovesAgree(t, nil, mustBuild(t, 5), 1000)
	checkMovesAgree(t, mustBuild(t, 5), nil, 1000)
}

// TestKeys measures with real keys what the benchmark measures with 1M.
func TestKeys(t *testing.T) {
	const nkeys, n = 100_000, 100
	hs := make([]uint64, nkeys)
	for i := range hs {
		hs[i] = KeyHash(store.RingKey(fmt.Sprintf("https://host/org/repo-%d", i), 0))
	}
	r := mustBuild(t, n)
	counts := map[string]int{}
	for _, h := range hs {
		o, _ := r.Owner(h)
		counts[o]++
	}
	peak := 0
	for _, c := range counts {
		peak = max(peak, c)
	}
	if pm := float64(peak) / (nkeys / n); pm >= 1.10 {
		t.Errorf("peak/mean = %.3f at %d members, %d keys", pm, n, nkeys)
	}

	moved := func(a, b *Ring) int {
		c := 0
		for _, h := range hs {
			if _, _, m := Moved(a, b, h); m {
				c++
			}
		}
		return c
	}
	joined, _ := r.Add(store.Member{ID: "new"})
	if f := float64(moved(r, joined)) / nkeys * (n + 1); f > 1.1 || f < 0.9 {
		t.Errorf("join moved %.3f of the ideal 1/(n+1)", f)
	}
	leaver := member(7).ID
	left, _ := r.Remove(leaver)
	if c := moved(r, left); c != counts[leaver] {
		t.Errorf("leave moved %d keys, the leaver had %d", c, counts[leaver])
	}
}

func TestRandomWalkBalance(t *testing.T) {
	start, steps := 300, 600
	if testing.Short() {
		start, steps = 100, 200
	}
	r := mustBuild(t, start)
	rng := rand.New(rand.NewPCG(7, 8))
	ids := []string{}
	for _, m := range r.Members() {
		ids = append(ids, m.ID)
	}
	next := start
	for step := range steps {
		var err error
		if rng.IntN(2) == 0 && len(ids) > 2 {
			k := rng.IntN(len(ids))
			r, err = r.Remove(ids[k])
			ids = slices.Delete(ids, k, k+1)
		} else {
			m := member(next)
			next++
			r, err = r.Add(m)
			ids = append(ids, m.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := shareRange(r); p > anyPeakBound {
			t.Fatalf("step %d, n=%d: peak share %.4f of the mean", step, r.Len(), p)
		}
	}
	checkInvariants(t, r)
	if r.NumTokens() > 2*r.Len()*MaxDonors {
		t.Errorf("after churn %d tokens for %d members", r.NumTokens(), r.Len())
	}
}

// TestChurnKeepsTokenCount: each join adds up to MaxDonors tokens; leaves must take
// about as many away, so the count plateaus instead of growing with every cycle.
func TestChurnKeepsTokenCount(t *testing.T) {
	const n, cycles = 100, 400
	r := mustBuild(t, n)
	rng := rand.New(rand.NewPCG(3, 4))
	var half int
	for c := range cycles {
		ms := r.Members()
		var err error
		if r, err = r.Remove(ms[rng.IntN(len(ms))].ID); err != nil {
			t.Fatal(err)
		}
		if r, err = r.Add(member(n + c)); err != nil {
			t.Fatal(err)
		}
		if c+1 == cycles/2 {
			half = r.NumTokens()
		}
	}
	checkInvariants(t, r)
	if got := r.NumTokens(); got > half*11/10 || got > 2*n*MaxDonors {
		t.Errorf("tokens after %d join/leave cycles: %d, after %d: %d", cycles, got, cycles/2, half)
	}
	if p, _ := shareRange(r); p > anyPeakBound {
		t.Errorf("peak share %.4f of the mean after churn", p)
	}
}

func TestDeterminism(t *testing.T) {
	ms := members(90)
	a, err := New().AddAll(ms...)
	if err != nil {
		t.Fatal(err)
	}
	shuffled := slices.Clone(ms)
	rand.New(rand.NewPCG(5, 6)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	b, err := New().AddAll(shuffled...)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Tokens(), b.Tokens()) {
		t.Fatal("AddAll depends on the order of its arguments")
	}
	seq := func() *Ring {
		r := a
		for _, id := range []string{"w0003", "w0050", "w0089"} {
			r, _ = r.Remove(id)
		}
		r, _ = r.Add(store.Member{ID: "x"})
		return r
	}
	if !slices.Equal(seq().Tokens(), seq().Tokens()) {
		t.Fatal("same changes gave different rings")
	}
}

func TestImmutable(t *testing.T) {
	r := mustBuild(t, 20)
	before := r.Tokens()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				h := KeyHash(fmt.Sprint(g, i))
				if _, ok := r.Owner(h); !ok {
					t.Error("lookup failed")
					return
				}
			}
		})
	}
	for i := range 5 {
		if _, err := r.Add(member(100 + i)); err != nil {
			t.Error(err)
		}
		if _, err := r.Remove(member(i).ID); err != nil {
			t.Error(err)
		}
	}
	wg.Wait()
	if !slices.Equal(r.Tokens(), before) {
		t.Fatal("Add/Remove changed the receiver")
	}
}

func TestMembershipErrors(t *testing.T) {
	r := mustBuild(t, 3)
	if _, err := r.Add(store.Member{ID: ""}); !errors.Is(err, ErrEmptyID) {
		t.Errorf("Add empty id: %v", err)
	}
	if _, err := r.Add(member(1)); !errors.Is(err, ErrDuplicateMember) {
		t.Errorf("Add existing: %v", err)
	}
	if _, err := r.AddAll(member(7), member(7)); !errors.Is(err, ErrDuplicateMember) {
		t.Errorf("AddAll duplicate: %v", err)
	}
	if _, err := r.Remove("nobody"); !errors.Is(err, ErrNotMember) {
		t.Errorf("Remove unknown: %v", err)
	}
	if _, err := New().Remove("nobody"); !errors.Is(err, ErrNotMember) {
		t.Errorf("Remove from empty: %v", err)
	}
	for _, id := range []string{"w0000", "w0001", "w0002"} {
		var err error
		if r, err = r.Remove(id); err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, r)
	}
	if r.Len() != 0 || r.NumTokens() != 0 {
		t.Fatalf("removing everyone left %d members, %d tokens", r.Len(), r.NumTokens())
	}
}

func TestSlotsKept(t *testing.T) {
	r, _ := New().AddAll(store.Member{ID: "b", Slot: 7}, store.Member{ID: "a", Slot: 3})
	want := []store.Member{{ID: "a", Slot: 3}, {ID: "b", Slot: 7}}
	if got := r.Members(); !slices.Equal(got, want) {
		t.Fatalf("Members = %+v, want %+v", got, want)
	}
}

func TestFromStore(t *testing.T) {
	ab := []store.Member{{ID: "a"}, {ID: "b"}}
	for _, c := range []struct {
		name string
		in   store.Ring
		err  error
	}{
		{"never written", store.Ring{}, nil},
		{"empty with hash", store.Ring{Hash: HashID}, nil},
		{"ok", store.Ring{Hash: HashID, Members: ab, Tokens: []store.Token{tok(1, "a"), tok(5, "b")}}, nil},
		{"other hash", store.Ring{Hash: "md5", Members: ab, Tokens: []store.Token{tok(1, "a"), tok(5, "b")}}, ErrHash},
		{"no hash", store.Ring{Members: ab, Tokens: []store.Token{tok(1, "a"), tok(5, "b")}}, ErrHash},
		{"unsorted", store.Ring{Hash: HashID, Members: ab, Tokens: []store.Token{tok(5, "a"), tok(1, "b")}}, ErrUnsorted},
		{"duplicate pos", store.Ring{Hash: HashID, Members: ab, Tokens: []store.Token{tok(1, "a"), tok(1, "b")}}, ErrDuplicatePos},
		{"unknown member", store.Ring{Hash: HashID, Members: ab, Tokens: []store.Token{tok(1, "a"), tok(3, "c"), tok(5, "b")}}, ErrUnknownMember},
		{"tokens without members", store.Ring{Hash: HashID, Tokens: []store.Token{tok(1, "a")}}, ErrUnknownMember},
		{"member without token", store.Ring{Hash: HashID, Members: ab, Tokens: []store.Token{tok(1, "a")}}, ErrNoTokens},
		{"duplicate member", store.Ring{Hash: HashID, Members: []store.Member{{ID: "a"}, {ID: "a"}}, Tokens: []store.Token{tok(1, "a")}}, ErrDuplicateMember},
		{"empty id", store.Ring{Hash: HashID, Members: []store.Member{{ID: ""}}}, ErrEmptyID},
	} {
		r, err := FromStore(c.in)
		if !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.err)
			continue
		}
		if err == nil {
			checkInvariants(t, r)
		}
	}

	// A stored ring with same-owner neighbours loads merged, with every key's owner kept.
	raw := store.Ring{Hash: HashID, Members: ab, Tokens: []store.Token{tok(10, "a"), tok(20, "a"), tok(30, "b"), tok(40, "b"), tok(math.MaxUint64, "a")}}
	r, err := FromStore(raw)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, r)
	if got, want := r.Tokens(), []store.Token{tok(20, "a"), tok(40, "b")}; !slices.Equal(got, want) {
		t.Errorf("merged tokens = %+v, want %+v", got, want)
	}
	for _, h := range []uint64{0, 10, 11, 20, 21, 35, 40, 41, math.MaxUint64} {
		want := "a"
		if h > 20 && h <= 40 {
			want = "b"
		}
		if got, _ := r.Owner(h); got != want {
			t.Errorf("Owner(%d) = %q, want %q", h, got, want)
		}
	}

	// Round trip of a built ring, and the loaded ring changes like the original.
	orig := mustBuild(t, 12)
	loaded, err := FromStore(store.Ring{Hash: HashID, Members: orig.Members(), Tokens: orig.Tokens()})
	if err != nil {
		t.Fatal(err)
	}
	x, _ := orig.Add(member(99))
	y, _ := loaded.Add(member(99))
	if !slices.Equal(x.Tokens(), y.Tokens()) {
		t.Fatal("a loaded ring changes differently from the original")
	}
}

// FuzzRing drives random joins and leaves and checks the invariants and movement rules
// after each.
func FuzzRing(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 5, 0, 9, 13, 0, 0, 2})
	f.Add([]byte{0, 1, 0, 1, 0, 1, 0, 1})
	f.Add([]byte("some longer sequence of operations to get going"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 200 {
			ops = ops[:200]
		}
		r := New()
		next := 0
		for _, op := range ops {
			old := r
			var err error
			var joined, left string
			if op%3 != 0 || r.Len() == 0 {
				joined = fmt.Sprintf("m%d-%d", next, op)
				next++
				r, err = r.Add(store.Member{ID: joined})
			} else {
				left = r.Members()[int(op/3)%r.Len()].ID
				r, err = r.Remove(left)
			}
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, r)
			for _, m := range Moves(old, r) {
				if (joined != "" && m.To != joined) || (left != "" && m.From != left) {
					t.Fatalf("join %q / leave %q moved %+v", joined, left, m)
				}
			}
			checkMovesAgree(t, old, r, 200)
		}
	})
}

// FuzzFromStore loads arbitrary stored rings (arcs of any length, down to 1) and checks
// that joins and leaves on them keep the invariants and move only what they should.
func FuzzFromStore(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18})
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		// Each 9 bytes: a position and an owner among 4 members.
		seen := map[uint64]bool{}
		var ts []store.Token
		for len(data) >= 9 {
			p := uint64(0)
			for _, b := range data[:8] {
				p = p<<8 | uint64(b)
			}
			if !seen[p] {
				seen[p] = true
				ts = append(ts, tok(p, string(rune('a'+data[8]%4))))
			}
			data = data[9:]
		}
		slices.SortFunc(ts, func(a, b store.Token) int { return cmp.Compare(a.Pos, b.Pos) })
		var ms []store.Member
		for _, id := range []string{"a", "b", "c", "d"} {
			if slices.ContainsFunc(ts, func(tk store.Token) bool { return tk.Member == id }) {
				ms = append(ms, store.Member{ID: id})
			}
		}
		r, err := FromStore(store.Ring{Hash: HashID, Members: ms, Tokens: ts})
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, r)
		nw, err := r.Add(store.Member{ID: "new"})
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, nw)
		for _, m := range Moves(r, nw) {
			if m.To != "new" {
				t.Fatalf("join moved %+v", m)
			}
		}
		checkMovesAgree(t, r, nw, 100)
		for _, m := range ms {
			left, err := r.Remove(m.ID)
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, left)
			for _, mv := range Moves(r, left) {
				if mv.From != m.ID {
					t.Fatalf("leave of %q moved %+v", m.ID, mv)
				}
			}
			checkMovesAgree(t, r, left, 100)
		}
	})
}

func TestOwnerDoesNotAllocate(t *testing.T) {
	r := mustBuild(t, 50)
	h := uint64(12345)
	if a := testing.AllocsPerRun(100, func() { benchSink, _ = r.Owner(h); h += 0x9e3779b97f4a7c15 }); a != 0 {
		t.Errorf("Owner allocates %v times", a)
	}
}

// Spans agrees with Owner at both ends of every span and just past them, covers the
// range exactly, and handles the wrap past the last token.
func TestSpans(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 7, 40} {
		r := mustBuild(t, n)
		last := r.pos[len(r.pos)-1]
		ranges := [][2]uint64{{0, math.MaxUint64}, {r.pos[0], r.pos[0]}, {last, last}, {last + 1, math.MaxUint64}, {0, r.pos[0]}}
		for range 200 {
			a, b := rng.Uint64(), rng.Uint64()
			ranges = append(ranges, [2]uint64{min(a, b), max(a, b)})
		}
		for _, rg := range ranges {
			sp := r.Spans(rg[0], rg[1])
			if len(sp) == 0 || sp[0].From != rg[0] || sp[len(sp)-1].To != rg[1] {
				t.Fatalf("%d members: Spans(%d, %d) = %+v does not cover the range", n, rg[0], rg[1], sp)
			}
			for i, s := range sp {
				if i > 0 && (s.From != sp[i-1].To+1 || s.Owner == sp[i-1].Owner) {
					t.Fatalf("%d members: spans %+v and %+v neither adjacent nor of different owners", n, sp[i-1], s)
				}
				for _, h := range []uint64{s.From, s.To, s.From + (s.To-s.From)/2} {
					if o, _ := r.Owner(h); o != s.Owner {
						t.Fatalf("%d members: position %d in span of %s, Owner says %s", n, h, s.Owner, o)
					}
				}
				if s.To < rg[1] {
					if o, _ := r.Owner(s.To + 1); o == s.Owner {
						t.Fatalf("%d members: position %d after a span of %s is also %s's", n, s.To+1, s.Owner, o)
					}
				}
			}
		}
	}
	if New().Spans(0, 10) != nil {
		t.Fatal("spans of an empty ring")
	}
}
