package packcache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
)

// repo makes a bare repository with a few commits and returns it and its head.
func repo(t *testing.T) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	srv := gittest.NewServer(t)
	r := srv.NewRepo(t, "a/b.git")
	for i := range 3 {
		r.Commit(t, "c", map[string][]byte{"f": gittest.RandomBytes(t, 8<<10+i)})
	}
	return r.Bare, r.Head(t)
}

// hookEnv is the environment the server gives the hook.
func hookEnv(cache, repo string) []string {
	return []string{EnvDir + "=" + cache, EnvRepo + "=" + repo}
}

// runHook runs the hook as upload-pack would for a pack of head, in repo.
func runHook(t *testing.T, cache, repo, head string, extra ...string) ([]byte, string) {
	t.Helper()
	var out, errb bytes.Buffer
	args := append([]string{"git", "pack-objects", "--revs", "--thin", "--stdout", "--delta-base-offset"}, extra...)
	wd, _ := os.Getwd()
	if err := os.Chdir(repo); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	if code := Main(args, strings.NewReader(head+"\n--not\n\n"), &out, &errb, hookEnv(cache, repo)); code != 0 {
		t.Fatalf("hook exit %d: %s", code, errb.String())
	}
	return out.Bytes(), errb.String()
}

func TestHookCachesAndServes(t *testing.T) {
	bare, head := repo(t)
	cache := t.TempDir()
	first, _ := runHook(t, cache, bare, head)
	if !bytes.HasPrefix(first, []byte("PACK")) {
		t.Fatalf("not a pack: %q", first[:min(len(first), 16)])
	}
	n, packs, err := Size(cache)
	if err != nil || packs != 1 || n != int64(len(first)) {
		t.Fatalf("cache: %d packs, %d bytes (%v); want 1 of %d", packs, n, err, len(first))
	}
	second, _ := runHook(t, cache, bare, head, "--progress") // progress does not change the key
	if !bytes.Equal(first, second) {
		t.Fatal("the cached pack differs from the generated one")
	}
	if _, packs, _ := Size(cache); packs != 1 {
		t.Fatalf("a hit wrote a new entry: %d packs", packs)
	}
	// Other arguments are another pack.
	runHook(t, cache, bare, head, "--include-tag")
	if _, packs, _ := Size(cache); packs != 2 {
		t.Fatalf("other arguments shared an entry: %d packs", packs)
	}
}

func TestHookRefusesOtherCommands(t *testing.T) {
	for _, args := range [][]string{nil, {"git"}, {"git", "upload-pack", "."}, {"sh", "-c", "id"}, {"git", "--shallow-file", "x", "config", "--list"}} {
		var errb bytes.Buffer
		if code := Main(args, strings.NewReader(""), &bytes.Buffer{}, &errb, hookEnv("", "")); code == 0 || !strings.Contains(errb.String(), "pack-objects") {
			t.Errorf("%q: exit %d, %q", args, code, errb.String())
		}
	}
}

func TestKey(t *testing.T) {
	bare, head := repo(t)
	args := []string{"pack-objects", "--revs", "--stdout"}
	k1, err := Key(bare, args, []byte(head+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	same, _ := Key(bare, append(args, "--progress"), []byte(head+"\n"))
	otherIn, _ := Key(bare, args, []byte(head+"\n--not\n"))
	otherArgs, _ := Key(bare, append(args, "--filter=blob:none"), []byte(head+"\n"))
	if k1 != same || k1 == otherIn || k1 == otherArgs {
		t.Fatalf("keys: %s %s %s %s", k1, same, otherIn, otherArgs)
	}
	// Shallow files count by content, not by their temporary names.
	dir := t.TempDir()
	a, b := filepath.Join(dir, "shallow_1"), filepath.Join(dir, "shallow_2")
	os.WriteFile(a, []byte(head+"\n"), 0o644)
	os.WriteFile(b, []byte(head+"\n"), 0o644)
	ka, _ := Key(bare, append([]string{"--shallow-file", a}, args...), nil)
	kb, _ := Key(bare, append([]string{"--shallow-file", b}, args...), nil)
	if ka != kb {
		t.Fatal("the shallow file's name changed the key")
	}
	// An empty --shallow-file is upload-pack's "none" for a shallow request (the
	// shallow commits come on stdin): a key, distinct from a request without it.
	ke, err := Key(bare, append([]string{"--shallow-file", ""}, args...), []byte("--shallow "+head+"\n"))
	if err != nil {
		t.Fatalf("key of a shallow request: %v", err)
	}
	if kn, _ := Key(bare, args, []byte("--shallow "+head+"\n")); ke == kn || ke == ka {
		t.Fatal("an empty --shallow-file did not count in the key")
	}
	// A ref update (a fetch into the mirror) changes every key of the repo.
	gittest.Run(t, "", "", nil, "--git-dir="+bare, "update-ref", "refs/heads/new", head)
	after, _ := Key(bare, args, []byte(head+"\n"))
	if after == k1 {
		t.Fatal("a new ref did not change the key")
	}
}

// A wait for an entry in generation ends with the waiting request.
func TestWaitEndsWithItsContext(t *testing.T) {
	c := Config{Dir: t.TempDir()}.withDefaults()
	key := strings.Repeat("ab", 32)
	l, err := c.lockEntry(key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Wait(ctx, key) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after its context ended: %v", err)
	}
	l.unlock()
	if err := c.Wait(context.Background(), key); err != nil {
		t.Fatalf("Wait on a free entry: %v", err)
	}
}

// The key follows the repository's contents, not its files' sizes and times: a ref
// rewritten to another value of the same length with its old mtime, or a changed
// config, alternates or shallow file, is another key.
func TestKeyFollowsContents(t *testing.T) {
	bare, head := repo(t)
	key := func() string {
		k, err := Key(bare, []string{"pack-objects", "--stdout"}, []byte(head+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	before := key()
	if key() != before {
		t.Fatal("the key of an unchanged repository changed")
	}
	ref := filepath.Join(bare, "refs", "heads", "other")
	old := time.Unix(1_700_000_000, 0)
	write := func(p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	write(ref, strings.Repeat("a", 40)+"\n")
	k1 := key()
	write(ref, strings.Repeat("b", 40)+"\n") // same size, same mtime
	if k2 := key(); k2 == k1 || k1 == before {
		t.Fatal("a ref rewritten with the same size and mtime kept its key")
	}
	for _, name := range []string{"config", "shallow", "objects/info/alternates"} {
		k := key()
		p := filepath.Join(bare, filepath.FromSlash(name))
		prev, _ := os.ReadFile(p)
		write(p, string(prev)+"# changed\n")
		if key() == k {
			t.Errorf("a changed %s kept the key", name)
		}
	}
}
