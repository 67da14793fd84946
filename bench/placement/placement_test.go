package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"testing"
)

const testKeys = 20_000

var testHashes = keyHashes(testKeys)

// placeAll returns the owner of every test key under p.
func placeAll(t *testing.T, p placer) []int32 {
	t.Helper()
	out := make([]int32, len(testHashes))
	p.place(testHashes, out)
	return out
}

func mustBuild(t *testing.T, build func([]string) (placer, error), n int) placer {
	t.Helper()
	p, err := build(workerIDs(n))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkJoin checks that a join of worker n moves keys only to it, and roughly its share.
func checkJoin(t *testing.T, p placer, n int) {
	t.Helper()
	before := placeAll(t, p)
	joined, err := p.join(int32(n), newWorkerID)
	if err != nil {
		t.Fatal(err)
	}
	after := placeAll(t, joined)
	for i := range before {
		if before[i] != after[i] && after[i] != int32(n) {
			t.Fatalf("key %d moved from %d to %d, not to the newcomer %d", i, before[i], after[i], n)
		}
	}
	moved, _ := movement(before, after, int32(n))
	if ideal := float64(testKeys) / float64(n+1); math.Abs(float64(moved)-ideal) > 0.5*ideal {
		t.Errorf("join moved %d keys, want about %.0f", moved, ideal)
	}
}

// checkLeave checks that worker w's leave moves exactly its keys, and to members.
func checkLeave(t *testing.T, p placer, w int32) {
	t.Helper()
	before := placeAll(t, p)
	left, err := p.leave(w)
	if err != nil {
		t.Fatal(err)
	}
	after := placeAll(t, left)
	for i := range before {
		switch {
		case after[i] == w:
			t.Fatalf("key %d still on the leaver %d", i, w)
		case before[i] == w && after[i] == w:
			t.Fatalf("key %d of the leaver did not move", i)
		case before[i] != w && after[i] != before[i]:
			t.Fatalf("key %d moved from %d to %d though %d left", i, before[i], after[i], w)
		}
	}
}

func checkAllUsed(t *testing.T, owners []int32, n int) {
	t.Helper()
	for w, l := range countLoads(owners, n) {
		if l == 0 {
			t.Errorf("worker %d has no keys", w)
		}
	}
}

func TestJump(t *testing.T) {
	for _, n := range []int{1, 2, 7, 50} {
		p := mustBuild(t, newJump, n)
		owners := placeAll(t, p)
		checkAllUsed(t, owners, n)
		if pm := peakMean(countLoads(owners, n), testKeys); pm > 1.2 {
			t.Errorf("n=%d: peak/mean %.3f, want near 1", n, pm)
		}
		checkJoin(t, p, n)
		if n > 1 {
			checkLeave(t, p, int32(n-1))
		}
	}
}

func TestJumpMatchesGrowth(t *testing.T) {
	// Growing one bucket at a time, a key only ever moves to the newest bucket, so its
	// bucket never decreases.
	for _, h := range testHashes[:500] {
		prev := int32(0)
		for n := int32(1); n <= 300; n++ {
			b := jumpBucket(h, n)
			if b < 0 || b >= n {
				t.Fatalf("bucket %d of %d", b, n)
			}
			if b != prev && b != n-1 {
				t.Fatalf("key %x moved from %d to %d at n=%d", h, prev, b, n)
			}
			prev = b
		}
	}
}

func TestJumpRefusesOtherChanges(t *testing.T) {
	p := mustBuild(t, newJump, 5)
	if _, err := p.leave(2); err == nil {
		t.Error("leave of a middle bucket succeeded")
	}
	if _, err := p.join(7, "x"); err == nil {
		t.Error("join of bucket 7 to 5 buckets succeeded")
	}
}

func TestRendezvous(t *testing.T) {
	p := mustBuild(t, newRendezvous, 40)
	owners := placeAll(t, p)
	checkAllUsed(t, owners, 40)
	checkJoin(t, p, 40)
	checkLeave(t, p, 13)
	checkLeave(t, p, 0)

	// The owner is the highest score, computed the long way.
	r := p.(*rendezvous)
	for i, h := range testHashes[:200] {
		var best int32
		for w := range r.seeds {
			if mix(h^r.seeds[w]) > mix(h^r.seeds[best]) {
				best = int32(w)
			}
		}
		if owners[i] != best {
			t.Fatalf("key %d: owner %d, highest score %d", i, owners[i], best)
		}
	}
}

func TestRendezvousLeaveKeepsNumbers(t *testing.T) {
	p := mustBuild(t, newRendezvous, 10)
	left, err := p.leave(3)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range placeAll(t, left) {
		if w == 3 || w < 0 || w >= 10 {
			t.Fatalf("owner %d after worker 3 left", w)
		}
	}
	if _, err := left.leave(3); err == nil {
		t.Error("second leave of worker 3 succeeded")
	}
}

func TestPlainRing(t *testing.T) {
	const n, vnodes = 30, 160
	r := newPlainRing(workerIDs(n), vnodes)
	if r.numTokens() != n*vnodes {
		t.Fatalf("%d tokens, want %d", r.numTokens(), n*vnodes)
	}
	if !slices.IsSorted(r.pos) {
		t.Fatal("positions not sorted")
	}
	owners := placeAll(t, r)
	checkAllUsed(t, owners, n)
	for i, h := range testHashes {
		if owners[i] < 0 || owners[i] >= n {
			t.Fatalf("key %d: owner %d is not a member", i, owners[i])
		}
		if want := firstClockwise(r.pos, r.owner, h); owners[i] != want {
			t.Fatalf("key %d: owner %d, first token clockwise belongs to %d", i, owners[i], want)
		}
	}
	// Past the last token a key wraps to the first.
	if got := r.ownerOf(r.pos[len(r.pos)-1] + 1); got != r.owner[0] {
		t.Errorf("wrap: owner %d, want %d", got, r.owner[0])
	}
	if sp := r.sharePeakMean(); sp < 1 || sp > 1.6 {
		t.Errorf("share peak/mean %.3f, want in [1, 1.6] with 160 vnodes", sp)
	}
	checkJoin(t, r, n)
	checkLeave(t, r, 7)
}

// firstClockwise is the owner of the token with the smallest position >= h, by scanning.
func firstClockwise(pos []uint64, owner []int32, h uint64) int32 {
	best := -1
	for i, p := range pos {
		if p >= h && (best < 0 || p < pos[best]) {
			best = i
		}
	}
	if best < 0 {
		best = 0 // wrap: the smallest position
	}
	return owner[best]
}

func TestBoundedLoads(t *testing.T) {
	const n = 50
	const c = 1.05 // tight enough that the bound moves keys
	b := newBoundedLoads(newPlainRing(workerIDs(n), 160), c, testKeys)
	owners := placeAll(t, b)
	limit := int(math.Ceil(c * testKeys / n))
	loads := countLoads(owners, n)
	for w, l := range loads {
		if l > limit {
			t.Errorf("worker %d has %d keys, over ceil(c·K/n) = %d", w, l, limit)
		}
	}
	// The plain ring's peak is over the limit, so the bound did something.
	if plain := countLoads(placeAll(t, b.ring), n); slices.Max(plain) <= limit {
		t.Fatalf("plain ring peak %d does not exceed %d: the test checks nothing", slices.Max(plain), limit)
	}

	// Replayed in order, each key is on the first worker clockwise that had room.
	replay := make([]int, n)
	for i, h := range testHashes {
		k := b.ring.search(h)
		for replay[b.ring.owner[k]] >= limit {
			k = (k + 1) % len(b.ring.owner)
		}
		if owners[i] != b.ring.owner[k] {
			t.Fatalf("key %d on %d, first with room is %d", i, owners[i], b.ring.owner[k])
		}
		replay[owners[i]]++
	}
}

func TestBoundedLoadsWithoutBoundIsPlain(t *testing.T) {
	r := newPlainRing(workerIDs(20), 160)
	b := newBoundedLoads(r, 100, testKeys)
	if !slices.Equal(placeAll(t, b), placeAll(t, r)) {
		t.Error("with a capacity no worker reaches, bounded loads differs from the plain ring")
	}
}

func TestBoundedLoadsLookupMatchesPlace(t *testing.T) {
	b := newBoundedLoads(newPlainRing(workerIDs(25), 160), 1.25, testKeys)
	want := placeAll(t, b)
	for round := range 2 { // the second round checks that lookups start over
		for i, h := range testHashes {
			if got := int32(b.lookup(h)); got != want[i] {
				t.Fatalf("round %d key %d: lookup %d, place %d", round, i, got, want[i])
			}
		}
	}
}

func TestOurs(t *testing.T) {
	p := mustBuild(t, newOurs, 20)
	owners := placeAll(t, p)
	checkAllUsed(t, owners, 20)
	checkJoin(t, p, 20)
	checkLeave(t, p, 10)
	if sp := p.(sharer).sharePeakMean(); sp < 1 || sp > 1.05 {
		t.Errorf("share peak/mean %.4f, want within 5%% of 1", sp)
	}
}

func TestMovement(t *testing.T) {
	before := []int32{0, 1, 2, 0, 1, 2}
	after := []int32{3, 1, 2, 0, 2, 3}
	moved, stray := movement(before, after, 3)
	if moved != 3 || stray != 1 { // keys 0 and 5 went to 3; key 4 went 1 → 2
		t.Errorf("movement = %d, %d; want 3, 1", moved, stray)
	}
	if m, s := movement(before, before, 0); m != 0 || s != 0 {
		t.Errorf("no change: movement = %d, %d", m, s)
	}
}

func TestLoadsAndPeakMean(t *testing.T) {
	loads := countLoads([]int32{0, 0, 0, 1, 2, 2}, 4)
	if !slices.Equal(loads, []int{3, 1, 2, 0}) {
		t.Fatalf("loads %v", loads)
	}
	if pm := peakMean(loads, 6); pm != 2 { // peak 3, mean 6/4
		t.Errorf("peak/mean %v, want 2", pm)
	}
	if pm := peakMean([]int{5, 5}, 10); pm != 1 {
		t.Errorf("even loads: peak/mean %v, want 1", pm)
	}
	if r := ratio(3, 0); r != 0 {
		t.Errorf("ratio without ideal = %v", r)
	}
	if r := ratio(3, 2); r != 1.5 {
		t.Errorf("ratio(3, 2) = %v", r)
	}
}

func TestUniformPeakMean(t *testing.T) {
	// 20k keys on 10 workers: 2000 each, standard deviation about 42, so the peak of ten
	// is a few percent above the mean.
	pm := uniformPeakMean(testHashes, 10, 0)
	if pm <= 1 || pm > 1.1 {
		t.Errorf("uniform peak/mean %.3f, want in (1, 1.1]", pm)
	}
	if uniformPeakMean(testHashes, 10, 1) == pm {
		t.Error("two trials gave the same placement")
	}
}

func TestMeasure(t *testing.T) {
	cfg := config{
		keys: 5000, workers: []int{3, 20}, vnodes: 160, loadFactor: 1.25, trials: 2,
		bench: func(placer, []uint64) (float64, int64) { return 42, 0 },
	}
	res, err := measure(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != len(res.Schemes)*len(cfg.workers) || len(res.Noise) != len(cfg.workers) {
		t.Fatalf("%d runs, %d noise rows", len(res.Runs), len(res.Noise))
	}
	for _, r := range res.Runs {
		name := fmt.Sprintf("%s/%d", r.Scheme, r.Workers)
		if r.JoinIdeal != float64(cfg.keys)/float64(r.Workers+1) {
			t.Errorf("%s: join ideal %v", name, r.JoinIdeal)
		}
		if r.JoinRatio != float64(r.JoinMoved)/r.JoinIdeal || r.LeaveRatio != float64(r.LeaveMoved)/float64(r.LeaveIdeal) {
			t.Errorf("%s: ratios %v, %v do not match counts", name, r.JoinRatio, r.LeaveRatio)
		}
		if r.PeakMean < 1 || r.LookupNs != 42 {
			t.Errorf("%s: peak/mean %v, lookup %v", name, r.PeakMean, r.LookupNs)
		}
		_, arcs := map[string]bool{"ours": true, "plain-160": true}[r.Scheme]
		if arcs != (r.SharePeakMean > 0) || arcs != (r.KeySetsPeakMean >= 1) {
			t.Errorf("%s: arc peak/mean %v, key sets peak/mean %v", name, r.SharePeakMean, r.KeySetsPeakMean)
		}
		consistent := r.Scheme != "bounded-loads"
		if consistent && (r.JoinStray != 0 || r.LeaveStray != 0 || r.LeaveMoved != r.LeaveIdeal) {
			t.Errorf("%s: stray moves %d/%d, leave moved %d of %d", name, r.JoinStray, r.LeaveStray, r.LeaveMoved, r.LeaveIdeal)
		}
		wantLeaver := fmt.Sprintf("worker-%04d", r.Workers/2)
		if r.Scheme == "jump" {
			wantLeaver = fmt.Sprintf("worker-%04d", r.Workers-1)
		}
		if r.Leaver != wantLeaver {
			t.Errorf("%s: leaver %s, want %s", name, r.Leaver, wantLeaver)
		}
	}
}

func TestMeasureCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := config{keys: 100, workers: []int{3}, vnodes: 4, loadFactor: 1.25, trials: 1,
		bench: func(placer, []uint64) (float64, int64) { return 0, 0 }}
	if _, err := measure(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), cfg); err == nil {
		t.Error("measure ran though the context was cancelled")
	}
}

func TestParseCounts(t *testing.T) {
	if ns, err := parseCounts("10, 100,1000"); err != nil || !slices.Equal(ns, []int{10, 100, 1000}) {
		t.Errorf("parseCounts = %v, %v", ns, err)
	}
	for _, bad := range []string{"", "10,x", "1"} {
		if _, err := parseCounts(bad); err == nil {
			t.Errorf("parseCounts(%q) succeeded", bad)
		}
	}
}

func TestBestLookup(t *testing.T) {
	times := []float64{30, 10, 20}
	allocs := []int64{0, 0, 2}
	call := 0
	bench := bestLookup(func(placer, []uint64) (float64, int64) {
		defer func() { call++ }()
		return times[call], allocs[call]
	}, 3)
	ns, a := bench(nil, nil)
	if ns != 10 || a != 2 || call != 3 {
		t.Errorf("best of %d runs = %v ns, %d allocs; want 10, 2 after 3 runs", call, ns, a)
	}
}

func TestResampledPeakMean(t *testing.T) {
	// Jump places keys uniformly, so over fresh key sets it matches the uniform floor.
	const n, trials = 8, 6
	got := resampledPeakMean(mustBuild(t, newJump, n), testHashes, n, trials)
	floor := noise(testHashes, n, trials).PeakMean
	if math.Abs(got-floor) > 0.02 {
		t.Errorf("jump over fresh key sets: peak/mean %.4f, uniform floor %.4f", got, floor)
	}
	// A ring's imbalance shows: two tokens half a circle apart balance, a quarter apart not.
	r := newPlainRing(workerIDs(2), 1)
	r.pos = []uint64{1 << 62, 1<<63 + 1<<62}
	if pm := resampledPeakMean(r, testHashes, 2, 2); pm > 1.05 {
		t.Errorf("two equal arcs: peak/mean %.3f", pm)
	}
	r.pos = []uint64{1 << 62, 1 << 63} // arcs of 1/4 and 3/4
	if pm := resampledPeakMean(r, testHashes, 2, 2); pm < 1.4 || pm > 1.6 {
		t.Errorf("arcs of 1/4 and 3/4: peak/mean %.3f, want about 1.5", pm)
	}
}
