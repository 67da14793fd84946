package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Election, ring, list sync and the fenced Apply.

func testEmptyStore(t *testing.T, s Store) {
	ctx := t.Context()
	e, err := s.GetElection(ctx)
	noErr(t, err, "GetElection")
	equal(t, "empty election", e, store.Election{}, normElection)
	r, err := s.GetRing(ctx)
	noErr(t, err, "GetRing")
	equal(t, "empty ring", r, store.Ring{}, normRing)
	l, err := s.GetListSync(ctx)
	noErr(t, err, "GetListSync")
	equal(t, "empty list sync", l, store.ListSync{}, normListSync)

	ws, err := s.ListWorkers(ctx)
	noErr(t, err, "ListWorkers")
	if len(ws) != 0 {
		t.Fatalf("ListWorkers = %v, want none", ws)
	}
	_, err = s.GetWorker(ctx, "w-none")
	wantErr(t, err, store.ErrNotFound, "GetWorker(missing)")
	_, err = s.GetRepo(ctx, "r-none")
	wantErr(t, err, store.ErrNotFound, "GetRepo(missing)")
	rs, next, err := s.ListRepos(ctx, "", 10)
	if err != nil || len(rs) != 0 || next != "" {
		t.Fatalf("ListRepos on empty = %v, %q, %v", rs, next, err)
	}
	rs, next, err = s.ListReposByOwner(ctx, "w-none", "", 10)
	if err != nil || len(rs) != 0 || next != "" {
		t.Fatalf("ListReposByOwner on empty = %v, %q, %v", rs, next, err)
	}
	for _, need := range []store.Need{store.NeedAction, store.NeedOwner} {
		rs, next, err = s.ListReposNeedingDecision(ctx, need, "", 10)
		if err != nil || len(rs) != 0 || next != "" {
			t.Fatalf("ListReposNeedingDecision(%d) on empty = %v, %q, %v", need, rs, next, err)
		}
	}
	rs, next, err = s.ListReposByOwnerRange(ctx, "w-none", 0, store.MaxPos, "", 10)
	if err != nil || len(rs) != 0 || next != "" {
		t.Fatalf("ListReposByOwnerRange on empty = %v, %q, %v", rs, next, err)
	}
	head, err := s.GetRingHead(ctx)
	noErr(t, err, "GetRingHead")
	equal(t, "empty ring head", head, store.Ring{}, normRing)
	counts, err := s.CountRepos(ctx)
	noErr(t, err, "CountRepos")
	for st, n := range counts {
		if n != 0 {
			t.Fatalf("CountRepos on empty: %s = %d", st, n)
		}
	}
}

func testCASElection(t *testing.T, s Store) {
	ctx := t.Context()
	first := store.Election{Version: 42, Term: 1, VotedFor: "coord-a", LeaseUntil: t0.Add(15 * time.Second), LastCallTime: t0}
	got, err := s.CASElection(ctx, 0, first)
	noErr(t, err, "CASElection(0)")
	first.Version = 1 // the store sets it, whatever the caller passed
	equal(t, "CASElection result", got, first, normElection)
	stored, err := s.GetElection(ctx)
	noErr(t, err, "GetElection")
	equal(t, "stored election", stored, first, normElection)

	for _, stale := range []int64{0, 2, 7} {
		_, err = s.CASElection(ctx, stale, store.Election{Term: 9, VotedFor: "coord-x"})
		wantErr(t, err, store.ErrConflict, fmt.Sprintf("CASElection(%d) at version 1", stale))
	}
	stored, err = s.GetElection(ctx)
	noErr(t, err, "GetElection")
	equal(t, "election after refused CAS", stored, first, normElection)

	second := store.Election{Term: 2, VotedFor: "coord-b", LeaseUntil: t0.Add(time.Minute), LastCallTime: t0.Add(time.Second)}
	got, err = s.CASElection(ctx, 1, second)
	noErr(t, err, "CASElection(1)")
	second.Version = 2
	equal(t, "second CASElection", got, second, normElection)
	stored, err = s.GetElection(ctx)
	noErr(t, err, "GetElection")
	equal(t, "stored second election", stored, second, normElection)
}

func testCASElectionRace(t *testing.T, s Store) {
	ctx := t.Context()
	for expect := range int64(2) { // from no record, then from an existing one
		errs := race(32, func(i int) error {
			_, err := s.CASElection(ctx, expect, store.Election{Term: expect + 1, VotedFor: fmt.Sprintf("coord-%d", i)})
			return err
		})
		w := oneWinner(t, "CASElection race", errs, store.ErrConflict)
		e, err := s.GetElection(ctx)
		noErr(t, err, "GetElection")
		if e.Version != expect+1 || e.VotedFor != fmt.Sprintf("coord-%d", w) {
			t.Fatalf("after race from %d: election %+v, want version %d won by coord-%d", expect, e, expect+1, w)
		}
	}
}

func sampleRing(n int) store.Ring {
	r := store.Ring{Version: 99, Hash: fmt.Sprintf("xxh64-%d", n), WarmupUntil: t0.Add(5 * time.Minute), Batch: 50 + n,
		Scans: []store.Scan{{Owner: "w-0", From: uint64(n), To: store.MaxPos}, {Owner: "w-9", From: 0, To: 0}}}
	for i := range 3 {
		id := fmt.Sprintf("w-%d", i)
		r.Members = append(r.Members, store.Member{ID: id, Slot: i})
		r.Tokens = append(r.Tokens, store.Token{Pos: uint64(i)<<60 + uint64(n), Member: id})
	}
	return r
}

func testPutRing(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	mustApply(t, s, term, store.PutRing{Ring: sampleRing(1), ExpectVersion: 0})
	want := sampleRing(1)
	want.Version = 1
	got, err := s.GetRing(ctx)
	noErr(t, err, "GetRing")
	equal(t, "stored ring", got, want, normRing)
	head, err := s.GetRingHead(ctx)
	noErr(t, err, "GetRingHead")
	wantHead := want
	wantHead.Members, wantHead.Tokens = nil, nil
	equal(t, "ring head", head, wantHead, normRing)

	// A new head over the same members and tokens (a new batch, scans done).
	same := want
	same.Batch, same.Scans = 7000, nil
	mustApply(t, s, term, store.PutRing{Ring: same, ExpectVersion: 1})
	same.Version = 2
	got, err = s.GetRing(ctx)
	noErr(t, err, "GetRing")
	equal(t, "ring with a new head", got, same, normRing)
	mustApply(t, s, term, store.PutRing{Ring: want, ExpectVersion: 2})
	want.Version = 3

	// The caller owns what it got back.
	got.Members[0].ID, got.Tokens[0].Pos = "mutated", 12345
	got, err = s.GetRing(ctx)
	noErr(t, err, "GetRing")
	equal(t, "ring after mutating a returned copy", got, want, normRing)

	for _, stale := range []int64{0, 2, 4} {
		err = s.Apply(ctx, term, []store.Mutation{store.PutRing{Ring: sampleRing(2), ExpectVersion: stale}})
		wantErr(t, err, store.ErrConflict, fmt.Sprintf("PutRing(expect %d) at version 3", stale))
	}
	got, err = s.GetRing(ctx)
	noErr(t, err, "GetRing")
	equal(t, "ring after refused PutRing", got, want, normRing)

	mustApply(t, s, term, store.PutRing{Ring: sampleRing(2), ExpectVersion: 3})
	want = sampleRing(2)
	want.Version = 4
	got, err = s.GetRing(ctx)
	noErr(t, err, "GetRing")
	equal(t, "second ring", got, want, normRing)
}

func testPutRingRace(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	errs := race(32, func(i int) error {
		return s.Apply(ctx, term, []store.Mutation{store.PutRing{Ring: sampleRing(i), ExpectVersion: 0}})
	})
	w := oneWinner(t, "PutRing race", errs, store.ErrConflict)
	want := sampleRing(w)
	want.Version = 1
	got, err := s.GetRing(ctx)
	noErr(t, err, "GetRing")
	equal(t, "ring after race", got, want, normRing)
}

func testPutListSync(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	first := store.ListSync{Version: 5, Commit: "abc123", AppliedAt: t0, Extra: []byte(`{"bad_lines":[3,9]}`)}
	mustApply(t, s, term, store.PutListSync{ListSync: first, ExpectVersion: 0})
	first.Version = 1
	got, err := s.GetListSync(ctx)
	noErr(t, err, "GetListSync")
	equal(t, "stored list sync", got, first, normListSync)

	got.Extra[0] = 'X' // the caller owns what it got back
	got, err = s.GetListSync(ctx)
	noErr(t, err, "GetListSync")
	equal(t, "list sync after mutating a returned copy", got, first, normListSync)

	for _, stale := range []int64{0, 2} {
		err = s.Apply(ctx, term, []store.Mutation{store.PutListSync{ListSync: store.ListSync{Commit: "zzz"}, ExpectVersion: stale}})
		wantErr(t, err, store.ErrConflict, fmt.Sprintf("PutListSync(expect %d) at version 1", stale))
	}
	got, err = s.GetListSync(ctx)
	noErr(t, err, "GetListSync")
	equal(t, "list sync after refused put", got, first, normListSync)

	second := store.ListSync{Commit: "def456", AppliedAt: t0.Add(time.Hour)}
	mustApply(t, s, term, store.PutListSync{ListSync: second, ExpectVersion: 1})
	second.Version = 2
	got, err = s.GetListSync(ctx)
	noErr(t, err, "GetListSync")
	equal(t, "second list sync", got, second, normListSync)
}

func testApplyFenced(t *testing.T, s Store) {
	ctx := t.Context()
	claim(t, s, "w1")
	r := createRepos(t, s, 1)[0]
	batch := []store.Mutation{
		store.PutRing{Ring: sampleRing(1)},
		store.AssignRepo{ID: r.ID, Owner: "w1", State: store.RepoCloning},
		store.AppendOutbox{Worker: "w1", Entries: []store.OutboxEntry{{Op: store.OpAdd, RepoID: r.ID, URL: r.URL, Epoch: 1}}},
		store.SetWorkerState{ID: "w1", State: store.WorkerActive},
	}
	before := snap(t, s)
	wantErr(t, s.Apply(ctx, 1, batch), store.ErrFenced, "Apply with no election")
	wantErr(t, s.Apply(ctx, 0, batch), store.ErrFenced, "Apply(term 0) with no election")
	wantUnchanged(t, "Apply with no election", before, s)

	term := lead(t, s)
	before = snap(t, s)
	for _, bad := range []int64{term - 1, term + 1} {
		wantErr(t, s.Apply(ctx, bad, batch), store.ErrFenced, fmt.Sprintf("Apply(term %d) at term %d", bad, term))
	}
	wantUnchanged(t, "Apply with a wrong term", before, s)

	// Another coordinator takes over: the old leader's writes are refused.
	e, err := s.GetElection(ctx)
	noErr(t, err, "GetElection")
	_, err = s.CASElection(ctx, e.Version, store.Election{Term: term + 1, VotedFor: "coord-b", LeaseUntil: t0.Add(time.Minute)})
	noErr(t, err, "CASElection(next term)")
	before = snap(t, s)
	wantErr(t, s.Apply(ctx, term, batch), store.ErrFenced, "Apply with the stale term")
	wantErr(t, s.Apply(ctx, term, nil), store.ErrFenced, "empty Apply with the stale term")
	wantUnchanged(t, "Apply with the stale term", before, s)

	mustApply(t, s, term+1, batch...)
	mustApply(t, s, term+1)
	if got := getRepo(t, s, r.ID); got.Owner != "w1" || got.OwnerEpoch != 1 {
		t.Fatalf("repo after Apply with the current term: %+v", got)
	}
}

func testApplyAtomic(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	claim(t, s, "w1")
	claim(t, s, "w2")
	hb2 := heartbeat(t, s, "w2", t0)
	rs := createRepos(t, s, 3)
	r1, r2, r3 := rs[0], rs[1], rs[2]
	mustApply(t, s, term, store.AssignRepo{ID: r2.ID, Owner: "w2", State: store.RepoCloning})

	// good writes distinct items, none touched by any bad mutation below.
	good := func(skip store.Mutation) []store.Mutation {
		var ms []store.Mutation
		if _, ok := skip.(store.PutRing); !ok {
			ms = append(ms, store.PutRing{Ring: sampleRing(1)})
		}
		if _, ok := skip.(store.PutListSync); !ok {
			ms = append(ms, store.PutListSync{ListSync: store.ListSync{Commit: "c1"}})
		}
		return append(ms,
			store.AssignRepo{ID: r1.ID, Owner: "w1", State: store.RepoCloning},
			store.AppendOutbox{Worker: "w1", Entries: []store.OutboxEntry{{Op: store.OpAdd, RepoID: r1.ID, URL: r1.URL, Epoch: 1}}},
			store.DeleteRepo{ID: r3.ID},
		)
	}
	bads := []struct {
		name string
		m    store.Mutation
	}{
		{"PutRing stale version", store.PutRing{Ring: sampleRing(2), ExpectVersion: 1}},
		{"PutListSync stale version", store.PutListSync{ListSync: store.ListSync{Commit: "c2"}, ExpectVersion: 3}},
		{"SetWorkerState missing worker", store.SetWorkerState{ID: "w-none", State: store.WorkerDead}},
		{"SetWorkerState stale heartbeat count", store.SetWorkerState{ID: "w2", State: store.WorkerDead, ExpectBeats: hb2.Beats - 1}},
		{"DeleteWorker missing worker", store.DeleteWorker{ID: "w-none"}},
		{"DeleteWorker stale heartbeat count", store.DeleteWorker{ID: "w2", ExpectBeats: hb2.Beats + 1}},
		{"AssignRepo missing repo", store.AssignRepo{ID: "r-none", Owner: "w2", State: store.RepoCloning}},
		{"AssignRepo wrong owner", store.AssignRepo{ID: r2.ID, ExpectOwner: "w1", ExpectEpoch: 1, Owner: "w1", State: store.RepoCloning}},
		{"AssignRepo wrong epoch", store.AssignRepo{ID: r2.ID, ExpectOwner: "w2", ExpectEpoch: 0, Owner: "w1", State: store.RepoCloning}},
		{"DeleteRepo missing repo", store.DeleteRepo{ID: "r-none"}},
		{"DeleteRepo wrong epoch", store.DeleteRepo{ID: r2.ID, ExpectEpoch: 0}},
		{"AppendOutbox missing worker", store.AppendOutbox{Worker: "w-none", Entries: []store.OutboxEntry{{Op: store.OpAdd}}}},
		{"AppendOutbox stale head", store.AppendOutbox{Worker: "w2", ExpectHead: 1, Entries: []store.OutboxEntry{{Op: store.OpAdd}}}},
		{"TrimOutbox missing worker", store.TrimOutbox{Worker: "w-none", Through: 1}},
	}
	before := snap(t, s)
	for _, bad := range bads {
		g := good(bad.m)
		for _, batch := range [][]store.Mutation{
			append([]store.Mutation{bad.m}, g...),           // first
			append(append(g[:2:2], bad.m), g[2:]...),        // middle
			append(append([]store.Mutation{}, g...), bad.m), // last
		} {
			wantErr(t, s.Apply(ctx, term, batch), store.ErrConflict, bad.name)
			wantUnchanged(t, "Apply with "+bad.name, before, s)
		}
	}

	// The same writes go through without the bad one.
	mustApply(t, s, term, good(nil)...)
	if got := getRepo(t, s, r1.ID); got.Owner != "w1" || got.OwnerEpoch != 1 {
		t.Fatalf("r1 after good batch: %+v", got)
	}
	if _, err := s.GetRepo(ctx, r3.ID); err == nil {
		t.Fatalf("r3 survived DeleteRepo")
	}
	if w := getWorker(t, s, "w1"); w.OutboxHead != 1 {
		t.Fatalf("w1 outbox head = %d, want 1", w.OutboxHead)
	}
}

func testApplyTooLarge(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	claim(t, s, "w1")
	entries := func(n int) []store.OutboxEntry {
		es := make([]store.OutboxEntry, n)
		for i := range es {
			es[i] = store.OutboxEntry{Op: store.OpAdd, RepoID: fmt.Sprintf("r%03d", i), Epoch: 1}
		}
		return es
	}
	before := snap(t, s)
	tooLarge := [][]store.Mutation{
		{store.AppendOutbox{Worker: "w1", Entries: entries(store.MaxApplyItems)}},
		{
			store.AppendOutbox{Worker: "w1", Entries: entries(store.MaxApplyItems - 2)},
			store.PutRing{Ring: sampleRing(1)},
			store.PutListSync{ListSync: store.ListSync{Commit: "c"}},
		},
	}
	for _, muts := range tooLarge {
		if n := store.CountItems(muts); n <= store.MaxApplyItems {
			t.Fatalf("fixture has %d items", n)
		}
		wantErr(t, s.Apply(ctx, term, muts), store.ErrTooLarge, fmt.Sprintf("Apply of %d items", store.CountItems(muts)))
	}
	wantUnchanged(t, "a too large Apply", before, s)

	mustApply(t, s, term, store.AppendOutbox{Worker: "w1", Entries: entries(store.MaxApplyItems - 1)})
	if got := readOutbox(t, s, "w1", 0, 0); len(got) != store.MaxApplyItems-1 || got[len(got)-1].Seq != store.MaxApplyItems-1 {
		t.Fatalf("after Apply of exactly MaxApplyItems items: %d entries, seqs %v", len(got), seqs(got))
	}
}

// A canceled context must fail the call without writing.
func testCanceledContext(t *testing.T, s Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.CASElection(ctx, 0, store.Election{Term: 1}); err == nil {
		t.Fatalf("CASElection with a canceled context succeeded")
	}
	if _, _, err := s.CreateRepo(ctx, newRepo(1)); err == nil {
		t.Fatalf("CreateRepo with a canceled context succeeded")
	}
	if _, err := s.ClaimSlot(ctx, store.Worker{ID: "w1"}, 4); err == nil {
		t.Fatalf("ClaimSlot with a canceled context succeeded")
	}
	wantUnchanged(t, "calls with a canceled context", snapshot{Outboxes: map[string][]store.OutboxEntry{}, Repos: []store.Repo{}, Counts: map[store.RepoState]int{}}, s)
}

// testStaleTermWritesNothing: once another coordinator took the next term, no write the
// old leader can make lands — each kind of mutation alone, and the list sync's fenced
// creates and deletes — and the current term's do.
func testStaleTermWritesNothing(t *testing.T, s Store) {
	ctx := t.Context()
	old := lead(t, s)
	claim(t, s, "w1")
	w := heartbeat(t, s, "w1", t0)
	rs := createRepos(t, s, 3)
	mustApply(t, s, old,
		store.AssignRepo{ID: rs[0].ID, Owner: "w1", State: store.RepoOK},
		store.AppendOutbox{Worker: "w1", Entries: []store.OutboxEntry{{Op: store.OpAdd, RepoID: rs[0].ID, Epoch: 1}}},
		store.PutRing{Ring: sampleRing(1)},
		store.PutListSync{ListSync: store.ListSync{Commit: "c1"}},
	)
	e, err := s.GetElection(ctx)
	noErr(t, err, "GetElection")
	cur, err := s.CASElection(ctx, e.Version, store.Election{Term: old + 1, VotedFor: "coord-b", LeaseUntil: t0.Add(time.Minute)})
	noErr(t, err, "CASElection(next term)")

	muts := []store.Mutation{
		store.PutRing{Ring: sampleRing(2), ExpectVersion: 1},
		store.PutListSync{ListSync: store.ListSync{Commit: "c2"}, ExpectVersion: 1},
		store.SetWorkerState{ID: "w1", State: store.WorkerDead, ExpectBeats: w.Beats},
		store.AssignRepo{ID: rs[1].ID, Owner: "w1", State: store.RepoCloning},
		store.DeleteRepo{ID: rs[0].ID, ExpectEpoch: 1},
		store.AppendOutbox{Worker: "w1", ExpectHead: 1, Entries: []store.OutboxEntry{{Op: store.OpDel, RepoID: rs[0].ID}}},
		store.TrimOutbox{Worker: "w1", Through: 1},
		store.DeleteWorker{ID: "w1"}, // last: the others need the worker
	}
	before := snap(t, s)
	for _, m := range muts {
		wantErr(t, s.Apply(ctx, old, []store.Mutation{m}), store.ErrFenced, fmt.Sprintf("%T with the stale term", m))
	}
	_, _, err = s.CreateRepoFenced(ctx, old, newRepo(50))
	wantErr(t, err, store.ErrFenced, "CreateRepoFenced with the stale term")
	_, _, err = s.CreateRepoFenced(ctx, old, rs[2]) // an existing id: still refused, not "exists"
	wantErr(t, err, store.ErrFenced, "CreateRepoFenced of an existing id with the stale term")
	wantErr(t, s.RequestDeleteFenced(ctx, old, rs[2].ID), store.ErrFenced, "RequestDeleteFenced with the stale term")
	wantUnchanged(t, "writes with the stale term", before, s)

	// The current term's writes land, one kind at a time.
	for _, m := range muts {
		mustApply(t, s, cur.Term, m)
	}
	got, created, err := s.CreateRepoFenced(ctx, cur.Term, newRepo(50))
	if err != nil || !created || got.ID != newRepo(50).ID {
		t.Fatalf("CreateRepoFenced with the current term = %+v, created %v, %v", got, created, err)
	}
	if _, created, err := s.CreateRepoFenced(ctx, cur.Term, newRepo(50)); err != nil || created {
		t.Fatalf("CreateRepoFenced of an existing id = created %v, %v; want the stored repo", created, err)
	}
	noErr(t, s.RequestDeleteFenced(ctx, cur.Term, rs[2].ID), "RequestDeleteFenced with the current term")
	if r := getRepo(t, s, rs[2].ID); r.State != store.RepoDeleting {
		t.Fatalf("repo after RequestDeleteFenced: state %s, want deleting", r.State)
	}
	noErr(t, s.RequestDeleteFenced(ctx, cur.Term, rs[2].ID), "RequestDeleteFenced of a repo being deleted")
	wantErr(t, s.RequestDeleteFenced(ctx, cur.Term, "r-none"), store.ErrNotFound, "RequestDeleteFenced of an unknown repo")
	checkIndexes(t, s, "w1")
}

// testPutSweep: the anti-entropy sweep's state is a versioned singleton, fenced by term.
func testPutSweep(t *testing.T, s Store) {
	ctx := t.Context()
	got, err := s.GetSweep(ctx)
	noErr(t, err, "GetSweep")
	equal(t, "empty sweep", got, store.Sweep{}, normSweep)
	term := lead(t, s)
	first := store.Sweep{Owner: "w1", Cursor: store.PosCursor(7, "r1"), PassStart: t0, TickAt: t0.Add(time.Minute),
		Read: 1000, LastPass: 5000, Passes: 3, Found: 2}
	mustApply(t, s, term, store.PutSweep{Sweep: first, ExpectVersion: 0})
	first.Version = 1
	got, err = s.GetSweep(ctx)
	noErr(t, err, "GetSweep")
	equal(t, "stored sweep", got, first, normSweep)
	for _, stale := range []int64{0, 2} {
		err = s.Apply(ctx, term, []store.Mutation{store.PutSweep{Sweep: store.Sweep{Owner: "zzz"}, ExpectVersion: stale}})
		wantErr(t, err, store.ErrConflict, fmt.Sprintf("PutSweep(expect %d) at version 1", stale))
	}
	err = s.Apply(ctx, term-1, []store.Mutation{store.PutSweep{Sweep: store.Sweep{Owner: "zzz"}, ExpectVersion: 1}})
	wantErr(t, err, store.ErrFenced, "PutSweep with an old term")
	got, err = s.GetSweep(ctx)
	noErr(t, err, "GetSweep")
	equal(t, "sweep after refused puts", got, first, normSweep)
	second := store.Sweep{PassStart: t0.Add(time.Hour), LastPass: 6000, Passes: 4}
	mustApply(t, s, term, store.PutSweep{Sweep: second, ExpectVersion: 1})
	second.Version = 2
	got, err = s.GetSweep(ctx)
	noErr(t, err, "GetSweep")
	equal(t, "second sweep", got, second, normSweep)
}
