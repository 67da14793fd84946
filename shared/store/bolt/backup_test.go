package bolt

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestBackupWhileWriting: a backup whose reader stalls does not stall the store's
// writers, even writes that grow the file (and bbolt's memory map) while it waits; the
// copy is a consistent store.
func TestBackupWhileWriting(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second) // bounds every wait below
	defer cancel()
	dir := t.TempDir()
	s, err := OpenWith(filepath.Join(dir, "fleet.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	create := func(i int) {
		if _, _, err := s.CreateRepo(ctx, store.Repo{ID: fmt.Sprintf("r%05d", i), URL: fmt.Sprintf("https://x/r%d", i),
			State: store.RepoPending, CreatedAt: at}); err != nil {
			t.Error(err)
		}
	}
	const before, during = 300, 3000
	for i := range before {
		create(i)
	}
	// The backup's first Write waits until `during` more creates have landed.
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := before; i < before+during; i++ {
			create(i)
		}
	}()
	var buf bytes.Buffer
	first := true
	n, err := s.Backup(ctx, writerFunc(func(p []byte) (int, error) {
		if first {
			first = false
			select {
			case <-wrote:
			case <-ctx.Done():
				return 0, fmt.Errorf("the writes stalled behind the backup: %w", ctx.Err())
			}
		}
		return buf.Write(p)
	}))
	if err != nil {
		t.Fatal(err)
	}
	<-wrote
	if n != int64(buf.Len()) {
		t.Fatalf("Backup wrote %d bytes, returned %d", buf.Len(), n)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*backup*")); len(left) > 0 {
		t.Fatalf("the spool is left behind: %v", left)
	}
	snap := filepath.Join(t.TempDir(), "snap.db")
	if err := os.WriteFile(snap, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	counts, err := c.CountRepos(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := counts[store.RepoPending]; got < before || got > before+during {
		t.Fatalf("snapshot holds %d repos, want between %d and %d", got, before, before+during)
	}
}
