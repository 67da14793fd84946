package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
)

// MaintainOptions configure Maintain.
type MaintainOptions struct {
	// Full is the whole-mirror run (a scrub): geometric repack with a reachability
	// bitmap, the commit-graph from all refs, and the connectivity check. Each of
	// these reads the mirror's old packs through; the run without Full reads only what
	// changed since Known (and the packs' small .idx files).
	Full bool
	// Known are the pack names (pack-<hash>.pack) at the end of the last maintenance
	// (without Full). The packs not in Known are the new ones: they join the
	// multi-pack index, are rolled up, and the commit-graph takes their commits; with
	// Known nil every pack is new (Mirrorer.Maintain asks for Full instead).
	Known []string
	// Around, if set, runs each git step (a benchmark measuring what each one reads):
	// it must call step once and return its error.
	Around func(name string, step func() error) error
}

// MaintainReport is what Maintain did.
type MaintainReport struct {
	PacksBefore, PacksAfter int
	Fscked                  bool
	// Steps are the git commands run, by name ("pack-refs", "repack", "midx-write",
	// "midx-repack", "midx-expire", "commit-graph", "fsck"), in order.
	Steps []string
	// Corrupt: the connectivity check failed. Maintain does nothing more about it;
	// Mirrorer.Maintain moves such a mirror to the trash and clones it again.
	Corrupt bool
	Took    time.Duration
}

// gitConfig is passed to every maintenance command: the mirror may belong to another
// uid on shared storage (safe.directory); git must not start its own background gc;
// nothing serves the dumb protocol (no info/packs); bitmaps, where written, carry
// name-hash caches (pack reuse for clones of a subset); and what git writes is fsynced.
var gitConfig = []string{
	"-c", "safe.directory=*",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "repack.updateServerInfo=false",
	"-c", "pack.writeBitmapHashCache=true",
	"-c", "core.fsync=committed,derived-metadata",
}

// Maintain keeps the bare repository at dir in shape for serving, with git, doing only
// what the change since the last maintenance needs (docs/adr/0023):
//
//  1. git pack-refs --all --prune, if there are loose refs (go-git writes one per
//     changed ref): they go into packed-refs; the refs already packed keep their
//     peeled values, so only the new tips are read.
//
// Then, on a changed mirror (not opt.Full), for the packs not in opt.Known (one per
// go-git fetch), each step reading the new packs and the .idx files only:
//
//  2. git multi-pack-index write: the new packs join the multi-pack index;
//  3. git multi-pack-index repack --batch-size=B, then expire: the packs smaller than
//     B (twice the new packs' bytes) are rolled up into one, listed object by object
//     (no history walk), and the rolled-up ones deleted; the big old packs are left
//     alone. (git repack --geometric would read them: it walks the new commits'
//     trees into the old packs.) The multi-pack bitmap is gone until the next scrub;
//  4. git commit-graph write --split --stdin-packs: the commits of the new packs, a
//     new layer of the chain.
//
// With opt.Full (the scrub), each of which reads the old packs through:
//
//  2. git repack --geometric=2 -d --write-midx --write-bitmap-index: packs rolled up
//     geometrically, the multi-pack index and its reachability bitmap (the bitmap
//     walks the whole history);
//  3. git commit-graph write --split --reachable;
//  4. git fsck --connectivity-only (also after any failed step): a failure marks the
//     mirror Corrupt.
//
// Readers never see a torn state: git writes every file under a temporary name and
// renames it in, and deletes rolled-up packs only after the new pack and index are in
// place. The caller must keep fetches out meanwhile (Mirrorer.Maintain holds the
// mirror's lock); a benchmark may maintain a directory it owns.
func Maintain(ctx context.Context, git gitcmd.Git, dir string, opt MaintainOptions) (MaintainReport, error) {
	start := time.Now()
	packs := packNames(dir)
	rep := MaintainReport{PacksBefore: len(packs)}
	if git.Path == "" {
		return rep, errors.New("maintenance needs git (none configured)")
	}
	var stepErr error
	run := func(name, stdin string, args ...string) {
		if stepErr != nil || ctx.Err() != nil {
			return
		}
		rep.Steps = append(rep.Steps, name)
		stepErr = around(opt, name, func() error { return execGit(ctx, git, dir, stdin, args...) })
	}
	if opt.Full || hasLooseRefs(dir) {
		run("pack-refs", "", "pack-refs", "--all", "--prune")
	}
	if opt.Full {
		run("repack", "", "repack", "-q", "--geometric=2", "-d", "--write-midx", "--write-bitmap-index")
		run("commit-graph", "", "commit-graph", "write", "--split", "--reachable", "--no-progress")
	} else if fresh := newNames(packs, opt.Known); len(fresh) > 0 {
		run("midx-write", "", "multi-pack-index", "write", "--no-progress")
		if len(packs) > 1 {
			batch := 2*packBytes(dir, fresh) + 1
			run("midx-repack", "", "multi-pack-index", "repack", "--no-progress", fmt.Sprintf("--batch-size=%d", batch))
			run("midx-expire", "", "multi-pack-index", "expire", "--no-progress")
		}
		var idx strings.Builder // --stdin-packs takes the packs' .idx names
		for _, p := range newNames(packNames(dir), opt.Known) {
			idx.WriteString(strings.TrimSuffix(p, ".pack") + ".idx\n")
		}
		if idx.Len() > 0 {
			run("commit-graph", idx.String(), "commit-graph", "write", "--split", "--stdin-packs", "--no-progress")
		}
	}
	if ctx.Err() == nil && (opt.Full || stepErr != nil) {
		rep.Fscked = true
		rep.Steps = append(rep.Steps, "fsck")
		if err := around(opt, "fsck", func() error {
			return execGit(ctx, git, dir, "", "fsck", "--connectivity-only", "--no-dangling", "--no-progress")
		}); err != nil {
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

// packBytes is the size of the named packs of the repository at dir.
func packBytes(dir string, names []string) int64 {
	var n int64
	for _, p := range names {
		if fi, err := os.Stat(filepath.Join(dir, "objects", "pack", p)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func around(opt MaintainOptions, name string, step func() error) error {
	if opt.Around == nil {
		return step()
	}
	return opt.Around(name, step)
}

// execGit runs one maintenance command in dir (gitcmd: no environment or
// configuration of ours). The error carries git's stderr.
func execGit(ctx context.Context, git gitcmd.Git, dir, stdin string, args ...string) error {
	c := gitcmd.Cmd{Args: append(slices.Clone(gitConfig), args...), Dir: dir, Env: []string{"GIT_DIR=" + dir},
		// Cancelled (a worker stopping): git is asked to stop first; it leaves only
		// temp files, which the next repack ignores and gc would remove.
		Grace: stopGrace}
	if stdin != "" {
		c.Stdin = strings.NewReader(stdin)
	}
	return git.Run(ctx, c)
}

// stopGrace is how long a cancelled maintenance command has to stop before it is
// killed: git removes its temporary files at once.
const stopGrace = 10 * time.Second

// countPacks is the number of packs in the repository at dir.
func countPacks(dir string) int { return len(packNames(dir)) }

// packNames are the names of the packs (pack-<hash>.pack) in the repository at dir,
// sorted: one directory listing, no file opened.
func packNames(dir string) []string {
	entries, err := os.ReadDir(filepath.Join(dir, "objects", "pack"))
	if err != nil {
		return nil
	}
	out := []string{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "pack-") && strings.HasSuffix(e.Name(), ".pack") {
			out = append(out, e.Name())
		}
	}
	return out // ReadDir sorts by name
}

// newNames are the names in cur that are not in old.
func newNames(cur, old []string) []string {
	var out []string
	for _, n := range cur {
		if !slices.Contains(old, n) {
			out = append(out, n)
		}
	}
	return out
}

// hasLooseRefs says whether any ref of the mirror at dir is a file under refs/ (not
// yet in packed-refs).
func hasLooseRefs(dir string) bool {
	found := false
	_ = filepath.WalkDir(filepath.Join(dir, "refs"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			found = true
			return fs.SkipAll
		}
		return nil
	})
	return found
}

// fingerprint is what tells a changed mirror from an unchanged one without git and
// without reading any object: a hash of HEAD, packed-refs and every loose ref (names
// and contents), and the pack names. A fetch that brings anything changes a ref and
// adds a pack; maintenance changes the files but not what they say, and records the
// fingerprint it leaves.
type fingerprint struct {
	Refs  string   `json:"refs"`
	Packs []string `json:"packs"`
}

func (f fingerprint) equal(g fingerprint) bool {
	return f.Refs == g.Refs && slices.Equal(f.Packs, g.Packs)
}

// readFingerprint reads dir's fingerprint: HEAD, packed-refs, the loose refs and the
// pack directory's listing.
func readFingerprint(dir string) (fingerprint, error) {
	h := sha256.New()
	for _, name := range []string{"HEAD", "packed-refs"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fingerprint{}, err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	err := filepath.WalkDir(filepath.Join(dir, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return fingerprint{}, err
	}
	return fingerprint{Refs: hex.EncodeToString(h.Sum(nil)), Packs: packNames(dir)}, nil
}

// maintState is what a mirror's maintenance remembers, in <root>/.locks/<path>.maint
// (shared storage: it moves with the repo from worker to worker), read and written
// under the mirror's lock.
type maintState struct {
	LastRun  time.Time `json:"last_run"`
	LastFsck time.Time `json:"last_fsck"` // the last full run (scrub)
	// Failed: the last run failed; the next one is a full run.
	Failed bool `json:"failed,omitempty"`
	// Fingerprint is the mirror's at the end of the last run; nil: none recorded (the
	// next run is a full one). FsckFingerprint is its fingerprint at the end of the
	// last full run (a scrub asked for only if it changed since compares with it).
	Fingerprint     *fingerprint `json:"fingerprint,omitempty"`
	FsckFingerprint *fingerprint `json:"fsck_fingerprint,omitempty"`
}

// planMaintenance decides, from the recorded state and the mirror's fingerprint now
// (nil: unreadable), whether a maintenance runs git at all, and how. A full run when
// asked (req.Fsck), after a failure, when the scrub is due (the last one before
// req.ScrubSince; with req.ScrubChangedOnly, only if the mirror changed since that
// one) or nothing is recorded; nothing when the fingerprint is the one the last run
// left; else a run over what changed.
func planMaintenance(st maintState, cur *fingerprint, req fetch.MaintainRequest) (run bool, opt MaintainOptions) {
	scrub := !req.ScrubSince.IsZero() && st.LastFsck.Before(req.ScrubSince)
	if scrub && req.ScrubChangedOnly && cur != nil && st.FsckFingerprint != nil && cur.equal(*st.FsckFingerprint) {
		scrub = false // as the last scrub left it: nothing written since
	}
	if req.Fsck || st.Failed || st.Fingerprint == nil || st.LastFsck.IsZero() || scrub {
		return true, MaintainOptions{Full: true}
	}
	if cur != nil && cur.equal(*st.Fingerprint) {
		return false, MaintainOptions{}
	}
	return true, MaintainOptions{Known: st.Fingerprint.Packs}
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
// Skipped if there is no mirror or it was maintained since req.Since, Unchanged (no
// git run, no object read) if its fingerprint is the one its last maintenance left
// and no full run is due (planMaintenance). A mirror that
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
	var cur *fingerprint
	if fp, err := readFingerprint(dir); err == nil {
		cur = &fp
	} else {
		m.log.Warn("mirror fingerprint", "id", t.ID, "err", err)
	}
	run, opt := planMaintenance(st, cur, req)
	opt.Around = m.around
	if !run {
		// Nothing changed since the last run: no git process, no pack read, and no
		// state written.
		out.Unchanged = true
		out.PacksBefore, out.PacksAfter = len(cur.Packs), len(cur.Packs)
		return out, nil
	}
	now := m.now()
	rep, err := Maintain(ctx, m.git, dir, opt)
	out.PacksBefore, out.PacksAfter, out.Fscked, out.Steps = rep.PacksBefore, rep.PacksAfter, rep.Fscked, rep.Steps
	if rep.Corrupt {
		return m.reclone(ctx, t, dir, out, err)
	}
	if err != nil {
		m.log.Warn("mirror maintenance failed", "id", t.ID, "url", u, "err", err, "took", rep.Took)
		if ctx.Err() == nil {
			st.Failed = true
			if werr := m.writeState(dir, st); werr != nil {
				m.log.Warn("mirror maintenance state", "id", t.ID, "err", werr)
			}
		}
		return out, &fetch.Error{Kind: fetch.KindOther, Err: fmt.Errorf("maintain %s: %w", u, err)}
	}
	st.LastRun, st.Failed = now, false
	st.Fingerprint = nil
	if fp, err := readFingerprint(dir); err == nil {
		st.Fingerprint = &fp
	}
	if opt.Full {
		st.LastFsck, st.FsckFingerprint = now, st.Fingerprint
	}
	if err := m.writeState(dir, st); err != nil {
		m.log.Warn("mirror maintenance state", "id", t.ID, "err", err)
	}
	m.log.Info("mirror maintained", "id", t.ID, "url", u, "full", opt.Full, "steps", strings.Join(rep.Steps, ","),
		"packs_before", rep.PacksBefore, "packs_after", rep.PacksAfter, "took", rep.Took)
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
	// A fresh clone is one pack without index or bitmap: give it both now (and check
	// it: it is in the page cache now, not later).
	st := maintState{}
	if _, err := Maintain(ctx, m.git, dir, MaintainOptions{Full: true}); err != nil {
		m.log.Warn("maintenance of the re-clone", "id", t.ID, "err", err)
		st.Failed = true
	}
	out.PacksAfter = countPacks(dir)
	now := m.now()
	st.LastRun, st.LastFsck = now, now
	if fp, err := readFingerprint(dir); err == nil {
		st.Fingerprint, st.FsckFingerprint = &fp, &fp
	}
	if err := m.writeState(dir, st); err != nil {
		m.log.Warn("mirror maintenance state", "id", t.ID, "err", err)
	}
	m.log.Info("corrupt mirror re-cloned", "id", t.ID, "url", u)
	return out, nil
}
