package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackupAndRestore: `mirrorfleet backup` copies the running fleet's store; after a
// later change, stopping the fleet, putting the copy in place and starting again brings
// back the store as it was at the backup.
func TestBackupAndRestore(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	// A one-hour warm-up: nothing is fetched, the test is about the records.
	p := startFleet(t, "backup fleet", data, e2eToken, "--warmup", "1h")
	p.mustCLI(t, "repos", "add", "https://example.com/backup/kept")
	file := filepath.Join(t.TempDir(), "fleet-backup.db")
	out, _ := p.mustCLI(t, "backup", file)
	if !strings.Contains(out, "store copied to "+file) {
		t.Fatalf("backup:\n%s", out)
	}
	p.mustCLI(t, "repos", "add", "https://example.com/backup/after")
	if r := p.call(t, http.MethodGet, "/v1/backup", nil, false); r.Status != http.StatusUnauthorized {
		t.Errorf("GET /v1/backup without the token: %d", r.Status)
	}
	p.stop(t)

	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "mirrorfleet.db"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	p = startFleet(t, "restored fleet", data, e2eToken, "--warmup", "1h")
	out, errOut := p.mustCLI(t, "repos", "ls")
	t.Logf("repos ls after the restore:\n%s%s", out, errOut)
	if !strings.Contains(out, "https://example.com/backup/kept") || strings.Contains(out, "https://example.com/backup/after") {
		t.Fatalf("after the restore repos ls shows:\n%s", out)
	}
	p.stop(t)
}
