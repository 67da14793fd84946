package api

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// TestSearchSkipsByBytes: the status page's search through the store's byte scan
// (bolt's SearchRepos with rawMaybe) finds exactly what decoding every repo finds —
// URLs in any case, ids, last errors, with a state, and texts JSON escapes — and its
// cursors walk every match once.
func TestSearchSkipsByBytes(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	for i := range 300 {
		url := fmt.Sprintf("https://Git.Example.org/Group-%d/project-%04d", i%7, i)
		r := store.Repo{ID: store.RepoID(url), URL: url, Source: store.SourceAPI, State: store.RepoOK, CreatedAt: t0.Add(-time.Hour)}
		if i%10 == 0 {
			r.State, r.LastError = store.RepoFailing, fmt.Sprintf(`fetch: "upstream" <said> 500 & gave up on #%d`, i)
		}
		if _, _, err := e.store.CreateRepo(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	someID := store.RepoID("https://Git.Example.org/Group-3/project-0003")
	for _, q := range []pageQuery{
		{Q: "group-3/"}, {Q: "GROUP-3/PROJECT-00"}, {Q: "project-0123"}, {Q: someID}, {Q: "gave up"},
		{Q: "<said> 500 &"}, {Q: `"upstream"`}, {Q: "group-2", State: store.RepoFailing}, {Q: "no such repo"},
	} {
		for _, limit := range []int{7, 1000} {
			q.Limit = limit
			var want []string
			for _, r := range allRepos(t, e.store) {
				if q.match(r) {
					want = append(want, r.ID)
				}
			}
			var got []string
			s := e.h.(*server)
			for cursor, pages := "", 0; ; pages++ {
				q.Cursor = cursor
				rs, next, err := s.search(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(rs) > limit || pages > 300 {
					t.Fatalf("q %q: a page of %d for limit %d, or no end", q.Q, len(rs), limit)
				}
				for _, r := range rs {
					got = append(got, r.ID)
				}
				if cursor = next; next == "" {
					break
				}
			}
			if !slices.Equal(got, want) || (q.Q != "no such repo" && len(want) == 0) {
				t.Errorf("search %q state %q limit %d: %d repos %v, want %d %v", q.Q, q.State, limit, len(got), got, len(want), want)
			}
		}
	}
}

func allRepos(t *testing.T, st Store) []store.Repo {
	t.Helper()
	var out []store.Repo
	for cursor := ""; ; {
		page, next, err := st.ListRepos(t.Context(), cursor, 1000)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if cursor = next; next == "" {
			return out
		}
	}
}
