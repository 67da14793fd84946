package mirror

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/logtest"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
)

// testGit is the git maintenance runs, or a skip saying what is missing.
func testGit(t testing.TB) gitcmd.Git {
	t.Helper()
	g, err := gitcmd.Find(context.Background())
	if err != nil {
		t.Skipf("maintenance needs git: %v", err)
	}
	return g
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// TestMaintainRollsUpGoGitPacks: a mirror with one pack per go-git fetch is repacked
// geometrically with a multi-pack index and bitmap and a split commit-graph, its loose
// refs are packed; it still equals the upstream, passes fsck, clones, and go-git keeps
// fetching into it.
func TestMaintainRollsUpGoGitPacks(t *testing.T) {
	s, u, m, tg := syncedBasic(t, "packs", Config{Git: testGit(t)})
	for i := range 6 {
		u.commit(t, fmt.Sprint("more ", i), map[string][]byte{"n.txt": []byte(fmt.Sprint(i)), "r.dat": randomBytes(t, 4<<10)})
		u.git(t, "branch", "-f", fmt.Sprint("b", i))
		if res := mustSync(t, m, tg); res.Packs != i+2 {
			t.Fatalf("after fetch %d: Packs = %d, want %d (one per go-git fetch)", i, res.Packs, i+2)
		}
	}
	dir := mirrorDir(t, m, tg)
	res, err := m.Maintain(context.Background(), tg, fetch.MaintainRequest{Fsck: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped || res.Recloned || !res.Fscked || res.PacksBefore != 7 || res.PacksAfter >= res.PacksBefore {
		t.Fatalf("maintenance: %+v; want 7 packs rolled up, checked", res)
	}
	pack := filepath.Join(dir, "objects", "pack")
	bitmaps, _ := filepath.Glob(filepath.Join(pack, "multi-pack-index-*.bitmap"))
	if !exists(filepath.Join(pack, "multi-pack-index")) || len(bitmaps) != 1 ||
		!exists(filepath.Join(dir, "objects", "info", "commit-graphs", "commit-graph-chain")) {
		t.Fatal("no multi-pack index, bitmap or commit-graph chain after maintenance")
	}
	if loose, _ := os.ReadDir(filepath.Join(dir, "refs", "heads")); len(loose) != 0 {
		t.Fatalf("loose refs left: %v", loose)
	}
	assertMirrored(t, m, u, tg)
	fsck(t, s.home, dir)
	clone := filepath.Join(t.TempDir(), "c")
	runGit(t, s.home, "", nil, "clone", "-q", "--mirror", "file://"+dir, clone)
	if got, want := forEachRef(t, "", "", clone), u.refs(t); got != want {
		t.Fatalf("clone of the maintained mirror has refs\n%s\nwant\n%s", got, want)
	}

	// go-git reads and fetches into the maintained mirror; the next maintenance within
	// the same slot is skipped, a later one runs.
	u.commit(t, "after", map[string][]byte{"after": []byte("x")})
	mustSync(t, m, tg)
	assertMirrored(t, m, u, tg)
	since := time.Now().Add(-time.Hour)
	if res, err := m.Maintain(context.Background(), tg, fetch.MaintainRequest{Since: since}); err != nil || !res.Skipped {
		t.Fatalf("maintenance already done since %v: %+v, %v; want skipped", since, res, err)
	}
	if res, err := m.Maintain(context.Background(), tg, fetch.MaintainRequest{Since: time.Now().Add(time.Second)}); err != nil || res.Skipped || res.Fscked {
		t.Fatalf("a later slot: %+v, %v; want run, no fsck", res, err)
	}
	fsck(t, s.home, dir)
}

// A mirror that is one big pack (a fresh go-git clone) keeps it and gains the index,
// bitmap and commit-graph.
func TestMaintainSinglePack(t *testing.T) {
	s := newGitServer(t)
	u := s.newRepo(t, "x/big")
	for i := range 4 {
		u.commit(t, fmt.Sprint("big ", i), map[string][]byte{fmt.Sprint("blob", i): randomBytes(t, 4<<20)})
	}
	m := newTestMirrorer(t, Config{Git: testGit(t)})
	tg := u.target("big")
	mustSync(t, m, tg)
	res, err := m.Maintain(context.Background(), tg, fetch.MaintainRequest{})
	if err != nil || res.PacksBefore != 1 || res.PacksAfter != 1 {
		t.Fatalf("maintenance of a one-pack mirror: %+v, %v", res, err)
	}
	dir := mirrorDir(t, m, tg)
	bitmaps, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "multi-pack-index-*.bitmap"))
	if len(bitmaps) != 1 {
		t.Fatal("no multi-pack bitmap for the single pack")
	}
	// git uses the bitmap: a clone counts objects from it.
	out, err := exec.Command("git", "-C", dir, "rev-list", "--test-bitmap", "HEAD").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK!") {
		t.Fatalf("bitmap check: %v: %s", err, out)
	}
	assertMirrored(t, m, u, tg)
}

// A corrupt mirror (its pack gone) fails its check, is moved to the trash with a log
// line, and cloned again under the lock.
func TestMaintainReclonesCorruptMirror(t *testing.T) {
	logs := &logtest.Buffer{}
	s, u, m, tg := syncedBasic(t, "rot", Config{Git: testGit(t), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	dir := mirrorDir(t, m, tg)
	packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "pack-*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs %v", packs)
	}
	if err := os.Remove(packs[0]); err != nil {
		t.Fatal(err)
	}
	res, err := m.Maintain(context.Background(), tg, fetch.MaintainRequest{Fsck: true})
	if err != nil || !res.Recloned || !res.Fscked {
		t.Fatalf("maintenance of a corrupt mirror: %+v, %v; want checked and re-cloned", res, err)
	}
	if !strings.Contains(logs.String(), "mirror corrupt: moved to the trash") || !strings.Contains(logs.String(), "to="+m.trashDir) {
		t.Errorf("no log line for the corrupt mirror moved to %s:\n%s", m.trashDir, logs)
	}
	assertMirrored(t, m, u, tg)
	fsck(t, s.home, dir)
}

func TestMaintainBusyAndConflict(t *testing.T) {
	s, _, m, tg := syncedBasic(t, "held", Config{Git: testGit(t)})
	lp, _ := m.LockPath(tg)
	lk, err := tryLock(lp)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Maintain(context.Background(), tg, fetch.MaintainRequest{})
	kindIs(t, err, fetch.KindBusy)
	lk.unlock(false)
	_, err = m.Maintain(context.Background(), fetch.Target{ID: "other", URL: tg.URL + ".git"}, fetch.MaintainRequest{})
	kindIs(t, err, fetch.KindConflict)
	if res, err := m.Maintain(context.Background(), tg, fetch.MaintainRequest{}); err != nil || res.PacksBefore != 1 {
		t.Fatalf("maintenance: %+v, %v", res, err)
	}
	none := fetch.Target{ID: "none", URL: s.srv.URL + "/x/never"}
	if res, err := m.Maintain(context.Background(), none, fetch.MaintainRequest{}); err != nil || !res.Skipped {
		t.Fatalf("maintenance without a mirror: %+v, %v; want skipped", res, err)
	}
	if _, err := newTestMirrorer(t, Config{}).Maintain(context.Background(), tg, fetch.MaintainRequest{}); err == nil {
		t.Fatal("maintenance without git succeeded")
	}
}

// planMaintenance: a full run when asked, after a failure, with nothing recorded or
// when the scrub slot began after the last full run; nothing when the fingerprint is
// the recorded one; else a run over the packs new since the recorded ones.
func TestPlanMaintenance(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	fp := &fingerprint{Refs: "r1", Packs: []string{"pack-a.pack"}}
	moved := &fingerprint{Refs: "r2", Packs: []string{"pack-a.pack", "pack-b.pack"}}
	ok := maintState{LastRun: t0, LastFsck: t0, Fingerprint: fp, FsckFingerprint: fp}
	failed := ok
	failed.Failed = true
	scrubbedBefore := ok // scrubbed at fp, maintained since at moved
	scrubbedBefore.Fingerprint = moved
	changedOnly := fetch.MaintainRequest{ScrubSince: t0.Add(time.Hour), ScrubChangedOnly: true}
	for _, c := range []struct {
		name     string
		st       maintState
		cur      *fingerprint
		req      fetch.MaintainRequest
		run      bool
		full     bool
		wantKnow []string
	}{
		{"unchanged", ok, fp, fetch.MaintainRequest{ScrubSince: t0.Add(-time.Hour)}, false, false, nil},
		{"changed", ok, moved, fetch.MaintainRequest{ScrubSince: t0}, true, false, fp.Packs},
		{"unreadable fingerprint", ok, nil, fetch.MaintainRequest{}, true, false, fp.Packs},
		{"scrub slot began", ok, fp, fetch.MaintainRequest{ScrubSince: t0.Add(time.Hour)}, true, true, nil},
		{"asked (corrupt fetch)", ok, fp, fetch.MaintainRequest{Fsck: true}, true, true, nil},
		{"after a failure", failed, fp, fetch.MaintainRequest{}, true, true, nil},
		{"nothing recorded", maintState{}, fp, fetch.MaintainRequest{}, true, true, nil},
		{"recorded before fingerprints", maintState{LastRun: t0, LastFsck: t0}, fp, fetch.MaintainRequest{}, true, true, nil},
		// A scrub of changed mirrors only: none for a mirror as its last scrub left it,
		// one for a mirror written since (its later maintenance included), and one where
		// the last scrub's fingerprint is not recorded.
		{"scrub slot, unchanged since the scrub", ok, fp, changedOnly, false, false, nil},
		{"scrub slot, written since the scrub", scrubbedBefore, moved, changedOnly, true, true, nil},
		{"scrub slot, changed since the last run", ok, moved, changedOnly, true, true, nil},
		{"scrub slot, no scrub fingerprint", maintState{LastRun: t0, LastFsck: t0, Fingerprint: fp}, fp, changedOnly, true, true, nil},
	} {
		run, opt := planMaintenance(c.st, c.cur, c.req)
		if run != c.run || opt.Full != c.full || fmt.Sprint(opt.Known) != fmt.Sprint(c.wantKnow) {
			t.Errorf("%s: run %v %+v; want run %v full %v known %v", c.name, run, opt, c.run, c.full, c.wantKnow)
		}
	}
}

// The maintenance of a changed mirror runs only the steps its change needs: the new
// loose refs packed, the new packs indexed, rolled up (the old pack left alone, no
// bitmap) and graphed, no check; an unchanged one runs none, and a scrub all of them.
func TestMaintainByChange(t *testing.T) {
	_, u, m, tg := syncedBasic(t, "bychange", Config{Git: testGit(t)})
	ctx := context.Background()
	res, err := m.Maintain(ctx, tg, fetch.MaintainRequest{})
	if err != nil || !res.Fscked || fmt.Sprint(res.Steps) != "[pack-refs repack commit-graph fsck]" {
		t.Fatalf("first maintenance: %+v, %v; want a full run", res, err)
	}
	if res, err := m.Maintain(ctx, tg, fetch.MaintainRequest{}); err != nil || !res.Unchanged || len(res.Steps) != 0 {
		t.Fatalf("unchanged: %+v, %v; want no step", res, err)
	}
	for i := range 3 {
		u.commit(t, fmt.Sprint("more ", i), map[string][]byte{"more": []byte(fmt.Sprint(i))})
		mustSync(t, m, tg)
	}
	res, err = m.Maintain(ctx, tg, fetch.MaintainRequest{})
	if err != nil || res.Unchanged || res.Fscked || res.PacksBefore != 4 || res.PacksAfter != 2 ||
		fmt.Sprint(res.Steps) != "[pack-refs midx-write midx-repack midx-expire commit-graph]" {
		t.Fatalf("changed: %+v, %v; want refs packed, the 3 new packs rolled into one beside the old and graphed, no check", res, err)
	}
	dir := mirrorDir(t, m, tg)
	if bitmaps, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.bitmap")); len(bitmaps) != 0 {
		t.Fatalf("bitmap %v written by a run without scrub", bitmaps)
	}
	if out, err := exec.Command("git", "--git-dir", dir, "commit-graph", "verify").CombinedOutput(); err != nil {
		t.Fatalf("commit-graph verify: %v\n%s", err, out)
	}
	// A ref deletion: refs change, no pack is new: only the refs are packed.
	u.git(t, "branch", "-D", "feature")
	mustSync(t, m, tg)
	if res, err := m.Maintain(ctx, tg, fetch.MaintainRequest{}); err != nil || fmt.Sprint(res.Steps) != "[]" || res.Unchanged {
		t.Fatalf("ref deletion: %+v, %v; want a run with no git step (go-git rewrote packed-refs)", res, err)
	}
	res, err = m.Maintain(ctx, tg, fetch.MaintainRequest{ScrubSince: time.Now().Add(time.Hour)})
	if err != nil || !res.Fscked || fmt.Sprint(res.Steps) != "[pack-refs repack commit-graph fsck]" {
		t.Fatalf("scrub: %+v, %v; want a full run", res, err)
	}
	if bitmaps, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.bitmap")); len(bitmaps) != 1 {
		t.Fatalf("no bitmap after the scrub: %v", bitmaps)
	}
	// The next scrub slot with scrubs of changed mirrors only: the mirror as the last
	// scrub left it is not scrubbed again (no git run); written since, it is.
	next := fetch.MaintainRequest{ScrubSince: time.Now().Add(2 * time.Hour), ScrubChangedOnly: true}
	if res, err := m.Maintain(ctx, tg, next); err != nil || !res.Unchanged || res.Fscked || len(res.Steps) != 0 {
		t.Fatalf("scrub slot of an unwritten mirror: %+v, %v; want nothing run", res, err)
	}
	u.commit(t, "after the scrub", map[string][]byte{"after": []byte("x")})
	mustSync(t, m, tg)
	if res, err := m.Maintain(ctx, tg, next); err != nil || !res.Fscked {
		t.Fatalf("scrub slot of a mirror written since its scrub: %+v, %v; want a full run", res, err)
	}
	assertMirrored(t, m, u, tg)
}
