package worker_test

import (
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

func TestDiskShare(t *testing.T) {
	for _, c := range []struct {
		name        string
		used, total int64
		fetchers    int
		share       int64
		ok          bool
	}{
		{"room for ten fetchers", 0, 1000, 10, 85, true},
		{"at the threshold", 850, 1000, 10, 0, false},
		{"past it", 900, 1000, 10, -5, false},
		{"a little room", 840, 1000, 10, 1, true},
		{"no total: an elastic file system without a quota", 48_800_000_000_000, 0, 10, 0, true},
	} {
		share, ok := worker.DiskShare(c.used, c.total, 0.85, c.fetchers)
		if share != c.share || ok != c.ok {
			t.Errorf("%s: share %d ok %v, want %d %v", c.name, share, ok, c.share, c.ok)
		}
	}
}
