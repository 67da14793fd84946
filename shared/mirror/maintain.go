package mirror

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/gitbin"
)

// MaintainOptions configure Maintain.
type MaintainOptions struct {
	// Fsck checks connectivity after the repack (it always does when a step failed).
	Fsck bool
}

// MaintainReport is what Maintain did.
type MaintainReport struct {
	PacksBefore, PacksAfter int
	Fscked                  bool
	// Corrupt: the connectivity check failed. Maintain does nothing more about it;
	// Mirrorer.Maintain moves such a mirror to the trash and clones it again.
	Corrupt bool
	Took    time.Duration
}

// gitConfig is passed to every maintenance command: the mirror may belong to another
// uid on shared storage (safe.directory); git must not start its own background gc;
// nothing serves the dumb protocol (no info/packs); bitmaps carry name-hash caches
// (pack reuse for clones of a subset); and what git writes is fsynced.
var gitConfig = []string{
	"-c", "safe.directory=*",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "repack.updateServerInfo=false",
	"-c", "repack.writeBitmaps=true",
	"-c", "pack.writeBitmapHashCache=true",
	"-c", "core.fsync=committed,derived-metadata",
}

// Maintain keeps the bare repository at dir in shape for serving, with git:
//
//  1. git pack-refs --all --prune: the loose refs go-git writes go into packed-refs;
//  2. git repack --geometric=2 -d --write-midx --write-bitmap-index: the packs go-git
//     leaves (one per fetch) are rolled up so each is at least twice the size of the
//     next smaller one, with a multi-pack index and its reachability bitmap (a mirror
//     with one big pack keeps it and gains the index and bitmap);
//  3. git commit-graph write --split --reachable: an incremental commit-graph chain;
//  4. git fsck --connectivity-only, with opt.Fsck or after a failed step: a failure
//     marks the mirror Corrupt.
//
// Readers never see a torn state: git writes every file under a temporary name and
// renames it in, and deletes rolled-up packs only after the new pack and index are in
// place. The caller must keep fetches out meanwhile (Mirrorer.Maintain holds the
// mirror's lock); a benchmark may maintain a directory it owns.
func Maintain(ctx context.Context, git gitbin.Git, dir string, opt MaintainOptions) (MaintainReport, error) {
	start := time.Now()
	rep := MaintainReport{PacksBefore: countPacks(dir)}
	if git.Path == "" {
		return rep, errors.New("maintenance needs git (none configured)")
	}
	var stepErr error
	for _, step := range [][]string{
		{"pack-refs", "--all", "--prune"},
		{"repack", "-q", "--geometric=2", "-d", "--write-midx", "--write-bitmap-index"},
		{"commit-graph", "write", "--split", "--reachable", "--no-progress"},
	} {
		if err := execGit(ctx, git, dir, step...); err != nil {
			stepErr = err
			break
		}
	}
	if ctx.Err() == nil && (opt.Fsck || stepErr != nil) {
		rep.Fscked = true
		if err := execGit(ctx, git, dir, "fsck", "--connectivity-only", "--no-dangling", "--no-progress"); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) && ctx.Err() == nil && ee.Exited() {
				rep.Corrupt = true
			}
			stepErr = errors.Join(stepErr, err)
		}
	}
	rep.PacksAfter = countPacks(dir)
	rep.Took = time.Since(start)
	return rep, stepErr
}

// execGit runs one maintenance command in dir with a clean environment (no GIT_*
// variables from ours, no system or user config). The error carries git's stderr.
func execGit(ctx context.Context, git gitbin.Git, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, git.Path, append(append([]string{}, gitConfig...), args...)...)
	cmd.Dir = dir
	env := []string{"GIT_DIR=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "LC_ALL=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	// Cancelled (a worker stopping): ask git to stop; it leaves only temp files,
	// which the next repack ignores and gc would remove.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var stderr tailBuffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s: %w: %s", args[0], err, bytes.TrimSpace(stderr.b))
	}
	return nil
}

// tailBuffer keeps the last 4 KiB written to it (git's stderr for error messages).
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	const keep = 4 << 10
	t.b = append(t.b, p...)
	if len(t.b) > keep {
		t.b = t.b[len(t.b)-keep:]
	}
	return len(p), nil
}

// countPacks is the number of packs in the repository at dir.
func countPacks(dir string) int {
	entries, err := os.ReadDir(filepath.Join(dir, "objects", "pack"))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "pack-") && strings.HasSuffix(e.Name(), ".pack") {
			n++
		}
	}
	return n
}

// maintState is what a mirror's maintenance remembers, in <root>/.locks/<path>.maint
// (shared storage: it moves with the repo from worker to worker), read and written
// under the mirror's lock.
type maintState struct {
	LastRun  time.Time `json:"last_run"`
	LastFsck time.Time `json:"last_fsck"`
}

func (m *Mirrorer) statePath(dir string) string {
	return strings.TrimSuffix(m.lockPath(dir), ".lock") + ".maint"
}

// readState returns the recorded state; a missing or unreadable one is zero (the
// mirror is then maintained, and checked, as if never before).
func (m *Mirrorer) readState(dir string) maintState {
	var st maintState
	if b, err := os.ReadFile(m.statePath(dir)); err == nil {
		_ = json.Unmarshal(b, &st)
	}
	return st
}

func (m *Mirrorer) writeState(dir string, st maintState) error {
	b, _ := json.Marshal(st)
	p := m.statePath(dir)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

func (m *Mirrorer) removeState(dir string) { _ = os.Remove(m.statePath(dir)) }

// Maintain maintains t's mirror (see the function Maintain) under its lock: a busy
// error while a sync holds it, a conflict if the directory belongs to another URL,
// Skipped if there is no mirror or it was maintained since req.Since. A mirror that
// fails its connectivity check is corrupt: it is moved to the trash and cloned again
// at once, still under the lock (Recloned; logged).
func (m *Mirrorer) Maintain(ctx context.Context, t fetch.Target, req fetch.MaintainRequest) (fetch.Maintenance, error) {
	var out fetch.Maintenance
	if m.git.Path == "" {
		return out, errors.New("mirror maintenance needs git: Config.Git is not set")
	}
	dir, err := m.Path(t)
	if err != nil {
		return out, err
	}
	u := redact(t.URL)
	lk, err := tryLock(m.lockPath(dir))
	if errors.Is(err, errLocked) {
		return out, busyErr(u)
	}
	if err != nil {
		return out, classify(fmt.Errorf("maintain %s: lock: %w", u, err))
	}
	defer lk.unlock(false)
	if !isDir(dir) {
		out.Skipped = true
		return out, nil
	}
	if err := checkOrigin(dir, t.URL); err != nil {
		return out, err
	}
	st := m.readState(dir)
	if !req.Since.IsZero() && !st.LastRun.Before(req.Since) && !req.Fsck {
		out.Skipped = true
		return out, nil
	}
	now := time.Now()
	fsck := req.Fsck || (req.FsckEvery > 0 && now.Sub(st.LastFsck) >= req.FsckEvery)
	rep, err := Maintain(ctx, m.git, dir, MaintainOptions{Fsck: fsck})
	out.PacksBefore, out.PacksAfter, out.Fscked = rep.PacksBefore, rep.PacksAfter, rep.Fscked
	if rep.Corrupt {
		return m.reclone(ctx, t, dir, out, err)
	}
	if err != nil {
		m.log.Warn("mirror maintenance failed", "id", t.ID, "url", u, "err", err, "took", rep.Took)
		return out, &fetch.Error{Kind: fetch.KindOther, Err: fmt.Errorf("maintain %s: %w", u, err)}
	}
	st.LastRun = now
	if fsck {
		st.LastFsck = now
	}
	if err := m.writeState(dir, st); err != nil {
		m.log.Warn("mirror maintenance state", "id", t.ID, "err", err)
	}
	m.log.Info("mirror maintained", "id", t.ID, "url", u, "packs_before", rep.PacksBefore,
		"packs_after", rep.PacksAfter, "fsck", rep.Fscked, "took", rep.Took)
	return out, nil
}

// reclone moves a corrupt mirror to the trash and clones it again; the caller holds
// the lock. If the clone fails the repo simply has no mirror: its next sync clones.
func (m *Mirrorer) reclone(ctx context.Context, t fetch.Target, dir string, out fetch.Maintenance, why error) (fetch.Maintenance, error) {
	u := redact(t.URL)
	dst, err := m.moveToTrash(dir, t.ID)
	if err != nil {
		return out, classify(fmt.Errorf("maintain %s: move corrupt mirror aside: %w", u, err))
	}
	m.removeState(dir)
	m.log.Warn("mirror corrupt: moved to the trash, cloning it again", "id", t.ID, "url", u, "to", dst, "why", why)
	if _, err := m.clone(ctx, t, dir); err != nil {
		err = classify(fmt.Errorf("maintain %s: re-clone: %w", u, err))
		m.log.Warn("re-clone of a corrupt mirror failed; the next sync clones it", "id", t.ID, "url", u, "err", err)
		return out, err
	}
	out.Recloned = true
	// A fresh clone is one pack without index or bitmap: give it both now.
	if _, err := Maintain(ctx, m.git, dir, MaintainOptions{}); err != nil {
		m.log.Warn("maintenance of the re-clone", "id", t.ID, "err", err)
	}
	out.PacksAfter = countPacks(dir)
	now := time.Now()
	if err := m.writeState(dir, maintState{LastRun: now, LastFsck: now}); err != nil {
		m.log.Warn("mirror maintenance state", "id", t.ID, "err", err)
	}
	m.log.Info("corrupt mirror re-cloned", "id", t.ID, "url", u)
	return out, nil
}
