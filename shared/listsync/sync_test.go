package listsync

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/hostile"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/liststatus"
	"github.com/mirrorfleet/mirrorfleet/shared/repos"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/timer"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

func TestAddAndRemoveLinesAfterOneSync(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := urls("base", 40) // removing one of 40 stays under the 5% threshold
	c1 := f.commit(base...)
	f.mustTick()
	wantSame(t, "list repos after the first sync", f.live(store.SourceList), base)
	ls, d := f.state()
	if ls.Commit != c1 || d.Entries != 40 || d.Added != 40 || d.Mode != "full" || !ls.AppliedAt.Equal(f.clk.Now()) {
		t.Fatalf("recorded %s (want %s), details %+v", ls.Commit, c1, d)
	}
	for _, r := range f.all() {
		if r.State != store.RepoPending || r.Source != store.SourceList || !r.CreatedAt.Equal(f.clk.Now()) {
			t.Fatalf("new repo %+v: want pending, source list, created now", r)
		}
	}

	// One commit adds two lines and removes one.
	next := append(slices.Clone(base[1:]), "https://git.example.org/new/one", "https://git.example.org/new/two")
	c2 := f.commit(next...)
	f.mustTick()
	wantSame(t, "list repos after the change", f.live(store.SourceList), next)
	if r, ok := f.repo(base[0]); !ok || r.State != store.RepoDeleting {
		t.Fatalf("removed line: repo %+v (exists %v), want deleting", r, ok)
	}
	ls, d = f.state()
	if ls.Commit != c2 || d.Mode != "diff" || d.Added != 2 || d.Removed != 1 || d.Entries != 41 || d.Held != nil {
		t.Fatalf("after the change: commit %s (want %s), details %+v", ls.Commit, c2, d)
	}
}

func TestUnchangedHeadCostsNoWrites(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.commit(urls("a", 30)...)
	f.mustTick()
	before := f.st.snapshot()
	f.srv.ResetRequests()
	for range 5 {
		f.mustTick() // the interval passed: fetches, finds the same head
	}
	if got := f.st.snapshot(); !equalCounts(got, before) {
		t.Fatalf("unchanged head wrote to the store: before %v, after %v", before, got)
	}
	fetches := len(f.srv.Requests())
	if fetches == 0 {
		t.Fatal("the syncs did not contact the list server at all")
	}
	for _, r := range f.srv.Requests() {
		if strings.Contains(r, "git-upload-pack") && strings.HasPrefix(r, "POST") {
			t.Fatalf("an unchanged list was fetched, not just listed: %v", f.srv.Requests())
		}
	}
	// Between intervals a tick does nothing at all: no fetch either.
	f.srv.ResetRequests()
	for range 3 {
		f.clk.Advance(f.s.cfg.Interval / 4)
		if err := f.s.SyncList(context.Background(), f.term); err != nil {
			t.Fatal(err)
		}
	}
	if reqs := f.srv.Requests(); len(reqs) != 0 {
		t.Fatalf("ticks within the interval contacted the list server: %v", reqs)
	}
	if got := f.st.snapshot(); !equalCounts(got, before) {
		t.Fatalf("ticks within the interval wrote: %v", got)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestBadLinesAreReportedAndSkipped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.Paths = []string{"lists"} })
	good := []string{"https://github.com/git/git", "https://gitlab.example.com/group/sub/project", "http://10.1.2.3/internal/repo"}
	f.up.Commit(t, "lists", map[string][]byte{
		"lists/a.txt": []byte(strings.Join([]string{
			"# upstream repos",                      // 1
			"",                                      // 2
			good[0] + "   # the git project",        // 3
			"not a url at all",                      // 4
			"https://user:secret@example.com/x.git", // 5
			"git://example.com/old.git",             // 6
			"https://GitHub.com/git/git.git",        // 7: the same repo as line 3
			"http://169.254.169.254/latest",         // 8
			"file:///etc/passwd",                    // 9
			"https://example.com/" + strings.Repeat("x", MaxLineBytes), // 10
			good[1], // 11
		}, "\n") + "\n"),
		"lists/more/b.txt": []byte("\r\n" + good[2] + "\r\n" + good[0] + "\r\n"),
		"lists/README.md":  []byte("not a list: ignored\n"),
	})
	f.mustTick()
	wantSame(t, "repos from the good lines", f.live(store.SourceList), good)

	_, d := f.state()
	want := map[string]string{ // file:line -> a word the reason must have
		"lists/a.txt:4":      "",
		"lists/a.txt:5":      "credential",
		"lists/a.txt:6":      "git://",
		"lists/a.txt:7":      "duplicate of lists/a.txt:3",
		"lists/a.txt:8":      "metadata",
		"lists/a.txt:9":      "file",
		"lists/a.txt:10":     "longer than",
		"lists/more/b.txt:3": "duplicate of lists/a.txt:3",
	}
	if d.BadTotal != len(want) || len(d.BadLines) != len(want) {
		t.Fatalf("bad lines %d (%d kept), want %d: %+v", d.BadTotal, len(d.BadLines), len(want), d.BadLines)
	}
	for _, b := range d.BadLines {
		at := b.File + ":" + strconv.Itoa(b.Line)
		word, ok := want[at]
		if !ok || !strings.Contains(b.Reason, word) || b.Reason == "" {
			t.Errorf("bad line %s: %q (reason %q); want one at %s mentioning %q", at, b.Text, b.Reason, at, word)
		}
		if strings.Contains(b.Text, "secret") && !strings.Contains(b.Text, "user:secret") {
			t.Errorf("text mangled: %q", b.Text)
		}
		if len(b.Text) > maxTextInBad+len("…") {
			t.Errorf("bad line text kept whole: %d bytes", len(b.Text))
		}
	}
	if d.Entries != 3 {
		t.Errorf("entries %d, want 3", d.Entries)
	}
	// The logs carry file:line and the reason; the API status too.
	if logs := f.logs.String(); !strings.Contains(logs, "at=lists/a.txt:4") || !strings.Contains(logs, "duplicate of lists/a.txt:3") {
		t.Errorf("bad lines not logged with file:line:\n%s", logs)
	}
	st, err := f.s.ListStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.BadTotal != len(want) || len(st.BadLines) != len(want) || st.BadLines[0].File != "lists/a.txt" || st.BadLines[0].Line != 4 ||
		!strings.Contains(st.Message, "8 bad lines") {
		t.Errorf("status: %+v", st)
	}
}

func TestHalfDeletionHeldUntilConfirmedWhileAdditionsLand(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := urls("base", 40)
	f.commit(base...)
	f.mustTick()

	added := []string{"https://git.example.org/new/a", "https://git.example.org/new/b"}
	kept := base[:20]
	c2 := f.commit(append(slices.Clone(kept), added...)...) // removes 20 of 40: 50%
	f.mustTick()
	wantSame(t, "list repos while the purge is held", f.live(store.SourceList), append(slices.Clone(base), added...))
	_, d := f.state()
	if d.Held == nil || d.Held.Commit != c2 || d.Held.Remove != 20 || d.Held.Of != 40 || d.HeldCount() != 20 || d.Held.Percent() != 50 {
		t.Fatalf("held purge %+v", d.Held)
	}
	if len(d.Held.Sample) == 0 || !slices.Contains(base[20:], d.Held.Sample[0]) {
		t.Fatalf("held sample %v", d.Held.Sample)
	}
	st, err := f.s.ListStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.HeldPurge == nil || st.HeldPurge.Remove != 20 || st.HeldPurge.Confirmed || !strings.Contains(st.Message, "mirrorfleet list confirm "+c2) {
		t.Fatalf("status while held: %+v", st)
	}
	if !strings.Contains(f.logs.String(), "list purge held") {
		t.Errorf("the hold is not logged")
	}

	// Syncs while held and unconfirmed change nothing and write nothing.
	before := f.st.total()
	f.mustTick()
	f.mustTick()
	if f.st.total() != before {
		t.Fatalf("a held purge wrote on unchanged syncs: %v", f.st.snapshot())
	}

	// A wrong commit is refused; the held one (by prefix) is confirmed.
	var ae *liststatus.Error
	if _, err := f.s.ConfirmPurge(context.Background(), "0123456789abcdef"); !errors.As(err, &ae) || ae.Kind != liststatus.Conflict || !strings.Contains(ae.Message, c2) {
		t.Fatalf("confirming another commit: %v", err)
	}
	st, err = f.s.ConfirmPurge(context.Background(), c2[:10])
	if err != nil {
		t.Fatal(err)
	}
	if st.HeldPurge == nil || !st.HeldPurge.Confirmed {
		t.Fatalf("after confirming: %+v", st.HeldPurge)
	}
	if _, err := f.s.ConfirmPurge(context.Background(), c2); err != nil {
		t.Fatalf("confirming twice: %v", err)
	}
	// The confirmation is applied at the next tick, without waiting for the interval.
	if err := f.s.SyncList(context.Background(), f.term); err != nil {
		t.Fatal(err)
	}
	wantSame(t, "list repos after the confirmation", f.live(store.SourceList), append(slices.Clone(kept), added...))
	_, d = f.state()
	if d.Held != nil || d.Confirmed != "" || d.Removed != 20 {
		t.Fatalf("after the confirmed purge: %+v", d)
	}
	if _, err := f.s.ConfirmPurge(context.Background(), c2); !errors.As(err, &ae) || ae.Kind != liststatus.Conflict {
		t.Fatalf("confirming with nothing held: %v", err)
	}
}

func TestRaisingTheThresholdReleasesAHeldPurge(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := urls("base", 20)
	f.commit(base...)
	f.mustTick()
	f.commit(base[:15]...) // 25%
	f.mustTick()
	if _, d := f.state(); d.HeldCount() != 5 {
		t.Fatalf("held %+v", d.Held)
	}
	// A restart with --list-purge-threshold 30: the held purge goes ahead, with no
	// change to the list.
	cfg := f.cfg
	cfg.PurgeThreshold = 30
	f.s = f.newSyncer(cfg)
	f.mustTick()
	wantSame(t, "list repos", f.live(store.SourceList), base[:15])
	if _, d := f.state(); d.Held != nil {
		t.Fatalf("still held: %+v", d.Held)
	}
}

func TestConfirmedPurgeThenANewerCommit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := urls("base", 40)
	f.commit(base...)
	f.mustTick()
	c2 := f.commit(base[:20]...)
	f.mustTick()
	if _, err := f.s.ConfirmPurge(context.Background(), c2); err != nil {
		t.Fatal(err)
	}
	// Before the coordinator gets to it, someone removes one more line and adds one:
	// the confirmed removals go ahead, the extra one is judged on its own (1 of 40).
	final := append(slices.Clone(base[:19]), "https://git.example.org/late/addition")
	f.commit(final...)
	f.mustTick()
	wantSame(t, "list repos", f.live(store.SourceList), final)
	if _, d := f.state(); d.Held != nil || d.Confirmed != "" {
		t.Fatalf("details %+v", d)
	}
}

func TestForcePushedListConvergesToTheNewList(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := urls("base", 40)
	f.commit(base[:30]...)
	f.mustTick()
	f.commit(base...)
	f.mustTick()

	// Rewrite the last commit away: the applied commit is no longer on the branch.
	rewritten := append(slices.Clone(base[1:]), urls("other", 3)...) // one removal of 40: not held
	old, nu := f.up.Rewrite(t, "main", 1, "rewritten", map[string][]byte{"repos.txt": []byte(strings.Join(rewritten, "\n"))})
	if ls, _ := f.state(); ls.Commit != old {
		t.Fatalf("applied %s, want %s", ls.Commit, old)
	}
	f.mustTick()
	ls, d := f.state()
	if ls.Commit != nu || d.Mode != "full" || d.Held != nil {
		t.Fatalf("after the force-push: commit %s (want %s), %+v", ls.Commit, nu, d)
	}
	wantSame(t, "list repos after the force-push", f.live(store.SourceList), rewritten)
	if !strings.Contains(f.logs.String(), "not an ancestor") {
		t.Errorf("rewritten history not noticed in the logs")
	}

	// A coordinator with a fresh clone (a Lambda cold start) after another rewrite does
	// not even have the old commit: it compares in full too.
	final := append(slices.Clone(rewritten[1:]), "https://git.example.org/final/one")
	_, nu = f.up.Rewrite(t, "main", 1, "again", map[string][]byte{"repos.txt": []byte(strings.Join(final, "\n"))})
	cfg := f.cfg
	cfg.Dir = t.TempDir()
	f.s = f.newSyncer(cfg)
	f.mustTick()
	ls, d = f.state()
	if ls.Commit != nu || d.Mode != "full" {
		t.Fatalf("cold start after a rewrite: commit %s (want %s), %+v", ls.Commit, nu, d)
	}
	wantSame(t, "list repos after the cold start", f.live(store.SourceList), final)
}

func TestForcePushPurgeIsProtectedToo(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := urls("base", 40)
	f.commit(base[:1]...)
	f.commit(base...)
	f.mustTick()
	f.up.Rewrite(t, "main", 1, "wipe", map[string][]byte{"repos.txt": []byte(strings.Join(base[:10], "\n"))})
	f.mustTick()
	wantSame(t, "list repos", f.live(store.SourceList), base)
	if _, d := f.state(); d.HeldCount() != 30 || d.Held.Of != 40 {
		t.Fatalf("held %+v", d.Held)
	}
}

func TestCrashBetweenApplyingAndRecordingConverges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	base := urls("base", 40)
	c1 := f.commit(base...)
	f.st.failRecord = 1
	if err := f.tick(); !errors.Is(err, errCrash) {
		t.Fatalf("sync with a crash at the record: %v", err)
	}
	wantSame(t, "list repos applied before the crash", f.live(store.SourceList), base)
	if ls, _ := f.state(); ls.Commit != "" {
		t.Fatalf("commit recorded despite the crash: %s", ls.Commit)
	}
	// The next tick (no need to wait for the interval) repeats the change and records it.
	if err := f.s.SyncList(context.Background(), f.term); err != nil {
		t.Fatal(err)
	}
	ls, d := f.state()
	if ls.Commit != c1 || d.Entries != 40 {
		t.Fatalf("after the retry: %s %+v", ls.Commit, d)
	}
	wantSame(t, "list repos", f.live(store.SourceList), base)

	// A crash in the middle of a diff's adds, and one at its record.
	next := append(slices.Clone(base[2:]), urls("more", 5)...)
	c2 := f.commit(next...)
	f.st.failCreateAt = 3
	if err := f.tick(); !errors.Is(err, errCrash) {
		t.Fatalf("sync with a crash mid-way: %v", err)
	}
	f.st.failRecord = 1
	if err := f.s.SyncList(context.Background(), f.term); !errors.Is(err, errCrash) {
		t.Fatalf("second crash: %v", err)
	}
	if err := f.s.SyncList(context.Background(), f.term); err != nil {
		t.Fatal(err)
	}
	if ls, d := f.state(); ls.Commit != c2 || d.Mode != "diff" {
		t.Fatalf("after the retries: %s %+v", ls.Commit, d)
	}
	wantSame(t, "list repos", f.live(store.SourceList), next)
	if n := len(f.all()); n != 45 {
		t.Fatalf("%d repos stored, want 45 (43 listed + 2 deleting)", n)
	}
}

func TestAPIReposSurviveAnyListChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.PurgeThreshold = 100 })
	ctx := context.Background()
	mine := []string{"https://git.example.org/api/kept", "https://git.example.org/api/also-listed"}
	for _, u := range mine {
		if res := repos.Add(ctx, f.db, policy, u, store.SourceAPI, f.clk.Now()); res.Err != nil || !res.Created {
			t.Fatalf("API add %s: %+v", u, res)
		}
	}
	base := urls("base", 10)
	f.commit(append(slices.Clone(base), mine[1])...)
	f.mustTick()
	if r, _ := f.repo(mine[1]); r.Source != store.SourceAPI {
		t.Fatalf("a listed API repo changed source: %+v", r)
	}
	// The line goes away; then the whole list, by a plain commit and by a rewrite.
	f.commit(base...)
	f.mustTick()
	f.commit("# nothing left")
	f.mustTick()
	f.up.Rewrite(t, "main", 2, "rewritten", map[string][]byte{"repos.txt": []byte(mine[0] + "\n")})
	f.mustTick()
	wantSame(t, "API repos", f.live(store.SourceAPI), mine)
	if got := f.live(store.SourceList); len(got) != 0 {
		t.Fatalf("list repos left: %v", got)
	}
}

func TestReaddedWhileBeingDeleted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.PurgeThreshold = 100 })
	x := "https://git.example.org/flaky/repo"
	base := urls("base", 5)
	f.commit(append(slices.Clone(base), x)...)
	f.mustTick()
	f.commit(base...)
	f.mustTick()
	if r, _ := f.repo(x); r.State != store.RepoDeleting {
		t.Fatalf("removed repo %+v", r)
	}
	// Re-listed before the coordinator finished the delete: the add must wait.
	f.commit(append(slices.Clone(base), x)...)
	f.mustTick()
	if _, d := f.state(); !slices.Equal(d.Pending, []string{x}) {
		t.Fatalf("pending %v", d.Pending)
	}
	f.purgeDeleted()
	f.mustTick()
	if r, ok := f.repo(x); !ok || r.State != store.RepoPending || r.Source != store.SourceList {
		t.Fatalf("re-added repo %+v (exists %v)", r, ok)
	}
	if _, d := f.state(); len(d.Pending) != 0 {
		t.Fatalf("still pending %v", d.Pending)
	}
	// And then the state is quiet again.
	before := f.st.total()
	f.mustTick()
	if f.st.total() != before {
		t.Fatalf("writes after convergence: %v", f.st.snapshot())
	}
}

func TestBranchAndMissingPath(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.Branch = "published" })
	f.commit(urls("main", 3)...)
	if err := f.tick(); err == nil || !strings.Contains(err.Error(), `branch "published" not found`) {
		t.Fatalf("missing branch: %v", err)
	}
	f.up.Branch(t, "published", "")
	f.mustTick()
	wantSame(t, "list repos", f.live(store.SourceList), urls("main", 3))
	// A configured path that disappears fails the sync instead of emptying the list.
	f.up.Git(t, "checkout", "-q", "published")
	f.up.Git(t, "rm", "-q", "repos.txt")
	f.up.Git(t, "commit", "-q", "-m", "oops")
	err := f.tick()
	if !errors.Is(err, ErrPathMissing) {
		t.Fatalf("missing path: %v", err)
	}
	wantSame(t, "list repos", f.live(store.SourceList), urls("main", 3))
	st, _ := f.s.ListStatus(context.Background())
	if st.LastError == nil || !strings.Contains(*st.LastError, "repos.txt") || !strings.Contains(st.Message, "failed") {
		t.Fatalf("status after a failure: %+v", st)
	}
}

// A deposed coordinator's list sync writes nothing: no record, no add, and no delete
// from the list commit it saw.
func TestFencedTermWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.commit(urls("a", 3)...)
	f.mustTick()
	applied, _ := f.state()
	f.commit(append(urls("a", 1), urls("b", 2)...)...) // drops two, adds two
	// Another coordinator takes over: this one's term is stale.
	el, _ := f.db.GetElection(context.Background())
	el.Term++
	el.VotedFor = "coord-2"
	if _, err := f.db.CASElection(context.Background(), el.Version, el); err != nil {
		t.Fatal(err)
	}
	if err := f.tick(); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale term: %v", err)
	}
	if ls, _ := f.state(); ls.Version != applied.Version || ls.Commit != applied.Commit {
		t.Fatalf("a stale term recorded %+v", ls)
	}
	wantSame(t, "list repos after a stale term's sync", f.live(store.SourceList), urls("a", 3))
}

func TestCoordinatorTickRunsTheListSync(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.commit(urls("a", 4)...)
	c := &coordinator.Coordinator{ID: "coord-1", Store: f.st, Timer: timer.NewLocal(), Clock: f.clk,
		Config: coordinator.Config{Lease: 24 * time.Hour, Warmup: coordinator.NoWarmup}, List: f.s}
	rep, err := c.Tick(context.Background())
	if err != nil || !rep.Leader || rep.ListError != "" {
		t.Fatalf("tick: %+v, %v", rep, err)
	}
	wantSame(t, "list repos", f.live(store.SourceList), urls("a", 4))
}

func TestNotConfigured(t *testing.T) {
	t.Parallel()
	st, err := View{}.ListStatus(context.Background())
	if err != nil || st.Configured || !strings.Contains(st.Message, "--list-repo") {
		t.Fatalf("%+v %v", st, err)
	}
	var ae *liststatus.Error
	if _, err := (View{}).ConfirmPurge(context.Background(), "abcdef0"); !errors.As(err, &ae) || ae.Kind != liststatus.Conflict {
		t.Fatalf("confirm: %v", err)
	}
	if _, err := New(Config{}, Options{}); err == nil {
		t.Fatal("New without a repository")
	}
}

func TestListRepoURLIsCheckedByThePolicy(t *testing.T) {
	t.Parallel()
	s := (&countingStore{})
	for _, c := range []struct{ url, want string }{
		{"http://127.0.0.1:9/list", "private"},
		{"http://169.254.169.254/list", "metadata"},
		{"https://user:pw@example.com/list", "credential"},
		{"git://example.com/list", "https://"},
		{"file:///tmp/list", "https://"},
	} {
		cfg := Defaults()
		cfg.Repo, cfg.Dir = c.url, t.TempDir()
		_, err := New(cfg, Options{Store: s})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %q", c.url, err, c.want)
		}
	}
}

var _ coordinator.ListSyncer = (*Syncer)(nil)

// TestMirrorPathTakenIsABadLine: a listed URL whose mirror path another stored repo
// holds (one stored with the "%21" spelling an older normalization kept) is not
// added; its line is reported, naming the repo, at every sync while it is listed, and
// the repo holding the path is neither replaced nor removed.
func TestMirrorPathTakenIsABadLine(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	old := "https://git.example.org/org/b%21c"
	held, _, err := f.db.CreateRepo(context.Background(), store.Repo{ID: store.RepoID(old), URL: old,
		Source: store.SourceList, State: store.RepoOK, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	base := urls("base", 30)
	f.commit(append([]string{"https://git.example.org/org/b!c"}, base...)...)
	check := func(when string, more ...string) {
		t.Helper()
		_, d := f.state()
		if d.BadTotal != 1 || len(d.BadLines) != 1 {
			t.Fatalf("%s: bad lines %+v, want the one whose path is taken", when, d.BadLines)
		}
		b := d.BadLines[0]
		if b.File != "repos.txt" || b.Line != 1 || !strings.Contains(b.Reason, held.ID) || !strings.Contains(b.Reason, old) {
			t.Fatalf("%s: bad line %+v; want repos.txt:1 naming %s (%s)", when, b, held.ID, old)
		}
		if r, err := f.db.GetRepo(context.Background(), held.ID); err != nil || r.URL != old || r.State != store.RepoOK {
			t.Fatalf("%s: the repo holding the path is now %+v, %v", when, r, err)
		}
		wantSame(t, when, f.live(store.SourceList), slices.Concat([]string{old}, base, more))
	}
	f.mustTick() // full compare
	check("after the first sync")
	if !strings.Contains(f.logs.String(), "list line skipped") {
		t.Error("the refused line is not logged")
	}

	f.commit(append([]string{"https://git.example.org/org/b!c", "https://git.example.org/new/one"}, base...)...)
	f.mustTick() // diff: the line is retried, still refused
	_, d := f.state()
	if d.Mode != "diff" || d.Added != 1 {
		t.Fatalf("second commit: details %+v", d)
	}
	check("after a diff sync", "https://git.example.org/new/one")
}

// TestHostileListStaysBounded: a list of a million bad lines (2 MB, a few kilobytes
// once compressed in git) is counted, its first bad lines kept, its good URLs applied,
// all in bounded memory; keeping every bad line took hundreds of megabytes.
func TestHostileListStaysBounded(t *testing.T) {
	f := newFixture(t)
	const n = 1_000_000
	body := bytes.Repeat([]byte("x\n"), n)
	body = append(body, "https://example.com/good/one\nhttps://example.com/good/two\n"...)
	f.up.Commit(t, "hostile", map[string][]byte{"repos.txt": body})
	mem := hostile.StartSampler()
	f.mustTick()
	peak := mem.Stop()
	if bound := uint64(128 << 20); peak > bound {
		t.Fatalf("heap peaked at %d MiB parsing the list, over %d MiB", peak>>20, bound>>20)
	}
	wantSame(t, "repos", f.live(store.SourceList), []string{"https://example.com/good/one", "https://example.com/good/two"})
	_, d := f.state()
	sum := 0
	for _, c := range d.BadByCode {
		sum += c
	}
	if d.BadTotal != n || len(d.BadLines) != MaxBadLinesKept || sum != n {
		t.Fatalf("bad lines: total %d, kept %d, by code %v; want %d, %d, summing to the total", d.BadTotal, len(d.BadLines), d.BadByCode, n, MaxBadLinesKept)
	}
	st, err := f.s.ListStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.BadTotal != n || len(st.BadLines) != MaxBadLinesKept || st.BadByCode[string(urlpolicy.ReasonLocalPath)] != n {
		t.Fatalf("status: %d bad lines, %d shown, by code %v", st.BadTotal, len(st.BadLines), st.BadByCode)
	}
	t.Logf("%d bad lines parsed with a heap peak of %d MiB", n, peak>>20)
}

func TestListOverItsLimitsIsNotApplied(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		mod  func(*Config)
		say  string
	}{
		{"bytes", func(c *Config) { c.MaxBytes = 100 }, "more than 100 bytes"},
		{"urls", func(c *Config) { c.MaxURLs = 2 }, "more than 2 URLs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.mod)
			f.commit("https://example.com/a/one", "https://example.com/a/two")
			f.mustTick()
			f.commit("https://example.com/a/one", "https://example.com/a/two", "https://example.com/a/three-with-a-long-name-past-100-bytes")
			err := f.tick()
			if err == nil || !strings.Contains(err.Error(), c.say) {
				t.Fatalf("sync of a list over the limit: %v, want an error saying %q", err, c.say)
			}
			wantSame(t, "repos", f.live(store.SourceList), []string{"https://example.com/a/one", "https://example.com/a/two"})
			st, _ := f.s.ListStatus(context.Background())
			if st.LastError == nil || !strings.Contains(*st.LastError, c.say) {
				t.Fatalf("status does not carry the error: %+v", st.LastError)
			}
		})
	}
}

// TestListOnCaseInsensitiveHosts: on github.com two lines naming one repo in different
// cases are one repo (the second a duplicate line); a repo stored before ids were
// folded, under the id of its mixed-case spelling, is still the listed one through a
// full compare and a diff (neither removed nor added twice), and is removed when its
// line goes.
func TestListOnCaseInsensitiveHosts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	legacyURL := "https://github.com/Legacy/Repo"
	legacy, _, err := f.db.CreateRepo(context.Background(), store.Repo{ID: store.RepoID(legacyURL), URL: legacyURL,
		Source: store.SourceList, State: store.RepoOK, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	base := urls("base", 30)
	f.commit(append([]string{legacyURL, "https://github.com/org/app", "https://github.com/Org/App"}, base...)...)
	f.mustTick() // full compare
	_, d := f.state()
	if d.BadByCode[BadDuplicate] != 1 {
		t.Errorf("bad lines %+v: want Org/App as a duplicate of org/app", d.BadLines)
	}
	wantSame(t, "after the first sync", f.live(store.SourceList), slices.Concat([]string{legacyURL, "https://github.com/org/app"}, base))
	if r, ok := f.repo(legacyURL); !ok || r.ID != legacy.ID || r.State != store.RepoOK {
		t.Fatalf("the stored repo is now %+v (%v)", r, ok)
	}
	f.commit(append([]string{legacyURL, "https://github.com/org/app", "https://github.com/new/one"}, base...)...)
	f.mustTick() // diff
	wantSame(t, "after a diff", f.live(store.SourceList), slices.Concat([]string{legacyURL, "https://github.com/org/app", "https://github.com/new/one"}, base))
	f.commit(append([]string{"https://github.com/org/app", "https://github.com/new/one"}, base...)...)
	f.mustTick()
	if r, ok := f.repo(legacyURL); !ok || r.State != store.RepoDeleting {
		t.Fatalf("the stored repo whose line went: %+v (%v), want deleting", r, ok)
	}
}
