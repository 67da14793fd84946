package bolt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
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
