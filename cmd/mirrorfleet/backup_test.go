package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
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

// TestRestoreRefusesCutCopies: a store copy cut short, or empty, is refused with a
// message that says what is wrong (bbolt would die of SIGBUS reading past the end of a
// cut one), and the store is left alone.
func TestRestoreRefusesCutCopies(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "fleet.db")
	st, err := bolt.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		u := fmt.Sprintf("https://example.com/group-%d/some-repository-%d", i%41, i)
		if _, _, err := st.CreateRepo(context.Background(), store.Repo{ID: store.RepoID(u), URL: u, State: store.RepoPending}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	whole, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	if code, msg := restoreCmd("--data", data, src); code != 0 {
		t.Fatalf("restore of the whole copy: exit %d\n%s", code, msg)
	}
	before, _ := os.ReadFile(filepath.Join(data, "mirrorfleet.db"))
	for _, c := range []struct {
		size int
		want string
	}{{len(whole) / 8, "truncated"}, {0, "empty"}} {
		cut := filepath.Join(t.TempDir(), "cut.db")
		if err := os.WriteFile(cut, whole[:c.size], 0o600); err != nil {
			t.Fatal(err)
		}
		code, msg := restoreCmd("--data", data, cut)
		if code != 1 || !strings.Contains(msg, "not a whole store copy") || !strings.Contains(msg, c.want) || strings.Contains(msg, "bad file descriptor") {
			t.Errorf("restore of a copy of %d bytes: exit %d\n%s", c.size, code, msg)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(data, "mirrorfleet.db")); !bytes.Equal(before, after) {
		t.Fatal("a refused restore changed the store")
	}
}

// restoreCmd runs `mirrorfleet restore args...` in process.
func restoreCmd(args ...string) (int, string) {
	var o, e bytes.Buffer
	code := run(append([]string{"restore"}, args...), &o, &e)
	return code, o.String() + e.String()
}
