package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBackupAndRestore: `mirrorfleet backup` copies the running fleet's store; restore
// refuses while the fleet runs and refuses a file that is not a whole store; after the
// fleet stops, `mirrorfleet restore` puts the copy in place (keeping the store it
// replaces) and the restarted fleet has the store as it was at the backup.
func TestBackupAndRestore(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	// A one-hour warm-up: nothing is fetched, the test is about the records.
	p := startFleet(t, "backup fleet", data, e2eToken, "--warmup", "1h")
	p.mustCLI(t, "repos", "add", "https://example.com/backup/kept")
	file := filepath.Join(t.TempDir(), "fleet-backup.db")
	out, _ := p.mustCLI(t, "backup", file, "--data", data)
	// backup says how to restore, with a command that works as printed (run below).
	restoreCmd := regexp.MustCompile(`(?m)^  (\S+ restore --data .+)$`).FindStringSubmatch(out)
	if !strings.Contains(out, "store copied to "+file) || restoreCmd == nil || !strings.Contains(restoreCmd[1], " restore --data "+data+" "+file) {
		t.Fatalf("backup does not print the restore command:\n%s", out)
	}
	p.mustCLI(t, "repos", "add", "https://example.com/backup/after")
	if r := p.call(t, http.MethodGet, "/v1/backup", nil, false); r.Status != http.StatusUnauthorized {
		t.Errorf("GET /v1/backup without the token: %d", r.Status)
	}
	restore := func(args ...string) (int, string) {
		var o, e bytes.Buffer
		code := run(append([]string{"restore"}, args...), &o, &e)
		return code, o.String() + e.String()
	}
	if code, msg := restore("--data", data, file); code != 1 || !strings.Contains(msg, "a fleet is running") {
		t.Fatalf("restore while the fleet runs: exit %d\n%s", code, msg)
	}
	p.stop(t)

	// A cut or foreign file is refused and the store is left alone.
	junk := filepath.Join(t.TempDir(), "junk.db")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("not a store "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(data, "mirrorfleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	if code, msg := restore("--data", data, junk); code != 1 || !strings.Contains(msg, "not a whole store copy") {
		t.Fatalf("restore of junk: exit %d\n%s", code, msg)
	}
	if after, _ := os.ReadFile(filepath.Join(data, "mirrorfleet.db")); !bytes.Equal(before, after) {
		t.Fatal("a refused restore changed the store")
	}

	sh := exec.Command("sh", "-c", restoreCmd[1])
	sh.Env = cleanEnv()
	b, err := sh.CombinedOutput()
	code, msg := sh.ProcessState.ExitCode(), string(b)
	if err != nil && code == 0 {
		t.Fatal(err)
	}
	if code != 0 || !strings.Contains(msg, "restored "+file) || !strings.Contains(msg, "mirrorfleet.db.before-restore-") {
		t.Fatalf("restore: exit %d\n%s", code, msg)
	}
	kept, _ := filepath.Glob(filepath.Join(data, "mirrorfleet.db.before-restore-*"))
	if len(kept) != 1 {
		t.Fatalf("the replaced store is not kept: %v", kept)
	}
	p = startFleet(t, "restored fleet", data, e2eToken, "--warmup", "1h")
	out, errOut := p.mustCLI(t, "repos", "ls")
	t.Logf("repos ls after the restore:\n%s%s", out, errOut)
	if !strings.Contains(out, "https://example.com/backup/kept") || strings.Contains(out, "https://example.com/backup/after") {
		t.Fatalf("after the restore repos ls shows:\n%s", out)
	}
	p.stop(t)
}
