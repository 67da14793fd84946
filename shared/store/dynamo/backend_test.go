package dynamo

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Tests of what is particular to the DynamoDB backend, on both tiers: the fence inside
// the transaction, conflict retries, ring chunks, and outbox leftovers.

var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

func mustNoErr(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func leadStore(t *testing.T, s *Store) int64 {
	t.Helper()
	e, err := s.CASElection(t.Context(), 0, store.Election{Term: 1, VotedFor: "coord-a", LeaseUntil: t0.Add(time.Minute)})
	mustNoErr(t, err, "CASElection")
	return e.Term
}

func testRepo(i int) store.Repo {
	url := fmt.Sprintf("https://git.example.com/org/repo-%03d.git", i)
	return store.Repo{ID: store.RepoID(url), URL: url, Source: store.SourceList, CreatedAt: t0}
}

// A new leader taking the election between Apply's read and its transaction: the
// transaction's own fence refuses the stale term, and nothing lands (invariant 1).
func TestFenceInsideTransaction(t *testing.T) {
	t.Parallel()
	bothTiers(t, func(t *testing.T, tr tier) {
		ctx := t.Context()
		s := newStore(t, tr.client, Config{})
		other, err := New(ctx, Config{Client: tr.direct, Table: s.Table()})
		mustNoErr(t, err, "New")
		term := leadStore(t, s)
		_, err = s.ClaimSlot(ctx, store.Worker{ID: "w1"}, 8)
		mustNoErr(t, err, "ClaimSlot")
		r, _, err := s.CreateRepo(ctx, testRepo(1))
		mustNoErr(t, err, "CreateRepo")

		tr.hooks.on("TransactWriteItems", 1, func() (int, string, bool) {
			if _, err := other.CASElection(ctx, 1, store.Election{Term: term + 1, VotedFor: "coord-b"}); err != nil {
				t.Errorf("CASElection by the new leader: %v", err) // not Fatal: this runs in the server's goroutine
			}
			return 0, "", false
		})
		err = s.Apply(ctx, term, []store.Mutation{
			store.AssignRepo{ID: r.ID, Owner: "w1", State: store.RepoCloning},
			store.AppendOutbox{Worker: "w1", Entries: []store.OutboxEntry{{Op: store.OpAdd, RepoID: r.ID}}},
			store.PutRing{Ring: store.Ring{Hash: "h", Members: []store.Member{{ID: "w1"}}}},
		})
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("Apply across a change of leader = %v, want ErrFenced", err)
		}
		got, err := s.GetRepo(ctx, r.ID)
		mustNoErr(t, err, "GetRepo")
		w, err := s.GetWorker(ctx, "w1")
		mustNoErr(t, err, "GetWorker")
		ring, err := s.GetRing(ctx)
		mustNoErr(t, err, "GetRing")
		if got.Owner != "" || got.OwnerEpoch != 0 || w.OutboxHead != 0 || ring.Version != 0 {
			t.Fatalf("a fenced Apply wrote: repo %+v, worker head %d, ring version %d", got, w.OutboxHead, ring.Version)
		}
		counts, err := s.CountRepos(ctx)
		mustNoErr(t, err, "CountRepos")
		if !reflect.DeepEqual(counts, map[store.RepoState]int{store.RepoPending: 1}) {
			t.Fatalf("counts after a fenced Apply = %v", counts)
		}
	})
}

const txConflictBody = `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException",` +
	`"message":"Transaction cancelled, please refer cancellation reasons for specific reasons [None, TransactionConflict]",` +
	`"CancellationReasons":[{"Code":"None"},{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item"}]}`

const itemConflictBody = `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionConflictException",` +
	`"message":"Transaction is ongoing for the item"}`

func conflictAnswer(body string) func() (int, string, bool) {
	return func() (int, string, bool) { return http.StatusBadRequest, body, true }
}

// Transaction conflicts are retried with backoff; a conflict that never clears ends in
// ErrConflict with nothing written.
func TestTransactionConflicts(t *testing.T) {
	t.Parallel()
	bothTiers(t, func(t *testing.T, tr tier) {
		ctx := t.Context()
		s := newStore(t, tr.client, Config{})
		tr.hooks.on("UpdateItem", 2, conflictAnswer(itemConflictBody))
		term := leadStore(t, s) // CASElection retries the item-level conflict
		r, _, err := s.CreateRepo(ctx, testRepo(1))
		mustNoErr(t, err, "CreateRepo")

		tr.hooks.on("TransactWriteItems", 3, conflictAnswer(txConflictBody))
		mustNoErr(t, s.Apply(ctx, term, []store.Mutation{store.AssignRepo{ID: r.ID, Owner: "w1", State: store.RepoCloning}}),
			"Apply through three transaction conflicts")
		got, err := s.GetRepo(ctx, r.ID)
		mustNoErr(t, err, "GetRepo")
		if got.Owner != "w1" || got.OwnerEpoch != 1 {
			t.Fatalf("repo after a retried Apply: %+v", got)
		}

		tr.hooks.on("TransactWriteItems", -1, conflictAnswer(txConflictBody))
		err = s.Apply(ctx, term, []store.Mutation{store.AssignRepo{ID: r.ID, ExpectOwner: "w1", ExpectEpoch: 1, Owner: "w2"}})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("Apply under endless conflicts = %v, want ErrConflict", err)
		}
		tr.hooks.clear()
		if got, err := s.GetRepo(ctx, r.ID); err != nil || got.Owner != "w1" || got.OwnerEpoch != 1 {
			t.Fatalf("repo after a given-up Apply: %+v, %v", got, err)
		}
	})
}

// bigRing is a ring of n members with 64 tokens each, as shared/ring builds at scale.
func bigRing(n int, seed uint64) store.Ring {
	rng := rand.New(rand.NewPCG(seed, 1))
	r := store.Ring{Hash: "fnv1a64-splitmix64", WarmupUntil: t0, Batch: 100}
	for i := range n {
		id := fmt.Sprintf("worker-%04d-%08x", i, rng.Uint32())
		r.Members = append(r.Members, store.Member{ID: id, Slot: i})
		for range 64 {
			r.Tokens = append(r.Tokens, store.Token{Pos: rng.Uint64(), Member: id})
		}
	}
	slices.SortFunc(r.Tokens, func(a, b store.Token) int {
		if a.Pos < b.Pos {
			return -1
		}
		if a.Pos > b.Pos {
			return 1
		}
		return 0
	})
	return r
}

func (s *Store) chunkKeys(t *testing.T) []string {
	t.Helper()
	var sks []string
	err := s.queryAll(t.Context(), "test", keysOnly(beginsWith(pkRing, skChunkPre)), func(it item) error {
		sks = append(sks, getS(it, attrSK))
		return nil
	})
	mustNoErr(t, err, "query chunks")
	return sks
}

// A 1000-member ring (64k tokens, 2.7 MB as JSON) is stored in chunks written ahead of the
// transaction, so its PutRing is still one action: it fits beside 98 other items. Older
// chunks are swept after a newer ring commits.
func TestRingChunks(t *testing.T) {
	t.Parallel()
	bothTiers(t, func(t *testing.T, tr tier) {
		ctx := t.Context()
		s := newStore(t, tr.client, Config{})
		term := leadStore(t, s)
		_, err := s.ClaimSlot(ctx, store.Worker{ID: "w1"}, 8)
		mustNoErr(t, err, "ClaimSlot")
		// Reads go through fresh stores: the writer caches what it wrote.
		read := func() store.Ring {
			t.Helper()
			fresh, err := New(ctx, Config{Client: tr.client, Table: s.Table()})
			mustNoErr(t, err, "New")
			r, err := fresh.GetRing(ctx)
			mustNoErr(t, err, "GetRing")
			cached, err := s.GetRing(ctx)
			mustNoErr(t, err, "GetRing (writer)")
			if !reflect.DeepEqual(r, cached) {
				t.Fatalf("the writer's cached ring differs from the stored one")
			}
			return r
		}

		big := bigRing(1000, 1)
		blob, err := encodeRing(big)
		mustNoErr(t, err, "encodeRing")
		t.Logf("1000 members, %d tokens: %d bytes encoded (%.1f per token), %d chunks of %d KB",
			len(big.Tokens), len(blob), float64(len(blob))/float64(len(big.Tokens)), (len(blob)+chunkBytes-1)/chunkBytes, chunkBytes>>10)

		entries := make([]store.OutboxEntry, store.MaxApplyItems-2)
		for i := range entries {
			entries[i] = store.OutboxEntry{Op: store.OpAdd, RepoID: fmt.Sprintf("r%03d", i)}
		}
		mustNoErr(t, s.Apply(ctx, term, []store.Mutation{
			store.AppendOutbox{Worker: "w1", Entries: entries},
			store.PutRing{Ring: big},
		}), "Apply of a 1000-member ring beside 98 outbox items")
		want := big
		want.Version = 1
		got := read()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ring read back differs (version %d, %d members, %d tokens)", got.Version, len(got.Members), len(got.Tokens))
		}
		v1 := s.chunkKeys(t)
		if len(v1) < 2 {
			t.Fatalf("a 1000-member ring took %d chunks, want several", len(v1))
		}

		big2 := bigRing(1000, 2)
		mustNoErr(t, s.Apply(ctx, term, []store.Mutation{store.PutRing{Ring: big2, ExpectVersion: 1}}), "second big ring")
		got = read()
		big2.Version = 2
		if !reflect.DeepEqual(got, big2) {
			t.Fatalf("second ring read back differs")
		}
		for _, sk := range s.chunkKeys(t) {
			if slices.Contains(v1, sk) {
				t.Fatalf("chunk %s of version 1 survived version 2", sk)
			}
		}

		// The same members and tokens with a new batch and scans: only the head is
		// written; it points at the chunks already there.
		v2 := s.chunkKeys(t)
		same := big2
		same.Batch, same.Scans = 4000, []store.Scan{{Owner: "w-0001", From: 10, To: 99}, {Owner: "w-0002", From: 0, To: store.MaxPos}}
		mustNoErr(t, s.Apply(ctx, term, []store.Mutation{store.PutRing{Ring: same, ExpectVersion: 2}}), "ring with new scans")
		same.Version = 3
		if got = read(); !reflect.DeepEqual(got, same) {
			t.Fatalf("ring with new scans read back differs: batch %d scans %+v", got.Batch, got.Scans)
		}
		if now := s.chunkKeys(t); !slices.Equal(now, v2) {
			t.Fatalf("an unchanged ring body rewrote its chunks: %v, then %v", v2, now)
		}
		head, err := s.GetRingHead(ctx)
		mustNoErr(t, err, "GetRingHead")
		if head.Version != 3 || head.Batch != 4000 || !reflect.DeepEqual(head.Scans, same.Scans) || head.Tokens != nil {
			t.Fatalf("ring head = version %d batch %d scans %+v with %d tokens", head.Version, head.Batch, head.Scans, len(head.Tokens))
		}

		// A losing writer's chunks are never visible, and a stale version is refused.
		err = s.Apply(ctx, term, []store.Mutation{store.PutRing{Ring: bigRing(1000, 3), ExpectVersion: 2}})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("PutRing on a stale version = %v, want ErrConflict", err)
		}
		small := store.Ring{Hash: "h", Members: []store.Member{{ID: "w1"}}, Tokens: []store.Token{{Pos: 7, Member: "w1"}}}
		mustNoErr(t, s.Apply(ctx, term, []store.Mutation{store.PutRing{Ring: small, ExpectVersion: 3}}), "small ring")
		if left := s.chunkKeys(t); len(left) != 0 {
			t.Fatalf("chunks left after an inline ring replaced the chunked ones: %v", left)
		}
		got = read()
		small.Version = 4
		if !reflect.DeepEqual(got, small) {
			t.Fatalf("small ring = %+v, want %+v", got, small)
		}
	})
}

func TestRingEncoding(t *testing.T) {
	t.Parallel()
	for _, r := range []store.Ring{
		{},
		{Members: []store.Member{{ID: "a", Slot: -1}}, Tokens: []store.Token{{Pos: 9, Member: "a"}, {Pos: 3, Member: "ghost"}, {Pos: ^uint64(0), Member: "a"}}},
		bigRing(10, 4),
	} {
		blob, err := encodeRing(r)
		mustNoErr(t, err, "encodeRing")
		var got store.Ring
		mustNoErr(t, decodeRing(blob, &got), "decodeRing")
		if len(got.Members) == 0 {
			got.Members = nil
		}
		if len(got.Tokens) == 0 {
			got.Tokens = nil
		}
		// The blob holds members and tokens; the head holds the rest.
		if !reflect.DeepEqual(got.Members, r.Members) || !reflect.DeepEqual(got.Tokens, r.Tokens) {
			t.Fatalf("ring round trip of %d members, %d tokens: got %d members, %d tokens, different",
				len(r.Members), len(r.Tokens), len(got.Members), len(got.Tokens))
		}
	}
}

// putRaw writes an item behind the store's back, as a failed clean-up would leave it.
func putRaw(t *testing.T, s *Store, it item) {
	t.Helper()
	_, err := s.db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: it})
	mustNoErr(t, err, "PutItem")
}

// Outbox entries a trim or a worker delete leaves behind (its clean-up runs after the
// transaction, and may fail) are never read back, not even by a worker re-registering
// under the same id.
func TestOutboxLeftoversInvisible(t *testing.T) {
	t.Parallel()
	bothTiers(t, func(t *testing.T, tr tier) {
		ctx := t.Context()
		s := newStore(t, tr.client, Config{})
		term := leadStore(t, s)
		_, err := s.ClaimSlot(ctx, store.Worker{ID: "w1"}, 8)
		mustNoErr(t, err, "ClaimSlot")
		old, err := s.getWorker(ctx, "test", "w1")
		mustNoErr(t, err, "getWorker")
		add := []store.OutboxEntry{{Op: store.OpAdd, RepoID: "r1"}, {Op: store.OpAdd, RepoID: "r2"}, {Op: store.OpAdd, RepoID: "r3"}}
		mustNoErr(t, s.Apply(ctx, term, []store.Mutation{store.AppendOutbox{Worker: "w1", Entries: add}}), "append")
		mustNoErr(t, s.Apply(ctx, term, []store.Mutation{store.TrimOutbox{Worker: "w1", Through: 2}}), "trim")

		stray := func(inc string, seq uint64) {
			it, err := s.entryItem("w1", inc, store.OutboxEntry{Seq: seq, Op: store.OpAdd, RepoID: "stray"})
			mustNoErr(t, err, "entryItem")
			putRaw(t, s, it)
		}
		stray(old.Inc, 1) // as if the trim's clean-up had failed
		es, err := s.ReadOutbox(ctx, "w1", 0, 0)
		mustNoErr(t, err, "ReadOutbox")
		if len(es) != 1 || es[0].Seq != 3 || es[0].RepoID != "r3" {
			t.Fatalf("ReadOutbox after a trim with leftovers = %+v, want only seq 3", es)
		}

		mustNoErr(t, s.Apply(ctx, term, []store.Mutation{store.DeleteWorker{ID: "w1"}}), "DeleteWorker")
		var left int
		mustNoErr(t, s.queryAll(ctx, "test", partition(outboxPK("w1", old.Inc)), func(item) error { left++; return nil }), "query")
		if left != 0 {
			t.Fatalf("%d outbox entries left after DeleteWorker's clean-up", left)
		}
		for seq := range uint64(5) {
			stray(old.Inc, seq+1) // as if the delete's clean-up had failed
		}
		w, err := s.ClaimSlot(ctx, store.Worker{ID: "w1"}, 8)
		mustNoErr(t, err, "ClaimSlot again")
		if es, err := s.ReadOutbox(ctx, "w1", 0, 0); err != nil || len(es) != 0 {
			t.Fatalf("re-registered worker reads %+v, %v; want nothing", es, err)
		}
		mustNoErr(t, s.Apply(ctx, term, []store.Mutation{store.AppendOutbox{Worker: "w1", ExpectHead: w.OutboxHead, Entries: add[:1]}}), "append")
		if es, err := s.ReadOutbox(ctx, "w1", 0, 0); err != nil || len(es) != 1 || es[0].RepoID != "r1" {
			t.Fatalf("re-registered worker reads %+v, %v; want its one entry", es, err)
		}
	})
}

// Mutations on one item in one Apply fold into one action, with bbolt's in-order meaning.
func TestApplyFoldsMutationsOnOneItem(t *testing.T) {
	t.Parallel()
	bothTiers(t, func(t *testing.T, tr tier) {
		ctx := t.Context()
		s := newStore(t, tr.client, Config{})
		term := leadStore(t, s)
		_, err := s.ClaimSlot(ctx, store.Worker{ID: "w1"}, 8)
		mustNoErr(t, err, "ClaimSlot")
		hb, err := s.Heartbeat(ctx, "w1", store.Heartbeat{At: t0})
		mustNoErr(t, err, "Heartbeat")
		r, _, err := s.CreateRepo(ctx, testRepo(1))
		mustNoErr(t, err, "CreateRepo")
		e := store.OutboxEntry{Op: store.OpAdd, RepoID: r.ID}
		mustNoErr(t, s.Apply(ctx, term, []store.Mutation{
			store.SetWorkerState{ID: "w1", State: store.WorkerActive, ExpectBeats: hb.Beats},
			store.AppendOutbox{Worker: "w1", Entries: []store.OutboxEntry{e, e}},
			store.AppendOutbox{Worker: "w1", ExpectHead: 2, Entries: []store.OutboxEntry{e}},
			store.TrimOutbox{Worker: "w1", Through: 1},
			store.AssignRepo{ID: r.ID, Owner: "w1", State: store.RepoCloning},
			store.AssignRepo{ID: r.ID, ExpectOwner: "w1", ExpectEpoch: 1, Owner: "w2"},
		}), "Apply")
		w, err := s.GetWorker(ctx, "w1")
		mustNoErr(t, err, "GetWorker")
		if w.State != store.WorkerActive || w.OutboxHead != 3 || w.TrimmedTo != 1 {
			t.Fatalf("worker after folded mutations: %+v", w)
		}
		es, err := s.ReadOutbox(ctx, "w1", 0, 0)
		mustNoErr(t, err, "ReadOutbox")
		if len(es) != 2 || es[0].Seq != 2 || es[1].Seq != 3 {
			t.Fatalf("outbox after folded mutations: %+v", es)
		}
		if got, _ := s.GetRepo(ctx, r.ID); got.Owner != "w2" || got.OwnerEpoch != 2 || got.State != store.RepoCloning {
			t.Fatalf("repo after two assignments in one Apply: %+v", got)
		}
		err = s.Apply(ctx, term, []store.Mutation{
			store.DeleteWorker{ID: "w1"},
			store.SetWorkerState{ID: "w1", State: store.WorkerDead},
		})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("a mutation after DeleteWorker of the same worker = %v, want ErrConflict", err)
		}
	})
}

func TestStaleSortOrder(t *testing.T) {
	t.Parallel()
	times := []time.Time{{}, time.Unix(0, 0), t0.Add(-time.Hour), t0, t0.Add(time.Nanosecond), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := 1; i < len(times); i++ {
		if a, b := staleSort(times[i-1], t0, "z"), staleSort(times[i], t0, "a"); a >= b {
			t.Fatalf("staleSort(%v) = %q sorts after staleSort(%v) = %q", times[i-1], a, times[i], b)
		}
	}
	if a, b := staleSort(t0, time.Time{}, "a"), staleSort(t0, time.Time{}, "b"); a >= b {
		t.Fatalf("ties are not broken by id: %q, %q", a, b)
	}
	// Never succeeded: by when added, before any success.
	if a, b := staleSort(time.Time{}, t0, "z"), staleSort(time.Time{}, t0.Add(time.Second), "a"); a >= b {
		t.Fatalf("never-succeeded repos not ordered by when added: %q, %q", a, b)
	}
	if a, b := staleSort(time.Time{}, maxStaleTime, "z"), staleSort(time.Unix(0, 0), t0, "a"); a >= b {
		t.Fatalf("a never-succeeded repo sorts after a success: %q, %q", a, b)
	}
}

// The table enables TTL on the outbox entries' expiry attribute, and entries carry it.
func TestOutboxTTL(t *testing.T) {
	t.Parallel()
	tr := localTier(t) // minidyn has no TTL
	ctx := t.Context()
	now := time.Unix(1_700_000_000, 0)
	s := newStore(t, tr.client, Config{Now: func() time.Time { return now }})
	out, err := s.db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.table)})
	mustNoErr(t, err, "DescribeTimeToLive")
	if d := out.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != attrTTL || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
		t.Fatalf("TTL = %+v, want enabled on %s", d, attrTTL)
	}
	term := leadStore(t, s)
	_, err = s.ClaimSlot(ctx, store.Worker{ID: "w1"}, 8)
	mustNoErr(t, err, "ClaimSlot")
	mustNoErr(t, s.Apply(ctx, term, []store.Mutation{store.AppendOutbox{Worker: "w1", Entries: []store.OutboxEntry{{Op: store.OpAdd}}}}), "append")
	w, err := s.getWorker(ctx, "test", "w1")
	mustNoErr(t, err, "getWorker")
	it, err := s.getItem(ctx, "test", key(outboxPK("w1", w.Inc), seqSK(1)))
	mustNoErr(t, err, "getItem")
	if got, want := getNum(it, attrTTL), fmt.Sprint(now.Add(DefaultOutboxTTL).Unix()); got != want {
		t.Fatalf("entry %s = %q, want %q", attrTTL, got, want)
	}
}

// Poll statistics cost nothing when zero, round-trip exactly otherwise, and a value that
// decayed below what DynamoDB can store is dropped rather than fail every write.
func TestRepoStatsEncoding(t *testing.T) {
	t.Parallel()
	r := testRepo(1)
	it, err := repoItem(r, 1)
	mustNoErr(t, err, "repoItem")
	for _, a := range []string{rPolls, rChanges, rPolled} {
		if _, ok := it[a]; ok {
			t.Fatalf("zero stats stored attribute %s", a)
		}
	}
	for _, st := range []priority.Stats{
		{Polls: 12.375, Changes: 0.1, Seconds: 1.5e6 + 1.0/3},
		{Polls: 1},
		{Polls: 3, Changes: 1e-200, Seconds: 60},
		{Events: 2, Exposure: 9e6, Root: true, Made: true},
		{WinSeconds: 86400, Root: true, Young: true, Made: true},
	} {
		r.Stats = st
		it, err := repoItem(r, 1)
		mustNoErr(t, err, "repoItem")
		got, _, err := decodeRepo(it)
		mustNoErr(t, err, "decodeRepo")
		want := st
		if want.Changes < minStat {
			want.Changes = 0
		}
		if got.Stats != want {
			t.Fatalf("stats %+v read back as %+v", st, got.Stats)
		}
	}
	r.Stats = priority.Stats{Polls: math.NaN()}
	if _, err := repoItem(r, 1); err == nil {
		t.Fatal("NaN stats accepted")
	}

	// A belief is one binary attribute, read back bit for bit; one that is not a
	// belief fails the read with the attribute named.
	r.Stats = priority.Fold(priority.Stats{}, priority.Poll{Now: time.Unix(1_700_000_000, 0), Changed: true,
		Commits: []time.Time{time.Unix(1_699_900_000, 0)}}, nil)
	it, err = repoItem(r, 1)
	mustNoErr(t, err, "repoItem")
	if b, ok := it[rBelief].(*types.AttributeValueMemberB); !ok || len(b.Value) != len(r.Stats.Belief.Bytes()) {
		t.Fatalf("belief stored as %#v", it[rBelief])
	}
	got, _, err := decodeRepo(it)
	mustNoErr(t, err, "decodeRepo")
	if got.Stats != r.Stats {
		t.Fatalf("stats %+v read back as %+v", r.Stats, got.Stats)
	}
	it[rBelief] = avB([]byte{1, 2, 3})
	if _, _, err := decodeRepo(it); err == nil || !strings.Contains(err.Error(), rBelief) {
		t.Fatalf("a belief of 3 bytes read with error %v, want one naming %s", err, rBelief)
	}
}

// A signal item carries the TTL attribute, moved ahead by every add, so the item of a
// worker that is gone is removed by DynamoDB; a take that empties it leaves no sets.
func TestSignalItemTTL(t *testing.T) {
	t.Parallel()
	tr := localTier(t)
	ctx := t.Context()
	now := time.Unix(1_700_000_000, 0)
	s := newStore(t, tr.client, Config{Now: func() time.Time { return now }})
	mustNoErr(t, s.AddSignals(ctx, "w1", store.Signals{Hook: []string{"r1"}}), "AddSignals")
	now = now.Add(time.Hour)
	mustNoErr(t, s.AddSignals(ctx, "w1", store.Signals{Sync: []string{"r2"}}), "AddSignals")
	it, err := s.getItem(ctx, "test", signalKey("w1"))
	mustNoErr(t, err, "getItem")
	if got, want := getNum(it, attrTTL), fmt.Sprint(now.Add(signalTTL).Unix()); got != want {
		t.Fatalf("signal item %s = %q, want %q (the last add's)", attrTTL, got, want)
	}
	mustNoErr(t, s.RemoveSignals(ctx, "w1", store.Signals{Hook: []string{"r1"}, Sync: []string{"r2"}}), "RemoveSignals")
	it, err = s.getItem(ctx, "test", signalKey("w1"))
	mustNoErr(t, err, "getItem")
	if _, ok := it[sigHook]; ok {
		t.Errorf("an emptied hook set is still stored: %v", it)
	}
	if _, ok := it[sigSync]; ok {
		t.Errorf("an emptied sync set is still stored: %v", it)
	}
}
