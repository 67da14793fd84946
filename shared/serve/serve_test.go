package serve

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/serve/packcache"
)

// TestCloneFetchLsRemote clones, fetches and lists a mirror with the real git client
// in protocol v2, v1 and v0, with and without .git in the URL, and checks that the
// clone has exactly the mirror's refs and passes fsck.
func TestCloneFetchLsRemote(t *testing.T) {
	e := newEnv(t)
	up := e.repo("example.com/team/app.git")
	before := snapshot(t, e.root)
	for _, proto := range []string{"2", "1", "0"} {
		for _, suffix := range []string{".git", ""} {
			t.Run("v"+proto+suffix, func(t *testing.T) {
				url := e.url("example.com/team/app" + suffix)
				dst := filepath.Join(t.TempDir(), "clone.git")
				e.git("", "-c", "protocol.version="+proto, "clone", "--mirror", "--quiet", url, dst)
				if got, want := gittest.RefsOf(t, dst), up.Refs(t); got != want {
					t.Fatalf("clone refs:\n%s\nwant:\n%s", got, want)
				}
				gittest.Fsck(t, dst)

				ls := e.git("", "-c", "protocol.version="+proto, "ls-remote", url)
				if !strings.Contains(ls, up.Head(t)+"\tHEAD") || !strings.Contains(ls, "refs/tags/v1^{}") {
					t.Fatalf("ls-remote:\n%s", ls)
				}
			})
		}
	}

	// A fetch after an upstream change gets exactly the new commit.
	work := filepath.Join(t.TempDir(), "work")
	e.git("", "clone", "--quiet", e.url("example.com/team/app"), work)
	next := up.Commit(t, "next", map[string][]byte{"README": []byte("next\n")})
	e.git(work, "fetch", "--quiet", "origin")
	if got := e.git(work, "rev-parse", "origin/main"); got != next {
		t.Fatalf("after fetch origin/main = %s, want %s", got, next)
	}
	gittest.Fsck(t, filepath.Join(work, ".git"))

	// Serving wrote nothing under the root beyond what the upstream commit did.
	_ = before
	after := snapshot(t, e.root)
	e.git(work, "fetch", "--quiet", "origin")
	e.git("", "ls-remote", e.url("example.com/team/app"))
	if again := snapshot(t, e.root); again != after {
		t.Fatalf("serving wrote under the mirrors root:\nbefore:\n%s\nafter:\n%s", after, again)
	}
	if left, _ := os.ReadDir(e.h.cfg.Scratch); len(left) != 0 {
		t.Fatalf("scratch directories left behind: %v", left)
	}
}

// TestShallowAndPartial: --depth, --shallow-since and --filter=blob:none through the
// front, on a root that nothing is written to.
func TestShallowAndPartial(t *testing.T) {
	e := newEnv(t)
	up := e.repo("example.com/a/b.git")
	url := e.url("example.com/a/b")
	before := snapshot(t, e.root)

	for _, proto := range []string{"2", "0"} {
		d := filepath.Join(t.TempDir(), "depth")
		e.git("", "-c", "protocol.version="+proto, "clone", "--quiet", "--depth", "1", url, d)
		if n := e.git(d, "rev-list", "--count", "HEAD"); n != "1" {
			t.Fatalf("v%s --depth 1: %s commits, want 1", proto, n)
		}
		if _, err := os.Stat(filepath.Join(d, ".git", "shallow")); err != nil {
			t.Fatalf("v%s --depth 1: not shallow: %v", proto, err)
		}
		// Deepen by one through the front.
		e.git(d, "-c", "protocol.version="+proto, "fetch", "--quiet", "--deepen", "1")
		if n := e.git(d, "rev-list", "--count", "HEAD"); n != "2" {
			t.Fatalf("v%s --deepen 1: %s commits, want 2", proto, n)
		}
	}

	// gittest dates commit n at CommitBase + n hours: since the third commit, only it
	// and the later ones come.
	since := gittest.CommitBase.Add(3*3600e9 - 1800e9).Format("2006-01-02T15:04:05Z")
	d := filepath.Join(t.TempDir(), "since")
	e.git("", "clone", "--quiet", "--shallow-since", since, url, d)
	if n := e.git(d, "rev-list", "--count", "HEAD"); n != "1" {
		t.Fatalf("--shallow-since %s: %s commits, want 1", since, n)
	}

	p := filepath.Join(t.TempDir(), "partial")
	e.git("", "clone", "--quiet", "--filter=blob:none", "--no-checkout", url, p)
	missing := e.git(p, "rev-list", "--objects", "--missing=print", "--all")
	if !strings.Contains(missing, "?") {
		t.Fatalf("--filter=blob:none: no blob missing from the clone:\n%s", missing)
	}
	// Checking out fetches the blobs it needs, lazily, through the front.
	e.git(p, "checkout", "--quiet", "main")
	if b, err := os.ReadFile(filepath.Join(p, "f2.bin")); err != nil || len(b) != 4096 {
		t.Fatalf("lazy fetch of a blob: %d bytes, %v", len(b), err)
	}
	if got, want := e.git(p, "rev-parse", "HEAD"), up.Head(t); got != want {
		t.Fatalf("partial clone HEAD %s, want %s", got, want)
	}
	if after := snapshot(t, e.root); after != before {
		t.Fatalf("shallow or partial clones wrote under the mirrors root")
	}
}

// TestPackCacheServesIdenticalClonesOnce: concurrent identical clones cost one pack
// generation, later ones are hits, and an upstream change starts a new entry.
func TestPackCacheServesIdenticalClonesOnce(t *testing.T) {
	e := newEnv(t)
	up := e.repo("example.com/cached.git")
	for i := range 20 {
		up.Commit(t, "more "+strconv.Itoa(i), map[string][]byte{"big.bin": gittest.RandomBytes(t, 64<<10)})
	}
	url := e.url("example.com/cached")
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	dirs := make([]string, n)
	for i := range n {
		dirs[i] = filepath.Join(t.TempDir(), "c.git")
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := e.gitErr("", "clone", "--mirror", "--quiet", url, dirs[i])
			if err != nil {
				errs[i] = err
				t.Logf("clone %d: %s", i, out)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("clone %d: %v", i, err)
		}
		if got, want := gittest.RefsOf(t, dirs[i]), up.Refs(t); got != want {
			t.Fatalf("clone %d has other refs", i)
		}
		gittest.Fsck(t, dirs[i])
	}
	e.sink.waitTotal(t, metrics.PackCacheMisses, 1)
	e.sink.waitTotal(t, metrics.PackCacheHits, n-1)
	size, packs, err := packcache.Size(e.cache)
	if err != nil || packs != 1 || size == 0 {
		t.Fatalf("cache holds %d packs, %d bytes (%v); want 1", packs, size, err)
	}

	// A change upstream (a fetch into the mirror) makes the next clone generate.
	up.Commit(t, "change", map[string][]byte{"README": []byte("changed\n")})
	d := filepath.Join(t.TempDir(), "after.git")
	e.git("", "clone", "--mirror", "--quiet", url, d)
	if got, want := gittest.RefsOf(t, d), up.Refs(t); got != want {
		t.Fatalf("clone after the change has stale refs:\n%s\nwant\n%s", got, want)
	}
	e.sink.waitTotal(t, metrics.PackCacheMisses, 2)
	if e.sink.total(metrics.PackGenerationSeconds) <= 0 {
		t.Fatalf("no pack generation time recorded")
	}
}

// TestPackCacheServesShallowClones: upload-pack gives pack-objects an empty
// --shallow-file for a shallow request; identical shallow clones still share one
// generation, and the client hears nothing of the cache.
func TestPackCacheServesShallowClones(t *testing.T) {
	e := newEnv(t)
	e.repo("example.com/shallow.git")
	url := e.url("example.com/shallow")
	for i := range 2 {
		d := filepath.Join(t.TempDir(), "depth")
		out, err := e.gitErr("", "clone", "--depth", "1", url, d)
		if err != nil {
			t.Fatalf("shallow clone %d: %v\n%s", i, err, out)
		}
		if strings.Contains(out, "pack-objects-hook") {
			t.Fatalf("shallow clone %d: the client saw the hook's message:\n%s", i, out)
		}
		if n := e.git(d, "rev-list", "--count", "HEAD"); n != "1" {
			t.Fatalf("shallow clone %d: %s commits, want 1", i, n)
		}
	}
	e.sink.waitTotal(t, metrics.PackCacheMisses, 1)
	e.sink.waitTotal(t, metrics.PackCacheHits, 1)
}

// TestWithoutCache: no hook, no cache: upload-pack runs pack-objects itself.
func TestWithoutCache(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Hook = nil })
	up := e.repo("example.com/plain.git")
	d := filepath.Join(t.TempDir(), "c.git")
	e.git("", "clone", "--mirror", "--quiet", e.url("example.com/plain.git"), d)
	if got, want := gittest.RefsOf(t, d), up.Refs(t); got != want {
		t.Fatalf("refs differ")
	}
	if _, packs, _ := packcache.Size(e.cache); packs != 0 {
		t.Fatalf("a cache without a hook holds %d packs", packs)
	}
	if e.sink.total(metrics.ServeRequests+"/2xx") < 2 {
		t.Fatalf("requests not counted: %v", e.sink.totals)
	}
	if e.sink.total(metrics.ServeBytes) <= 0 {
		t.Fatalf("bytes not counted")
	}
	// Each request ran one upload-pack, counted by gitcmd with its CPU time.
	if got, want := e.sink.total(metrics.GitProcesses+"/upload-pack"), e.sink.total(metrics.ServeRequests+"/2xx"); got != want {
		t.Fatalf("%v upload-pack processes counted for %v requests", got, want)
	}
	if e.sink.counts[metrics.GitCpuSeconds+"/upload-pack"] == 0 || e.sink.total(metrics.GitFailures+"/upload-pack") != 0 {
		t.Fatalf("git counters: %v", e.sink.totals)
	}
}

// TestCachedCloneRunsNoGit: a clone asked for again is answered from the cached whole
// response, with no upload-pack for its pack request; it is byte-for-byte a working
// clone. A fetch (haves) still goes to git, and a change upstream is a new entry.
func TestCachedCloneRunsNoGit(t *testing.T) {
	calls := filepath.Join(t.TempDir(), "calls")
	wrapper := filepath.Join(t.TempDir(), "git")
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip(err)
	}
	script := fmt.Sprintf("#!/bin/sh\necho x >> %q\nexec %q \"$@\"\n", calls, real)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.Git = wrapper })
	up := e.repo("example.com/again.git")
	url := e.url("example.com/again")
	runs := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "x")
	}
	clone := func(name string, env ...string) (string, int) {
		t.Helper()
		before := runs()
		d := filepath.Join(t.TempDir(), name)
		gittest.Run(t, e.home, "", env, "clone", "--mirror", "--quiet", url, d)
		if got, want := gittest.RefsOf(t, d), up.Refs(t); got != want {
			t.Fatalf("%s: refs differ:\n%s\nwant\n%s", name, got, want)
		}
		gittest.Fsck(t, d)
		return d, runs() - before
	}
	_, first := clone("first.git")
	d, second := clone("second.git")
	// The first runs upload-pack for the refs, then upload-pack and (from the hook)
	// pack-objects for the pack; the second only the first of those.
	if second != first-2 {
		t.Fatalf("the repeated clone ran git %d times, the first %d: want two fewer (no upload-pack, no pack-objects)", second, first)
	}
	e.sink.waitTotal(t, metrics.PackCacheHits, 1)
	// Another client (another agent string, as another git version sends) asking the
	// same is answered from the same entry.
	if _, other := clone("other-client.git", "GIT_USER_AGENT=git/0.0-another-client"); other != second {
		t.Fatalf("a clone by another client ran git %d times, the repeated clone %d: want the cached response", other, second)
	}
	e.sink.waitTotal(t, metrics.PackCacheHits, 2)

	// A fetch with haves goes to git and brings the new commit.
	up.Commit(t, "new", map[string][]byte{"README": []byte("new\n")})
	before := runs()
	e.git(d, "fetch", "--quiet", "origin")
	if runs() == before {
		t.Fatal("a fetch ran no git")
	}
	if got, want := gittest.RefsOf(t, d), up.Refs(t); got != want {
		t.Fatalf("fetch: refs differ:\n%s\nwant\n%s", got, want)
	}
	// The change is a new entry: the next clone has the new commit.
	_, third := clone("third.git")
	if third != first {
		t.Fatalf("the clone after a change ran git %d times, want %d (a new generation)", third, first)
	}
}

// The front's index of the pack cache follows what the hooks (separate processes,
// through their reports) and the front's own fills put on disk, and keeps the files
// within the entry bound with no directory walk.
func TestPackCacheIndexFollowsTheHooks(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PackCache.MaxEntries = 6 })
	up := e.repo("example.com/team/app.git")
	work := filepath.Join(t.TempDir(), "work")
	e.git("", "clone", "--quiet", e.url("example.com/team/app"), work) // the front's fill
	for i := range 4 {
		up.Commit(t, "next", map[string][]byte{"README": fmt.Appendf(nil, "next %d\n", i)})
		e.git(work, "fetch", "--quiet", "origin") // a hook's fill, told in its report
	}
	onDisk := func() int {
		n := 0
		filepath.WalkDir(e.cache, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				n++
			}
			return nil
		})
		return n
	}
	// Reports are datagrams the front reads as they come: wait for the last one.
	deadline := time.Now().Add(10 * time.Second)
	for {
		files, _ := e.h.cfg.PackCache.Index.Counts()
		disk := onDisk()
		if files == disk && disk <= 6 && disk >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the index counts %d files, the disk holds %d (bound 6)", files, disk)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
