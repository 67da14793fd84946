package api

import (
	"fmt"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// BenchmarkStatusPage renders GET / (the default view and a search for a rare URL) on a
// bbolt store of MIRRORFLEET_BENCH_PAGE_REPOS repos (default 100,000), of which 1% are
// failing and 0.5% gone:
//
//	go test ./shared/api -run '^$' -bench StatusPage -benchtime 20x -benchmem
//
// docs/architecture.md ("Status page") quotes its figures.
func BenchmarkStatusPage(b *testing.B) {
	n := 100_000
	if v := os.Getenv("MIRRORFLEET_BENCH_PAGE_REPOS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	e := newEnv(b, func(c *Config) { c.CloneBaseURL = "http://git.test" })
	ctx := b.Context()
	for i := range n {
		st, owner, success := store.RepoOK, "w1", t0.Add(-time.Duration(i)*time.Second)
		switch {
		case i%100 == 0:
			st = store.RepoFailing
		case i%200 == 1:
			st = store.RepoGone
		}
		url := fmt.Sprintf("https://git.example.org/group-%d/project-%07d", i%97, i)
		if _, _, err := e.store.CreateRepo(ctx, store.Repo{ID: store.RepoID(url), URL: url, Source: store.SourceAPI, State: st,
			Owner: owner, CreatedAt: t0.Add(-48 * time.Hour), LastSuccessAt: success, SizeBytes: int64(i) << 10}); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []struct{ name, path string }{{"default", "/"}, {"search", "/?q=project-0099999"}, {"state=gone", "/?state=gone"}} {
		b.Run(fmt.Sprintf("%s/repos=%d", q.name, n), func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				e.h.ServeHTTP(rec, httptest.NewRequest("GET", q.path, nil))
				if rec.Code != 200 {
					b.Fatalf("GET %s: %d", q.path, rec.Code)
				}
			}
		})
	}
}
