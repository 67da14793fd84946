package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// TestVerify: a closed store passes; a store held open is reported as locked; a file
// that is not a store, and a bbolt file without the store's buckets, are refused.
func TestVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("Verify of an open store: %v, want ErrLocked", err)
	}
	s.Close()
	if err := Verify(path); err != nil {
		t.Fatalf("Verify of a closed store: %v", err)
	}
	junk := filepath.Join(t.TempDir(), "junk")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("x"), 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Verify(junk); err == nil {
		t.Fatal("Verify accepted a file that is not a store")
	}
	if _, err := os.Stat(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("setup")
	}
	if err := Verify(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("Verify accepted a missing file")
	}
}

// TestVerifyRefusesCutFiles: a store copy cut short anywhere, or empty, is refused with
// a message that says so, and never reaches bbolt's map (where reading past the end
// of the file is a SIGBUS that kills the process).
func TestVerifyRefusesCutFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	s, err := OpenWith(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		u := fmt.Sprintf("https://example.com/group-%d/repo-with-a-longish-name-%d", i%37, i)
		if _, _, err := s.CreateRepo(context.Background(), store.Repo{ID: store.RepoID(u), URL: u, State: store.RepoPending}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(path); err != nil {
		t.Fatalf("the whole file: %v", err)
	}
	// bbolt grows the file ahead of its pages: cut within the pages its meta page counts.
	f, _ := os.Open(path)
	m, ok := readMeta(f, 4096)
	f.Close()
	used := int(m.pgid) * int(m.pageSize)
	if !ok || used > len(whole) || used < 16*4096 {
		t.Fatalf("meta %+v (%v) of a %d-byte file", m, ok, len(whole))
	}
	dir := t.TempDir()
	for _, cut := range []int{used / 2, used - 4096, 3 * 4096, 8192, 4096, 100, 0} {
		p := filepath.Join(dir, fmt.Sprint("cut-", cut))
		if err := os.WriteFile(p, whole[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		err := Verify(p)
		want := "truncated"
		switch {
		case cut == 0:
			want = "empty"
		case cut < 2*4096:
			want = "short"
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("cut at %d of %d bytes: %v, want %q", cut, len(whole), err, want)
		}
	}
}
