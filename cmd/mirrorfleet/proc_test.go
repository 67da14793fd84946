package main

// Helpers of the end-to-end tests: the mirrorfleet binary (built once), a `mirrorfleet
// run` subprocess, its API and its CLI.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/mirrorpath"
)

// raceEnabled is set by race_test.go under -race: the binary is then built with -race
// too, and a data race in it fails the test.
var raceEnabled bool

var (
	buildOnce sync.Once
	buildDir  string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// goTool finds the go command that builds the binary.
func goTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("the go command is neither on PATH nor in $GOROOT/bin")
}

// versionFlags are the linker flags `make` gives: git's description and commit.
func versionFlags() string {
	describe, _ := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	head, _ := exec.Command("git", "rev-parse", "HEAD").Output()
	const pkg = "github.com/mirrorfleet/mirrorfleet/shared/buildinfo"
	return "-X " + pkg + ".version=" + strings.TrimSpace(string(describe)) + " -X " + pkg + ".commit=" + strings.TrimSpace(string(head))
}

// binary builds ./cmd/mirrorfleet once per test process (with -race under -race).
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		goCmd, err := goTool()
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, err = os.MkdirTemp("", "mirrorfleet-e2e-"); err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(buildDir, "mirrorfleet")
		// Stamped as the Makefile stamps it: the version and commit from git.
		args := []string{"build", "-o", binPath, "-ldflags", versionFlags()}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command(goCmd, append(args, ".")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build mirrorfleet: %v", buildErr)
	}
	return binPath
}

// output collects a subprocess's output and spots the status page line in it.
type output struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	addr  chan string
	found bool
}

var statusLine = regexp.MustCompile(`status page: http://([^/\s]+)/`)

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	if !o.found {
		if m := statusLine.FindStringSubmatch(o.buf.String()); m != nil {
			o.found = true
			o.addr <- m[1]
		}
	}
	return len(p), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// fleetProc is a `mirrorfleet run` subprocess.
type fleetProc struct {
	t       *testing.T
	name    string
	data    string
	token   string
	base    string // http://127.0.0.1:<port>
	cmd     *exec.Cmd
	out     *output
	exited  chan struct{}
	waitErr error
}

// startFleet runs `mirrorfleet run` on data with the e2e timings (heartbeat and tick
// 1s, grace 8s, no warm-up, min-interval 1s) and extra flags, which come last and so
// win, and waits for its status page line.
func startFleet(t *testing.T, name, data, token string, extra ...string) *fleetProc {
	t.Helper()
	args := []string{"run", "--data", data, "--listen", "127.0.0.1:0", "--workers", "3", "--heartbeat", "1s",
		"--tick", "1s", "--grace", "8s", "--warmup", "0s", "--min-interval", "1s", "--token", token,
		// every upstream is on the test's one git server: no per-host politeness
		"--host-concurrency", "-1", "--host-rate", "-1"}
	p := launch(t, name, "", cleanEnv(), binary(t), append(args, extra...)...)
	p.data, p.token = data, token
	return p
}

// launch runs `bin args...` (a `mirrorfleet run`) in dir with env, and waits for its
// status page line. It is killed at the end of the test if still running.
func launch(t *testing.T, name, dir string, env []string, bin string, args ...string) *fleetProc {
	t.Helper()
	p := &fleetProc{t: t, name: name, out: &output{addr: make(chan string, 1)}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", p.name, p.out.String())
		}
	})
	select {
	case addr := <-p.out.addr:
		p.base = "http://" + addr
	case <-p.exited:
		t.Fatalf("%s exited before serving: %v\n%s", name, p.waitErr, p.out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s printed no status page line within 60s", name)
	}
	return p
}

// cleanEnv is the environment without the fleet's own variables, so the host's
// settings cannot leak into a test.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MIRRORFLEET_") {
			env = append(env, kv)
		}
	}
	return env
}

// stop sends SIGTERM and requires a clean exit (status 0) within 15s, and no data
// race reported by a -race binary. It returns how long the exit took.
func (p *fleetProc) stop(t *testing.T) time.Duration {
	t.Helper()
	begin := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not exit within 15s of SIGTERM", p.name)
	}
	took := time.Since(begin)
	if p.waitErr != nil {
		t.Fatalf("%s exited with %v after SIGTERM, want status 0", p.name, p.waitErr)
	}
	if strings.Contains(p.out.String(), "WARNING: DATA RACE") {
		t.Fatalf("%s reported a data race", p.name)
	}
	return took
}

// kill ends the process with SIGKILL, as a crash would.
func (p *fleetProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
}

// activeWorkers is the sorted ids of the active workers.
func (p *fleetProc) activeWorkers(t *testing.T) []string {
	t.Helper()
	var ws struct{ Workers []struct{ ID, State string } }
	p.getJSON(t, "/v1/workers", &ws)
	var ids []string
	for _, w := range ws.Workers {
		if w.State == "active" {
			ids = append(ids, w.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// apiResp is an API answer.
type apiResp struct {
	Status int
	Header http.Header
	Body   []byte
}

// apiError is the API's error body.
type apiErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Reason  string `json:"reason"`
	} `json:"error"`
}

// call sends a request; body is sent as is when it is []byte, else as JSON. With auth
// it carries the fleet's token.
func (p *fleetProc) call(t *testing.T, method, path string, body any, auth bool) apiResp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return apiResp{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// getJSON GETs path, requires 200 and decodes the body into out.
func (p *fleetProc) getJSON(t *testing.T, path string, out any) {
	t.Helper()
	r := p.call(t, http.MethodGet, path, nil, false)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, out); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, r.Body)
	}
}

// repoJSON is the part of the API's repo the tests read (the CLI has its own).
type apiRepo struct {
	ID            string     `json:"id"`
	URL           string     `json:"url"`
	State         string     `json:"state"`
	Owner         *string    `json:"owner"`
	OwnerEpoch    int64      `json:"owner_epoch"`
	SyncRequested bool       `json:"sync_requested"`
	LastChangeAt  *time.Time `json:"last_change_at"`
	LastSuccessAt *time.Time `json:"last_success_at"`
	LastError     string     `json:"last_error"`
	CloneURL      string     `json:"clone_url"`
}

func (r apiRepo) owner() string {
	if r.Owner == nil {
		return ""
	}
	return *r.Owner
}

// repos lists every repo through the API's pages.
func (p *fleetProc) repos(t *testing.T) map[string]apiRepo {
	t.Helper()
	out := map[string]apiRepo{}
	cursor := ""
	for {
		q := url.Values{"limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Repos      []apiRepo `json:"repos"`
			NextCursor string    `json:"next_cursor"`
		}
		p.getJSON(t, "/v1/repos?"+q.Encode(), &page)
		for _, r := range page.Repos {
			out[r.ID] = r
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

// cli runs the mirrorfleet CLI against the fleet and returns stdout, stderr and the
// exit status.
func (p *fleetProc) cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), append(args, "--api", p.base, "--token", p.token)...)
	cmd.Env = cleanEnv()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("mirrorfleet %s: %v", strings.Join(args, " "), err)
	}
	return o.String(), e.String(), code
}

// mustCLI runs the CLI and requires exit status 0.
func (p *fleetProc) mustCLI(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, code := p.cli(t, args...)
	if code != 0 {
		t.Fatalf("mirrorfleet %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout, stderr
}

// mirrorPath is where the fleet keeps the mirror of a normalized URL.
func mirrorPath(t *testing.T, data, normalized string) string {
	t.Helper()
	rel, err := mirrorpath.Rel(normalized)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(data, "mirrors", rel)
}

// eventually polls cond every 200ms until it returns "" (done), failing with its last
// answer at the deadline.
func eventually(t *testing.T, within time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, within, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stepper returns a function that logs the time since the start of the test with a
// step name, to see where the time of a long test goes (go test -v).
func stepper(t *testing.T) func(what string) {
	begin := time.Now()
	return func(what string) { t.Logf("%6.1fs %s", time.Since(begin).Seconds(), what) }
}

// waitRing waits until the ring has n members and that many workers are active. Repos
// added earlier go to the workers that joined first and move again a tick later, and a
// move while the old owner fetches the repo stalls it for the worker's 30 s busy retry
// (a bug, see shared/fleet's TestBusyMirrorIsRetriedWithinMinInterval); tests that are
// not about that add repos once the ring is complete.
func (p *fleetProc) waitRing(t *testing.T, n int) {
	t.Helper()
	eventually(t, 30*time.Second, "a complete ring", func() string {
		var rg struct {
			Version int64
			Members []struct{ ID string }
		}
		p.getJSON(t, "/v1/ring", &rg)
		var ws struct{ Workers []struct{ ID, State string } }
		p.getJSON(t, "/v1/workers", &ws)
		active := 0
		for _, w := range ws.Workers {
			if w.State == "active" {
				active++
			}
		}
		if len(rg.Members) != n || active != n {
			return fmt.Sprintf("ring version %d has %d members, %d workers active", rg.Version, len(rg.Members), active)
		}
		return ""
	})
}
