package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/repogen"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/fstrace"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
)

// EFS meters every operation of a client (AWS re:Post, "How do I estimate Elastic
// Throughput mode costs for Amazon EFS"): a data operation (read, write) at 32 KiB at
// least, a metadata operation (open, stat, directory listing, lock, create, rename,
// delete) at 4 KiB at least; data and metadata reads at the read price, writes at the
// write price.
const (
	efsDataMin = 32 << 10
	efsMetaMin = 4 << 10
)

// efsOpEnv, when set, makes this program the helper that runs one mirror operation
// under strace (measureEFSOps) and exits.
const efsOpEnv = "MIRRORFLEET_STORECOST_EFS_OP"

// efsOpSpec is one operation for the helper.
type efsOpSpec struct {
	Op     string // "sync", "maintain", "clone"
	Root   string // the mirrors root
	URL    string
	Digest string // sync: Target.RefsDigest
	Scrub  bool   // maintain: a scrub is due
	Dst    string // clone: where the served clone goes (outside Root)
	Marks  string // directory of the begin and end markers
}

// efsOpResult is what the helper reports on stdout.
type efsOpResult struct {
	Sync     fetch.Result
	Maintain fetch.Maintenance
}

// runEFSOp is the helper: the operation between two markers, nothing else of it
// inside them.
func runEFSOp(raw string) error {
	var s efsOpSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g, err := gitcmd.Find(ctx)
	if err != nil {
		return err
	}
	m, err := mirror.New(mirror.Config{Root: s.Root, Git: g})
	if err != nil {
		return err
	}
	defer m.Close()
	t := fetch.Target{ID: "measured", URL: s.URL, RefsDigest: s.Digest}
	var out efsOpResult
	fstrace.Mark(filepath.Join(s.Marks, "begin"))
	switch s.Op {
	case "sync":
		out.Sync, err = m.Sync(ctx, t)
	case "maintain":
		req := fetch.MaintainRequest{}
		if s.Scrub {
			req.ScrubSince = time.Now().Add(time.Hour)
		}
		out.Maintain, err = m.Maintain(ctx, t, req)
	case "clone":
		var dir string
		if dir, err = m.Path(t); err == nil {
			err = repogen.GitRun(ctx, "", "clone", "-q", "--mirror", "--no-local", "file://"+dir, s.Dst)
		}
	default:
		err = fmt.Errorf("unknown operation %q", s.Op)
	}
	fstrace.Mark(filepath.Join(s.Marks, "end"))
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// efsBench runs the mirror operations of a fleet, each in a process of its own under
// strace, and counts what they do to the mirror tree.
type efsBench struct {
	log    *slog.Logger
	work   string
	root   string
	url    string
	digest string
	m      *mirror.Mirrorer
	n      int
}

// measureEFSOps counts, for each operation the fleet makes on a mirror, the data and
// metadata operations it makes on the mirror tree, from its real system calls (strace:
// every call of the process, its threads and its git children that names a path under
// the mirrors root), on real go-git and git work against a git server on 127.0.0.1.
// The mirror is generated at sizeMB MiB of pack; operation counts barely depend on the
// size (data read through mmap, git's way to read packs, is not a system call: the
// bill takes those bytes from bench/maintenance).
// It also returns the measured mirror's pack bytes (after its first clone).
func measureEFSOps(ctx context.Context, log *slog.Logger, sizeMB int) ([]results.StoreCostEFSOp, int64, error) {
	if _, err := fstrace.Strace(); err != nil {
		return nil, 0, fmt.Errorf("the EFS operation counts come from strace: %w", err)
	}
	work, err := os.MkdirTemp("", "storecost-efs-")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(work)
	upRoot := filepath.Join(work, "up")
	upDir := filepath.Join(upRoot, "example.org", "measured.git")
	gen, err := repogen.Create(ctx, upDir, repogen.PlanFor(int64(sizeMB)<<20), 7)
	if err != nil {
		return nil, 0, err
	}
	srv, stop, err := gittest.Serve(upRoot)
	if err != nil {
		return nil, 0, err
	}
	defer stop()
	g, err := gitcmd.Find(ctx)
	if err != nil {
		return nil, 0, err
	}
	b := &efsBench{log: log, work: work, root: filepath.Join(work, "mirrors"), url: srv.URL + "/example.org/measured.git"}
	if b.m, err = mirror.New(mirror.Config{Root: b.root, Git: g}); err != nil {
		return nil, 0, err
	}
	defer b.m.Close()
	var out []results.StoreCostEFSOp
	add := func(op results.StoreCostEFSOp, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", op.Key, err)
		}
		log.Info("EFS operations", "op", op.Key, "metadata_reads", op.MetaReads, "metadata_writes", op.MetaWrites,
			"data_reads", op.DataReads, "data_writes", op.DataWrites, "metered_kib", (op.MeteredReadBytes+op.MeteredWriteBytes)/1024)
		out = append(out, op)
		return nil
	}
	sync := func(digest string, want func(fetch.Result) error) func() (efsOpResult, error) {
		return func() (efsOpResult, error) {
			r, err := b.run(ctx, efsOpSpec{Op: "sync", Digest: digest})
			if err == nil {
				err = want(r.Sync)
			}
			if err == nil && r.Sync.RefsDigest != "" {
				b.digest = r.Sync.RefsDigest
			}
			return r, err
		}
	}
	// maintain measures a maintenance run, which must have done what want says.
	maintain := func(scrub bool, want func(fetch.Maintenance) bool) func() (efsOpResult, error) {
		return func() (efsOpResult, error) {
			r, err := b.run(ctx, efsOpSpec{Op: "maintain", Scrub: scrub})
			if err == nil && !want(r.Maintain) {
				err = fmt.Errorf("maintenance did %+v", r.Maintain)
			}
			return r, err
		}
	}
	changed := func(r fetch.Result) error {
		if !r.Changed {
			return errors.New("nothing changed")
		}
		return nil
	}
	unchanged := func(r fetch.Result) error {
		if r.Changed {
			return errors.New("changed")
		}
		return nil
	}
	if err := add(b.measure("first_clone", "first clone (Mirrorer.Sync of a repo without a mirror: clone into .tmp, fsync, rename into place)",
		sync("", func(r fetch.Result) error {
			if !r.Cloned {
				return errors.New("not cloned")
			}
			return nil
		}))); err != nil {
		return nil, 0, err
	}
	dir, err := b.m.Path(fetch.Target{ID: "measured", URL: b.url})
	if err != nil {
		return nil, 0, err
	}
	packBytes, _, err := repogen.PackBytes(dir)
	if err != nil {
		return nil, 0, err
	}
	// The first maintenance (a full run: no state yet) is not one the fleet repeats.
	if _, err := b.m.Maintain(ctx, fetch.Target{ID: "measured", URL: b.url}, fetch.MaintainRequest{}); err != nil {
		return nil, 0, err
	}
	steps := []struct {
		key, name string
		before    func() error
		run       func() (efsOpResult, error)
	}{
		{"poll_nochange", "no-change poll: Mirrorer.Sync with the mirror's refs digest, the upstream's refs the same",
			nil, func() (efsOpResult, error) { return sync(b.digest, unchanged)() }},
		{"poll_nochange_nodigest", "no-change poll without the digest (a worker's first poll of a repo after a restart into a store that lacks it): the mirror's refs read",
			nil, sync("", unchanged)},
		{"maintain_unchanged", "maintenance of an unchanged mirror (Mirrorer.Maintain: lock, state, fingerprint of HEAD, packed-refs, loose refs, pack names; no git run)",
			nil, maintain(false, func(m fetch.Maintenance) bool { return m.Unchanged })},
		{"fetch_change", "fetch with changes: Mirrorer.Sync with the digest after one small commit upstream (go-git's negotiation, the new pack written through the atomic file system, refs updated, the new commits read)",
			func() error { return repogen.PushSmallChange(ctx, upDir, gen) },
			func() (efsOpResult, error) { return sync(b.digest, changed)() }},
		{"maintain_changed", "maintenance of a changed mirror: Mirrorer.Maintain after three fetches (pack-refs, multi-pack-index write, repack and expire, commit-graph over the new packs)",
			func() error {
				for range 2 {
					if err := repogen.PushSmallChange(ctx, upDir, gen); err != nil {
						return err
					}
					r, err := b.m.Sync(ctx, fetch.Target{ID: "measured", URL: b.url})
					if err != nil {
						return err
					}
					b.digest = r.RefsDigest
				}
				return nil
			},
			maintain(false, func(m fetch.Maintenance) bool { return !m.Unchanged && !m.Fscked })},
		{"scrub", "scrub: Mirrorer.Maintain with its scrub slot begun (geometric repack with a bitmap, commit-graph from all refs, connectivity check)",
			nil, maintain(true, func(m fetch.Maintenance) bool { return m.Fscked })},
		{"clone_served", "clone served: git clone --mirror --no-local of the mirror (git upload-pack and pack-objects reading it, as the git server runs them on a cache miss)",
			nil, func() (efsOpResult, error) {
				return b.run(ctx, efsOpSpec{Op: "clone", Dst: filepath.Join(b.work, fmt.Sprintf("served-%d", b.n))})
			}},
	}
	for _, s := range steps {
		if s.before != nil {
			if err := s.before(); err != nil {
				return nil, 0, fmt.Errorf("%s: %w", s.key, err)
			}
		}
		if err := add(b.measure(s.key, s.name, s.run)); err != nil {
			return nil, 0, err
		}
	}
	return out, packBytes, nil
}

// run runs spec (Root, URL and Marks filled in) in a helper process under strace and
// returns its result; the record is left at b.trace().
func (b *efsBench) run(ctx context.Context, spec efsOpSpec) (efsOpResult, error) {
	b.n++
	spec.Root, spec.URL, spec.Marks = b.root, b.url, b.marks()
	if err := os.MkdirAll(spec.Marks, 0o755); err != nil {
		return efsOpResult{}, err
	}
	raw, _ := json.Marshal(spec)
	self, err := os.Executable()
	if err != nil {
		return efsOpResult{}, err
	}
	cmd, err := fstrace.Command(ctx, b.trace(), self)
	if err != nil {
		return efsOpResult{}, err
	}
	cmd.Env = append(os.Environ(), efsOpEnv+"="+string(raw))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
		}
		return efsOpResult{}, err
	}
	var r efsOpResult
	if err := json.Unmarshal(stdout, &r); err != nil {
		return r, fmt.Errorf("helper said %q: %w", stdout, err)
	}
	return r, nil
}

func (b *efsBench) marks() string { return filepath.Join(b.work, fmt.Sprintf("marks-%d", b.n)) }
func (b *efsBench) trace() string { return filepath.Join(b.work, fmt.Sprintf("trace-%d", b.n)) }

// measure runs op and meters the calls it made under the mirrors root.
func (b *efsBench) measure(key, name string, op func() (efsOpResult, error)) (results.StoreCostEFSOp, error) {
	m := results.StoreCostEFSOp{Key: key, Name: name}
	if _, err := op(); err != nil {
		return m, err
	}
	calls, err := fstrace.ParseFile(b.trace())
	if err != nil {
		return m, err
	}
	during, err := fstrace.Between(calls, filepath.Join(b.marks(), "begin"), filepath.Join(b.marks(), "end"))
	if err != nil {
		return m, err
	}
	meterEFS(&m, fstrace.Under(during, b.root))
	return m, nil
}

// callClass is what EFS makes of a system call on its files: a data read or write, a
// metadata read or write, or nothing it meters (a descriptor's bookkeeping in the
// client, a mapping, whose page faults are data reads strace does not see).
type callClass int

const (
	notMetered callClass = iota
	dataRead
	dataWrite
	metaRead
	metaWrite
)

// classify says how EFS meters one call, with no NFS client cache: every call that
// needs the server is an operation of its own (a real client caches attributes and
// directory entries for a few seconds and coalesces writes, so it sends fewer; the
// bill takes none of that).
func classifyCall(c fstrace.Call) callClass {
	switch c.Name {
	case "read", "pread64", "readv", "preadv", "preadv2", "copy_file_range", "sendfile":
		return dataRead
	case "write", "pwrite64", "writev", "pwritev", "pwritev2":
		return dataWrite
	case "creat":
		return metaWrite
	case "openat", "open", "openat2":
		if strings.Contains(c.Args, "O_CREAT") || strings.Contains(c.Args, "O_TRUNC") {
			return metaWrite // creates (or truncates) a file
		}
		return metaRead
	case "newfstatat", "fstat", "stat", "lstat", "statx", "access", "faccessat", "faccessat2",
		"readlink", "readlinkat", "getdents64", "getdents", "statfs", "fstatfs", "close", "getxattr", "lgetxattr", "fgetxattr":
		return metaRead
	case "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
		"link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "fchownat", "lchown",
		"utimensat", "utimes", "futimesat", "truncate", "ftruncate", "fallocate", "fsync", "fdatasync", "sync_file_range",
		"flock", "setxattr", "removexattr":
		return metaWrite
	case "fcntl":
		return notMetered // locks are flock here; F_SETFD and the like stay in the client
	}
	return notMetered
}

// meterEFS fills m from the calls under the root.
func meterEFS(m *results.StoreCostEFSOp, calls []fstrace.Call) {
	by := map[string]int{}
	paths := map[string]bool{}
	for _, c := range calls {
		class := classifyCall(c)
		if class == notMetered {
			if c.Name == "mmap" && c.Errno == "" {
				m.Mappings++
				m.MappedBytes += c.MapLen
			}
			continue
		}
		if c.Name == "close" && c.Errno != "" {
			continue
		}
		by[c.Name]++
		for _, p := range c.Paths {
			paths[p] = true
		}
		n := max(c.Ret, 0)
		switch class {
		case dataRead:
			m.DataReads++
			m.DataReadBytes += n
			m.MeteredReadBytes += max(n, efsDataMin)
		case dataWrite:
			m.DataWrites++
			m.DataWriteBytes += n
			m.MeteredWriteBytes += max(n, efsDataMin)
		case metaRead:
			m.MetaReads++
			m.MeteredReadBytes += efsMetaMin
		case metaWrite:
			m.MetaWrites++
			m.MeteredWriteBytes += efsMetaMin
		}
	}
	m.Paths = len(paths)
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range by {
			if !yield(k) {
				return
			}
		}
	}) {
		m.Calls = append(m.Calls, results.StoreCostCallCount{Call: name, Count: by[name]})
	}
}
