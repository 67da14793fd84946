//go:build integration

package localstack

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/functions/runtimeapi"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/logtest"
)

// proc is a process of the fleet: a worker or the git server, with its own environment
// only (what the stack gives the container, what ECS adds, the emulator's endpoints,
// PATH and HOME).
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    logtest.Buffer
	lines  chan string // stderr lines, for whoever waits for one
	exited chan struct{}
}

func startProc(t *testing.T, name string, env map[string]string, args ...string) *proc {
	t.Helper()
	all := awsEnv()
	if _, ok := env["AWS_CONTAINER_CREDENTIALS_FULL_URI"]; ok {
		// A task's credentials come from the ECS agent, not the environment.
		delete(all, "AWS_ACCESS_KEY_ID")
		delete(all, "AWS_SECRET_ACCESS_KEY")
	}
	maps.Copy(all, env)
	all["PATH"] = hostPath()
	if _, ok := all["HOME"]; !ok {
		all["HOME"] = t.TempDir()
	}
	p := &proc{name: name, cmd: exec.Command(bins.mirrorfleet, args...), lines: make(chan string, 1024), exited: make(chan struct{})}
	p.cmd.Env = environ(all)
	p.cmd.Stdout = io.Discard // EMF metrics
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(&p.out, sc.Text())
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	})
	go func() {
		wg.Wait()
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM, 10*time.Second)
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.out.String())
		}
	})
	return p
}

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// stop signals the process (resumed first, if stopped) and waits for it to exit,
// killing it after within.
func (p *proc) stop(sig syscall.Signal, within time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(within):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// waitLog waits for a JSON log line whose msg is msg and returns it.
func (p *proc) waitLog(t *testing.T, msg string, within time.Duration) map[string]any {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l := <-p.lines:
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
				return m
			}
		case <-p.exited:
			t.Fatalf("%s exited before logging %q:\n%s", p.name, msg, p.out.String())
		case <-deadline:
			t.Fatalf("%s did not log %q within %s:\n%s", p.name, msg, within, p.out.String())
		}
	}
}

// run runs a mirrorfleet command to its end and returns its output; a failure fails
// the test.
func run(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	stdout, stderr, code := mirrorfleet(t, env, args...)
	if code != 0 {
		t.Fatalf("mirrorfleet %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout + stderr
}

// mirrorfleet runs a mirrorfleet command to its end with the tier's AWS environment and
// env, and returns its stdout, its stderr and its exit code.
func mirrorfleet(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	all := awsEnv()
	maps.Copy(all, env)
	all["PATH"], all["HOME"] = hostPath(), t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.mirrorfleet, args...)
	cmd.Env = environ(all)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("mirrorfleet %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

// lambda is a function's bootstrap under the Runtime API emulator.
type lambda struct {
	t  *testing.T
	fn *runtimeapi.Function
}

// startLambda runs bootstrap as Lambda would with the stack's environment for it (env)
// and the emulator's endpoints.
func startLambda(t *testing.T, bootstrap, name string, env map[string]string) *lambda {
	t.Helper()
	all := awsEnv()
	delete(all, "AWS_REGION") // Lambda sets it (runtimeapi does)
	all["AWS_SESSION_TOKEN"] = "session"
	maps.Copy(all, env)
	fn, err := runtimeapi.Start(runtimeapi.Config{Binary: bootstrap, Name: name, Region: region, Env: all})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		fn.Close()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, fn.Stderr())
		}
	})
	return &lambda{t: t, fn: fn}
}

// invoke sends one event and returns the function's answer; a function error fails the test.
func (l *lambda) invoke(payload []byte) []byte {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(l.t.Context(), 2*time.Minute)
	defer cancel()
	res, err := l.fn.Invoke(ctx, payload)
	if err != nil {
		l.t.Fatal(err)
	}
	if res.Error != nil {
		l.t.Fatalf("%s: %s: function error %v", l.fn.Name, payload, res.Error)
	}
	return res.Payload
}

// tick is the coordinator's answer to an event (functions/coordinator Result).
type tick struct {
	Event    string `json:"event"`
	Leader   bool   `json:"leader"`
	Term     int64  `json:"term"`
	Assigned int    `json:"assigned"`
	Moved    int    `json:"moved"`
	Ignored  string `json:"ignored"`
	// ListError is the list sync's failure, if the tick's sync failed.
	ListError string `json:"list_error"`
}

func (l *lambda) tick(payload []byte) tick {
	l.t.Helper()
	var r tick
	b := l.invoke(payload)
	if err := json.Unmarshal(b, &r); err != nil {
		l.t.Fatalf("coordinator answered %s", b)
	}
	return r
}

// call sends an HTTP API request through API Gateway's event (signed: with the
// operator's verified IAM identity; headers for a webhook) and returns the answer.
func (l *lambda) call(method, path, body string, headers map[string]string, signed bool) runtimeapi.HTTPResponse {
	l.t.Helper()
	var id *runtimeapi.IAMIdentity
	if signed {
		id = runtimeapi.Operator
	}
	b := l.invoke(runtimeapi.HTTPEventWith(method, path, body, headers, id))
	var r runtimeapi.HTTPResponse
	if err := json.Unmarshal(b, &r); err != nil {
		l.t.Fatalf("%s %s: the API answered %s", method, path, b)
	}
	return r
}
