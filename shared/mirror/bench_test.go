package mirror

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"testing"
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
