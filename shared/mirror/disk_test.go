package mirror

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestDiskUsageOfTheFileSystem(t *testing.T) {
	d := &Disk{Path: t.TempDir()}
	used, total, err := d.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if total <= 0 || used < 0 || used > total {
		t.Fatalf("used %d of %d", used, total)
	}
}

func TestDiskQuotaMeasuresTheTreeAndCaches(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := &Disk{Path: dir, Quota: 4000, Refresh: time.Minute, Now: func() time.Time { return now }}
	used, total, err := d.Usage(context.Background())
	if err != nil || used != 1000 || total != 4000 {
		t.Fatalf("usage %d/%d %v", used, total, err)
	}
	os.WriteFile(filepath.Join(dir, "b"), make([]byte, 2000), 0o644)
	if used, _, _ := d.Usage(context.Background()); used != 1000 {
		t.Fatalf("re-measured before the refresh: %d", used)
	}
	now = now.Add(time.Minute)
	if used, _, _ := d.Usage(context.Background()); used != 3000 {
		t.Fatalf("after the refresh: %d, want 3000", used)
	}
}

// With Statfs a quota's used bytes are the file system's own figure: no walk of the tree
// (which holds only 1000 bytes here, on a file system that holds much more).
func TestDiskQuotaFromStatfs(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	fsUsed, _, err := (&Disk{Path: dir}).Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	used, total, err := (&Disk{Path: dir, Quota: 1 << 50, Statfs: true}).Usage(context.Background())
	if err != nil || total != 1<<50 {
		t.Fatalf("usage %d/%d %v", used, total, err)
	}
	if used == 1000 || used-fsUsed > 64<<20 || fsUsed-used > 64<<20 {
		t.Fatalf("used %d, want the file system's %d (give or take other writers), not the tree's 1000", used, fsUsed)
	}
}

// What EFS's statfs reports (a size near 2^63 bytes, 1 MiB blocks), with the mirrors of
// a 1,000,000-repo fleet on it.
func efsStat(used int64) func(string) (int64, int64, error) {
	return func(string) (int64, int64, error) { return saturate(1<<43-1, 1<<20), used, nil }
}

// An elastic file system (EFS) has no room to guard: no total, whatever it reports;
// the used bytes are its own. A quota on it is still a quota.
func TestDiskElastic(t *testing.T) {
	const used = 48_800_000_000_000
	used0, total, err := (&Disk{Path: "/mnt/mirrors", Elastic: true, StatFS: efsStat(used)}).Usage(context.Background())
	if err != nil || used0 != used || total != 0 {
		t.Fatalf("elastic: %d of %d, %v; want %d of none", used0, total, err, int64(used))
	}
	// The same figures read as a plain file system: the exabytes are its total.
	if _, total, _ := (&Disk{Path: "/mnt/mirrors", StatFS: efsStat(used)}).Usage(context.Background()); total < 1<<62 {
		t.Fatalf("not elastic: total %d, want EFS's exabytes", total)
	}
	if u, total, _ := (&Disk{Path: "/mnt/mirrors", Elastic: true, Quota: 500 << 30, StatFS: efsStat(used)}).Usage(context.Background()); u != used || total != 500<<30 {
		t.Fatalf("elastic with a quota: %d of %d", u, total)
	}
}

func TestSaturate(t *testing.T) {
	if got := saturate(1<<44, 1<<20); got != math.MaxInt64 {
		t.Fatalf("2^64 bytes: %d, want the largest int64", got)
	}
	if got := saturate(3, 4096); got != 12288 {
		t.Fatalf("3 blocks of 4 KiB: %d", got)
	}
}
