// Package gitcmd is the one place the product starts git (serving's upload-pack, the
// pack cache's pack-objects, mirror maintenance, the version and health checks, the
// smoke test's clone), as Gitaly's command package is for Gitaly. Every process gets:
//
//   - one environment: nothing of ours but PATH, the dynamic linker's path, TZ, TMPDIR,
//     the proxies and the TLS trust store; no system or user configuration (GIT_CONFIG_NOSYSTEM,
//     GIT_CONFIG_GLOBAL and HOME pointing nowhere, so no ~/.gitconfig, XDG
//     attributes file or .netrc is read), LC_ALL=C, no prompt and no askpass program;
//   - a process group of its own, signalled whole when its context ends or its timeout
//     passes, and killed whole once git has exited, so nothing it started outlives it;
//   - its stderr kept within StderrBytes (the head and the tail), for its error;
//   - a timeout (DefaultTimeout unless the caller knows a tighter bound);
//   - counters by git command (GitProcesses, GitFailures, GitCpuSeconds) on the
//     Git's metrics sink.
//
// Fetching is not here: it is go-git's (shared/mirror).
package gitcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
)

// EnvGit names a git binary to use instead of the one on PATH.
const EnvGit = "MIRRORFLEET_GIT"

// Defaults of Cmd.
const (
	// DefaultTimeout is the backstop of every git process whose caller sets none: a
	// day, beyond any repack or clone of the largest mirrors at any useful speed. A
	// process still running then is stuck (a hung file system, a client trickling a
	// clone for ever).
	DefaultTimeout = 24 * time.Hour
	// DefaultStderrBytes bounds what is kept of a process's stderr.
	DefaultStderrBytes = 4 << 10
	// waitDelay bounds the wait, after git has exited and its group was killed, for
	// the copies of its output to end.
	waitDelay = time.Second
)

// Sink receives the counters (metrics.Prometheus, metrics.EMF).
type Sink interface {
	Record(...metrics.Sample) error
}

// Git is a git binary (Find checks it) and the way to run it.
type Git struct {
	Path    string
	Version Version
	// Metrics, if set, counts every process by git command.
	Metrics Sink
}

// Cmd is one git process.
type Cmd struct {
	// Args are git's arguments: global options (-c key=value, --shallow-file F), the
	// command and its own. The first argument that is not an option names the command
	// in the counters.
	Args []string
	Dir  string
	// Env is added to the fixed environment (a later entry wins): GIT_DIR,
	// GIT_PROTOCOL, the pack cache's variables.
	Env   []string
	Stdin io.Reader
	// Stdout receives the output; nil: Run discards it, Start gives a pipe
	// (Process.Stdout).
	Stdout io.Writer
	// Stderr, if set, receives git's stderr as it comes (the pack-objects hook passes
	// pack-objects' progress on to upload-pack), besides the bounded copy kept for the
	// error.
	Stderr      io.Writer
	StderrBytes int           // 0: DefaultStderrBytes
	Timeout     time.Duration // 0: DefaultTimeout
	// Grace, if set, is how long git has to stop after a SIGTERM (to remove its
	// temporary files, as a cancelled repack does) before the group is killed; zero:
	// killed at once.
	Grace time.Duration
	// SameGroup keeps git in this process's group instead of one of its own: for a
	// process that git itself started (the pack-objects hook), whose group the server
	// kills whole — in a group of its own, its git would survive that.
	SameGroup bool
}

// Error is a git process that failed: it could not start, exited non-zero, was killed
// or timed out. Err wraps the cause (an *exec.ExitError, context.DeadlineExceeded,
// context.Canceled).
type Error struct {
	Command string
	Err     error
	Stderr  string // what was kept of git's stderr, trimmed
}

func (e *Error) Error() string {
	if e.Stderr == "" {
		return fmt.Sprintf("git %s: %v", e.Command, e.Err)
	}
	return fmt.Sprintf("git %s: %v: %s", e.Command, e.Err, e.Stderr)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrTimeout: the process ran past its Cmd.Timeout and was stopped.
var ErrTimeout = errors.New("timed out")

// Run runs c to its end.
func (g Git) Run(ctx context.Context, c Cmd) error {
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	p, err := g.Start(ctx, c)
	if err != nil {
		return err
	}
	return p.Wait()
}

// MaxOutput bounds what Output keeps.
const MaxOutput = 1 << 20

// Output runs c to its end and returns its standard output; more than MaxOutput bytes
// is an error.
func (g Git) Output(ctx context.Context, c Cmd) ([]byte, error) {
	out := &limited{max: MaxOutput}
	c.Stdout = out
	err := g.Run(ctx, c)
	if err == nil && out.over {
		err = &Error{Command: command(c.Args), Err: fmt.Errorf("output over %d bytes", MaxOutput)}
	}
	return out.buf.Bytes(), err
}

// Process is a started git process. Wait must be called, after reading Stdout to
// its end (if it is a pipe).
type Process struct {
	// Stdout is git's standard output when Cmd.Stdout was nil, else nil.
	Stdout io.Reader

	cmd     *exec.Cmd
	git     Git
	name    string
	c       Cmd
	parent  context.Context
	ctx     context.Context // parent with the timeout
	cancel  context.CancelFunc
	stderr  *stderrBuffer
	started time.Time

	mu     sync.Mutex
	exited bool // git has exited: its pid no longer names a group of ours
	done   chan struct{}
	once   sync.Once
	err    error
}

// Start starts c. The process is stopped when ctx ends or c.Timeout passes.
func (g Git) Start(ctx context.Context, c Cmd) (*Process, error) {
	name := command(c.Args)
	if g.Path == "" {
		return nil, &Error{Command: name, Err: errors.New("no git binary configured")}
	}
	if err := ctx.Err(); err != nil { // the caller is done already: nothing to start
		return nil, &Error{Command: name, Err: err}
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	max := c.StderrBytes
	if max <= 0 {
		max = DefaultStderrBytes
	}
	p := &Process{git: g, name: name, c: c, parent: ctx, stderr: newStderrBuffer(max), done: make(chan struct{})}
	p.ctx, p.cancel = context.WithTimeoutCause(ctx, timeout, ErrTimeout)
	cmd := exec.Command(g.Path, c.Args...) // the product's one exec of git
	cmd.Dir = c.Dir
	cmd.Env = Environ(c.Env)
	cmd.Stdin = c.Stdin
	cmd.Stderr = p.stderr
	if c.Stderr != nil {
		cmd.Stderr = io.MultiWriter(p.stderr, c.Stderr)
	}
	if !c.SameGroup {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	cmd.WaitDelay = waitDelay
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	} else {
		out, err := cmd.StdoutPipe()
		if err != nil {
			p.cancel()
			return nil, &Error{Command: name, Err: err}
		}
		p.Stdout = out
	}
	p.cmd = cmd
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		p.cancel()
		err = &Error{Command: name, Err: err}
		p.record(err)
		return nil, err
	}
	go p.watch()
	return p, nil
}

// watch stops the process when its context ends: SIGTERM and, after the grace, SIGKILL
// to its group (or to it alone, in the caller's group).
func (p *Process) watch() {
	select {
	case <-p.done:
		return
	case <-p.ctx.Done():
	}
	if p.c.Grace <= 0 {
		p.signal(syscall.SIGKILL)
		return
	}
	p.signal(syscall.SIGTERM)
	t := time.NewTimer(p.c.Grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.signal(syscall.SIGKILL)
	}
}

// signal sends sig to the process's group while git has not exited: until then its
// pid, the group's id, cannot name anyone else's processes.
func (p *Process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return
	}
	if p.c.SameGroup {
		_ = p.cmd.Process.Signal(sig)
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Wait waits for git to exit, kills what it left running in its group, and returns its
// error (an *Error) or nil. It may be called more than once.
func (p *Process) Wait() error {
	p.once.Do(func() {
		// Wait for git to exit without reaping it, kill the rest of its group (a hook
		// waiting for a cache entry, a pack-objects whose reader went away), and only
		// then reap it: until then no other process can be given its pid, the group's
		// id.
		if !p.c.SameGroup && waitExited(p.cmd.Process.Pid) {
			p.mu.Lock()
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			p.exited = true
			p.mu.Unlock()
		}
		err := p.cmd.Wait()
		p.mu.Lock()
		p.exited = true
		p.mu.Unlock()
		close(p.done)
		if err != nil {
			if cause := context.Cause(p.ctx); cause != nil {
				err = fmt.Errorf("%w (%w)", cause, err)
			}
			err = &Error{Command: p.name, Err: err, Stderr: strings.TrimSpace(p.stderr.String())}
		}
		p.cancel()
		p.err = err
		p.record(err)
	})
	return p.err
}

// StderrText is what was kept of git's stderr so far.
func (p *Process) StderrText() string { return p.stderr.String() }

// record counts the process: one more of its command, its CPU time (its own and its
// waited-for children's: upload-pack's includes the pack-objects it ran), and a
// failure unless its caller stopped it (a client gone, a worker stopping).
func (p *Process) record(err error) {
	if p.git.Metrics == nil {
		return
	}
	var cpu time.Duration
	if st := p.cmd.ProcessState; st != nil {
		cpu = st.UserTime() + st.SystemTime()
	}
	failed := err != nil && !(p.parent.Err() != nil && !errors.Is(err, ErrTimeout))
	_ = p.git.Metrics.Record(metrics.GitProcess(p.name, failed, cpu)...)
}

// command is the git command args run: the first argument that is not a global option
// or an option's value.
func command(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c" || a == "-C" || a == "--shallow-file" || a == "--git-dir" || a == "--work-tree":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return "git"
}

// passed are the variables of this process's environment that git gets: where to
// find programs and libraries, the time zone, the temporary directory, and for the
// smoke test's clone the proxies and the TLS trust store. Nothing else: no GIT_*
// (another repository, another configuration), no HOME, XDG_*, LANG, askpass or
// credential variables.
var passed = []string{"PATH", "LD_LIBRARY_PATH", "TZ", "TMPDIR",
	"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
	"SSL_CERT_FILE", "SSL_CERT_DIR"}

// Environ is the environment of every git process, with extra added (a later entry
// wins).
func Environ(extra []string) []string {
	env := make([]string, 0, len(passed)+6+len(extra))
	for _, k := range passed {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL="+os.DevNull,
		// HOME is where git (and curl) look for user files the configuration does not
		// name: ~/.config/git/attributes, ~/.netrc. None of them is read from a file
		// that is not a directory.
		"HOME="+os.DevNull,
		"LC_ALL=C",
		"GIT_TERMINAL_PROMPT=0",
	)
	return append(env, extra...)
}

// stderrBuffer keeps the first and the last half of max bytes written to it: git's
// first complaint and its last words.
type stderrBuffer struct {
	mu         sync.Mutex
	max        int
	head, tail []byte
	cut        bool
}

func newStderrBuffer(max int) *stderrBuffer { return &stderrBuffer{max: max} }

func (b *stderrBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	half := b.max / 2
	if room := b.max - half - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	b.tail = append(b.tail, p...)
	if over := len(b.tail) - half; over > 0 {
		b.tail = append(b.tail[:0], b.tail[over:]...)
		b.cut = true
	}
	return n, nil
}

func (b *stderrBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cut {
		return string(b.head) + "\n…\n" + string(b.tail)
	}
	return string(b.head) + string(b.tail)
}

// limited keeps up to max bytes and notes whether more came.
type limited struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (l *limited) Write(p []byte) (int, error) {
	n := len(p)
	if room := l.max - l.buf.Len(); room < len(p) {
		l.over = true
		p = p[:max(room, 0)]
	}
	l.buf.Write(p)
	return n, nil
}
