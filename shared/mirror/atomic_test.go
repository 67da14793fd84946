package mirror

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// A ref update replaces the file (a rename) instead of rewriting it in place: a reader
// holding the old file still reads the old value whole, and no lock file is left.
func TestRefUpdateReplacesTheFile(t *testing.T) {
	s, _, m, tg := syncedBasic(t, "refs", Config{})
	dir := mirrorDir(t, m, tg)

	sto := m.storage(dir, false)
	defer sto.Close()
	a := plumbing.NewHash(runGit(t, s.home, dir, nil, "rev-parse", "HEAD~1"))
	b := plumbing.NewHash(runGit(t, s.home, dir, nil, "rev-parse", "HEAD"))
	name := plumbing.ReferenceName("refs/heads/loose")
	if err := sto.SetReference(plumbing.NewHashReference(name, a)); err != nil {
		t.Fatal(err)
	}
	refFile := filepath.Join(dir, "refs", "heads", "loose")
	old, err := os.Open(refFile)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := sto.CheckAndSetReference(plumbing.NewHashReference(name, b), plumbing.NewHashReference(name, a)); err != nil {
		t.Fatal(err)
	}
	if err := sto.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, name)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(old); err != nil || buf.String() != a.String()+"\n" {
		t.Fatalf("the old ref file now reads %q, %v; want the old value whole (%s)", buf.String(), err, a)
	}
	if got := runGit(t, s.home, dir, nil, "rev-parse", "HEAD"); got != b.String() {
		t.Fatalf("HEAD = %s, want %s", got, b)
	}
	// A check that fails writes nothing.
	err = sto.CheckAndSetReference(plumbing.NewHashReference(name, a), plumbing.NewHashReference(name, a))
	if err == nil {
		t.Fatal("CheckAndSetReference with a stale old value succeeded")
	}
	if got := runGit(t, s.home, dir, nil, "rev-parse", string(name)); got != b.String() {
		t.Fatalf("%s = %s after a refused update, want %s", name, got, b)
	}
	var locks []string
	_ = filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
		if strings.HasSuffix(p, ".lock") || strings.Contains(filepath.Base(p), "tmp_") {
			locks = append(locks, p)
		}
		return nil
	})
	if len(locks) > 0 {
		t.Fatalf("left behind: %v", locks)
	}
}

// go-git writes a pack's .idx before it renames the .pack into place; the .idx must
// only appear once the pack is there, read-only as git makes them.
func TestIdxWaitsForItsPack(t *testing.T) {
	root := t.TempDir()
	fs := newAtomicFS(root, false)
	base := "objects/pack/pack-" + strings.Repeat("ab", 20)
	idx, err := fs.Create(base + ".idx")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idx.Write([]byte("index")); err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	fixPerm := fs.Chmod(base+".idx", 0o444) // go-git's fixPermissions, before the pack
	if fixPerm != nil {
		t.Fatalf("chmod of a waiting .idx: %v", fixPerm)
	}
	if _, err := os.Lstat(filepath.Join(root, base+".idx")); !os.IsNotExist(err) {
		t.Fatalf("the .idx is visible before its pack (%v)", err)
	}
	pack, err := fs.TempFile("objects/pack", "tmp_pack_")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pack.Write([]byte("pack")); err != nil {
		t.Fatal(err)
	}
	if err := pack.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Rename(pack.Name(), base+".pack"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(root, base+".idx"))
	if err != nil || fi.Mode().Perm() != 0o444 {
		t.Fatalf("after the pack: .idx %v, %v; want it there, mode 0444", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, base+".idx")); string(b) != "index" {
		t.Fatalf(".idx holds %q", b)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "objects", "pack"))
	if len(entries) != 2 {
		t.Fatalf("objects/pack holds %v, want the pack and its .idx", entries)
	}
}

// TestClonesDuringForcedFetches: while the mirror code force-fetches an upstream that
// is force-pushed again and again (branches rewritten, moved, created and deleted,
// tags too), git clones the mirror over smart HTTP (plain git http-backend) and
// file://, and reads its refs directly; every third round the mirror is maintained
// (geometric repack, multi-pack bitmap, commit-graph) meanwhile. Every clone must succeed and pass git fsck,
// and every ref read must be whole.
func TestClonesDuringForcedFetches(t *testing.T) {
	s := newGitServer(t)
	u := s.newRepo(t, "x/churn")
	for i := range 10 {
		u.commit(t, fmt.Sprintf("c%d", i), map[string][]byte{"f": []byte(fmt.Sprint(i)), "blob": randomBytes(t, 8<<10)})
	}
	u.AddManyRefs(t, "r", 30, 20)
	m := newTestMirrorer(t, Config{Git: testGit(t)})
	tg := u.target("churn")
	mustSync(t, m, tg)
	dir := mirrorDir(t, m, tg)
	rel, _ := filepath.Rel(m.root, dir)

	served, stop, err := gittest.Serve(m.root)
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(stop)
	sources := []string{served.URL + "/" + filepath.ToSlash(rel), "file://" + dir}

	rounds := 12
	if testing.Short() {
		rounds = 6
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var clones, reads atomic.Int64
	var mu sync.Mutex
	var failures []string
	fail := func(f string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 10 {
			failures = append(failures, fmt.Sprintf(f, args...))
		}
	}
	home := t.TempDir()
	git := func(dir string, args ...string) (string, string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, gittest.Env(home)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				dst := filepath.Join(t.TempDir(), "c")
				src := sources[(i+n)%len(sources)]
				if _, stderr, err := git("", "clone", "-q", "--mirror", src, dst); err != nil {
					fail("clone %s: %v: %s", src, err, stderr)
					continue
				}
				if _, stderr, err := git(dst, "fsck", "--full", "--no-progress"); err != nil || stderr != "" {
					fail("fsck of a clone of %s: %v: %s", src, err, stderr)
				}
				if _, stderr, err := git(dst, "fetch", "-q", "--prune", src, "+refs/*:refs/*"); err != nil {
					fail("fetch from %s: %v: %s", src, err, stderr)
				}
				clones.Add(1)
				_ = os.RemoveAll(dst)
			}
		}()
	}
	wg.Add(1)
	go func() { // direct readers of the refs: a torn ref file shows here first
		defer wg.Done()
		for ctx.Err() == nil {
			out, stderr, err := git(dir, "for-each-ref", "--format=%(objectname) %(refname)")
			if err != nil || !strings.Contains(out, "refs/heads/main") || strings.Count(out, "refs/heads/") != 31 {
				fail("for-each-ref: %v: %s (%d branches, refs/heads/main among them: %v)", err, stderr, strings.Count(out, "refs/heads/"), strings.Contains(out, "refs/heads/main"))
			}
			// A ref deleted between git listing refs/ and reading it reads as broken and
			// is skipped (git's own deletions race readers so too): only tags are ever
			// deleted here; any other complaint is a torn ref.
			for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
				if line != "" && !strings.HasPrefix(line, "warning: ignoring broken ref refs/tags/") {
					fail("for-each-ref: %s", line)
				}
			}
			if _, stderr, err := git(dir, "rev-parse", "--verify", "HEAD^{commit}"); err != nil {
				fail("rev-parse HEAD: %v: %s", err, stderr)
			}
			reads.Add(1)
		}
	}()

	maintained := 0
	hashes := func() []string { return strings.Fields(u.Out(t, "rev-list", "--max-count=8", "HEAD")) }
	for r := range rounds {
		u.Rewrite(t, "main", 1, fmt.Sprintf("rewrite %d", r), map[string][]byte{"f": []byte(fmt.Sprint("r", r))})
		hs := hashes()
		var b strings.Builder
		for i := range 30 {
			fmt.Fprintf(&b, "update refs/heads/r%04d %s\n", i, hs[(i+r)%len(hs)])
		}
		for i := range 20 {
			if (i+r)%3 == 0 {
				fmt.Fprintf(&b, "delete refs/tags/r%04d\n", i)
			} else {
				fmt.Fprintf(&b, "update refs/tags/r%04d %s\n", i, hs[(i+2*r)%len(hs)])
			}
		}
		gittest.RunStdin(t, s.home, u.dir, b.String(), "update-ref", "--stdin")
		res, err := m.Sync(context.Background(), tg)
		if err != nil || !res.Changed {
			t.Fatalf("round %d: sync = %+v, %v", r, res, err)
		}
		if r%3 == 2 { // maintenance (repack, midx, bitmap, commit-graph) while clones run
			mr, err := m.Maintain(context.Background(), tg, fetch.MaintainRequest{})
			if err != nil || mr.PacksAfter >= mr.PacksBefore {
				t.Fatalf("round %d: maintenance %+v, %v", r, mr, err)
			}
			maintained++
		}
	}
	cancel()
	wg.Wait()
	assertMirrored(t, m, u, tg)
	for _, f := range failures {
		t.Error(f)
	}
	if clones.Load() < int64(rounds/2) || reads.Load() < int64(rounds) {
		t.Fatalf("only %d clones and %d ref reads ran during %d forced fetches", clones.Load(), reads.Load(), rounds)
	}
	t.Logf("%d forced fetches, %d maintenance runs, %d clones (+fsck, +fetch), %d direct ref reads, %d failures",
		rounds, maintained, clones.Load(), reads.Load(), len(failures))
}

// A fetch that moves one branch touches that branch only: no ref is deleted and
// written back, and packed-refs is not rewritten (go-git's prune with a "+" refspec
// did both, for every ref).
func TestFetchTouchesOnlyChangedRefs(t *testing.T) {
	s := newGitServer(t)
	u := buildBasic(t, s, "x/few")
	u.AddManyRefs(t, "r", 20, 20)
	m := newTestMirrorer(t, Config{})
	tg := u.target("few")
	mustSync(t, m, tg) // a clone: every ref packed
	dir := mirrorDir(t, m, tg)
	before, err := os.Stat(filepath.Join(dir, "packed-refs"))
	if err != nil {
		t.Fatal(err)
	}
	u.commit(t, "one more", map[string][]byte{"g": []byte("g")})
	if res := mustSync(t, m, tg); !res.Changed {
		t.Fatal("no change seen")
	}
	after, err := os.Stat(filepath.Join(dir, "packed-refs"))
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("packed-refs was rewritten by a fetch that deleted no ref (%v)", err)
	}
	loose, _ := os.ReadDir(filepath.Join(dir, "refs", "heads"))
	if len(loose) != 1 {
		t.Fatalf("loose heads after the fetch: %d, want 1 (the moved branch)", len(loose))
	}
	assertMirrored(t, m, u, tg)
	// A deleted upstream ref still goes away.
	u.DeleteTag(t, "r0003")
	mustSync(t, m, tg)
	assertMirrored(t, m, u, tg)
}
