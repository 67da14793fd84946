package bolt_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
)

func open(t *testing.T, path string) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		return open(t, filepath.Join(t.TempDir(), "fleet.db"))
	})
}

func TestReopenKeepsData(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "fleet.db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	e, err := s.CASElection(ctx, 0, store.Election{Term: 3, VotedFor: "c"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.ClaimSlot(ctx, store.Worker{ID: "w1"}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Heartbeat(ctx, "w1", store.Heartbeat{At: at, AckSeq: 2}); err != nil {
		t.Fatal(err)
	}
	r, _, err := s.CreateRepo(ctx, store.Repo{ID: "r1", URL: "https://x/r1", CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Apply(ctx, e.Term, []store.Mutation{
		store.AssignRepo{ID: r.ID, Owner: "w1", State: store.RepoCloning},
		store.AppendOutbox{Worker: "w1", Entries: []store.OutboxEntry{{Op: store.OpAdd, RepoID: r.ID}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = open(t, path)
	if got, err := s.GetElection(ctx); err != nil || got.Term != 3 || got.Version != 1 {
		t.Fatalf("election after reopen = %+v, %v", got, err)
	}
	got, err := s.GetWorker(ctx, "w1")
	if err != nil || got.Slot != w.Slot || !got.HeartbeatAt.Equal(at) || got.AckSeq != 2 || got.OutboxHead != 1 {
		t.Fatalf("worker after reopen = %+v, %v", got, err)
	}
	if rs, _, err := s.ListReposByOwner(ctx, "w1", "", 10); err != nil || len(rs) != 1 || rs[0].OwnerEpoch != 1 {
		t.Fatalf("owner index after reopen = %+v, %v", rs, err)
	}
	if es, err := s.ReadOutbox(ctx, "w1", 0, 0); err != nil || len(es) != 1 || es[0].Seq != 1 {
		t.Fatalf("outbox after reopen = %+v, %v", es, err)
	}
	if counts, err := s.CountRepos(ctx); err != nil || counts[store.RepoCloning] != 1 || len(counts) != 1 {
		t.Fatalf("counts after reopen = %v, %v", counts, err)
	}
	// The slot bitmap survived too: the next worker gets the next slot.
	if w2, err := s.ClaimSlot(ctx, store.Worker{ID: "w2"}, 8); err != nil || w2.Slot != 1 {
		t.Fatalf("ClaimSlot after reopen = %+v, %v", w2, err)
	}
}

func TestSecondOpenFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	open(t, path)

	start := time.Now()
	s, err := bolt.Open(path)
	took := time.Since(start)
	if err == nil {
		_ = s.Close()
		t.Fatal("second Open of a held file succeeded")
	}
	if !errors.Is(err, bolt.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if took > bolt.LockTimeout+time.Second {
		t.Fatalf("second Open took %s, lock timeout is %s", took, bolt.LockTimeout)
	}
	t.Logf("second Open after %s: %v", took.Round(time.Millisecond), err)
}
