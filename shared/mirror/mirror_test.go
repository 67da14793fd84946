package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// The worker's interface.
var _ interface {
	Sync(ctx context.Context, t fetch.Target) (fetch.Result, error)
	Exists(t fetch.Target) bool
	Trash(ctx context.Context, t fetch.Target) error
} = (*Mirrorer)(nil)

// buildBasic makes an upstream with branches, lightweight and annotated tags, a tag
// of a tag, tags of a blob and a tree, a merge and a binary file.
func buildBasic(t testing.TB, s *gitServer, name string) *upstream {
	t.Helper()
	u := s.newRepo(t, name)
	u.commit(t, "init", map[string][]byte{"README": []byte("hello\n")})
	u.git(t, "tag", "v0.1")
	u.commit(t, "two", map[string][]byte{"a.txt": []byte("a\n")})
	u.git(t, "checkout", "-q", "-b", "feature")
	u.commit(t, "binary", map[string][]byte{"bin/blob.dat": randomBytes(t, 64<<10)})
	u.commit(t, "feature 2", map[string][]byte{"b.txt": []byte("b\n")})
	u.git(t, "checkout", "-q", "main")
	u.commit(t, "three", map[string][]byte{"c.txt": []byte("c\n")})
	u.mergeNoFF(t, "feature")
	u.git(t, "tag", "-a", "v1.0", "-m", "release 1.0")
	u.git(t, "tag", "-a", "v1.0-countersigned", "-m", "tag of a tag", "v1.0")
	u.git(t, "branch", "dev", "HEAD~1")
	u.git(t, "branch", "old", "v0.1")
	u.git(t, "tag", "blobtag", u.git(t, "hash-object", "-w", "README"))
	u.git(t, "tag", "-a", "treetag", "-m", "a tree", "HEAD^{tree}")
	return u
}

func kindIs(t testing.TB, err error, want fetch.Kind) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %s error, got nil", want)
	}
	var fe *fetch.Error
	if !errors.As(err, &fe) {
		t.Fatalf("want *fetch.Error, got %T: %v", err, err)
	}
	if fe.Kind != want {
		t.Fatalf("kind = %s, want %s (err: %v)", fe.Kind, want, err)
	}
}

func TestSyncCloneThenNoChangePoll(t *testing.T) {
	s := newGitServer(t)
	u := buildBasic(t, s, "x/basic")
	logger := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := newTestMirrorer(t, Config{Logger: logger})
	tg := u.target("basic")
	if m.Exists(tg) {
		t.Fatal("Exists before the first sync")
	}

	res := mustSync(t, m, tg)
	if !res.Cloned || !res.Changed {
		t.Fatalf("first sync: %+v, want Cloned and Changed", res)
	}
	if res.BytesReceived < 64<<10 || res.SizeBytes < 64<<10 {
		t.Fatalf("first sync: BytesReceived=%d SizeBytes=%d, want at least the binary's size", res.BytesReceived, res.SizeBytes)
	}
	if want := u.newestCommit(t); !res.LastCommitAt.Equal(want) {
		t.Fatalf("LastCommitAt = %v, want %v", res.LastCommitAt, want)
	}
	if !m.Exists(tg) {
		t.Fatal("Exists after sync = false")
	}
	dir := mirrorDir(t, m, tg)
	if want := filepath.Join(m.root, "http+"+strings.TrimPrefix(s.srv.URL, "http://"), "x", "basic.git"); dir != want {
		t.Fatalf("mirror at %s, want %s", dir, want)
	}
	assertMirrored(t, m, u, tg)
	fsck(t, s.home, dir)
	if got := runGit(t, s.home, dir, nil, "rev-parse", "--is-bare-repository"); got != "true" {
		t.Fatalf("is-bare-repository = %q", got)
	}
	if got := runGit(t, s.home, dir, nil, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Fatalf("mirror HEAD = %q", got)
	}
	if got := runGit(t, s.home, dir, nil, "config", "remote.origin.url"); got != tg.URL {
		t.Fatalf("remote.origin.url = %q", got)
	}
	if entries, _ := os.ReadDir(m.tmpDir); len(entries) != 0 {
		t.Fatalf("temp dir not empty after clone: %v", entries)
	}

	// The no-change poll: one GET of the ref advertisement, nothing written.
	before := treeSnapshot(t, dir)
	s.resetRequests()
	res2 := mustSync(t, m, tg)
	if res2.Cloned || res2.Changed {
		t.Fatalf("second sync: %+v, want no change", res2)
	}
	if !res2.LastCommitAt.IsZero() || res2.SizeBytes != res.SizeBytes {
		t.Fatalf("second sync stats %+v differ from first %+v", res2, res)
	}
	if res2.BytesReceived <= 0 || res2.BytesReceived > 16<<10 {
		t.Fatalf("no-change BytesReceived = %d, want just the ref advertisement", res2.BytesReceived)
	}
	if got, want := s.requests(), []string{"GET /x/basic/info/refs?service=git-upload-pack"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("no-change poll made requests %q, want only %q", got, want)
	}
	if d := diffSnapshots(before, treeSnapshot(t, dir)); len(d) != 0 {
		t.Fatalf("no-change poll modified the mirror:\n%s", strings.Join(d, "\n"))
	}

	// The mirror is a usable repository.
	work := filepath.Join(t.TempDir(), "work")
	runGit(t, s.home, "", nil, "clone", "-q", dir, work)
	upBlob, _ := os.ReadFile(filepath.Join(u.dir, "bin", "blob.dat"))
	gotBlob, err := os.ReadFile(filepath.Join(work, "bin", "blob.dat"))
	if err != nil || !bytes.Equal(gotBlob, upBlob) {
		t.Fatalf("binary file differs in a clone of the mirror (err %v)", err)
	}
	if a, b := runGit(t, s.home, work, nil, "rev-parse", "HEAD"), u.git(t, "rev-parse", "HEAD"); a != b {
		t.Fatalf("clone of mirror HEAD %s, upstream %s", a, b)
	}
}

func TestSyncFollowsUpstreamChanges(t *testing.T) {
	s := newGitServer(t)
	u := buildBasic(t, s, "x/moving")
	m := newTestMirrorer(t, Config{})
	tg := u.target("moving")
	mustSync(t, m, tg)
	dir := mirrorDir(t, m, tg)

	u.commit(t, "new on main", map[string][]byte{"d.txt": []byte("d\n")})
	u.git(t, "branch", "-D", "old")
	u.git(t, "tag", "-d", "v0.1")
	u.git(t, "tag", "v2")
	// Force-push dev: rewrite it onto a new, unrelated commit.
	u.git(t, "checkout", "-q", "dev")
	u.git(t, "reset", "-q", "--hard", "HEAD~1")
	u.commit(t, "rewritten dev", map[string][]byte{"dev.txt": []byte("rewritten\n")})
	u.git(t, "checkout", "-q", "main")

	res := mustSync(t, m, tg)
	if res.Cloned || !res.Changed {
		t.Fatalf("sync after upstream changes: %+v", res)
	}
	if want := u.newestCommit(t); !res.LastCommitAt.Equal(want) {
		t.Fatalf("LastCommitAt = %v, want %v", res.LastCommitAt, want)
	}
	assertMirrored(t, m, u, tg)
	fsck(t, s.home, dir)

	// A deletion only: refs change, no objects needed, so no pack is requested.
	u.git(t, "branch", "-D", "feature")
	s.resetRequests()
	res = mustSync(t, m, tg)
	if !res.Changed {
		t.Fatal("branch deletion not seen")
	}
	assertMirrored(t, m, u, tg)
	for _, r := range s.requests() {
		if strings.HasPrefix(r, "POST") {
			t.Fatalf("a ref deletion fetched a pack: %q", s.requests())
		}
	}

	// Upstream changes its default branch: the mirror's HEAD follows.
	u.git(t, "symbolic-ref", "HEAD", "refs/heads/dev")
	res = mustSync(t, m, tg)
	if !res.Changed {
		t.Fatal("HEAD change not seen")
	}
	if got := runGit(t, s.home, dir, nil, "symbolic-ref", "HEAD"); got != "refs/heads/dev" {
		t.Fatalf("mirror HEAD = %q, want refs/heads/dev", got)
	}
	if res := mustSync(t, m, tg); res.Changed {
		t.Fatal("sync after HEAD change: Changed again")
	}
	fsck(t, s.home, dir)
}

func TestSyncEmptyUpstream(t *testing.T) {
	s := newGitServer(t)
	u := s.newRepo(t, "x/empty")
	m := newTestMirrorer(t, Config{})
	tg := u.target("empty")

	res := mustSync(t, m, tg)
	if !res.Cloned || !res.Changed || !res.LastCommitAt.IsZero() {
		t.Fatalf("empty clone: %+v", res)
	}
	dir := mirrorDir(t, m, tg)
	if got := runGit(t, s.home, dir, nil, "rev-parse", "--is-bare-repository"); got != "true" {
		t.Fatalf("is-bare-repository = %q", got)
	}
	if got := runGit(t, s.home, dir, nil, "config", "remote.origin.url"); got != tg.URL {
		t.Fatalf("remote.origin.url = %q", got)
	}
	if got := forEachRef(t, s.home, dir, dir); got != "" {
		t.Fatalf("empty mirror has refs: %q", got)
	}
	if res := mustSync(t, m, tg); res.Changed || res.Cloned {
		t.Fatalf("second sync of empty: %+v", res)
	}

	u.commit(t, "first", map[string][]byte{"f": []byte("1\n")})
	if res := mustSync(t, m, tg); !res.Changed || res.LastCommitAt.IsZero() {
		t.Fatalf("first commit not seen: %+v", res)
	}
	assertMirrored(t, m, u, tg)

	// And empty again.
	u.git(t, "update-ref", "-d", "refs/heads/main")
	if res := mustSync(t, m, tg); !res.Changed || !res.LastCommitAt.IsZero() {
		t.Fatalf("emptied upstream: %+v", res)
	}
	assertMirrored(t, m, u, tg)
	fsck(t, s.home, dir)
}

func TestSyncManyRefs(t *testing.T) {
	s := newGitServer(t)
	u := s.newRepo(t, "x/many")
	var hashes []string
	for i := range 5 {
		u.commit(t, fmt.Sprint("c", i), map[string][]byte{"f": []byte(fmt.Sprint(i))})
		hashes = append(hashes, u.git(t, "rev-parse", "HEAD"))
	}
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "create refs/heads/br%03d %s\n", i, hashes[i%5])
	}
	for i := range 100 {
		fmt.Fprintf(&b, "create refs/tags/t%03d %s\n", i, hashes[i%5])
	}
	fmt.Fprintf(&b, "create refs/changes/01/1/1 %s\n", hashes[1]) // a non-branch, non-tag namespace
	updateRefs(t, u, b.String())

	m := newTestMirrorer(t, Config{})
	tg := u.target("many")
	mustSync(t, m, tg)
	assertMirrored(t, m, u, tg)
	if res := mustSync(t, m, tg); res.Changed {
		t.Fatal("unchanged many-ref repo reported Changed")
	}

	b.Reset()
	for i := 0; i < 300; i += 6 {
		fmt.Fprintf(&b, "delete refs/heads/br%03d\n", i)
	}
	for i := 0; i < 100; i += 7 {
		fmt.Fprintf(&b, "update refs/tags/t%03d %s\n", i, hashes[(i+1)%5])
	}
	updateRefs(t, u, b.String())
	if res := mustSync(t, m, tg); !res.Changed {
		t.Fatal("ref changes not seen")
	}
	assertMirrored(t, m, u, tg)
	fsck(t, s.home, mirrorDir(t, m, tg))
}

func updateRefs(t *testing.T, u *upstream, script string) {
	t.Helper()
	cmd := exec.Command("git", "update-ref", "--stdin")
	cmd.Dir = u.dir
	cmd.Env = gitEnv(u.s.home)
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("update-ref: %v\n%s", err, out)
	}
}

func TestSyncErrorsFromUpstream(t *testing.T) {
	s := newGitServer(t)
	buildBasic(t, s, "x/basic")
	m := newTestMirrorer(t, Config{})
	ctx := context.Background()

	_, err := m.Sync(ctx, fetch.Target{ID: "nope", URL: s.srv.URL + "/x/nope"})
	kindIs(t, err, fetch.KindNotFound)

	_, err = m.Sync(ctx, fetch.Target{ID: "rl", URL: s.srv.URL + "/ratelimited/x/basic"})
	kindIs(t, err, fetch.KindRateLimited)
	if ra := fetch.RetryAfterOf(err); ra != 7*time.Second {
		t.Fatalf("RetryAfter = %v, want 7s", ra)
	}

	_, err = m.Sync(ctx, fetch.Target{ID: "un", URL: s.srv.URL + "/unavailable/x/basic"})
	kindIs(t, err, fetch.KindRateLimited)
	if ra := fetch.RetryAfterOf(err); ra < 80*time.Second || ra > 91*time.Second {
		t.Fatalf("RetryAfter from an HTTP date = %v, want about 90s", ra)
	}

	_, err = m.Sync(ctx, fetch.Target{ID: "fb", URL: s.srv.URL + "/forbidden/x/basic"})
	kindIs(t, err, fetch.KindAuth)

	// Nothing listens on this port any more.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	_ = ln.Close()
	_, err = m.Sync(ctx, fetch.Target{ID: "down", URL: "http://" + addr + "/x/basic"})
	kindIs(t, err, fetch.KindNetwork)

	for _, bad := range []string{"file:///etc", "ssh://git@example.com/a/b", "https://example.com/a/../../b", "git://example.com/a"} {
		_, err = m.Sync(ctx, fetch.Target{ID: "bad", URL: bad})
		kindIs(t, err, fetch.KindPolicy)
	}

	for _, p := range []string{"nope", "ratelimited", "unavailable", "forbidden", "down"} {
		if m.Exists(fetch.Target{URL: s.srv.URL + "/x/" + p}) {
			t.Fatalf("a failed clone left a mirror for %s", p)
		}
	}
	if entries, _ := os.ReadDir(m.tmpDir); len(entries) != 0 {
		t.Fatalf("failed clones left temp dirs: %v", entries)
	}
	// ... nor lock files or directories.
	assertOnlyDotDirs(t, m)
}

func TestInterruptedFetchKeepsMirror(t *testing.T) {
	s := newGitServer(t)
	u := buildBasic(t, s, "x/big")
	m := newTestMirrorer(t, Config{Timeout: 2 * time.Second})
	tg := u.target("big")
	mustSync(t, m, tg)
	dir := mirrorDir(t, m, tg)
	wantRefs := forEachRef(t, s.home, dir, dir)

	u.commit(t, "big", map[string][]byte{"big.bin": randomBytes(t, 4<<20)})
	u.git(t, "branch", "-D", "old")

	check := func() {
		t.Helper()
		if got := forEachRef(t, s.home, dir, dir); got != wantRefs {
			t.Fatalf("interrupted fetch changed the refs:\n%s", got)
		}
		fsck(t, s.home, dir)
		if tmps := m.packTemps(dir); len(tmps) != 0 {
			t.Fatalf("temp pack files left: %v", tmps)
		}
	}

	// 1. The server stalls mid-pack; the step deadline (Timeout) fires.
	s.stallAfter.Store(32 << 10)
	start := time.Now()
	_, err := m.Sync(context.Background(), tg)
	kindIs(t, err, fetch.KindTimeout)
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("timed-out fetch took %v", took)
	}
	select {
	case <-s.stalled:
	default:
		t.Fatal("the server never stalled: the fetch was not interrupted mid-way")
	}
	check()

	// 2. The caller cancels mid-pack.
	ctx, cancel := context.WithCancel(context.Background())
	var got atomic.Int64
	stop := make(chan struct{})
	go func() {
		// Cancel once the client has received some of the pack.
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			for _, r := range s.requests() {
				if strings.HasPrefix(r, "POST") {
					got.Add(1)
				}
			}
			if got.Load() > 0 {
				time.Sleep(100 * time.Millisecond)
				cancel()
				return
			}
		}
	}()
	s.resetRequests()
	_, err = m.Sync(ctx, tg)
	close(stop)
	cancel()
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled sync: err = %v, want context.Canceled", err)
	}
	check()

	// 3. The server recovers: the next sync completes (with a Timeout that leaves
	// room for the race detector).
	s.stallAfter.Store(0)
	m2 := newTestMirrorer(t, Config{Root: m.root})
	if res := mustSync(t, m2, tg); !res.Changed {
		t.Fatal("recovered sync: no change")
	}
	assertMirrored(t, m2, u, tg)
	fsck(t, s.home, dir)
}

func TestConcurrentSyncIsBusy(t *testing.T) {
	s := newGitServer(t)
	u := buildBasic(t, s, "x/busy")
	m := newTestMirrorer(t, Config{})
	tg := u.target("busy")
	mustSync(t, m, tg)

	// In-process: a sync stuck in a fetch holds the lock.
	u.commit(t, "big", map[string][]byte{"big.bin": randomBytes(t, 1<<20)})
	s.stallAfter.Store(16 << 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := m.Sync(ctx, tg)
		done <- err
	}()
	select {
	case <-s.stalled:
	case <-time.After(20 * time.Second):
		t.Fatal("first sync never reached the stalled fetch")
	}
	_, err := m.Sync(context.Background(), tg)
	kindIs(t, err, fetch.KindBusy)
	m2 := newTestMirrorer(t, Config{Root: m.root}) // another Mirrorer on the same root
	_, err = m2.Sync(context.Background(), tg)
	kindIs(t, err, fetch.KindBusy)
	kindIs(t, m.Trash(context.Background(), tg), fetch.KindBusy)
	cancel()
	<-done
	s.stallAfter.Store(0)
	mustSync(t, m, tg)

	// Across processes: flock(1) holds the lock file.
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) not installed")
	}
	lockPath := m.lockPath(mirrorDir(t, m, tg))
	holder := holdLockInOtherProcess(t, lockPath)
	_, err = m.Sync(context.Background(), tg)
	kindIs(t, err, fetch.KindBusy)
	killGroup(holder)
	waitLockFree(t, lockPath)
	mustSync(t, m, tg)
}

// waitLockFree waits until nobody holds path's lock: the child flock(1) forks may still
// be exiting after flock itself was reaped, holding a copy of the locked descriptor.
func waitLockFree(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		}
		_ = f.Close()
		if err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s still locked after its holder was killed", path)
}

// holdLockInOtherProcess runs flock(1) on path and waits until it holds the lock.
func holdLockInOtherProcess(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) not installed")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	// -o: only flock itself holds the lock, not its child, so killing it frees it.
	cmd := exec.Command("flock", "-o", "-x", path, "sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killGroup(cmd) })
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f, err := os.Open(path)
		if err == nil {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			_ = f.Close() // releases our lock if we got it
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return cmd
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("flock(1) never took the lock")
	return nil
}

func TestNewRemovesStaleTempDirs(t *testing.T) {
	root := t.TempDir()
	tmp := filepath.Join(root, ".tmp")
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(tmp, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) {
		if err := os.WriteFile(filepath.Join(tmp, p), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("dead-1/objects/pack")
	write("dead-1/objects/pack/tmp_pack_123")
	mk("dead-2")
	write("dead-2.lock")
	write("orphan.lock")
	mk("live-1/objects")
	holdLockInOtherProcess(t, filepath.Join(tmp, "live-1.lock"))

	newTestMirrorer(t, Config{Root: root})
	for _, gone := range []string{"dead-1", "dead-2", "dead-2.lock", "orphan.lock"} {
		if _, err := os.Lstat(filepath.Join(tmp, gone)); !os.IsNotExist(err) {
			t.Errorf("%s survived New (err %v)", gone, err)
		}
	}
	if !isDir(filepath.Join(tmp, "live-1")) {
		t.Error("New removed a clone in progress in another process")
	}
}

func TestTrash(t *testing.T) {
	s := newGitServer(t)
	u := buildBasic(t, s, "x/gone")
	m := newTestMirrorer(t, Config{})
	tg := u.target("gone/1")
	mustSync(t, m, tg)
	dir := mirrorDir(t, m, tg)

	if err := m.Trash(context.Background(), tg); err != nil {
		t.Fatal(err)
	}
	if m.Exists(tg) || isDir(dir) {
		t.Fatal("mirror still in place right after Trash")
	}
	if _, err := os.Lstat(m.lockPath(dir)); !os.IsNotExist(err) {
		t.Fatalf("lock file left after Trash: %v", err)
	}
	assertOnlyDotDirs(t, m)
	if err := m.Trash(context.Background(), tg); err != nil {
		t.Fatalf("Trash of a missing mirror: %v", err)
	}
	_ = m.Close() // waits for the background removal
	if entries, _ := os.ReadDir(m.trashDir); len(entries) != 0 {
		t.Fatalf("trash not freed: %v", entries)
	}

	// Leftovers (a crash between rename and removal) go with EmptyTrash.
	if err := os.MkdirAll(filepath.Join(m.trashDir, "old-123", "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.EmptyTrash(context.Background()); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(m.trashDir); len(entries) != 0 {
		t.Fatalf("EmptyTrash left %v", entries)
	}

	// A trashed repo can be mirrored again.
	if res := mustSync(t, m, tg); !res.Cloned {
		t.Fatalf("sync after trash: %+v", res)
	}
	assertMirrored(t, m, u, tg)
}

func TestCorruptMirror(t *testing.T) {
	s := newGitServer(t)
	u := buildBasic(t, s, "x/corrupt")
	m := newTestMirrorer(t, Config{})
	tg := u.target("corrupt")
	mustSync(t, m, tg)
	dir := mirrorDir(t, m, tg)

	packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if len(packs) == 0 {
		t.Fatal("no pack in mirror")
	}
	for _, p := range packs {
		if err := os.Truncate(p, 40); err != nil {
			t.Fatal(err)
		}
	}
	// A poll that finds nothing new reads no object, so it cannot see the damage
	// (maintenance's scrub does); the next change does.
	if res, err := m.Sync(context.Background(), tg); err != nil || res.Changed {
		t.Fatalf("no-change poll of a mirror with damaged packs: %+v, %v; want no change, nothing read", res, err)
	}
	u.commit(t, "after the damage", map[string][]byte{"late": []byte("late\n")})
	_, err := m.Sync(context.Background(), tg)
	kindIs(t, err, fetch.KindCorrupt)

	if err := os.Remove(filepath.Join(dir, "HEAD")); err != nil {
		t.Fatal(err)
	}
	_, err = m.Sync(context.Background(), tg)
	kindIs(t, err, fetch.KindCorrupt)
	if !isDir(dir) {
		t.Fatal("a corrupt mirror must not be deleted by Sync")
	}
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process == nil || cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
}

type refusal struct{ addr string }

func (r refusal) Error() string         { return "refused by policy: " + r.addr }
func (r refusal) RefusedByPolicy() bool { return true }

func TestClientIsPerMirrorer(t *testing.T) {
	s := newGitServer(t)
	u := buildBasic(t, s, "x/policy")
	tg := u.target("policy")

	// A Mirrorer whose dialer refuses everything.
	refusing := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nil, refusal{addr}
		},
	}}
	mBad := newTestMirrorer(t, Config{Client: refusing})
	_, err := mBad.Sync(context.Background(), tg)
	kindIs(t, err, fetch.KindPolicy)

	// A dialer that speaks fetch.Error directly.
	kindOnly := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nil, fetch.Errorf(fetch.KindPolicy, "loopback %s not allowed", addr)
		},
	}}
	mBad2 := newTestMirrorer(t, Config{Client: kindOnly})
	_, err = mBad2.Sync(context.Background(), tg)
	kindIs(t, err, fetch.KindPolicy)

	// The project's URL policy: its strict default refuses 127.0.0.1 at connect time.
	mStrict := newTestMirrorer(t, Config{Client: urlpolicy.Default().HTTPClient(0)})
	_, err = mStrict.Sync(context.Background(), tg)
	kindIs(t, err, fetch.KindPolicy)
	if !errors.Is(err, urlpolicy.ErrRefused) {
		t.Fatalf("policy refusal lost its cause: %v", err)
	}
	// ... and a policy that admits private hosts works through go-git end to end.
	mLoose := newTestMirrorer(t, Config{Client: urlpolicy.Policy{AllowPrivateHosts: true}.HTTPClient(0)})
	mustSync(t, mLoose, tg)
	assertMirrored(t, mLoose, u, tg)

	// A Mirrorer with a counting client, at the same time: its client is used, the
	// refusing one is not.
	var n atomic.Int64
	counting := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})}
	mGood := newTestMirrorer(t, Config{Client: counting})
	mustSync(t, mGood, tg)
	if n.Load() == 0 {
		t.Fatal("the Mirrorer's client was not used")
	}
	assertMirrored(t, mGood, u, tg)

	// Plain go-git in the same process still gets go-git's default transport.
	if _, err := git.PlainClone(t.TempDir(), true, &git.CloneOptions{URL: u.URL()}); err != nil {
		t.Fatalf("plain go-git clone after New: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestMirrorOfAnotherURL: a directory whose config records another origin URL is never
// fetched into, nor trashed, for this URL. "x/two" and "x/two.git" are one directory;
// a record of each (as from before the store kept one repo per path) must not mix.
func TestMirrorOfAnotherURL(t *testing.T) {
	_, u, m, owner := syncedBasic(t, "two", Config{})
	dir := mirrorDir(t, m, owner)
	other := fetch.Target{ID: "other", URL: u.URL() + ".git"}
	if p, _ := m.Path(other); p != dir {
		t.Fatalf("test setup: %s and %s map to %s and %s", owner.URL, other.URL, dir, p)
	}
	before := treeSnapshot(t, dir)
	_, err := m.Sync(context.Background(), other)
	kindIs(t, err, fetch.KindConflict)
	if !strings.Contains(err.Error(), owner.URL) {
		t.Errorf("error does not name the mirror's URL: %v", err)
	}
	kindIs(t, m.Trash(context.Background(), other), fetch.KindConflict)
	if d := diffSnapshots(before, treeSnapshot(t, dir)); len(d) > 0 {
		t.Fatalf("the other URL's sync or trash changed the mirror: %v", d)
	}
	mustSync(t, m, owner)
	if err := m.Trash(context.Background(), owner); err != nil || isDir(dir) {
		t.Fatalf("the owner's trash: %v (dir still there: %v)", err, isDir(dir))
	}
}
