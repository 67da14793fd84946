package mirror

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/fstrace"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// A poll that knows the mirror's refs (Target.RefsDigest) needs nothing of the mirror
// when the upstream's refs are the same: with the mirror's directory moved away, such
// polls still succeed and create nothing; the first poll that finds new refs finds the
// mirror missing and says so, and a sync without the digest clones it again.
func TestNoChangePollNeedsNoMirror(t *testing.T) {
	s, u, m, tg := syncedBasic(t, "away", Config{})
	dir := mirrorDir(t, m, tg)

	// The digest a clone reports is the one a poll of the same refs computes, and a
	// sync that reads the mirror (no digest given) reports it too.
	first := mustSync(t, m, tg)
	if first.Changed || first.RefsDigest == "" {
		t.Fatalf("sync after the clone: %+v, want no change and a digest", first)
	}
	tg.RefsDigest = first.RefsDigest
	s.resetRequests()
	res := mustSync(t, m, tg)
	if res.Changed || res.RefsDigest != tg.RefsDigest || res.SizeBytes != 0 || res.BytesReceived <= 0 {
		t.Fatalf("poll with the digest: %+v, want no change, the same digest, no size, the advertisement's bytes", res)
	}
	if got, want := s.requests(), []string{"GET /x/away/info/refs?service=git-upload-pack"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("poll made requests %q, want %q", got, want)
	}

	away := filepath.Join(t.TempDir(), "away.git")
	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	before := treeSnapshot(t, m.root)
	for i := range 3 {
		res := mustSync(t, m, tg)
		if res.Changed || res.Cloned || res.RefsDigest != tg.RefsDigest {
			t.Fatalf("poll %d without the mirror: %+v", i, res)
		}
	}
	if d := diffSnapshots(before, treeSnapshot(t, m.root)); len(d) != 0 {
		t.Fatalf("no-change polls touched the mirror root:\n%s", strings.Join(d, "\n"))
	}

	u.commit(t, "moved on", map[string][]byte{"new.txt": []byte("new\n")})
	_, err := m.Sync(t.Context(), tg)
	kindIs(t, err, fetch.KindCorrupt)
	if !strings.Contains(err.Error(), "missing") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("the changed poll's error does not say the mirror is missing: %v", err)
	}
	for _, c := range diffSnapshots(before, treeSnapshot(t, m.root)) {
		if strings.HasPrefix(c, "added ") {
			t.Fatalf("the changed poll created %s", strings.TrimPrefix(c, "added "))
		}
	}
	if m.Exists(tg) {
		t.Fatal("the changed poll made a mirror")
	}

	tg.RefsDigest = ""
	again := mustSync(t, m, tg)
	if !again.Cloned || again.RefsDigest == "" || again.RefsDigest == first.RefsDigest {
		t.Fatalf("sync without the digest: %+v, want a clone with the new refs' digest", again)
	}
	assertMirrored(t, m, u, tg)
}

// Refs that differ from the digest are fetched as without one, into the mirror as it
// is (the truth), after Admit; an Admit that refuses ends the sync with its error
// and the mirror as it was. A no-change poll never asks Admit.
func TestPollWithDigestFetchesChanges(t *testing.T) {
	_, u, m, tg := syncedBasic(t, "digest", Config{})
	tg.RefsDigest = mustSync(t, m, tg).RefsDigest
	admits := 0
	full := fetch.Errorf(fetch.KindDiskFull, "disk 90%% full")
	tg.Admit = func(context.Context) (int64, error) { admits++; return 0, full }
	mustSync(t, m, tg)
	if admits != 0 {
		t.Fatalf("a no-change poll asked Admit %d times", admits)
	}

	dir := mirrorDir(t, m, tg)
	before := forEachRef(t, "", dir, dir)
	u.commit(t, "change", map[string][]byte{"c.txt": []byte("c\n")})
	_, err := m.Sync(t.Context(), tg)
	kindIs(t, err, fetch.KindDiskFull)
	if admits != 1 || forEachRef(t, "", dir, dir) != before {
		t.Fatalf("a refused change: %d admits, refs changed: %v", admits, forEachRef(t, "", dir, dir) != before)
	}

	var capped int64
	tg.Admit = func(context.Context) (int64, error) { capped = 1 << 30; return capped, nil }
	res := mustSync(t, m, tg)
	if !res.Changed || capped == 0 || res.RefsDigest == tg.RefsDigest {
		t.Fatalf("an admitted change: %+v", res)
	}
	assertMirrored(t, m, u, tg)
	// A stale digest (one the mirror does not have) costs a read of the mirror once,
	// never a wrong answer: the mirror is the truth.
	tg.RefsDigest, tg.Admit = "0123456789abcdef0123456789abcdef", nil
	stale := mustSync(t, m, tg)
	if stale.Changed || stale.RefsDigest != res.RefsDigest {
		t.Fatalf("sync with a stale digest: %+v, want no change and the mirror's digest %s", stale, res.RefsDigest)
	}
}

// The helper process of TestNoChangePollMakesNoFileCall (run under strace, started by
// TestMain in killed_test.go): polls with the digest between two markers, then one sync
// without it between two more.
const pollHelperEnv = "MIRRORFLEET_TEST_STRACED_POLLS"

// stracedPolls runs the helper: spec is root, URL, digest, marker directory and the
// poll count, newline-separated.
func stracedPolls(spec string) error {
	f := strings.Split(spec, "\n")
	if len(f) != 5 {
		return fmt.Errorf("helper spec %q", spec)
	}
	root, url, digest, marks := f[0], f[1], f[2], f[3]
	n, err := strconv.Atoi(f[4])
	if err != nil {
		return err
	}
	m, err := New(Config{Root: root})
	if err != nil {
		return err
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tg := fetch.Target{ID: "traced", URL: url, RefsDigest: digest}
	fstrace.Mark(filepath.Join(marks, "polls-begin"))
	for range n {
		res, err := m.Sync(ctx, tg)
		if err != nil {
			return err
		}
		if res.Changed || res.RefsDigest != digest {
			return fmt.Errorf("poll: %+v", res)
		}
	}
	fstrace.Mark(filepath.Join(marks, "polls-end"))
	tg.RefsDigest = ""
	fstrace.Mark(filepath.Join(marks, "sync-begin"))
	if res, err := m.Sync(ctx, tg); err != nil || res.Changed {
		return errors.Join(err, fmt.Errorf("sync: %+v", res))
	}
	fstrace.Mark(filepath.Join(marks, "sync-end"))
	return nil
}

// A no-change poll opens, stats, lists and locks nothing under the mirrors root
// (DESIGN invariant 13), counted from the process's system calls: a process that
// polls an unchanged repo with its digest is recorded by strace, and between its
// markers no call names a path under the root. The same record shows a sync without
// the digest reading the mirror, so the record would see the polls if they did.
func TestNoChangePollMakesNoFileCall(t *testing.T) {
	fstrace.ForTest(t)
	_, _, m, tg := syncedBasic(t, "traced", Config{})
	digest := mustSync(t, m, tg).RefsDigest
	marks := t.TempDir()
	out := filepath.Join(marks, "trace")
	const polls = 5
	cmd, err := fstrace.Command(t.Context(), out, os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), pollHelperEnv+"="+strings.Join([]string{m.root, tg.URL, digest, marks, strconv.Itoa(polls)}, "\n"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("traced polls: %v\n%s", err, b)
	}
	calls, err := fstrace.ParseFile(out)
	if err != nil {
		t.Fatal(err)
	}
	during, err := fstrace.Between(calls, filepath.Join(marks, "polls-begin"), filepath.Join(marks, "polls-end"))
	if err != nil {
		t.Fatal(err)
	}
	if len(during) == 0 {
		t.Fatal("no system call at all between the markers: the record cannot see the polls")
	}
	if touched := fstrace.Under(during, m.root); len(touched) > 0 {
		var lines []string
		for _, c := range touched {
			lines = append(lines, fmt.Sprintf("%s %v", c.Name, c.Paths))
		}
		t.Fatalf("%d no-change polls made %d calls under the mirrors root:\n%s", polls, len(touched), strings.Join(lines, "\n"))
	}
	sync, err := fstrace.Between(calls, filepath.Join(marks, "sync-begin"), filepath.Join(marks, "sync-end"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(fstrace.Under(sync, mirrorDir(t, m, tg))); n < 5 {
		t.Fatalf("a sync without the digest made %d calls on the mirror: the record misses them", n)
	}
}
