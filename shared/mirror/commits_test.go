package mirror

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// importCommits appends n commits to branch (from its tip, or from the revision `from`
// if set, or as a new root if the branch does not exist): commit k is authored at
// start + k·step and committed committerLag later.
func importCommits(t testing.TB, u *upstream, branch, from string, n int, start time.Time, step, committerLag time.Duration) {
	t.Helper()
	err := gittest.ImportCommits(u.s.home, u.dir, gittest.Commits{Branch: branch, From: from, N: n, Start: start,
		Step: step, CommitterLag: committerLag})
	if err != nil {
		t.Fatal(err)
	}
}

// revList is git's own answer: the (author, committer) times of the commits git
// rev-list lists in the repository at gitDir for args, newest committer first.
func revList(t testing.TB, home, gitDir string, args ...string) []fetch.Commit {
	t.Helper()
	out := runGit(t, home, gitDir, nil, append([]string{"rev-list", "--format=%at %ct", "--date-order"}, args...)...)
	var cs []fetch.Commit
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "commit ") || line == "" {
			continue
		}
		var a, c int64
		if _, err := fmt.Sscan(line, &a, &c); err != nil {
			t.Fatalf("rev-list line %q: %v", line, err)
		}
		cs = append(cs, fetch.Commit{Author: time.Unix(a, 0).UTC(), Committer: time.Unix(c, 0).UTC()})
	}
	return cs
}

func sameCommits(t testing.TB, what string, got, want []fetch.Commit) {
	t.Helper()
	key := func(cs []fetch.Commit) []string {
		var k []string
		for _, c := range cs {
			k = append(k, c.Author.Format(time.RFC3339)+"/"+c.Committer.Format(time.RFC3339))
		}
		slices.Sort(k)
		return k
	}
	if g, w := key(got), key(want); !slices.Equal(g, w) {
		t.Fatalf("%s: %d commits listed, git lists %d\ngot  %v\nwant %v", what, len(g), len(w), g, w)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Committer.After(got[i-1].Committer) {
			t.Fatalf("%s: not newest first at %d: %v after %v", what, i, got[i].Committer, got[i-1].Committer)
		}
	}
}

func TestSyncListsTheCommitsAFetchBrings(t *testing.T) {
	s := newGitServer(t)
	u := s.newRepo(t, "x/walk")
	base := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	importCommits(t, u, "main", "", 40, base, time.Hour, 0)
	importCommits(t, u, "old", "main~30", 5, base.Add(10*time.Hour), time.Minute, 0)
	u.git(t, "tag", "-a", "-m", "v1", "v1", "main~5")
	u.git(t, "symbolic-ref", "HEAD", "refs/heads/main")
	m := newTestMirrorer(t, Config{Now: func() time.Time { return base.Add(100 * 24 * time.Hour) }})
	tg := u.target("walk")

	res := mustSync(t, m, tg)
	dir := mirrorDir(t, m, tg)
	sameCommits(t, "first clone", res.Commits, revList(t, s.home, dir, "--all"))
	if !res.HistoryFromRoot || !res.HistorySince.Equal(base) {
		t.Fatalf("history of a young repo: since %v from root %v, want %v and true", res.HistorySince, res.HistoryFromRoot, base)
	}
	before := strings.Fields(runGit(t, s.home, dir, nil, "for-each-ref", "--format=%(objectname)"))

	// A push of 3 commits on main, whose committer stamps them 2 hours after the
	// author; a new branch of 4 commits off an old commit; a tag on an old commit; a
	// branch rewritten (its old commits dropped, 2 new ones).
	importCommits(t, u, "main", "", 3, base.Add(200*time.Hour), time.Minute, 2*time.Hour)
	importCommits(t, u, "feature", "main~20", 4, base.Add(300*time.Hour), time.Second, 0)
	u.git(t, "tag", "v0", "main~25")
	importCommits(t, u, "old", "main~35", 2, base.Add(400*time.Hour), time.Second, 0)

	res = mustSync(t, m, tg)
	if !res.Changed || res.Cloned {
		t.Fatalf("sync after pushes: %+v", res)
	}
	want := revList(t, s.home, dir, append([]string{"--all", "--not"}, before...)...)
	if len(want) != 3+4+2 {
		t.Fatalf("git lists %d new commits, the test pushed 9", len(want))
	}
	sameCommits(t, "fetch", res.Commits, want)
	restamped := 0
	for _, c := range res.Commits {
		if c.Committer.Sub(c.Author) == 2*time.Hour && c.Time().Equal(c.Committer) {
			restamped++
		}
	}
	if restamped != 3 {
		t.Fatalf("%d new commits carry a committer time 2 h after the author's (and take it as their time), want 3", restamped)
	}

	// A poll that finds nothing lists nothing.
	if res := mustSync(t, m, tg); res.Changed || len(res.Commits) != 0 {
		t.Fatalf("no-change poll: changed %v, %d commits", res.Changed, len(res.Commits))
	}
	// A ref moved to a commit the mirror has (a reset): a change with no new commit.
	u.git(t, "update-ref", "refs/heads/feature", "main~3")
	if res := mustSync(t, m, tg); !res.Changed || len(res.Commits) != 0 {
		t.Fatalf("reset to a known commit: changed %v, %d commits", res.Changed, len(res.Commits))
	}
}

func TestHistoryIsBoundedByTheWindowAndTheCap(t *testing.T) {
	s := newGitServer(t)
	u := s.newRepo(t, "x/long")
	base := time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)
	// 1,500 commits a day apart: more than MaxHistoryCommits, and older than the window.
	importCommits(t, u, "main", "", fetch.MaxHistoryCommits+500, base, 24*time.Hour, 0)
	u.git(t, "symbolic-ref", "HEAD", "refs/heads/main")
	newest := base.Add(time.Duration(fetch.MaxHistoryCommits+499) * 24 * time.Hour)

	// Seen from just after its newest commit: the cap stops the walk first.
	m := newTestMirrorer(t, Config{Now: func() time.Time { return newest.Add(time.Hour) }})
	tg := u.target("long")
	res := mustSync(t, m, tg)
	dir := mirrorDir(t, m, tg)
	sameCommits(t, "capped history", res.Commits, revList(t, s.home, dir, "--all", fmt.Sprintf("--max-count=%d", fetch.MaxHistoryCommits)))
	if oldest := res.Commits[len(res.Commits)-1].Committer; !res.HistorySince.Equal(oldest) || res.HistoryFromRoot {
		t.Fatalf("capped history since %v (from root %v), want the oldest listed %v", res.HistorySince, res.HistoryFromRoot, oldest)
	}

	// Seen from 6 years after its newest commit: nothing in the window.
	far := newest.Add(6 * 365 * 24 * time.Hour)
	m2 := newTestMirrorer(t, Config{Now: func() time.Time { return far }})
	res = mustSync(t, m2, tg)
	if len(res.Commits) != 0 || !res.HistorySince.Equal(far.Add(-fetch.HistoryWindow)) || res.HistoryFromRoot {
		t.Fatalf("quiet repo: %d commits since %v (from root %v), want none since %v", len(res.Commits),
			res.HistorySince, res.HistoryFromRoot, far.Add(-fetch.HistoryWindow))
	}
	if !res.LastCommitAt.Equal(newest) {
		t.Fatalf("LastCommitAt %v, want %v", res.LastCommitAt, newest)
	}

	// A push of more than MaxNewCommits: the listing stops at the bound, newest first.
	before := strings.Fields(runGit(t, s.home, dir, nil, "for-each-ref", "--format=%(objectname)"))
	importCommits(t, u, "main", "", fetch.MaxNewCommits+200, newest.Add(time.Hour), time.Minute, 0)
	res = mustSync(t, m, tg)
	want := revList(t, s.home, dir, append([]string{"--all", fmt.Sprintf("--max-count=%d", fetch.MaxNewCommits), "--not"}, before...)...)
	sameCommits(t, "capped fetch", res.Commits, want)
}
