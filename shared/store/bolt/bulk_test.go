package bolt_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// CreateRepos leaves the store as the same repos created one CreateRepo each would:
// the records, the per-state counts and the indexes the coordinator and the status page
// read; a repo stored already, or twice in the batch, is created once.
func TestCreateReposIsCreateRepoInBulk(t *testing.T) {
	ctx := t.Context()
	bulk := open(t, filepath.Join(t.TempDir(), "bulk.db"))
	single := open(t, filepath.Join(t.TempDir(), "single.db"))
	repo := func(i int) store.Repo {
		url := fmt.Sprintf("https://example.org/r/%d", i)
		return store.Repo{ID: store.RepoID(url), URL: url, Source: store.SourceAPI}
	}
	if _, _, err := bulk.CreateRepo(ctx, repo(3)); err != nil {
		t.Fatal(err)
	}
	var rs []store.Repo
	for i := range 500 {
		rs = append(rs, repo(i))
	}
	again := repo(7) // twice in one batch: the first is created
	again.Source = store.SourceList
	rs = append(rs, again)
	n, err := bulk.CreateRepos(ctx, rs)
	if err != nil || n != 499 {
		t.Fatalf("CreateRepos = %d, %v; want 499 created (one stored already, one twice)", n, err)
	}
	if r, err := bulk.GetRepo(ctx, again.ID); err != nil || r.Source != store.SourceAPI {
		t.Fatalf("repo given twice stored as %+v, %v; want the first", r, err)
	}
	for i := range 500 {
		if _, _, err := single.CreateRepo(ctx, repo(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bulk.CreateRepos(ctx, []store.Repo{{ID: ""}}); err == nil {
		t.Fatal("CreateRepos took an empty id")
	}

	reads := map[string]func(st storetest.Store) (any, error){
		"counts": func(st storetest.Store) (any, error) { return st.CountRepos(ctx) },
		"pending": func(st storetest.Store) (any, error) {
			rs, _, err := st.ListReposNeedingDecision(ctx, store.NeedOwner, "", 1000)
			return rs, err
		},
		"all": func(st storetest.Store) (any, error) {
			rs, _, err := st.ListRepos(ctx, "", 1000)
			return rs, err
		},
		"stalest": func(st storetest.Store) (any, error) { return st.ListStalest(ctx, 1000) },
	}
	for name, read := range reads {
		got, err := read(bulk)
		if err != nil {
			t.Fatal(err)
		}
		want, err := read(single)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s after CreateRepos differs from after CreateRepo one by one", name)
		}
	}
}
