package packcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
)

// Arg is the subcommand of the mirrorfleet binary that runs the hook. upload-pack
// runs `<hook> git [--shallow-file F] pack-objects ARGS...`, so a binary that sees
// os.Args[1] == Arg calls Main(os.Args[2:], ...).
const Arg = "pack-objects-hook"

// The hook's environment, set by the server on upload-pack and inherited by the hook.
const (
	EnvDir     = "MIRRORFLEET_PACK_CACHE_DIR"         // the cache directory; empty: no cache
	EnvBytes   = "MIRRORFLEET_PACK_CACHE_BYTES"       // Config.MaxBytes, in bytes
	EnvTTL     = "MIRRORFLEET_PACK_CACHE_TTL"         // Config.TTL, a Go duration
	EnvEntries = "MIRRORFLEET_PACK_CACHE_MAX_ENTRIES" // Config.MaxEntries
	EnvRepo    = "MIRRORFLEET_SERVE_REPO"             // the repository's real path (its identity)
	EnvReport  = "MIRRORFLEET_PACK_CACHE_REPORT"      // a unixgram socket the outcome is sent to
	EnvGit     = gitcmd.EnvGit                        // the git binary
)

// maxStdin bounds the standard input a key is made of; a bigger one (an enormous list
// of haves) is passed through uncached.
const maxStdin = 64 << 20

// Outcomes of one hook run.
const (
	Hit    = "hit"    // served from the cache
	Waited = "wait"   // another hook was generating the same pack: served from the cache after it
	Miss   = "miss"   // generated and cached
	Bypass = "bypass" // generated, not cached (too big, no cache, an error of the cache)
	// Filling is not an outcome but the report a hook sends when it starts writing
	// Tmp for Key, so that the server's index counts the partly written file.
	Filling = "filling"
)

// Report is what a hook run sends to the server's report socket.
type Report struct {
	Result            string  `json:"result"`
	GenerationSeconds float64 `json:"generation_seconds,omitempty"` // Miss and Bypass: pack-objects' wall time
	Bytes             int64   `json:"bytes"`                        // pack bytes sent to upload-pack
	CachedBytes       int64   `json:"cached_bytes,omitempty"`       // bytes written into the cache
	// Note says why a request that could have been cached was not; the server logs
	// it (the client's stderr is no place for it).
	Note string `json:"note,omitempty"`
	// Key is the entry the hook looked up, filled or waited for, and Tmp the file it
	// wrote the entry into: the server's index looks at their files again (Index.Note).
	Key string `json:"key,omitempty"`
	Tmp string `json:"tmp,omitempty"`
}

// Main runs the hook: args is what follows the hook command (git ...), environ its
// environment (KEY=VALUE). It returns the exit status: pack-objects' own when it ran.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	getenv := func(k string) string {
		v := ""
		for _, kv := range environ {
			if key, val, ok := strings.Cut(kv, "="); ok && key == k {
				v = val // the last one counts, as in exec
			}
		}
		return v
	}
	h, err := newHook(args, getenv, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "mirrorfleet pack-objects-hook: %v\n", err)
		return 128
	}
	// The hook stands in for pack-objects: what upload-pack told it about the
	// repository and the configuration (GIT_DIR, GIT_CONFIG_PARAMETERS, ...) goes on to
	// the pack-objects it runs.
	for _, kv := range environ {
		if strings.HasPrefix(kv, "GIT_") {
			h.env = append(h.env, kv)
		}
	}
	in, err := io.ReadAll(io.LimitReader(stdin, maxStdin+1))
	if err != nil {
		fmt.Fprintf(stderr, "mirrorfleet pack-objects-hook: reading the request: %v\n", err)
		return 128
	}
	var rep Report
	var code int
	if len(in) > maxStdin || h.cfg.Dir == "" || h.repo == "" {
		code, rep = h.direct(io.MultiReader(bytes.NewReader(in), stdin), stdout)
	} else if key, kerr := Key(h.repo, h.args, in); kerr != nil {
		code, rep = h.direct(bytes.NewReader(in), stdout)
		rep.Note = fmt.Sprintf("no cache for this request: %v", kerr)
	} else {
		code, rep = h.cached(key, in, stdout)
		rep.Key = key
	}
	sendReport(getenv(EnvReport), rep)
	return code
}

type hook struct {
	cfg    Config
	git    gitcmd.Git
	env    []string // the GIT_* variables upload-pack set
	args   []string // after "git"
	repo   string
	report string // the server's report socket
	stderr io.Writer
}

func newHook(args []string, getenv func(string) string, stderr io.Writer) (*hook, error) {
	// upload-pack's command line, and nothing else: this hook runs pack-objects only.
	if len(args) < 2 || args[0] != "git" {
		return nil, fmt.Errorf("want `git [--shallow-file F] pack-objects ...`, got %q", args)
	}
	rest := args[1:]
	if rest[0] == "--shallow-file" && len(rest) > 2 {
		rest = rest[2:]
	}
	if rest[0] != "pack-objects" {
		return nil, fmt.Errorf("only runs pack-objects, not %q", rest[0])
	}
	// The server names its git (EnvGit); by hand, git on PATH.
	git, err := gitcmd.Locate(getenv)
	if err != nil {
		return nil, err
	}
	h := &hook{git: gitcmd.Git{Path: git}, args: args[1:], repo: getenv(EnvRepo), report: getenv(EnvReport), stderr: stderr,
		cfg: Config{Dir: getenv(EnvDir)}}
	if v := getenv(EnvBytes); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: not a number of bytes", EnvBytes, v)
		}
		h.cfg.MaxBytes = n
	}
	if v := getenv(EnvEntries); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: not a number of entries", EnvEntries, v)
		}
		h.cfg.MaxEntries = n
	}
	if v := getenv(EnvTTL); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: not a duration", EnvTTL, v)
		}
		h.cfg.TTL = d
	}
	h.cfg = h.cfg.withDefaults()
	return h, nil
}

// command is pack-objects as upload-pack asked for it, in upload-pack's process group
// (which the server kills whole), its progress passed on to upload-pack. The server
// bounds it: upload-pack runs for at most gitcmd.DefaultTimeout.
func (h *hook) command(stdin io.Reader, stdout io.Writer) gitcmd.Cmd {
	return gitcmd.Cmd{Args: h.args, Env: h.env, Stdin: stdin, Stdout: stdout, Stderr: h.stderr, SameGroup: true}
}

// direct runs pack-objects straight through, uncached.
func (h *hook) direct(stdin io.Reader, stdout io.Writer) (int, Report) {
	cw := &countWriter{w: stdout}
	start := time.Now()
	err := h.git.Run(context.Background(), h.command(stdin, cw))
	return exitCode(err, h.stderr), Report{Result: Bypass, GenerationSeconds: time.Since(start).Seconds(), Bytes: cw.n}
}

// cached answers from the cache, waits for a generation in progress, or generates.
func (h *hook) cached(key string, in []byte, stdout io.Writer) (int, Report) {
	c := h.cfg
	waited := false
	for range 3 {
		if f, _, ok := c.Open(key); ok {
			n, err := io.Copy(stdout, f)
			f.Close()
			res := Hit
			if waited {
				res = Waited
			}
			if err != nil {
				return 1, Report{Result: res, Bytes: n} // upload-pack went away
			}
			return 0, Report{Result: res, Bytes: n}
		}
		if c.Uncacheable(key) {
			break
		}
		l, err := c.lockEntry(key)
		if err == nil {
			return h.generate(key, in, l, stdout)
		}
		if !errors.Is(err, ErrBusy) {
			break
		}
		// Another hook generates this pack, at disk speed: wait until it lets go of
		// the lock. The wait ends with this request, whose process group is killed.
		waited = true
		if c.Wait(context.Background(), key) != nil {
			break
		}
	}
	return h.direct(bytes.NewReader(in), stdout)
}

// generate runs pack-objects into the cache entry of key at disk speed while
// streaming the entry out at upload-pack's pace (Fill.Run). l, the key's lock, is
// released as soon as the entry is in place, not when this client has it all.
func (h *hook) generate(key string, in []byte, l *flock, stdout io.Writer) (int, Report) {
	fill, err := h.cfg.newFill(key, l, ".pack")
	if err != nil {
		return h.direct(bytes.NewReader(in), stdout)
	}
	defer fill.Abort()
	sendReport(h.report, Report{Result: Filling, Key: key, Tmp: fill.tmp.Name()})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	start := time.Now()
	cmd, err := h.git.Start(ctx, h.command(bytes.NewReader(in), nil))
	if err != nil {
		return exitCode(err, h.stderr), Report{Result: Bypass, Tmp: fill.tmp.Name()}
	}
	res := fill.Run(cmd.Stdout, stdout, cmd.Wait, stop)
	rep := Report{Result: Bypass, GenerationSeconds: time.Since(start).Seconds(), Bytes: res.Sent, Tmp: fill.tmp.Name()}
	if res.Cached > 0 {
		rep.Result, rep.CachedBytes = Miss, res.Cached
	}
	if res.GenErr != nil && res.WriteErr == nil {
		return exitCode(res.GenErr, h.stderr), rep
	}
	return exitStatus(res.WriteErr), rep
}

func exitStatus(writeErr error) int {
	if writeErr != nil {
		return 1
	}
	return 0
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		return ee.ExitCode()
	}
	fmt.Fprintf(stderr, "mirrorfleet pack-objects-hook: %v\n", err)
	return 128
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// IsHook reports whether args (os.Args) run the hook.
func IsHook(args []string) bool { return len(args) > 1 && args[1] == Arg }

// RunHook runs the hook of os.Args and exits; for main and TestMain.
func RunHook() {
	// A write to a closed standard output must fail with EPIPE, not end the process:
	// the pack still goes into the cache for the clients waiting for it.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	os.Exit(Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
}
