package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Repos, their listings and indexes.

func testCreateRepo(t *testing.T, s Store) {
	ctx := t.Context()
	r := newRepo(1)
	got, created, err := s.CreateRepo(ctx, r)
	noErr(t, err, "CreateRepo")
	if !created {
		t.Fatalf("CreateRepo of a new id: created = false")
	}
	want := r
	want.State = store.RepoPending // the default
	equal(t, "CreateRepo result", got, want, normRepo)
	equal(t, "stored repo", getRepo(t, s, r.ID), want, normRepo)

	dup := r
	dup.URL, dup.State, dup.Source = "https://elsewhere/x.git", store.RepoOK, store.SourceAPI
	got, created, err = s.CreateRepo(ctx, dup)
	noErr(t, err, "CreateRepo of an existing id")
	if created {
		t.Fatalf("CreateRepo of an existing id: created = true")
	}
	equal(t, "CreateRepo of an existing id returns the stored repo", got, want, normRepo)
	equal(t, "stored repo after duplicate create", getRepo(t, s, r.ID), want, normRepo)

	given := newRepo(2)
	given.State, given.Source, given.Priority = store.RepoOK, store.SourceAPI, 2.5
	got, created, err = s.CreateRepo(ctx, given)
	if err != nil || !created {
		t.Fatalf("CreateRepo with a state = created %v, %v", created, err)
	}
	equal(t, "CreateRepo keeps a given state", got, given, normRepo)
	equal(t, "stored repo with a given state", getRepo(t, s, given.ID), given, normRepo)

	_, err = s.GetRepo(ctx, "r-none")
	wantErr(t, err, store.ErrNotFound, "GetRepo of an unknown id")
	checkIndexes(t, s)
}

// testOneRepoPerMirrorPath: repo ids come from the mirror path, so URLs that would
// share a mirror directory cannot both be stored, also when added at the same time.
func testOneRepoPerMirrorPath(t *testing.T, s Store) {
	ctx := t.Context()
	mk := func(url string) store.Repo {
		return store.Repo{ID: store.RepoID(url), URL: url, Source: store.SourceAPI, State: store.RepoPending, CreatedAt: t0}
	}
	// Spellings of one directory: a stored URL from before the policy decoded "%21",
	// and the ".git" a hand-written record may keep.
	for _, pair := range [][2]string{
		{"https://git.example.com/org/b%21c", "https://git.example.com/org/b!c"},
		{"https://git.example.com/org/dup", "https://git.example.com/org/dup.git"},
	} {
		first, created, err := s.CreateRepo(ctx, mk(pair[0]))
		if err != nil || !created {
			t.Fatalf("CreateRepo(%s) = created %v, %v", pair[0], created, err)
		}
		got, created, err := s.CreateRepo(ctx, mk(pair[1]))
		noErr(t, err, "CreateRepo of a URL whose mirror path is taken")
		if created || got.ID != first.ID || got.URL != pair[0] {
			t.Fatalf("CreateRepo(%s) = %s %s created %v; want the stored %s %s", pair[1], got.ID, got.URL, created, first.ID, pair[0])
		}
	}
	// Twins that are two repositories get two records.
	for _, url := range []string{"http://git.example.com/org/twin", "https://git.example.com/org/twin", "https://git.example.com:8443/org/twin"} {
		if _, created, err := s.CreateRepo(ctx, mk(url)); err != nil || !created {
			t.Fatalf("CreateRepo(%s) = created %v, %v", url, created, err)
		}
	}
	// Racing adds of two spellings: exactly one is stored.
	a, b := "https://git.example.com/org/race", "https://git.example.com/org/race.git"
	var wg sync.WaitGroup
	res := make([]bool, 2)
	errs := make([]error, 2)
	for i, url := range []string{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, res[i], errs[i] = s.CreateRepo(ctx, mk(url))
		}()
	}
	wg.Wait()
	noErr(t, errors.Join(errs...), "racing CreateRepo")
	if res[0] == res[1] {
		t.Fatalf("racing CreateRepo of one mirror path: created %v and %v, want exactly one", res[0], res[1])
	}
	counts, err := s.CountRepos(ctx)
	noErr(t, err, "CountRepos")
	if counts[store.RepoPending] != 6 {
		t.Fatalf("pending repos = %d, want 6 (2 + 3 twins + 1 raced): %v", counts[store.RepoPending], counts)
	}
	checkIndexes(t, s)
}

func testListReposPaging(t *testing.T, s Store) {
	ctx := t.Context()
	rs := createRepos(t, s, 25)
	byID := map[string]store.Repo{}
	for _, r := range rs {
		byID[r.ID] = r
	}
	for _, limit := range []int{1, 2, 3, 7, 24, 25, 26, 1000, 0} {
		got := pageAll(t, "ListRepos", limit, func(c string) ([]store.Repo, string, error) { return s.ListRepos(ctx, c, limit) })
		wantIDs(t, fmt.Sprintf("ListRepos(limit %d)", limit), got, ids(rs))
		for _, r := range got {
			equal(t, "listed repo", r, byID[r.ID], normRepo)
		}
	}
	// A cursor survives writes between pages: nothing is skipped or repeated.
	page, next, err := s.ListRepos(ctx, "", 10)
	if err != nil || len(page) != 10 || next == "" {
		t.Fatalf("ListRepos(limit 10) = %d repos, cursor %q, %v", len(page), next, err)
	}
	term := lead(t, s)
	mustApply(t, s, term, store.AssignRepo{ID: page[3].ID, Owner: "w1", State: store.RepoCloning})
	rest := pageAll(t, "ListRepos", 4, func(c string) ([]store.Repo, string, error) {
		if c == "" {
			c = next
		}
		return s.ListRepos(ctx, c, 4)
	})
	wantIDs(t, "ListRepos across a write", append(page, rest...), ids(rs))
}

func testListReposByOwner(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	rs := createRepos(t, s, 12)
	owners := map[string][]string{}
	var muts []store.Mutation
	for i, r := range rs {
		owner := []string{"w1", "w1", "w2", ""}[i%4]
		if owner == "" {
			continue
		}
		owners[owner] = append(owners[owner], r.ID)
		muts = append(muts, store.AssignRepo{ID: r.ID, Owner: owner, State: store.RepoCloning})
	}
	mustApply(t, s, term, muts...)
	byID := map[string]store.Repo{}
	for _, r := range rs {
		byID[r.ID] = r
	}
	for _, owner := range []string{"w1", "w2", "w3"} {
		var want []store.Repo
		for _, id := range owners[owner] {
			want = append(want, byID[id])
		}
		slices.SortFunc(want, byPos)
		for _, limit := range []int{1, 2, 3, 5, 6, 100, 0} {
			got := pageAll(t, "ListReposByOwner", limit, func(c string) ([]store.Repo, string, error) {
				return s.ListReposByOwner(ctx, owner, c, limit)
			})
			if !slices.Equal(ids(got), ids(want)) {
				t.Fatalf("ListReposByOwner(%s, limit %d) = %v, want %v (by ring position)", owner, limit, ids(got), ids(want))
			}
			for _, r := range got {
				if r.Owner != owner || r.OwnerEpoch != 1 || r.State != store.RepoCloning {
					t.Fatalf("ListReposByOwner(%s) returned %+v", owner, r)
				}
			}
		}
	}
	checkIndexes(t, s, "w1", "w2", "w3")
}

// testListReposByOwnerRange reads arcs of the ring: every range of positions, ends
// included, holds exactly the owner's repos whose RingPos lies in it, whatever the page.
func testListReposByOwnerRange(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	rs := createRepos(t, s, 30)
	var muts []store.Mutation
	var mine []store.Repo
	for i, r := range rs {
		owner := "w1"
		if i%3 == 2 {
			owner = "w2"
		}
		salt := i % 2 // a salted repo sits at the position of its salted key
		muts = append(muts, store.AssignRepo{ID: r.ID, Owner: owner, State: store.RepoOK, Salt: salt})
		r.Salt = salt
		if owner == "w1" {
			mine = append(mine, r)
		}
	}
	mustApply(t, s, term, muts...)
	slices.SortFunc(mine, byPos)
	pos := func(i int) uint64 { return mine[i].RingPos() }
	n := len(mine)
	ranges := [][2]uint64{
		{0, store.MaxPos},
		{pos(0), pos(0)},           // one repo, both ends on it
		{pos(3), pos(7)},           // ends on repos
		{pos(3) + 1, pos(7) - 1},   // ends just inside
		{pos(n - 1), store.MaxPos}, // the top end
		{0, pos(0) - 1},            // nothing below the first
		{pos(5) + 1, pos(6) - 1},   // nothing between neighbours
		{pos(2), pos(n - 2)},
	}
	for _, rg := range ranges {
		var want []string
		for _, r := range mine {
			if p := r.RingPos(); rg[0] <= p && p <= rg[1] {
				want = append(want, r.ID)
			}
		}
		for _, limit := range []int{1, 2, 4, 1000} {
			got := pageAll(t, "ListReposByOwnerRange", limit, func(c string) ([]store.Repo, string, error) {
				return s.ListReposByOwnerRange(ctx, "w1", rg[0], rg[1], c, limit)
			})
			if !slices.Equal(ids(got), want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("ListReposByOwnerRange(w1, [%d, %d], limit %d) = %v, want %v", rg[0], rg[1], limit, ids(got), want)
			}
			for _, r := range got {
				if r.Owner != "w1" {
					t.Fatalf("range listing of w1 returned a repo of %s", r.Owner)
				}
			}
		}
	}
	// Moving a repo to another position (a new salt) or owner moves it in the index.
	r := mine[4]
	mustApply(t, s, term, store.AssignRepo{ID: r.ID, ExpectOwner: "w1", ExpectEpoch: 1, Owner: "w1", State: store.RepoOK, Salt: r.Salt + 5})
	r.Salt += 5
	got := pageAll(t, "ListReposByOwnerRange", 0, func(c string) ([]store.Repo, string, error) {
		return s.ListReposByOwnerRange(ctx, "w1", r.RingPos(), r.RingPos(), c, 0)
	})
	wantIDs(t, "range at a re-salted repo's new position", got, []string{r.ID})
	mustApply(t, s, term, store.AssignRepo{ID: r.ID, ExpectOwner: "w1", ExpectEpoch: 2, Owner: "w2", State: store.RepoOK, Salt: r.Salt})
	got = pageAll(t, "ListReposByOwnerRange", 0, func(c string) ([]store.Repo, string, error) {
		return s.ListReposByOwnerRange(ctx, "w1", 0, store.MaxPos, c, 0)
	})
	if slices.Contains(ids(got), r.ID) || len(got) != n-1 {
		t.Fatalf("after moving %s to w2, w1 lists %d repos (%v)", r.ID, len(got), slices.Contains(ids(got), r.ID))
	}
	checkIndexes(t, s, "w1", "w2")
}

// testListReposNeedingDecision pages through both parts of the index: pending repos
// (waiting for an owner) apart from those that need an action, so a million pending
// never delay a delete.
func testListReposNeedingDecision(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	rs := createRepos(t, s, 12)
	mustApply(t, s, term,
		store.AssignRepo{ID: rs[0].ID, Owner: "w1", State: store.RepoOK},
		store.AssignRepo{ID: rs[1].ID, Owner: "w1", State: store.RepoOK},
		store.AssignRepo{ID: rs[2].ID, Owner: "w1", State: store.RepoOK},
		store.AssignRepo{ID: rs[3].ID, Owner: "w1", State: store.RepoOK},
	)
	noErr(t, s.RequestSync(ctx, rs[0].ID), "RequestSync")
	noErr(t, s.RequestDelete(ctx, rs[1].ID), "RequestDelete")
	noErr(t, s.HandBack(ctx, rs[2].ID, "w1", 1, "full"), "HandBack")
	noErr(t, s.RequestSync(ctx, rs[11].ID), "RequestSync of a pending repo") // needs an action now
	action := []string{rs[0].ID, rs[1].ID, rs[2].ID, rs[11].ID}
	var pending []string
	for _, r := range rs[4:11] {
		pending = append(pending, r.ID)
	}
	for _, limit := range []int{1, 2, 3, 100, 0} {
		got := pageAll(t, "ListReposNeedingDecision", limit, func(c string) ([]store.Repo, string, error) {
			return s.ListReposNeedingDecision(ctx, store.NeedAction, c, limit)
		})
		wantIDs(t, fmt.Sprintf("needing an action (limit %d)", limit), got, action)
		got = pageAll(t, "ListReposNeedingDecision", limit, func(c string) ([]store.Repo, string, error) {
			return s.ListReposNeedingDecision(ctx, store.NeedOwner, c, limit)
		})
		wantIDs(t, fmt.Sprintf("pending (limit %d)", limit), got, pending)
	}
	// A cursor survives writes between pages.
	page, next, err := s.ListReposNeedingDecision(ctx, store.NeedOwner, "", 3)
	if err != nil || len(page) != 3 || next == "" {
		t.Fatalf("first page of pending = %d, %q, %v", len(page), next, err)
	}
	mustApply(t, s, term, store.AssignRepo{ID: page[1].ID, Owner: "w2", State: store.RepoCloning})
	rest := pageAll(t, "ListReposNeedingDecision", 2, func(c string) ([]store.Repo, string, error) {
		if c == "" {
			c = next
		}
		return s.ListReposNeedingDecision(ctx, store.NeedOwner, c, 2)
	})
	wantIDs(t, "pending across a write", append([]store.Repo{page[0], page[2]}, rest...),
		slices.DeleteFunc(slices.Clone(pending), func(id string) bool { return id == page[1].ID }))
	checkIndexes(t, s, "w1", "w2")
}

func testAssignRepo(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	r := createRepos(t, s, 1)[0]

	mustApply(t, s, term, store.AssignRepo{ID: r.ID, ExpectOwner: "", ExpectEpoch: 0, Owner: "w1", State: store.RepoCloning, Salt: 0, Priority: 0.7})
	want := r
	want.Owner, want.OwnerEpoch, want.State, want.Priority = "w1", 1, store.RepoCloning, 0.7
	equal(t, "assigned repo", getRepo(t, s, r.ID), want, normRepo)
	checkIndexes(t, s, "w1", "w2")

	before := snap(t, s)
	for _, m := range []store.AssignRepo{
		{ID: r.ID, ExpectOwner: "w2", ExpectEpoch: 1, Owner: "w2", State: store.RepoCloning},
		{ID: r.ID, ExpectOwner: "", ExpectEpoch: 1, Owner: "w2", State: store.RepoCloning},
		{ID: r.ID, ExpectOwner: "w1", ExpectEpoch: 0, Owner: "w2", State: store.RepoCloning},
		{ID: r.ID, ExpectOwner: "w1", ExpectEpoch: 2, Owner: "w2", State: store.RepoCloning},
		{ID: "r-none", ExpectOwner: "", ExpectEpoch: 0, Owner: "w2", State: store.RepoCloning},
	} {
		wantErr(t, s.Apply(ctx, term, []store.Mutation{m}), store.ErrConflict, fmt.Sprintf("AssignRepo %+v", m))
	}
	wantUnchanged(t, "refused AssignRepo", before, s)
	_, err := s.GetRepo(ctx, "r-none")
	wantErr(t, err, store.ErrNotFound, "AssignRepo created a repo")

	// SyncRequested survives an assignment unless ClearSync.
	noErr(t, s.RequestSync(ctx, r.ID), "RequestSync")
	mustApply(t, s, term, store.AssignRepo{ID: r.ID, ExpectOwner: "w1", ExpectEpoch: 1, Owner: "w2", State: store.RepoOK, Salt: 1, Priority: 0.2})
	want.Owner, want.OwnerEpoch, want.State, want.Salt, want.Priority, want.SyncRequested = "w2", 2, store.RepoOK, 1, 0.2, true
	equal(t, "reassigned repo", getRepo(t, s, r.ID), want, normRepo)
	checkIndexes(t, s, "w1", "w2")

	mustApply(t, s, term, store.AssignRepo{ID: r.ID, ExpectOwner: "w2", ExpectEpoch: 2, Owner: "w2", State: store.RepoOK, Salt: 1, Priority: 0.2, ClearSync: true})
	want.OwnerEpoch, want.SyncRequested = 3, false
	equal(t, "repo after ClearSync", getRepo(t, s, r.ID), want, normRepo)
	checkIndexes(t, s, "w1", "w2")

	mustApply(t, s, term, store.AssignRepo{ID: r.ID, ExpectOwner: "w2", ExpectEpoch: 3, Owner: "", State: store.RepoPending})
	want.Owner, want.OwnerEpoch, want.State, want.Salt, want.Priority = "", 4, store.RepoPending, 0, 0
	equal(t, "unassigned repo", getRepo(t, s, r.ID), want, normRepo)
	checkIndexes(t, s, "w1", "w2")

	// An empty State keeps the stored one (a worker may have just written it).
	mustApply(t, s, term, store.AssignRepo{ID: r.ID, ExpectOwner: "", ExpectEpoch: 4, Owner: "w1", State: store.RepoCloning})
	noErr(t, s.ReportFetch(ctx, r.ID, "w1", 5, store.FetchReport{State: store.RepoOK}), "ReportFetch")
	mustApply(t, s, term, store.AssignRepo{ID: r.ID, ExpectOwner: "w1", ExpectEpoch: 5, Owner: "w2"})
	if got := getRepo(t, s, r.ID); got.State != store.RepoOK || got.Owner != "w2" || got.OwnerEpoch != 6 {
		t.Fatalf("AssignRepo with empty State: state %s owner %s epoch %d; want ok w2 6", got.State, got.Owner, got.OwnerEpoch)
	}
	checkIndexes(t, s, "w1", "w2")

	// A delete request wins over a concurrent assignment.
	noErr(t, s.RequestDelete(ctx, r.ID), "RequestDelete")
	before = snap(t, s)
	wantErr(t, s.Apply(ctx, term, []store.Mutation{store.AssignRepo{ID: r.ID, ExpectOwner: "w2", ExpectEpoch: 6, Owner: "w1", State: store.RepoCloning}}),
		store.ErrConflict, "AssignRepo of a deleting repo")
	wantUnchanged(t, "refused AssignRepo of a deleting repo", before, s)
	wantErr(t, s.ReportFetch(ctx, r.ID, "w2", 6, store.FetchReport{State: store.RepoOK}), store.ErrConflict, "ReportFetch on a deleting repo")
	wantErr(t, s.HandBack(ctx, r.ID, "w2", 6, "full"), store.ErrConflict, "HandBack on a deleting repo")
	wantUnchanged(t, "fetch report on a deleting repo", before, s)
}

func testDeleteRepo(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	rs := createRepos(t, s, 2)
	r, other := rs[0], rs[1]
	mustApply(t, s, term, store.AssignRepo{ID: r.ID, Owner: "w1", State: store.RepoCloning})

	before := snap(t, s)
	for _, m := range []store.DeleteRepo{{ID: r.ID, ExpectEpoch: 0}, {ID: r.ID, ExpectEpoch: 2}, {ID: "r-none"}} {
		wantErr(t, s.Apply(ctx, term, []store.Mutation{m}), store.ErrConflict, fmt.Sprintf("DeleteRepo %+v", m))
	}
	wantUnchanged(t, "refused DeleteRepo", before, s)

	mustApply(t, s, term, store.DeleteRepo{ID: r.ID, ExpectEpoch: 1})
	_, err := s.GetRepo(ctx, r.ID)
	wantErr(t, err, store.ErrNotFound, "GetRepo after DeleteRepo")
	wantErr(t, s.Apply(ctx, term, []store.Mutation{store.DeleteRepo{ID: r.ID, ExpectEpoch: 1}}), store.ErrConflict, "DeleteRepo twice")
	equal(t, "untouched repo", getRepo(t, s, other.ID), other, normRepo)
	checkIndexes(t, s, "w1")

	// The id can come back, with a fresh record.
	got, created, err := s.CreateRepo(ctx, newRepo(0))
	if err != nil || !created || got.Owner != "" || got.OwnerEpoch != 0 || got.State != store.RepoPending {
		t.Fatalf("CreateRepo after delete = %+v, created %v, %v", got, created, err)
	}
	checkIndexes(t, s, "w1")
}

func testRequestDeleteAndSync(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	wantErr(t, s.RequestDelete(ctx, "r-none"), store.ErrNotFound, "RequestDelete of an unknown repo")
	wantErr(t, s.RequestSync(ctx, "r-none"), store.ErrNotFound, "RequestSync of an unknown repo")

	rs := createRepos(t, s, 2)
	mustApply(t, s, term,
		store.AssignRepo{ID: rs[0].ID, Owner: "w1", State: store.RepoOK},
		store.AssignRepo{ID: rs[1].ID, Owner: "w1", State: store.RepoOK},
	)
	checkIndexes(t, s, "w1")
	if needs := needing(t, s); len(needs) != 0 {
		t.Fatalf("assigned ok repos need a decision: %v", needs)
	}

	noErr(t, s.RequestSync(ctx, rs[0].ID), "RequestSync")
	want := getRepo(t, s, rs[0].ID)
	if !want.SyncRequested || want.State != store.RepoOK || want.Owner != "w1" || want.OwnerEpoch != 1 {
		t.Fatalf("after RequestSync: %+v", want)
	}
	noErr(t, s.RequestSync(ctx, rs[0].ID), "RequestSync twice")
	equal(t, "after a second RequestSync", getRepo(t, s, rs[0].ID), want, normRepo)
	checkIndexes(t, s, "w1")

	noErr(t, s.RequestDelete(ctx, rs[1].ID), "RequestDelete")
	want = getRepo(t, s, rs[1].ID)
	if want.State != store.RepoDeleting || want.Owner != "w1" || want.OwnerEpoch != 1 {
		t.Fatalf("after RequestDelete: %+v", want)
	}
	checkIndexes(t, s, "w1")
	wantIDs(t, "needing a decision", needing(t, s), ids(rs))
}

func testReportFetch(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	r := createRepos(t, s, 1)[0]
	noErr(t, s.RequestSync(ctx, r.ID), "RequestSync")
	mustApply(t, s, term, store.AssignRepo{ID: r.ID, Owner: "w1", State: store.RepoCloning, Salt: 2, Priority: 1})
	want := getRepo(t, s, r.ID)

	rep := store.FetchReport{
		State: store.RepoOK, Priority: 3.5,
		LastFetchAt: t0.Add(time.Hour), LastSuccessAt: t0.Add(time.Hour + 1), LastChangeAt: t0.Add(time.Hour + 2), LastCommitAt: t0.Add(-time.Hour),
		CloneFailCnt: 1, FetchFailCnt: 2, SizeBytes: 5 << 30, LastError: "slow remote",
		Stats: priority.Stats{Polls: 12.375, Changes: 3.0625, Seconds: 1.5e6 + 0.25,
			Events: 41.5, Exposure: 9.1e7 + 0.5, WinEvents: 2, WinSeconds: 86400 * 3.25, WinQuiet: 86400 * 1.5, Root: true, Young: true,
			Belief: someBelief(1)},
		PollStretch: 4.5, RefsDigest: "0123456789abcdef0123456789abcdef",
	}
	before := snap(t, s)
	for _, c := range []struct {
		id, owner string
		epoch     int64
	}{{r.ID, "w2", 1}, {r.ID, "w1", 0}, {r.ID, "w1", 2}, {r.ID, "", 1}, {"r-none", "w1", 1}} {
		wantErr(t, s.ReportFetch(ctx, c.id, c.owner, c.epoch, rep), store.ErrConflict, fmt.Sprintf("ReportFetch(%s, %s, %d)", c.id, c.owner, c.epoch))
	}
	wantUnchanged(t, "refused ReportFetch", before, s)

	noErr(t, s.ReportFetch(ctx, r.ID, "w1", 1, rep), "ReportFetch")
	want.State, want.Priority = rep.State, rep.Priority
	want.LastFetchAt, want.LastSuccessAt, want.LastChangeAt, want.LastCommitAt = rep.LastFetchAt, rep.LastSuccessAt, rep.LastChangeAt, rep.LastCommitAt
	want.CloneFailCnt, want.FetchFailCnt, want.SizeBytes, want.LastError = 1, 2, 5<<30, "slow remote"
	want.Stats, want.PollStretch, want.RefsDigest = rep.Stats, rep.PollStretch, rep.RefsDigest
	equal(t, "repo after ReportFetch", getRepo(t, s, r.ID), want, normRepo)
	checkIndexes(t, s, "w1")

	// Every field is copied, including zero ones.
	rep2 := store.FetchReport{State: store.RepoFailing, LastFetchAt: t0.Add(2 * time.Hour)}
	noErr(t, s.ReportFetch(ctx, r.ID, "w1", 1, rep2), "second ReportFetch")
	want.State, want.Priority = rep2.State, 0
	want.LastFetchAt, want.LastSuccessAt, want.LastChangeAt, want.LastCommitAt = rep2.LastFetchAt, time.Time{}, time.Time{}, time.Time{}
	want.CloneFailCnt, want.FetchFailCnt, want.SizeBytes, want.LastError = 0, 0, 0, ""
	want.Stats, want.PollStretch, want.RefsDigest = priority.Stats{}, 0, ""
	equal(t, "repo after second ReportFetch", getRepo(t, s, r.ID), want, normRepo)
	checkIndexes(t, s, "w1")
}

// A report that keeps the state (a backend may write it another way than a state change)
// copies every field too, zero ones included; the poll statistics then move with the repo
// so its next owner learns from them.
func testReportFetchKeepingState(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	r := createRepos(t, s, 1)[0]
	mustApply(t, s, term, store.AssignRepo{ID: r.ID, Owner: "w1", State: store.RepoOK, Priority: 1})
	want := getRepo(t, s, r.ID)
	rep := store.FetchReport{State: store.RepoOK, Priority: 2, LastFetchAt: t0, LastSuccessAt: t0, LastCommitAt: t0.Add(-time.Hour),
		SizeBytes: 1 << 20, LastError: "flaky", Stats: priority.Stats{Polls: 12.375, Changes: 3.0625, Seconds: 1.5e6 + 0.25,
			Events: 7.75, Exposure: 1.58e8, WinEvents: 1, WinSeconds: 3600}}
	for i, st := range []priority.Stats{
		rep.Stats,
		{Polls: 13.1, Changes: 4.2, Seconds: 1.6e6, Events: 8.5, Exposure: 1.59e8, WinSeconds: 7200.25, Root: true, Belief: someBelief(2)},
		{Polls: 13.2, Changes: 4.2, Seconds: 1.6e6, Events: 8.5, Exposure: 1.59e8, WinSeconds: 7300, Root: true, Belief: someBelief(30)},
		{Polls: 2, Seconds: 7200, WinSeconds: 86400 * 20, Root: true, Young: true},
		{Polls: 1, Seconds: 3600.5, Exposure: 3.2e8},
		{Polls: 2.5e-90, Changes: 1e-3, Seconds: 7e9, Events: 1e-95, WinEvents: 3},
		{},
		{Polls: 3, Changes: 1, Seconds: 86400, WinEvents: 1, WinSeconds: 86400},
	} {
		rep.LastFetchAt, rep.LastSuccessAt, rep.Priority = t0.Add(time.Duration(i)*time.Minute), t0.Add(time.Duration(i)*time.Minute), float64(2+i)
		rep.Stats = st
		rep.PollStretch = float64(i%3) * 2.25          // 0, 2.25, 4.5: set, changed and cleared
		rep.RefsDigest = []string{"aa", "bb", ""}[i%3] // set, changed, cleared; set at the end
		if i == 2 {
			rep.LastError = ""
		}
		noErr(t, s.ReportFetch(ctx, r.ID, "w1", 1, rep), "ReportFetch keeping the state")
		want.Priority, want.LastFetchAt, want.LastSuccessAt, want.LastCommitAt = rep.Priority, rep.LastFetchAt, rep.LastSuccessAt, rep.LastCommitAt
		want.SizeBytes, want.LastError, want.Stats, want.PollStretch = rep.SizeBytes, rep.LastError, st, rep.PollStretch
		want.RefsDigest = rep.RefsDigest
		equal(t, fmt.Sprintf("repo after ReportFetch with stats %+v", st), getRepo(t, s, r.ID), want, normRepo)
	}
	checkIndexes(t, s, "w1")

	mustApply(t, s, term, store.AssignRepo{ID: r.ID, ExpectOwner: "w1", ExpectEpoch: 1, Owner: "w2", Priority: 1})
	if got := getRepo(t, s, r.ID); got.Owner != "w2" || got.Stats != rep.Stats || got.RefsDigest != rep.RefsDigest {
		t.Fatalf("repo after a move: owner %q stats %+v refs %q, want w2, %+v and %q", got.Owner, got.Stats, got.RefsDigest, rep.Stats, rep.RefsDigest)
	}
	checkIndexes(t, s, "w2")
}

func testHandBack(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	r := createRepos(t, s, 1)[0]
	mustApply(t, s, term, store.AssignRepo{ID: r.ID, Owner: "w1", State: store.RepoOK, Priority: 2})
	want := getRepo(t, s, r.ID)

	before := snap(t, s)
	for _, c := range []struct {
		id, owner string
		epoch     int64
	}{{r.ID, "w2", 1}, {r.ID, "w1", 0}, {r.ID, "w1", 2}, {"r-none", "w1", 1}} {
		wantErr(t, s.HandBack(ctx, c.id, c.owner, c.epoch, "disk full"), store.ErrConflict, fmt.Sprintf("HandBack(%s, %s, %d)", c.id, c.owner, c.epoch))
	}
	wantUnchanged(t, "refused HandBack", before, s)

	noErr(t, s.HandBack(ctx, r.ID, "w1", 1, "disk full"), "HandBack")
	want.State, want.LastError = store.RepoOverflow, "disk full"
	equal(t, "repo after HandBack", getRepo(t, s, r.ID), want, normRepo)
	wantIDs(t, "needing a decision after HandBack", needing(t, s), []string{r.ID})
	checkIndexes(t, s, "w1")
}

func testCountRepos(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	rs := createRepos(t, s, 6)
	wantCounts(t, s, map[store.RepoState]int{store.RepoPending: 6})
	mustApply(t, s, term,
		store.AssignRepo{ID: rs[0].ID, Owner: "w1", State: store.RepoCloning},
		store.AssignRepo{ID: rs[1].ID, Owner: "w1", State: store.RepoCloning},
		store.AssignRepo{ID: rs[2].ID, Owner: "w1", State: store.RepoCloning},
	)
	wantCounts(t, s, map[store.RepoState]int{store.RepoPending: 3, store.RepoCloning: 3})
	noErr(t, s.ReportFetch(ctx, rs[0].ID, "w1", 1, store.FetchReport{State: store.RepoOK}), "ReportFetch")
	noErr(t, s.ReportFetch(ctx, rs[1].ID, "w1", 1, store.FetchReport{State: store.RepoGone}), "ReportFetch")
	noErr(t, s.HandBack(ctx, rs[2].ID, "w1", 1, "full"), "HandBack")
	noErr(t, s.RequestDelete(ctx, rs[3].ID), "RequestDelete")
	wantCounts(t, s, map[store.RepoState]int{store.RepoPending: 2, store.RepoOK: 1, store.RepoGone: 1, store.RepoOverflow: 1, store.RepoDeleting: 1})
	mustApply(t, s, term, store.DeleteRepo{ID: rs[3].ID}, store.DeleteRepo{ID: rs[0].ID, ExpectEpoch: 1})
	wantCounts(t, s, map[store.RepoState]int{store.RepoPending: 2, store.RepoGone: 1, store.RepoOverflow: 1})
	checkIndexes(t, s, "w1")
}

func wantCounts(t *testing.T, s Store, want map[store.RepoState]int) {
	t.Helper()
	got, err := s.CountRepos(t.Context())
	noErr(t, err, "CountRepos")
	for _, st := range allStates(got, want) {
		if got[st] != want[st] {
			t.Fatalf("CountRepos = %v, want %v", got, want)
		}
	}
}

func allStates(ms ...map[store.RepoState]int) []store.RepoState {
	states := []store.RepoState{store.RepoPending, store.RepoCloning, store.RepoOK, store.RepoFailing, store.RepoGone, store.RepoOverflow, store.RepoDeleting}
	for _, m := range ms {
		for st := range m {
			if !slices.Contains(states, st) {
				states = append(states, st)
			}
		}
	}
	return states
}

// testIndexesStayExact walks repos through every kind of write and checks after each
// that the owner index, the needs-decision index and the counts match the repos.
func testIndexesStayExact(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	owners := []string{"w1", "w2", "w3", "w9"}
	rs := createRepos(t, s, 20)
	preowned := newRepo(100) // created with an owner, as a restore might
	preowned.Owner, preowned.OwnerEpoch, preowned.State = "w9", 4, store.RepoOK
	if _, created, err := s.CreateRepo(ctx, preowned); err != nil || !created {
		t.Fatalf("CreateRepo(preowned) = %v, %v", created, err)
	}
	checkIndexes(t, s, owners...)

	epoch := map[string]int64{}
	owner := map[string]string{}
	assign := func(to string, state store.RepoState, clearSync bool, idx ...int) {
		t.Helper()
		var muts []store.Mutation
		for _, i := range idx {
			id := rs[i].ID
			muts = append(muts, store.AssignRepo{ID: id, ExpectOwner: owner[id], ExpectEpoch: epoch[id], Owner: to, State: state, ClearSync: clearSync})
			owner[id] = to
			epoch[id]++
		}
		mustApply(t, s, term, muts...)
		checkIndexes(t, s, owners...)
	}
	step := func(what string, err error) {
		t.Helper()
		noErr(t, err, what)
		checkIndexes(t, s, owners...)
	}

	assign("w1", store.RepoCloning, false, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	assign("w2", store.RepoCloning, false, 10, 11, 12, 13, 14)
	step("RequestSync", s.RequestSync(ctx, rs[3].ID))
	assign("w2", store.RepoCloning, true, 3)
	assign("w2", store.RepoOK, false, 0, 1, 2, 4)
	step("ReportFetch ok", s.ReportFetch(ctx, rs[5].ID, "w1", epoch[rs[5].ID], store.FetchReport{State: store.RepoOK}))
	step("ReportFetch failing", s.ReportFetch(ctx, rs[6].ID, "w1", epoch[rs[6].ID], store.FetchReport{State: store.RepoFailing, LastError: "x"}))
	step("ReportFetch gone", s.ReportFetch(ctx, rs[10].ID, "w2", epoch[rs[10].ID], store.FetchReport{State: store.RepoGone}))
	step("HandBack", s.HandBack(ctx, rs[7].ID, "w1", epoch[rs[7].ID], "disk full"))
	assign("w3", store.RepoCloning, false, 7)
	step("RequestDelete", s.RequestDelete(ctx, rs[8].ID))
	step("RequestDelete unowned", s.RequestDelete(ctx, rs[19].ID))
	step("DeleteRepo", s.Apply(ctx, term, []store.Mutation{
		store.DeleteRepo{ID: rs[8].ID, ExpectEpoch: epoch[rs[8].ID]},
		store.DeleteRepo{ID: rs[11].ID, ExpectEpoch: epoch[rs[11].ID]},
		store.DeleteRepo{ID: rs[19].ID},
		store.DeleteRepo{ID: preowned.ID, ExpectEpoch: 4},
	}))
	assign("", store.RepoPending, false, 12)
	step("RequestSync unowned", s.RequestSync(ctx, rs[12].ID))
	assign("w1", store.RepoCloning, true, 12, 15, 16)
}

// needing lists both parts of the needs-decision index, checking each holds only its
// own; it returns them by id.
func needing(t *testing.T, s Store) []store.Repo {
	t.Helper()
	var all []store.Repo
	for _, need := range []store.Need{store.NeedAction, store.NeedOwner} {
		rs := pageAll(t, "ListReposNeedingDecision", 0, func(c string) ([]store.Repo, string, error) {
			return s.ListReposNeedingDecision(t.Context(), need, c, 0)
		})
		for _, r := range rs {
			if !r.NeedsDecision() || r.Need() != need {
				t.Fatalf("ListReposNeedingDecision(%d) returned %+v (needs decision %v, need %d)", need, r, r.NeedsDecision(), r.Need())
			}
		}
		all = append(all, rs...)
	}
	slices.SortFunc(all, func(a, b store.Repo) int { return cmp.Compare(a.ID, b.ID) })
	return all
}

// byPos orders repos as an owner listing does: by ring position, then id.
func byPos(a, b store.Repo) int {
	return cmp.Or(cmp.Compare(a.RingPos(), b.RingPos()), cmp.Compare(a.ID, b.ID))
}

// checkIndexes derives what each index must hold from a full listing and compares.
func checkIndexes(t *testing.T, s Store, owners ...string) {
	t.Helper()
	ctx := t.Context()
	all := pageAll(t, "ListRepos", 3, func(c string) ([]store.Repo, string, error) { return s.ListRepos(ctx, c, 3) })
	byID := map[string]store.Repo{}
	needIDs := map[store.Need][]string{}
	counts := map[store.RepoState]int{}
	for _, r := range all {
		byID[r.ID] = r
		if r.NeedsDecision() {
			needIDs[r.Need()] = append(needIDs[r.Need()], r.ID)
		}
		counts[r.State]++
	}
	for _, owner := range owners {
		var want []store.Repo
		for _, r := range all {
			if r.Owner == owner {
				want = append(want, r)
			}
		}
		slices.SortFunc(want, byPos)
		got := pageAll(t, "ListReposByOwner", 2, func(c string) ([]store.Repo, string, error) { return s.ListReposByOwner(ctx, owner, c, 2) })
		if !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("ListReposByOwner(%s) = %v, want %v in ring-position order", owner, ids(got), ids(want))
		}
		for _, r := range got {
			equal(t, "repo from the owner index", r, byID[r.ID], normRepo)
		}
	}
	for _, need := range []store.Need{store.NeedAction, store.NeedOwner} {
		got := pageAll(t, "ListReposNeedingDecision", 2, func(c string) ([]store.Repo, string, error) {
			return s.ListReposNeedingDecision(ctx, need, c, 2)
		})
		wantIDs(t, fmt.Sprintf("ListReposNeedingDecision(%d)", need), got, needIDs[need])
		for _, r := range got {
			equal(t, "repo from the needs-decision index", r, byID[r.ID], normRepo)
		}
	}
	wantCounts(t, s, counts)
}

// someBelief is a repo's belief after a first clone whose history shows pushes a day
// apart for days days: a belief as a worker stores it.
func someBelief(days int) priority.Belief {
	var commits []time.Time
	for d := range days {
		commits = append(commits, t0.Add(-time.Duration(d+1)*24*time.Hour))
	}
	return priority.Fold(priority.Stats{}, priority.Poll{Now: t0, Changed: true, Commits: commits, Since: t0.Add(-365 * 24 * time.Hour)}, nil).Belief
}
