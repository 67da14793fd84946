package ring

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

const benchKeys = 1_000_000

// keyHashes returns the hashes of 1M repo URLs, computed once for all sub-benchmarks.
var keyHashes = sync.OnceValue(func() []uint64 {
	hs := make([]uint64, benchKeys)
	for i := range hs {
		hs[i] = KeyHash(store.RingKey(fmt.Sprintf("https://host/org/repo-%d", i), 0))
	}
	return hs
})

// ringKind builds rings of some scheme and changes their membership.
type ringKind struct {
	name   string
	build  func(ids []string) *Ring
	add    func(r *Ring, id string) *Ring
	remove func(r *Ring, id string) *Ring
}

var balanced = ringKind{
	name: "balanced",
	build: func(ids []string) *Ring {
		ms := make([]store.Member, len(ids))
		for i, id := range ids {
			ms[i] = store.Member{ID: id}
		}
		r, err := New().AddAll(ms...)
		if err != nil {
			panic(err)
		}
		return r
	},
	add: func(r *Ring, id string) *Ring {
		r, err := r.Add(store.Member{ID: id})
		if err != nil {
			panic(err)
		}
		return r
	},
	remove: func(r *Ring, id string) *Ring {
		r, err := r.Remove(id)
		if err != nil {
			panic(err)
		}
		return r
	},
}

// plain160 is the baseline: 160 vnodes per member at hashed (pseudo-random) positions.
var plain160 = ringKind{
	name:  "plain160",
	build: plainRing,
	add: func(r *Ring, id string) *Ring {
		return plainRing(append(memberIDs(r), id))
	},
	remove: func(r *Ring, id string) *Ring {
		return plainRing(slices.DeleteFunc(memberIDs(r), func(s string) bool { return s == id }))
	},
}

func memberIDs(r *Ring) []string {
	var ids []string
	for _, m := range r.Members() {
		ids = append(ids, m.ID)
	}
	return ids
}

func plainRing(ids []string) *Ring {
	sr := store.Ring{Hash: HashID}
	for _, id := range ids {
		sr.Members = append(sr.Members, store.Member{ID: id})
		for v := range 160 {
			sr.Tokens = append(sr.Tokens, store.Token{Pos: KeyHash(id + "#" + strconv.Itoa(v)), Member: id})
		}
	}
	slices.SortFunc(sr.Tokens, func(a, b store.Token) int {
		switch {
		case a.Pos < b.Pos:
			return -1
		case a.Pos > b.Pos:
			return 1
		}
		return 0
	})
	sr.Tokens = slices.CompactFunc(sr.Tokens, func(a, b store.Token) bool { return a.Pos == b.Pos })
	r, err := FromStore(sr)
	if err != nil {
		panic(err)
	}
	return r
}

// BenchmarkRing reports, for 1M keys: peak/mean keys per member, the peak arc share
// (what is left without sampling noise), keys moved by a join and by a leave relative
// to the ideal (1/(n+1) of the keys; the leaver's keys), tokens, and ns/op per lookup of
// a precomputed hash (1M random hashes: mostly cache misses at 1000 members).
func BenchmarkRing(b *testing.B) {
	for _, kind := range []ringKind{balanced, plain160} {
		for _, n := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("%s/n=%d", kind.name, n), func(b *testing.B) {
				hs := keyHashes()
				ids := make([]string, n)
				for i := range ids {
					ids[i] = fmt.Sprintf("worker-%04d", i)
				}
				r := kind.build(ids)

				counts := map[string]int{}
				for _, h := range hs {
					o, _ := r.Owner(h)
					counts[o]++
				}
				peak := 0
				for _, c := range counts {
					peak = max(peak, c)
				}
				sharePeak := 0.0
				for _, s := range r.Shares() {
					sharePeak = max(sharePeak, s)
				}
				moved := func(old, nw *Ring) int {
					c := 0
					for _, h := range hs {
						if _, _, m := Moved(old, nw, h); m {
							c++
						}
					}
					return c
				}
				joinMoved := moved(r, kind.add(r, "worker-new"))
				leaver := ids[n/2]
				leaveMoved := moved(r, kind.remove(r, leaver))

				for b.Loop() {
					for _, h := range hs {
						benchSink, _ = r.Owner(h)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(hs)), "ns/op")
				b.ReportMetric(float64(peak)*float64(n)/float64(len(hs)), "peak/mean")
				b.ReportMetric(sharePeak*float64(n), "share-peak/mean")
				b.ReportMetric(float64(joinMoved)/float64(len(hs))*float64(n+1), "join-moved/ideal")
				b.ReportMetric(float64(leaveMoved)/float64(counts[leaver]), "leave-moved/ideal")
				b.ReportMetric(float64(r.NumTokens()), "tokens")
			})
		}
	}
}

var benchSink string

// BenchmarkLookup is Lookup (hash and search) on a 1000-member ring; ns/op is per key,
// over 64k keys per iteration so that -benchtime 1x still measures something.
func BenchmarkLookup(b *testing.B) {
	r := balanced.build(benchIDs(1000))
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = fmt.Sprintf("https://host/org/repo-%d", i)
	}
	for b.Loop() {
		for _, k := range keys {
			benchSink, _ = r.Lookup(k)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/op")
}

// BenchmarkJoin is one Add to a 1000-member ring (the coordinator's cost of a join).
func BenchmarkJoin(b *testing.B) {
	r := balanced.build(benchIDs(1000))
	for b.Loop() {
		if _, err := r.Add(store.Member{ID: "worker-new"}); err != nil {
			b.Fatal(err)
		}
	}
}

func benchIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("worker-%04d", i)
	}
	return ids
}
