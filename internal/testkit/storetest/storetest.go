// Package storetest is the conformance suite every store backend runs:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Store { ... a fresh, empty store ... })
//	}
//
// It only uses the Store interface, so it holds for bbolt and DynamoDB alike. It
// never puts two mutations on the same item in one Apply, which DynamoDB transactions
// reject.
package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Run runs the suite. newStore must return a fresh, empty store for each subtest and
// arrange (with t.Cleanup) to close it.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s Store)
	}{
		{"EmptyStore", testEmptyStore},
		{"CASElection", testCASElection},
		{"CASElectionRace", testCASElectionRace},
		{"PutRing", testPutRing},
		{"PutRingRace", testPutRingRace},
		{"PutListSync", testPutListSync},
		{"PutSweep", testPutSweep},
		{"ApplyFenced", testApplyFenced},
		{"StaleTermWritesNothing", testStaleTermWritesNothing},
		{"ApplyAtomic", testApplyAtomic},
		{"ApplyTooLarge", testApplyTooLarge},
		{"CanceledContext", testCanceledContext},
		{"ClaimSlot", testClaimSlot},
		{"ClaimSlotRace", testClaimSlotRace},
		{"ClaimSlotSameIDRace", testClaimSlotSameIDRace},
		{"Heartbeat", testHeartbeat},
		{"Leave", testLeave},
		{"SetWorkerState", testSetWorkerState},
		{"DeleteWorker", testDeleteWorker},
		{"Outbox", testOutbox},
		{"WorkersVersion", testWorkersVersion},
		{"Signals", testSignals},
		{"SignalsRace", testSignalsRace},
		{"CreateRepo", testCreateRepo},
		{"OneRepoPerMirrorPath", testOneRepoPerMirrorPath},
		{"ListReposPaging", testListReposPaging},
		{"ListReposByOwner", testListReposByOwner},
		{"ListReposByOwnerRange", testListReposByOwnerRange},
		{"ListReposNeedingDecision", testListReposNeedingDecision},
		{"AssignRepo", testAssignRepo},
		{"DeleteRepo", testDeleteRepo},
		{"RequestDeleteAndSync", testRequestDeleteAndSync},
		{"ReportFetch", testReportFetch},
		{"ReportFetchKeepingState", testReportFetchKeepingState},
		{"HandBack", testHandBack},
		{"ListStalest", testListStalest},
		{"CountRepos", testCountRepos},
		{"IndexesStayExact", testIndexesStayExact},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

// t0 has nanoseconds and a non-UTC zone, so a lossy time encoding shows up.
var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("IST", 5*3600+1800))

// ---- fixtures ----

// lead makes the test the leader at term 1 and returns the term.
func lead(t *testing.T, s Store) int64 {
	t.Helper()
	e, err := s.CASElection(t.Context(), 0, store.Election{Term: 1, VotedFor: "coord-a", LeaseUntil: t0.Add(15 * time.Second), LastCallTime: t0})
	if err != nil {
		t.Fatalf("CASElection: %v", err)
	}
	return e.Term
}

func mustApply(t *testing.T, s Store, term int64, muts ...store.Mutation) {
	t.Helper()
	if err := s.Apply(t.Context(), term, muts); err != nil {
		t.Fatalf("Apply(%d, %+v): %v", term, muts, err)
	}
}

func claim(t *testing.T, s Store, id string) store.Worker {
	t.Helper()
	w, err := s.ClaimSlot(t.Context(), store.Worker{ID: id, StartedAt: t0}, 64)
	if err != nil {
		t.Fatalf("ClaimSlot(%s): %v", id, err)
	}
	return w
}

func heartbeat(t *testing.T, s Store, id string, at time.Time) store.Worker {
	t.Helper()
	w, err := s.Heartbeat(t.Context(), id, store.Heartbeat{At: at})
	if err != nil {
		t.Fatalf("Heartbeat(%s): %v", id, err)
	}
	return w
}

// newRepo is repo number i, not yet stored; ids sort like i only by accident.
func newRepo(i int) store.Repo {
	url := fmt.Sprintf("https://git.example.com/org/repo-%03d.git", i)
	r := store.Repo{ID: store.RepoID(url), URL: url, Source: store.SourceList, CreatedAt: t0.Add(time.Duration(i) * time.Second)}
	if i%2 == 1 {
		// Every other repo was added with a URL that differs from its identity: each
		// write and read of it must keep that (compared whole by the tests).
		r.Upstream = url + "/"
	}
	return r
}

func createRepos(t *testing.T, s Store, n int) []store.Repo {
	t.Helper()
	var rs []store.Repo
	for i := range n {
		r, created, err := s.CreateRepo(t.Context(), newRepo(i))
		if err != nil || !created {
			t.Fatalf("CreateRepo(%d) = created %v, %v", i, created, err)
		}
		rs = append(rs, r)
	}
	return rs
}

func getRepo(t *testing.T, s Store, id string) store.Repo {
	t.Helper()
	r, err := s.GetRepo(t.Context(), id)
	if err != nil {
		t.Fatalf("GetRepo(%s): %v", id, err)
	}
	return r
}

func getWorker(t *testing.T, s Store, id string) store.Worker {
	t.Helper()
	w, err := s.GetWorker(t.Context(), id)
	if err != nil {
		t.Fatalf("GetWorker(%s): %v", id, err)
	}
	return w
}

func readOutbox(t *testing.T, s Store, worker string, after uint64, limit int) []store.OutboxEntry {
	t.Helper()
	es, err := s.ReadOutbox(t.Context(), worker, after, limit)
	if err != nil {
		t.Fatalf("ReadOutbox(%s, %d, %d): %v", worker, after, limit, err)
	}
	return es
}

func seqs(es []store.OutboxEntry) []uint64 {
	var out []uint64
	for _, e := range es {
		out = append(out, e.Seq)
	}
	return out
}

// ---- assertions ----

func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func noErr(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// equal compares after norm, which maps equivalent encodings (time zones, monotonic
// readings, nil vs empty slices) to one form.
func equal[T any](t *testing.T, what string, got, want T, norm func(T) T) {
	t.Helper()
	if !reflect.DeepEqual(norm(got), norm(want)) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// UTC drops the zone and the monotonic reading; Equal times become DeepEqual.
func normRepo(r store.Repo) store.Repo {
	for _, p := range []*time.Time{&r.CreatedAt, &r.LastFetchAt, &r.LastSuccessAt, &r.LastChangeAt, &r.LastCommitAt} {
		*p = p.UTC()
	}
	return r
}

func normRepos(rs []store.Repo) []store.Repo {
	out := []store.Repo{}
	for _, r := range rs {
		out = append(out, normRepo(r))
	}
	return out
}

func normWorker(w store.Worker) store.Worker {
	w.StartedAt, w.HeartbeatAt, w.SilentSince = w.StartedAt.UTC(), w.HeartbeatAt.UTC(), w.SilentSince.UTC()
	if len(w.Checks) > 0 {
		cs := make([]store.Check, len(w.Checks))
		for i, c := range w.Checks {
			cs[i] = store.Check{RepoID: c.RepoID, At: c.At.UTC().Round(0)}
		}
		w.Checks = cs
	} else {
		w.Checks = nil
	}
	return w
}

func normElection(e store.Election) store.Election {
	e.LeaseUntil, e.LastCallTime = e.LeaseUntil.UTC(), e.LastCallTime.UTC()
	return e
}

func normRing(r store.Ring) store.Ring {
	r.WarmupUntil = r.WarmupUntil.UTC()
	if len(r.Members) == 0 {
		r.Members = nil
	}
	if len(r.Tokens) == 0 {
		r.Tokens = nil
	}
	if len(r.Scans) == 0 {
		r.Scans = nil
	}
	return r
}

func normSweep(sw store.Sweep) store.Sweep {
	sw.PassStart, sw.TickAt = sw.PassStart.UTC(), sw.TickAt.UTC()
	return sw
}

func normListSync(l store.ListSync) store.ListSync {
	l.AppliedAt = l.AppliedAt.UTC()
	if len(l.Extra) == 0 {
		l.Extra = nil
	}
	return l
}

func normEntries(es []store.OutboxEntry) []store.OutboxEntry {
	if len(es) == 0 {
		return nil
	}
	return es
}

// pageAll follows cursors to the end, failing on a runaway listing.
func pageAll(t *testing.T, what string, limit int, list func(cursor string) ([]store.Repo, string, error)) []store.Repo {
	t.Helper()
	var all []store.Repo
	cursor := ""
	for range 1000 {
		page, next, err := list(cursor)
		if err != nil {
			t.Fatalf("%s(cursor %q, limit %d): %v", what, cursor, limit, err)
		}
		if limit > 0 && len(page) > limit {
			t.Fatalf("%s: page of %d repos exceeds limit %d", what, len(page), limit)
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		cursor = next
	}
	t.Fatalf("%s: listing with limit %d did not end", what, limit)
	return nil
}

func ids(rs []store.Repo) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// wantIDs checks rs holds exactly want's ids, each once, in ascending order.
func wantIDs(t *testing.T, what string, rs []store.Repo, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	if got := ids(rs); !slices.Equal(got, want) {
		t.Fatalf("%s: got ids %v, want %v", what, got, want)
	}
}

// ---- whole-store snapshot, to prove a refused write changed nothing ----

type snapshot struct {
	Election store.Election
	Ring     store.Ring
	ListSync store.ListSync
	Workers  []store.Worker
	Outboxes map[string][]store.OutboxEntry
	Repos    []store.Repo
	Needs    []string
	Counts   map[store.RepoState]int
}

func snap(t *testing.T, s Store) snapshot {
	t.Helper()
	ctx := t.Context()
	var sn snapshot
	var err error
	sn.Election, err = s.GetElection(ctx)
	noErr(t, err, "GetElection")
	sn.Election = normElection(sn.Election)
	sn.Ring, err = s.GetRing(ctx)
	noErr(t, err, "GetRing")
	sn.Ring = normRing(sn.Ring)
	sn.ListSync, err = s.GetListSync(ctx)
	noErr(t, err, "GetListSync")
	sn.ListSync = normListSync(sn.ListSync)
	ws, err := s.ListWorkers(ctx)
	noErr(t, err, "ListWorkers")
	slices.SortFunc(ws, func(a, b store.Worker) int { return cmp.Compare(a.ID, b.ID) })
	sn.Outboxes = map[string][]store.OutboxEntry{}
	for _, w := range ws {
		sn.Workers = append(sn.Workers, normWorker(w))
		sn.Outboxes[w.ID] = normEntries(readOutbox(t, s, w.ID, 0, 0))
	}
	sn.Repos = normRepos(pageAll(t, "ListRepos", 0, func(c string) ([]store.Repo, string, error) { return s.ListRepos(ctx, c, 0) }))
	sn.Needs = slices.Sorted(slices.Values(ids(needing(t, s))))
	counts, err := s.CountRepos(ctx)
	noErr(t, err, "CountRepos")
	sn.Counts = map[store.RepoState]int{}
	for st, n := range counts {
		if n != 0 {
			sn.Counts[st] = n
		}
	}
	return sn
}

func wantUnchanged(t *testing.T, what string, before snapshot, s Store) {
	t.Helper()
	if after := snap(t, s); !reflect.DeepEqual(before, after) {
		t.Fatalf("%s changed the store:\nbefore %+v\n after %+v", what, before, after)
	}
}

// ---- concurrency ----

// race runs fn(i) for i in [0,n) in n goroutines released together, and returns the errors.
func race(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	done := make(chan struct{})
	for i := range n {
		go func() {
			defer func() { done <- struct{}{} }()
			<-start
			errs[i] = fn(i)
		}()
	}
	close(start)
	for range n {
		<-done
	}
	return errs
}

// oneWinner checks exactly one call succeeded and the rest failed with loseErr; it
// returns the winner's index.
func oneWinner(t *testing.T, what string, errs []error, loseErr error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("%s: both %d and %d won", what, winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, loseErr):
			t.Fatalf("%s: loser %d got %v, want %v", what, i, err, loseErr)
		}
	}
	if winner < 0 {
		t.Fatalf("%s: nobody won", what)
	}
	return winner
}
