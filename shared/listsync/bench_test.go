package listsync

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/election"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
)

// BenchmarkApply100k is the first sync of a 100,000-URL list into an empty store: fetch
// (the clone is made once, in the first iteration), parse, compare, 100k adds, record.
// Run with -benchtime 1x -benchmem; ns/op is the time of one whole apply, B/op what it
// allocated.
func BenchmarkApply100k(b *testing.B) {
	const n = 100_000
	f := newFixture(b, func(c *Config) { c.PurgeThreshold = 100 })
	f.commit(urls("bench", n)...)
	ctx := context.Background()
	var peak uint64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		db, err := bolt.OpenWith(filepath.Join(b.TempDir(), fmt.Sprintf("fleet-%d.db", i)), bolt.Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		term, _, err := election.Elector{Store: db, ID: "bench", Lease: time.Hour}.Campaign(ctx, f.clk.Now())
		if err != nil {
			b.Fatal(err)
		}
		f.st = &countingStore{Store: db}
		f.term = term
		f.s = f.newSyncer(f.cfg) // same clone directory: the fetch is one ref listing after the first
		runtime.GC()
		stop := samplePeakHeap()
		b.StartTimer()
		if err := f.s.SyncList(ctx, term); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		peak = max(peak, stop())
		if got := f.st.snapshot()["CreateRepo"]; got != n {
			b.Fatalf("%d adds, want %d", got, n)
		}
		f.s.Close()
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "repos/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
}

// samplePeakHeap samples the live heap every few milliseconds until the returned
// function is called, which returns the largest sample: B/op counts every allocation,
// this is what the apply holds at once.
func samplePeakHeap() func() uint64 {
	done := make(chan struct{})
	res := make(chan uint64)
	go func() {
		var peak uint64
		var m runtime.MemStats
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-done:
				res <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-res }
}

// BenchmarkDiff100k applies a 1% change (1,000 lines replaced) to an applied
// 100,000-URL list: the diff path, whose store work is proportional to the change.
func BenchmarkDiff100k(b *testing.B) {
	const n, change = 100_000, 1000
	f := newFixture(b, func(c *Config) { c.PurgeThreshold = 5 })
	lines := urls("bench", n)
	f.commit(lines...)
	f.mustTick()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j := range change {
			k := (i*change + j) % n
			lines[k] = fmt.Sprintf("https://git.example.org/bench-%d/repo-%05d", i, k)
		}
		f.up.Commit(b, "change", map[string][]byte{"repos.txt": []byte(strings.Join(lines, "\n"))})
		f.clk.Advance(f.s.cfg.Interval)
		before := f.st.total()
		b.StartTimer()
		if err := f.s.SyncList(context.Background(), f.term); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, d := f.state(); d.Mode != "diff" || d.Added != change || d.Removed != change {
			b.Fatalf("details %+v", d)
		}
		// Writes proportional to the change: the adds, the deletes and the record.
		if w := f.st.total() - before; w != 2*change+1 {
			b.Fatalf("%d writes for a change of %d lines", w, 2*change)
		}
		b.StartTimer()
	}
}
