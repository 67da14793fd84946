package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGeneratedTokenStaysOutOfLogs: with its output captured (not a terminal) the
// fleet saves a generated token (0600) and does not print it; a token file other users
// can read is refused at start.
func TestGeneratedTokenStaysOutOfLogs(t *testing.T) {
	data := t.TempDir()
	p := startFleet(t, "token", data, "", "--workers", "1")
	path := filepath.Join(data, "token")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	tok := strings.TrimSpace(string(b))
	if len(tok) < 32 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %d characters, mode %v", len(tok), fi.Mode().Perm())
	}
	p.stop(t)
	out := p.out.String()
	if strings.Contains(out, tok) {
		t.Fatalf("the generated token is in the captured output:\n%s", out)
	}
	if !strings.Contains(out, "not shown: stderr is not a terminal") || !strings.Contains(out, path) {
		t.Fatalf("the output does not say where the token is:\n%s", out)
	}

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "run", "--data", data, "--listen", "127.0.0.1:0", "--workers", "1")
	cmd.Env = cleanEnv()
	got, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(got), "chmod 600") || strings.Contains(string(got), tok) {
		t.Fatalf("start with a token file readable by others: %v\n%s", err, got)
	}
}
