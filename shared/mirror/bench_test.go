package mirror

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// BenchmarkNoChangePoll compares the no-change poll of Sync (lock, read local refs,
// one ref advertisement over HTTP, compare, LastCommitAt and size of the mirror)
// with `git ls-remote` of the same URL from the git CLI, in the same run against
// the same local git http-backend. Run with:
//
//	go test -run '^$' -bench NoChangePoll ./shared/mirror/
func BenchmarkNoChangePoll(b *testing.B) {
	s := newGitServer(b)
	u := buildBasic(b, s, "x/bench")
	m := newTestMirrorer(b, Config{})
	tg := u.target("bench")
	mustSync(b, m, tg)

	b.Run("go-git-Sync", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			res, err := m.Sync(ctx, tg)
			if err != nil || res.Changed {
				b.Fatalf("Sync: %+v, %v", res, err)
			}
		}
	})
	b.Run("git-ls-remote", func(b *testing.B) {
		env := gitEnv(s.home)
		for b.Loop() {
			cmd := exec.Command("git", "ls-remote", tg.URL)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("git ls-remote: %v\n%s", err, out)
			}
		}
	})
}

// BenchmarkCommitWalks measures the walks a sync makes to report commits, on a history
// of 5,000 commits with 50 release branches: listing a first clone's history (at most
// fetch.MaxHistoryCommits) and the commits a push of 3 brought, against reading every
// commit (what an unbounded walk would cost). Run with:
//
//	go test -run '^$' -bench CommitWalks ./shared/mirror/
func BenchmarkCommitWalks(b *testing.B) {
	s := newGitServer(b)
	u := s.newRepo(b, "x/walks")
	start := time.Now().Add(-5000 * time.Hour).Truncate(time.Hour)
	importCommits(b, u, "main", "", 5000, start, time.Hour, 0)
	for k := 100; k < 5000; k += 100 {
		importCommits(b, u, fmt.Sprintf("release-%d", k), fmt.Sprintf("main~%d", 5000-k), 1, start.Add(time.Duration(k)*time.Hour+time.Minute), time.Minute, 0)
	}
	u.git(b, "symbolic-ref", "HEAD", "refs/heads/main")
	m := newTestMirrorer(b, Config{})
	tg := u.target("walks")
	mustSync(b, m, tg)
	dir := mirrorDir(b, m, tg)
	before := map[string]string{}
	for _, line := range strings.Split(forEachRef(b, s.home, dir, dir), "\n") {
		if h, name, ok := strings.Cut(line, " "); ok {
			before[name] = h
		}
	}
	packs, err := Packs(dir)
	if err != nil {
		b.Fatal(err)
	}
	// A push: 3 commits on main, and a branch of 2 off a commit 4,000 hours old.
	importCommits(b, u, "main", "", 3, time.Now().Add(-time.Hour), time.Minute, 0)
	importCommits(b, u, "backport", "main~4000", 2, time.Now().Add(-time.Hour), time.Minute, 0)
	if res := mustSync(b, m, tg); len(res.Commits) != 5 {
		b.Fatalf("the fetch listed %d commits, want 5", len(res.Commits))
	}
	b.Run("new-commits", func(b *testing.B) {
		for b.Loop() {
			if cs, err := NewCommitsOf(dir, before, packs); err != nil || len(cs) != 5 {
				b.Fatalf("%d, %v", len(cs), err)
			}
		}
	})
	b.Run("history", func(b *testing.B) {
		for b.Loop() {
			if cs, err := HistoryOf(dir, time.Now()); err != nil || len(cs) != fetch.MaxHistoryCommits {
				b.Fatalf("%d, %v", len(cs), err)
			}
		}
	})
	b.Run("every-commit", func(b *testing.B) {
		sto, refs, err := openRefs(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer sto.Close()
		for b.Loop() {
			w := walk{s: sto, seen: map[plumbing.Hash]struct{}{}}
			tips, err := tipCommits(sto, refs)
			if err != nil {
				b.Fatal(err)
			}
			for _, c := range tips {
				w.push(c)
			}
			n := 0
			for len(w.queue) > 0 {
				c := w.pop()
				n++
				if err := w.parents(c); err != nil {
					b.Fatal(err)
				}
			}
			if n != 5000+49+5 {
				b.Fatalf("%d commits", n)
			}
		}
	})
}

// BenchmarkCloneGuarded measures what the pack walker (walk.go) costs a clone: the
// same clone of a repository with about 24 MB of history (text and binary versions)
// with the default limits, and with MaxObjectBytes off (no walker; the other guards
// stay), in the same run. Compare the two within one run:
//
//	go test -run '^$' -bench CloneGuarded -benchtime 5x ./shared/mirror/
func BenchmarkCloneGuarded(b *testing.B) {
	s := newGitServer(b)
	u := s.newRepo(b, "x/clone")
	for i := range 24 {
		u.commit(b, fmt.Sprintf("c%d", i), map[string][]byte{
			"bin.dat":  randomBytes(b, 1<<20),
			"text.txt": bytes.Repeat([]byte(fmt.Sprintf("line %d of a text file\n", i)), 4000),
		})
	}
	for _, c := range []struct {
		name string
		lim  Limits
	}{{"walker", Limits{}}, {"no-walker", Limits{MaxObjectBytes: -1}}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				m := newTestMirrorer(b, Config{Root: b.TempDir(), Limits: c.lim})
				if _, err := m.Sync(ctx, u.target("clone")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
