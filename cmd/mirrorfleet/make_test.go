package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMakeRun runs `make run` as the README says, with flags in ARGS: the fleet is the
// binary make built, running as make's child (not a `go run` grandchild), so a SIGTERM
// to it stops the fleet, make exits, and the port is free.
func TestMakeRun(t *testing.T) {
	t.Parallel()
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make is not installed: `make run` cannot be tried")
	}
	goCmd, err := goTool()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "mirrorfleet")
	args := fmt.Sprintf("--data %s --listen 127.0.0.1:0 --workers 2 --warmup 0s", filepath.Join(dir, "data"))
	cmd := exec.Command(mk, "-C", "../..", "run", "GO="+goCmd, "BIN="+bin, "ARGS="+args)
	cmd.Env = cleanEnv()
	out := &output{addr: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("make run output:\n%s", out.String())
		}
	})
	var addr string
	select {
	case addr = <-out.addr:
	case err := <-exited:
		t.Fatalf("make run exited before serving: %v", err)
	case <-time.After(3 * time.Minute): // the build comes first
		t.Fatal("make run printed no status page line within 3 minutes")
	}
	if !strings.Contains(out.String(), "workers=2") {
		t.Errorf("ARGS did not reach the fleet (--workers 2):\n%s", out.String())
	}

	child := childOf(t, cmd.Process.Pid)
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", child)); err != nil || exe != bin {
		t.Fatalf("make's child %d runs %q (%v), want the built %s", child, exe, err, bin)
	}
	if err := syscall.Kill(child, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("make exited with %v after its fleet's SIGTERM, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("make still runs 30s after SIGTERM to its fleet")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after the fleet stopped", addr)
	}
	if err := syscall.Kill(child, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the fleet (pid %d) still runs: %v", child, err)
	}
}

// childOf is the one child process of pid (from /proc).
func childOf(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to find make's child in: %v", err)
	}
	var kids []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after its ")".
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, n)
		}
	}
	if len(kids) != 1 {
		t.Fatalf("make (pid %d) has children %v, want one: the fleet", pid, kids)
	}
	return kids[0]
}

// TestMakeInstall: `make install` puts the binary in $GOBIN, says where, and says when
// that directory is not on PATH.
func TestMakeInstall(t *testing.T) {
	t.Parallel()
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make is not installed: `make install` cannot be tried")
	}
	goCmd, err := goTool()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gobin := filepath.Join(dir, "bin")
	cmd := exec.Command(mk, "-C", "../..", "install", "GO="+goCmd, "BIN="+filepath.Join(dir, "build", "mirrorfleet"), "GOBIN="+gobin)
	cmd.Env = append(cleanEnv(), "PATH=/usr/bin:/bin")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	installed := filepath.Join(gobin, "mirrorfleet")
	if !strings.Contains(string(out), "installed "+installed) || !strings.Contains(string(out), gobin+" is not on your PATH") {
		t.Errorf("make install does not say where the binary went and that it is not on PATH:\n%s", out)
	}
	v, err := exec.Command(installed, "version").Output()
	if err != nil || !strings.HasPrefix(string(v), "mirrorfleet ") {
		t.Errorf("the installed binary: %q, %v", v, err)
	}
}
