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
