package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/gittest"
)

// TestServeCommand runs `mirrorfleet serve` over a mirrors root: /healthz answers,
// git clones through it (the second clone from the pack cache), and /healthz says
// so when the root goes away.
func TestServeCommand(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	up := srv.NewRepo(t, "example.org/team/app.git")
	up.Commit(t, "one", map[string][]byte{"README": []byte("hi\n")})
	root := srv.Root
	cmd := exec.Command(binary(t), "serve", "--root", root, "--listen", "127.0.0.1:0",
		"--pack-cache-dir", t.TempDir(), "--emf-interval", "0")
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var addr string
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		var l struct{ Msg, Listen string }
		if json.Unmarshal(lines.Bytes(), &l) == nil && l.Msg == "serving git" {
			addr = l.Listen
			break
		}
	}
	if addr == "" {
		t.Fatal("mirrorfleet serve did not log its address")
	}
	go io.Copy(io.Discard, stderr)
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	for _, name := range []string{"a", "b"} {
		dst := filepath.Join(t.TempDir(), name)
		gittest.Run(t, "", "", nil, "clone", "-q", "http://"+addr+"/git/example.org/team/app", dst)
		if got := gittest.Run(t, "", dst, nil, "rev-parse", "HEAD"); got != up.Head(t) {
			t.Fatalf("clone %s at %s", name, got)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, m := get("/metrics")
		if strings.Contains(m, "mirrorfleet_pack_cache_hits_total 1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pack cache hit in /metrics:\n%s", m)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _ := get("/git/"); code != 404 {
		t.Fatalf("/git/ without a table: %d, want 404 (no index)", code)
	}

	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(15 * time.Second)
	for {
		code, body := get("/healthz")
		if code == 503 && strings.Contains(body, "mirrors root") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz without the root: %d %q", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
}
