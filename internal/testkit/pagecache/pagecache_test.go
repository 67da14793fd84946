package pagecache

import (
	"os"
	"path/filepath"
	"testing"
)

// A file read after eviction is resident again, as far as it was read (and the
// kernel's read-ahead); evicted, it is not.
func TestEvictAndResident(t *testing.T) {
	dir := t.TempDir()
	if err := Check(dir); err != nil {
		t.Skipf("page cache eviction does not work here: %v", err)
	}
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := EvictTree(dir); err != nil {
		t.Fatal(err)
	}
	files, err := ResidentTree(dir)
	if err != nil || len(files) != 1 || files[0].Resident != 0 || files[0].Size != 4<<20 {
		t.Fatalf("after eviction: %+v, %v", files, err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if _, err := f.ReadAt(buf, 2<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, _, err := Resident(p)
	if err != nil || r < 4096 || r > 2<<20 {
		t.Fatalf("after reading one page: %d bytes resident, %v; want that page and some read-ahead", r, err)
	}
}
