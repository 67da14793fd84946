package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
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

// startServe starts `mirrorfleet serve` over root with extra flags and returns its
// address.
func startServe(t *testing.T, root string, extra ...string) string {
	t.Helper()
	args := append([]string{"serve", "--root", root, "--listen", "127.0.0.1:0",
		"--pack-cache-dir", t.TempDir(), "--emf-interval", "0"}, extra...)
	cmd := exec.Command(binary(t), args...)
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		var l struct{ Msg, Listen string }
		if json.Unmarshal(lines.Bytes(), &l) == nil && l.Msg == "serving git" {
			go io.Copy(io.Discard, stderr)
			return l.Listen
		}
	}
	t.Fatal("mirrorfleet serve did not log its address")
	return ""
}

// With --serve-token, /metrics needs the token as git does; --max-conns bounds the
// open connections (a third waits to be accepted while two half-sent requests hold
// their places).
func TestServeCommandTokenAndConnLimit(t *testing.T) {
	t.Parallel()
	addr := startServe(t, t.TempDir(), "--serve-token", "tok", "--max-conns", "2")
	get := func(tok string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		if tok != "" {
			req.SetBasicAuth("x", tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(""); code != 401 {
		t.Fatalf("/metrics without the token: %d, want 401", code)
	}
	if code := get("tok"); code != 200 {
		t.Fatalf("/metrics with the token: %d", code)
	}
	http.DefaultClient.CloseIdleConnections()

	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // half-sent
		held = append(held, c)
	}
	third, err := net.Dial("tcp", addr) // the kernel accepts; the server does not yet
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	fmt.Fprint(third, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	third.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := third.Read(make([]byte, 1)); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a third connection past --max-conns 2 was answered: %d %v", n, err)
	}
	held[0].Close()
	third.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil {
		t.Fatalf("the third connection once a place freed: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
}
