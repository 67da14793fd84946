package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

func testListStalest(t *testing.T, s Store) {
	ctx := t.Context()
	got, err := s.ListStalest(ctx, 5)
	noErr(t, err, "ListStalest on an empty store")
	if len(got) != 0 {
		t.Fatalf("ListStalest on an empty store = %v", ids(got))
	}

	// Successes spread over time, some never (the longest waiting first: by when they
	// were added), some tied (the id breaks the tie), one in another zone that is earlier
	// in absolute time than its wall clock suggests.
	west := time.FixedZone("PST", -8*3600)
	success := []time.Time{
		{}, t0.Add(3 * time.Hour), t0.Add(time.Hour), {}, t0.Add(time.Hour),
		t0.Add(-time.Hour).In(west), t0.Add(2 * time.Hour), {}, t0.Add(time.Hour), t0.Add(5 * time.Hour),
	}
	// The never-succeeded are added in the reverse of their ids' order, so an order by
	// id would show.
	var never []int
	for i, at := range success {
		if at.IsZero() {
			never = append(never, i)
		}
	}
	slices.SortFunc(never, func(a, b int) int { return cmp.Compare(newRepo(b).ID, newRepo(a).ID) })
	added := map[int]time.Time{}
	for k, i := range never {
		added[i] = t0.Add(time.Duration(k-10) * time.Hour)
	}
	var live []store.Repo
	for i, at := range success {
		r := newRepo(i)
		r.State, r.LastSuccessAt = store.RepoOK, at
		if at.IsZero() {
			r.State, r.CreatedAt = store.RepoCloning, added[i]
		}
		created, ok, err := s.CreateRepo(ctx, r)
		if err != nil || !ok {
			t.Fatalf("CreateRepo(%d) = created %v, %v", i, ok, err)
		}
		live = append(live, created)
	}
	// Repos being deleted are left out, however stale.
	for i, at := range []time.Time{{}, t0.Add(-24 * time.Hour)} {
		r := newRepo(100 + i)
		r.LastSuccessAt = at
		_, _, err := s.CreateRepo(ctx, r)
		noErr(t, err, "CreateRepo")
		noErr(t, s.RequestDelete(ctx, r.ID), "RequestDelete")
	}

	want := slices.Clone(live)
	// Spelled out here, not store.CompareStaleness: the suite checks that too.
	slices.SortFunc(want, func(a, b store.Repo) int {
		if a.LastSuccessAt.IsZero() && b.LastSuccessAt.IsZero() {
			return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
		}
		return cmp.Or(a.LastSuccessAt.Compare(b.LastSuccessAt), cmp.Compare(a.ID, b.ID))
	})
	for _, limit := range []int{1, 3, 4, len(live) - 1, len(live), len(live) + 5, 0} {
		got, err := s.ListStalest(ctx, limit)
		noErr(t, err, fmt.Sprintf("ListStalest(%d)", limit))
		n := len(live)
		if limit > 0 && limit < n {
			n = limit
		}
		if !slices.Equal(ids(got), ids(want[:n])) {
			t.Fatalf("ListStalest(%d) = %v, want %v", limit, ids(got), ids(want[:n]))
		}
		for i := range got {
			equal(t, "listed stale repo", got[i], want[i], normRepo)
		}
	}

	// A failed clone keeps a repo where it waits; a success moves it out of the front.
	term := lead(t, s)
	second := want[1]
	mustApply(t, s, term, store.AssignRepo{ID: second.ID, Owner: "w1", State: store.RepoCloning})
	noErr(t, s.ReportFetch(ctx, second.ID, "w1", 1, store.FetchReport{State: store.RepoCloning, CloneFailCnt: 1,
		LastFetchAt: t0.Add(9 * time.Hour), LastError: "network: unreachable"}), "ReportFetch of a failed clone")
	got, err = s.ListStalest(ctx, 0)
	noErr(t, err, "ListStalest after a failed clone")
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("ListStalest after a failed clone = %v, want %v", ids(got), ids(want))
	}
	first := want[0]
	mustApply(t, s, term, store.AssignRepo{ID: first.ID, Owner: "w1", State: store.RepoCloning})
	noErr(t, s.ReportFetch(ctx, first.ID, "w1", 1, store.FetchReport{State: store.RepoOK, LastSuccessAt: t0.Add(10 * time.Hour)}), "ReportFetch")
	got, err = s.ListStalest(ctx, 0)
	noErr(t, err, "ListStalest after a success")
	wantOrder := append(ids(want[1:]), first.ID)
	if !slices.Equal(ids(got), wantOrder) {
		t.Fatalf("ListStalest after a success = %v, want %v", ids(got), wantOrder)
	}
}
