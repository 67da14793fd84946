package serve

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
)

// gatedProxy forwards connections to addr; what the server sends passes only its
// first `free` bytes per connection until open is called: a client that stops
// reading.
type gatedProxy struct {
	ln   net.Listener
	free int64
	gate chan struct{}
	once sync.Once
	held chan struct{} // gets a value when a connection reaches the gate
}

func newGatedProxy(t *testing.T, addr string, free int64) *gatedProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &gatedProxy{ln: ln, free: free, gate: make(chan struct{}), held: make(chan struct{}, 16)}
	t.Cleanup(func() { p.open(); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(s, c); s.(*net.TCPConn).CloseWrite() }()
			go func() {
				defer c.Close()
				defer s.Close()
				if _, err := io.CopyN(c, s, p.free); err != nil {
					return
				}
				p.held <- struct{}{}
				<-p.gate
				io.Copy(c, s)
			}()
		}
	}()
	return p
}

func (p *gatedProxy) open()        { p.once.Do(func() { close(p.gate) }) }
func (p *gatedProxy) addr() string { return p.ln.Addr().String() }

// gitCtx runs the git client under ctx and returns its combined output.
func (e *env) gitCtx(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = gittest.Env(e.home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A client that stops reading does not hold up an identical clone or fetch: the
// entry it caused is generated at disk speed and put in place, and the other request
// is answered from it while the slow one still waits.
func TestSlowClientDoesNotHoldIdenticalRequests(t *testing.T) {
	e := newEnv(t)
	r := e.repo("big/r.git")
	work := t.TempDir()
	// Big enough that the response does not fit in the sockets' buffers.
	e.git(work, "clone", "--bare", "-q", e.url("big/r.git"), "base.git")
	r.Commit(t, "big", map[string][]byte{"big.bin": gittest.RandomBytes(t, 24<<20)})
	e.git(work, "clone", "--bare", "-q", "base.git", "base2.git") // the same haves for both fetches
	proxy := newGatedProxy(t, strings.TrimPrefix(e.srv.URL, "http://"), 64<<10)
	slowURL := "http://" + proxy.addr() + Prefix + "big/r.git"
	proxy2 := newGatedProxy(t, strings.TrimPrefix(e.srv.URL, "http://"), 64<<10)
	slowURL2 := "http://" + proxy2.addr() + Prefix + "big/r.git"

	for _, tc := range []struct {
		name, slowDir, fastDir string
		proxy                  *gatedProxy
		slow, fast             []string
	}{
		{"clone", work, work, proxy,
			[]string{"clone", "--bare", "-q", slowURL, "slow-clone.git"},
			[]string{"clone", "--bare", "-q", e.url("big/r.git"), "fast-clone.git"}},
		{"fetch", filepath.Join(work, "base.git"), filepath.Join(work, "base2.git"), proxy2,
			[]string{"fetch", "-q", slowURL2, "+refs/heads/*:refs/heads/*"},
			[]string{"fetch", "-q", e.url("big/r.git"), "+refs/heads/*:refs/heads/*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy := tc.proxy
			defer proxy.open()
			slowDone := make(chan error, 1)
			go func() {
				out, err := e.gitCtx(context.Background(), tc.slowDir, tc.slow...)
				if err != nil {
					err = fmt.Errorf("%w: %s", err, out)
				}
				slowDone <- err
			}()
			// The fast request once the slow one's response is under way.
			select {
			case <-proxy.held:
			case err := <-slowDone:
				t.Fatalf("the slow %s ended before it stopped reading: %v", tc.name, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out, err := e.gitCtx(ctx, tc.fastDir, tc.fast...)
			if err != nil {
				t.Fatalf("the identical %s while a client does not read: %v: %s", tc.name, err, out)
			}
			select {
			case err := <-slowDone:
				t.Fatalf("the slow client finished before its gate opened: %v", err)
			default:
			}
			proxy.open()
			if err := <-slowDone; err != nil {
				t.Fatalf("the slow %s, once it reads: %v", tc.name, err)
			}
		})
	}
}

// Whatever git starts dies with the request: a git that leaves a child behind (here
// a wrapper starting a sleep) leaves nothing running once the request is over,
// whether the client read it all or went away.
func TestGitProcessesDieWithTheirRequest(t *testing.T) {
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	mark := t.TempDir()
	wrapper := filepath.Join(mark, "git")
	script := fmt.Sprintf("#!/bin/sh\ncase \"$*\" in *upload-pack*) MF_TEST_MARK=%s sleep 120 </dev/null >/dev/null 2>&1 & ;; esac\nexec %s \"$@\"\n", mark, real)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.Git = wrapper })
	e.repo("a/r.git")
	t.Cleanup(func() {
		for _, pid := range marked(mark) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	e.git(t.TempDir(), "clone", "--bare", "-q", e.url("a/r.git"), "c.git")
	noneLeft := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(marked(mark)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if left := marked(mark); len(left) > 0 {
			t.Fatalf("after %s, %d processes started by the requests' git still run: %v", what, len(left), left)
		}
	}
	noneLeft("a clone")
	// An abandoned request: the client goes away while git runs.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "clone", "--bare", "-q", e.url("a/r.git"), "d.git")
	cmd.Dir, cmd.Env = t.TempDir(), gittest.Env(e.home)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for len(marked(mark)) == 0 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	noneLeft("an abandoned clone")
}

// marked lists the processes whose environment has MF_TEST_MARK=mark.
func marked(mark string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err == nil && strings.Contains(string(b), "MF_TEST_MARK="+mark+"\x00") {
			pids = append(pids, pid)
		}
	}
	return pids
}
