// Package fstrace reads what a process does to files from strace's record of its
// system calls: the calls on files and descriptors of a process, its threads and its
// children (git's included), each with the paths it names, resolved. Tests use it to
// prove a path untouched; bench/storecost to count the operations a file system
// meters.
package fstrace

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Call is one system call on a file or a descriptor.
type Call struct {
	PID  int
	Name string // as strace names it: openat, newfstatat, read, getdents64, ...
	// Paths are the files it names: path arguments resolved against their directory
	// descriptor or the caller's working directory, and the files behind descriptor
	// arguments (strace -y). Symbolic links in a path argument are not resolved.
	Paths []string
	// Ret is the return value (bytes for a read or write, a descriptor for an open);
	// Errno names the error of a failed call (Ret is then -1).
	Ret   int64
	Errno string
	// MapLen is the length of a mmap (its second argument); 0 for other calls.
	MapLen int64
	// Args are the arguments as strace printed them (flags included: O_CREAT, ...).
	Args string
}

// Strace is the strace binary, or an error saying it is missing.
func Strace() (string, error) {
	p, err := exec.LookPath("strace")
	if err != nil {
		return "", fmt.Errorf("strace is not installed (apt-get install strace): %w", err)
	}
	return p, nil
}

// ForTest is the strace binary for a test: $MIRRORFLEET_STRACE when set (make unit sets
// it, and then a missing binary fails the test), else strace on PATH; without either
// the test skips, saying what is missing.
func ForTest(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("MIRRORFLEET_STRACE"); p != "" {
		if _, err := os.Stat(p); err != nil {
			tb.Fatalf("MIRRORFLEET_STRACE: %v", err)
		}
		return p
	}
	p, err := Strace()
	if err != nil {
		tb.Skip(err)
	}
	return p
}

// Args are strace's arguments that record the file and descriptor calls of the
// command after them, with its threads and children, into out: one line a call, every
// descriptor with its path, no buffer contents.
func Args(out string) []string {
	return []string{"-f", "-y", "-qq", "-s", "0", "-e", "trace=%file,%desc", "-o", out}
}

// Command is name args run under strace, recording into out.
func Command(ctx context.Context, out, name string, args ...string) (*exec.Cmd, error) {
	st, err := Strace()
	if err != nil {
		return nil, err
	}
	return exec.CommandContext(ctx, st, append(append(Args(out), "--", name), args...)...), nil
}

// Mark names path in a system call the record will show: a marker for Between. The
// path need not exist.
func Mark(path string) { _, _ = os.Lstat(path) }

// ParseFile parses the record strace wrote to path.
func ParseFile(path string) ([]Call, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

var (
	linePID  = regexp.MustCompile(`^(\d+)\s+(.*)$`)
	callHead = regexp.MustCompile(`^([a-z0-9_]+)\((.*)$`)
	resumed  = regexp.MustCompile(`^<\.\.\. ([a-z0-9_]+) resumed>(.*)$`)
	// A descriptor or AT_FDCWD with its path: 3</a/b>, AT_FDCWD</cwd>.
	fdPath = regexp.MustCompile(`(\d+|AT_FDCWD)<([^<>]*)>`)
	// What follows ") = ": the value (a descriptor's path after it), an errno name.
	retRe = regexp.MustCompile(`^(0x[0-9a-f]+|-?\d+|\?)(?:<[^<>]*>)?(?:\s+([A-Z][A-Z0-9_]+))?`)
)

// Parse reads strace's record (as Args writes it). A call split by another thread's
// (<unfinished ...>, <... resumed>) is joined and kept where it began.
func Parse(r io.Reader) ([]Call, error) {
	var calls []Call
	pending := map[int]int{} // pid → index in raw of its unfinished call
	cwd := map[int]string{}  // what AT_FDCWD last said of a pid's working directory
	var raw []string         // each call's whole text
	var pids []int
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	for sc.Scan() {
		m := linePID.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		text := m[2]
		switch {
		case strings.HasPrefix(text, "---"), strings.HasPrefix(text, "+++"):
			continue
		case strings.HasPrefix(text, "<..."):
			i, ok := pending[pid]
			rm := resumed.FindStringSubmatch(text)
			if !ok || rm == nil {
				continue // a call begun before the record
			}
			raw[i] += rm[2]
			delete(pending, pid)
			continue
		}
		if before, ok := strings.CutSuffix(text, "<unfinished ...>"); ok {
			pending[pid] = len(raw)
			raw = append(raw, before)
			pids = append(pids, pid)
			continue
		}
		raw = append(raw, text)
		pids = append(pids, pid)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for i, text := range raw {
		c, ok := parseCall(pids[i], text, cwd)
		if ok {
			calls = append(calls, c)
		}
	}
	return calls, nil
}

// parseCall reads one joined call. cwd follows each pid's working directory.
func parseCall(pid int, text string, cwd map[int]string) (Call, bool) {
	h := callHead.FindStringSubmatch(text)
	if h == nil {
		return Call{}, false
	}
	c := Call{PID: pid, Name: h[1]}
	args := h[2]
	if i := strings.LastIndex(args, ") = "); i >= 0 {
		if rm := retRe.FindStringSubmatch(args[i+4:]); rm != nil {
			c.Ret, _ = strconv.ParseInt(rm[1], 0, 64) // "?" (no return) reads as 0
			c.Errno = rm[2]
		}
		args = args[:i]
	}
	for _, m := range fdPath.FindAllStringSubmatch(args, -1) {
		if m[1] == "AT_FDCWD" {
			cwd[pid] = m[2]
		}
	}
	if c.Name == "chdir" && c.Errno == "" {
		if s, ok := firstString(args); ok {
			cwd[pid] = resolve(cwd[pid], s)
		}
	}
	c.Args = args
	c.Paths = callPaths(args, cwd[pid])
	if c.Name == "mmap" {
		if f := strings.Split(args, ", "); len(f) > 1 {
			c.MapLen, _ = strconv.ParseInt(f[1], 0, 64)
		}
	}
	return c, true
}

// callPaths are the files a call's arguments name: each quoted path resolved against
// the descriptor (or AT_FDCWD) just before it, else the working directory wd; each
// other descriptor's file. A descriptor followed by an empty string (AT_EMPTY_PATH, or
// a buffer strace printed empty: -s 0) names the descriptor's file.
func callPaths(args, wd string) []string {
	type token struct {
		fd, path string // a descriptor and its file
		str      string // or a quoted string
		isStr    bool
	}
	var toks []token
	for i := 0; i < len(args); {
		q := strings.IndexByte(args[i:], '"')
		loc := fdPath.FindStringSubmatchIndex(args[i:])
		switch {
		case q >= 0 && (loc == nil || q < loc[0]):
			s, n := quoted(args[i+q:])
			toks = append(toks, token{str: s, isStr: true})
			i += q + n
		case loc != nil:
			toks = append(toks, token{fd: args[i+loc[2] : i+loc[3]], path: args[i+loc[4] : i+loc[5]]})
			i += loc[1]
		default:
			i = len(args)
		}
	}
	var out []string
	dir, dirFile := wd, ""
	for k, t := range toks {
		if t.isStr {
			if t.str != "" {
				out = append(out, resolve(dir, t.str))
			} else if dirFile != "" {
				out = append(out, dirFile)
			}
			dir, dirFile = wd, ""
			continue
		}
		if k+1 < len(toks) && toks[k+1].isStr {
			dir = t.path // the directory of the path after it
			if t.fd != "AT_FDCWD" {
				dirFile = t.path
			}
			continue
		}
		if t.fd != "AT_FDCWD" {
			out = append(out, t.path)
		}
	}
	return out
}

// quoted reads a C string strace printed at the start of s; n is its length in s
// (with a trailing "..." of a truncated one).
func quoted(s string) (string, int) {
	var b strings.Builder
	i := 1
	for i < len(s) && s[i] != '"' {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'x':
				if i+2 < len(s) {
					if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
						b.WriteByte(byte(v))
						i += 2
						break
					}
				}
				b.WriteByte('x')
			default:
				b.WriteByte(s[i])
			}
			i++
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	i++ // the closing quote
	if strings.HasPrefix(s[min(i, len(s)):], "...") {
		i += 3
	}
	return b.String(), min(i, len(s))
}

func firstString(args string) (string, bool) {
	i := strings.IndexByte(args, '"')
	if i < 0 {
		return "", false
	}
	s, _ := quoted(args[i:])
	return s, true
}

func resolve(dir, p string) string {
	if filepath.IsAbs(p) || dir == "" {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

// Under keeps the calls that name root or a path under it.
func Under(calls []Call, root string) []Call {
	root = filepath.Clean(root)
	var out []Call
	for _, c := range calls {
		for _, p := range c.Paths {
			if p == root || strings.HasPrefix(p, root+string(filepath.Separator)) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// Between is the calls after the first that names begin and before the first after
// it that names end (markers: Mark).
func Between(calls []Call, begin, end string) ([]Call, error) {
	from := -1
	for i, c := range calls {
		for _, p := range c.Paths {
			switch {
			case from < 0 && p == begin:
				from = i
			case from >= 0 && p == end:
				return calls[from+1 : i], nil
			}
		}
	}
	if from < 0 {
		return nil, errors.New("fstrace: no call names the begin marker " + begin)
	}
	return nil, errors.New("fstrace: no call names the end marker " + end)
}
