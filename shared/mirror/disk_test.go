package mirror

import (
	"context"
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
