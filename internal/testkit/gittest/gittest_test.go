package gittest_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
)

// clone clones url into a new directory with the git CLI and returns the directory.
func clone(t *testing.T, srv *gittest.Server, url string, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "clone")
	gittest.Run(t, srv.Home, "", nil, append(append([]string{"clone", "-q"}, args...), url, dir)...)
	return dir
}

func TestRepoIsServedAndFollowsEveryChange(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	up := srv.NewRepo(t, "team/app")
	if got := up.Refs(t); got != "" {
		t.Fatalf("new repo has refs: %q", got)
	}
	// An empty repository clones (git warns, and succeeds).
	clone(t, srv, up.URL())

	blob := gittest.RandomBytes(t, 32<<10)
	first := up.Commit(t, "init", map[string][]byte{"README": []byte("hi\n")})
	up.Tag(t, "v0.1", "")
	up.CheckoutNew(t, "feature")
	up.Commit(t, "binary", map[string][]byte{"bin/blob.dat": blob})
	up.Checkout(t, "main")
	up.Commit(t, "on main", map[string][]byte{"a.txt": []byte("a\n")})
	merge := up.Merge(t, "feature")
	up.AnnotatedTag(t, "v1.0", "", "release 1.0")
	up.Branch(t, "dev", "HEAD~1")

	refs := up.Refs(t)
	for _, want := range []string{
		first + " refs/tags/v0.1",
		merge + " refs/heads/main",
		"refs/heads/feature",
		"refs/heads/dev",
		"refs/tags/v1.0",
	} {
		if !strings.Contains(refs, want) {
			t.Fatalf("served refs lack %q:\n%s", want, refs)
		}
	}
	if tagObj := gittest.Run(t, "", "", nil, "--git-dir="+up.Served(), "cat-file", "-t", "refs/tags/v1.0"); tagObj != "tag" {
		t.Fatalf("v1.0 is a %s, want an annotated tag", tagObj)
	}
	if got := gittest.RefsOf(t, filepath.Join(up.Dir, ".git")); got != refs {
		t.Fatalf("working tree and served refs differ:\n%s\n--\n%s", got, refs)
	}
	// Commits 1 to 4 (the merge); the tag's own date (5) is not a commit date.
	if got, want := up.NewestCommit(t), gittest.CommitBase.Add(4*time.Hour); !got.Equal(want) {
		t.Fatalf("NewestCommit = %v, want %v", got, want)
	}

	// Over HTTP: a clone has the binary file and every ref.
	dir := clone(t, srv, up.URL(), "--mirror")
	if got := gittest.RefsOf(t, dir); got != refs {
		t.Fatalf("mirror clone refs differ:\n%s\n--\n%s", got, refs)
	}
	work := clone(t, srv, up.URL())
	if got, err := os.ReadFile(filepath.Join(work, "bin", "blob.dat")); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("binary file differs in a clone (err %v)", err)
	}
	gittest.Fsck(t, dir)

	// Deletions, a force-push and a new default branch reach the served repository.
	up.DeleteBranch(t, "feature")
	up.DeleteTag(t, "v0.1")
	old, rewritten := up.Rewrite(t, "dev", 1, "rewritten", map[string][]byte{"dev.txt": []byte("x\n")})
	refs = up.Refs(t)
	if strings.Contains(refs, "refs/heads/feature") || strings.Contains(refs, "refs/tags/v0.1") {
		t.Fatalf("deleted refs still served:\n%s", refs)
	}
	if !strings.Contains(refs, rewritten+" refs/heads/dev") || strings.Contains(refs, old+" refs/heads/dev") {
		t.Fatalf("rewrite of dev (%s -> %s) not served:\n%s", old, rewritten, refs)
	}
	if br := up.Out(t, "symbolic-ref", "--short", "HEAD"); br != "main" {
		t.Fatalf("Rewrite left the working tree on %s", br)
	}
	up.Checkout(t, "dev")
	if head := gittest.Run(t, "", "", nil, "--git-dir="+up.Served(), "symbolic-ref", "HEAD"); head != "refs/heads/dev" {
		t.Fatalf("served HEAD = %s, want refs/heads/dev", head)
	}

	// Deleting every ref leaves an empty served repository.
	up.Git(t, "update-ref", "-d", "refs/heads/main")
	up.Git(t, "update-ref", "-d", "refs/heads/dev")
	up.Git(t, "update-ref", "-d", "refs/tags/v1.0")
	if got := up.Refs(t); got != "" {
		t.Fatalf("emptied repo still serves refs:\n%s", got)
	}
}

func TestManyRefs(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	up := srv.NewRepo(t, "many")
	for i := range 3 {
		up.Commit(t, fmt.Sprint("c", i), map[string][]byte{"f": []byte(fmt.Sprint(i))})
	}
	up.AddManyRefs(t, "r", 300, 100)
	if n := len(strings.Split(up.Refs(t), "\n")); n != 401 {
		t.Fatalf("%d refs served, want 401", n)
	}
	if got := gittest.RefsOf(t, clone(t, srv, up.URL(), "--mirror")); got != up.Refs(t) {
		t.Fatal("a mirror clone of the many-ref repo differs")
	}
}

func TestWorkRepoAndInterceptAndRequestLog(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	up := srv.NewWorkRepo(t, "x/work")
	up.Commit(t, "one", nil)
	// Written behind the Repo's back, and still served.
	gittest.Run(t, srv.Home, up.Dir, nil, "tag", "direct")
	if !strings.Contains(up.Refs(t), "refs/tags/direct") {
		t.Fatalf("work repo does not serve its own refs:\n%s", up.Refs(t))
	}
	srv.ResetRequests()
	if got := gittest.Run(t, srv.Home, "", nil, "ls-remote", up.URL()); !strings.Contains(got, "refs/tags/direct") {
		t.Fatalf("ls-remote: %s", got)
	}
	if reqs := srv.Requests(); len(reqs) == 0 || !strings.HasPrefix(reqs[0], "GET /x/work/info/refs?service=git-upload-pack") {
		t.Fatalf("request log: %q", reqs)
	}

	srv.Intercept(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if strings.HasPrefix(r.URL.Path, "/teapot/") {
			http.Error(w, "no", http.StatusTeapot)
			return
		}
		next.ServeHTTP(w, r)
	})
	resp, err := http.Get(srv.URL + "/teapot/x/info/refs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Fatalf("intercepted status %d", resp.StatusCode)
	}
	resp, err = http.Get(srv.URL + "/missing/info/refs?service=git-upload-pack")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a missing repo answers %d, want 404", resp.StatusCode)
	}
	srv.Intercept(nil)
}

func TestServeOutsideATest(t *testing.T) {
	t.Parallel()
	gittest.Require(t)
	root := t.TempDir()
	bare := filepath.Join(root, "plain.git")
	gittest.Run(t, "", "", nil, "init", "-q", "--bare", "-b", "main", bare)
	work := filepath.Join(t.TempDir(), "w")
	gittest.Run(t, "", "", nil, "init", "-q", "-b", "main", work)
	gittest.Run(t, "", work, nil, "commit", "-q", "--allow-empty", "-m", "one")
	gittest.Run(t, "", work, nil, "push", "-q", bare, "main")

	srv, stop, err := gittest.Serve(root)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Root != root {
		t.Fatalf("Root = %s, want %s", srv.Root, root)
	}
	if got, want := gittest.Run(t, srv.Home, "", nil, "ls-remote", srv.URL+"/plain.git", "refs/heads/main"),
		gittest.Run(t, "", work, nil, "rev-parse", "HEAD")+"\trefs/heads/main"; got != want {
		t.Fatalf("ls-remote = %q, want %q", got, want)
	}
	stop()
	if _, err := os.Stat(srv.Home); !os.IsNotExist(err) {
		t.Fatalf("stop left the server's home behind: %v", err)
	}
	if _, err := os.Stat(bare); err != nil {
		t.Fatalf("stop touched the served repositories: %v", err)
	}
	if resp, err := http.Get(srv.URL + "/plain.git/info/refs"); err == nil {
		resp.Body.Close()
		t.Fatal("the server still answers after stop")
	}
	if _, _, err := gittest.Serve(filepath.Join(root, "missing")); err == nil {
		t.Fatal("Serve of a missing root succeeded")
	}
}
