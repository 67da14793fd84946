package mirror

import (
	"context"
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
