package ring

import (
	"fmt"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Balance and movement against other schemes are measured by bench/placement; these are
// the costs of the ring's own operations.

var benchSink string

// BenchmarkLookup is Lookup (hash and search) on a 1000-member ring; ns/op is per key,
// over 64k keys per iteration so that -benchtime 1x still measures something.
func BenchmarkLookup(b *testing.B) {
	r := benchRing(b, 1000)
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
	r := benchRing(b, 1000)
	for b.Loop() {
		if _, err := r.Add(store.Member{ID: "worker-new"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLeave is one Remove from a 1000-member ring (the coordinator's cost of a leave).
func BenchmarkLeave(b *testing.B) {
	r := benchRing(b, 1000)
	for b.Loop() {
		if _, err := r.Remove("worker-0500"); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRing is a ring of n members worker-0000, worker-0001, ...
func benchRing(b *testing.B, n int) *Ring {
	b.Helper()
	ms := make([]store.Member, n)
	for i := range ms {
		ms[i] = store.Member{ID: fmt.Sprintf("worker-%04d", i)}
	}
	r, err := New().AddAll(ms...)
	if err != nil {
		b.Fatal(err)
	}
	return r
}
