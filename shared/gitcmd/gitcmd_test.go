package gitcmd

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
)

func realGit(t *testing.T) (Git, *metrics.Tally) {
	t.Helper()
	g, err := Find(context.Background())
	if err != nil {
		t.Fatalf("git: %v", err)
	}
	tally := &metrics.Tally{}
	g.Metrics = tally
	return g, tally
}

// alias runs sh script as git's command "x" (a shell alias: git starts sh, which
// starts what the script runs, all in git's process group).
func alias(script string) []string { return []string{"-c", "alias.x=!" + script, "x"} }

// dead reports whether pid is gone or a zombie (killed, not yet reaped by init).
func dead(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

func waitDead(t *testing.T, pid int) {
	t.Helper()
	for range 500 {
		if dead(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	t.Fatalf("process %d outlived its git", pid)
}

// The environment git and what it starts get: no configuration but the command line's,
// no user files, the C locale, no prompt, no askpass, nothing of ours but what is
// passed.
func TestEnvironment(t *testing.T) {
	g, _ := realGit(t)
	home := t.TempDir()
	global := filepath.Join(home, "global")
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = from-home\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(global, []byte("[user]\n\tname = from-global\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"HOME": home, "GIT_CONFIG_GLOBAL": global, "XDG_CONFIG_HOME": home,
		"GIT_DIR": filepath.Join(home, "elsewhere"), "GIT_ASKPASS": "/bin/echo", "SSH_ASKPASS": "/bin/echo",
		"LANG": "de_DE.UTF-8", "LC_ALL": "de_DE.UTF-8", "MIRRORFLEET_TOKEN": "secret", "TZ": "UTC"} {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	dir := t.TempDir() // not in a repository
	err := g.Run(ctx, Cmd{Args: []string{"config", "--get", "user.name"}, Dir: dir})
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("git config --get user.name: %v; want exit status 1 (not set anywhere git may read)", err)
	}
	out, err := g.Output(ctx, Cmd{Args: alias("env"), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for k, want := range map[string]string{"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.DevNull, "HOME": os.DevNull,
		"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", "TZ": "UTC"} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
	if !strings.HasSuffix(env["PATH"], os.Getenv("PATH")) { // git puts its exec path first
		t.Errorf("PATH=%q, want ours at its end", env["PATH"])
	}
	for _, k := range []string{"XDG_CONFIG_HOME", "GIT_DIR", "GIT_ASKPASS", "SSH_ASKPASS", "LANG", "MIRRORFLEET_TOKEN"} {
		if v, ok := env[k]; ok {
			t.Errorf("%s=%q reached git", k, v)
		}
	}
	// What the caller adds comes last and wins.
	out, err = g.Output(ctx, Cmd{Args: alias(`echo "$GIT_PROTOCOL $HOME"`), Dir: dir, Env: []string{"GIT_PROTOCOL=version=2", "HOME=/x"}})
	if err != nil || strings.TrimSpace(string(out)) != "version=2 /x" {
		t.Errorf("extra environment: %q, %v", out, err)
	}
}

// A cancelled command's whole group is killed, and Wait says the caller stopped it; a
// stopped process is not a failure.
func TestCancelKillsTheGroup(t *testing.T) {
	g, tally := realGit(t)
	ctx, cancel := context.WithCancel(context.Background())
	p, err := g.Start(ctx, Cmd{Args: alias("sleep 60 & echo $!; wait")})
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(p.Stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(line))
	cancel()
	err = p.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel: %v", err)
	}
	waitDead(t, child)
	if tally.Total("GitProcesses/x") != 1 || tally.Total("GitFailures/x") != 0 {
		t.Errorf("processes %v, failures %v; want 1 and 0", tally.Total("GitProcesses/x"), tally.Total("GitFailures/x"))
	}
	// A caller done before the start starts nothing.
	if _, err := g.Start(ctx, Cmd{Args: alias("true")}); !errors.Is(err, context.Canceled) || tally.Total("GitProcesses/x") != 1 {
		t.Errorf("Start after cancel: %v, %v processes", err, tally.Total("GitProcesses/x"))
	}
}

// What git leaves running in its group when it exits is killed before Wait returns,
// whether it holds git's output open or not.
func TestStragglersKilled(t *testing.T) {
	g, _ := realGit(t)
	for _, script := range []string{"sleep 60 >/dev/null 2>&1 & echo $!", "sleep 60 & echo $!"} {
		out, err := g.Output(context.Background(), Cmd{Args: alias(script)})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("%s: output %q", script, out)
		}
		waitDead(t, pid)
	}
}

// A command past its timeout is stopped and fails with ErrTimeout; the failure counts.
func TestTimeout(t *testing.T) {
	g, tally := realGit(t)
	err := g.Run(context.Background(), Cmd{Args: alias("sleep 60"), Timeout: 200 * time.Millisecond})
	var ge *Error
	if !errors.Is(err, ErrTimeout) || !errors.As(err, &ge) || ge.Command != "x" {
		t.Fatalf("Run past its timeout: %v", err)
	}
	if tally.Total("GitFailures/x") != 1 {
		t.Errorf("failures %v, want 1", tally.Total("GitFailures/x"))
	}
}

// With a grace, git gets SIGTERM first and may clean up; without, it is killed.
func TestGrace(t *testing.T) {
	for _, grace := range []time.Duration{0, 30 * time.Second} {
		dir := t.TempDir()
		mark := filepath.Join(dir, "cleaned")
		// A git that removes its temporary files when told to stop, as git does.
		script := "#!/bin/sh\ntrap 'touch " + mark + "; exit 1' TERM\necho ready\nwhile :; do sleep 0.05; done\n"
		g := Git{Path: filepath.Join(dir, "git")}
		if err := os.WriteFile(g.Path, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		p, err := g.Start(ctx, Cmd{Args: []string{"repack"}, Grace: grace})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(p.Stdout).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		cancel()
		_ = p.Wait()
		_, err = os.Stat(mark)
		if cleaned := err == nil; cleaned != (grace > 0) {
			t.Errorf("grace %s: cleaned up %v", grace, cleaned)
		}
	}
}

// stderr is kept within its bound, head and tail: git's first complaint and its last
// words; the exit status stays reachable.
func TestStderrBounded(t *testing.T) {
	g, tally := realGit(t)
	err := g.Run(context.Background(), Cmd{Args: alias("echo FIRST >&2; head -c 200000 /dev/zero | tr '\\0' x >&2; echo; echo LAST >&2; exit 3")})
	var ge *Error
	var ee *exec.ExitError
	if !errors.As(err, &ge) || !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Run: %v", err)
	}
	if len(ge.Stderr) > DefaultStderrBytes+8 || !strings.HasPrefix(ge.Stderr, "FIRST") || !strings.HasSuffix(ge.Stderr, "LAST") {
		t.Errorf("stderr kept: %d bytes, %q…%q", len(ge.Stderr), ge.Stderr[:min(20, len(ge.Stderr))], ge.Stderr[max(0, len(ge.Stderr)-20):])
	}
	if tally.Total("GitFailures/x") != 1 {
		t.Errorf("failures %v, want 1", tally.Total("GitFailures/x"))
	}
}

func TestOutputBounded(t *testing.T) {
	g, _ := realGit(t)
	_, err := g.Output(context.Background(), Cmd{Args: alias("head -c 2000000 /dev/zero")})
	if err == nil || !strings.Contains(err.Error(), "output over") {
		t.Fatalf("Output of 2 MB: %v", err)
	}
}

func TestCounters(t *testing.T) {
	g, tally := realGit(t)
	for range 3 {
		if err := g.CheckRuns(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := tally.Total("GitProcesses/version"); n != 3 {
		t.Errorf("GitProcesses/version = %v, want 3", n)
	}
	if tally.Count("GitCpuSeconds/version") != 3 || tally.Total("GitFailures/version") != 0 {
		t.Errorf("cpu samples %d, failures %v", tally.Count("GitCpuSeconds/version"), tally.Total("GitFailures/version"))
	}
	bad := Git{Path: filepath.Join(t.TempDir(), "no-git"), Metrics: tally}
	if err := bad.CheckRuns(context.Background()); err == nil {
		t.Fatal("a missing binary ran")
	}
	if tally.Total("GitFailures/version") != 1 {
		t.Errorf("a git that would not start is not a failure: %v", tally.Total("GitFailures/version"))
	}
}

func TestCommandName(t *testing.T) {
	for want, args := range map[string][]string{
		"upload-pack":      {"-c", "uploadpack.allowFilter=true", "-c", "safe.directory=*", "upload-pack", "--strict", "/x"},
		"pack-objects":     {"--shallow-file", "/tmp/s", "pack-objects", "--revs"},
		"multi-pack-index": {"-C", "/x", "multi-pack-index", "write"},
		"version":          {"version"},
		"git":              {"-c", "a=b"},
	} {
		if got := command(args); got != want {
			t.Errorf("command(%q) = %q, want %q", args, got, want)
		}
	}
}
