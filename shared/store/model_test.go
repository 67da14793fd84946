package store

import (
	"errors"
	"testing"
	"time"
)

func TestApplyReportIsFenced(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := Repo{ID: "r", Owner: "w1", OwnerEpoch: 3, State: RepoCloning}
	rep := FetchReport{State: RepoOK, Priority: 7, LastFetchAt: at, LastSuccessAt: at, SizeBytes: 42, LastError: ""}
	if err := r.ApplyReport("w1", 2, rep); !errors.Is(err, ErrConflict) || r.State != RepoCloning {
		t.Fatalf("a report of an old epoch: %v, state %s", err, r.State)
	}
	if err := r.ApplyReport("w2", 3, rep); !errors.Is(err, ErrConflict) {
		t.Fatalf("a report of another owner: %v", err)
	}
	if err := r.ApplyReport("w1", 3, rep); err != nil {
		t.Fatal(err)
	}
	if r.State != RepoOK || r.Priority != 7 || !r.LastSuccessAt.Equal(at) || r.SizeBytes != 42 || r.Owner != "w1" || r.OwnerEpoch != 3 {
		t.Fatalf("after the report: %+v", r)
	}
	r.State = RepoDeleting
	if err := r.ApplyReport("w1", 3, rep); !errors.Is(err, ErrConflict) {
		t.Fatalf("a report on a repo being deleted: %v", err)
	}
}

func TestAssigned(t *testing.T) {
	old := Repo{ID: "r", Owner: "w1", OwnerEpoch: 3, State: RepoOK, SyncRequested: true, Salt: 0, Priority: 5}
	nu := old.Assigned(AssignRepo{ID: "r", ExpectOwner: "w1", ExpectEpoch: 3, Owner: "w2", Salt: 1, Priority: 0, ClearSync: true})
	if nu.Owner != "w2" || nu.OwnerEpoch != 4 || nu.Salt != 1 || nu.Priority != 0 || nu.SyncRequested || nu.State != RepoOK {
		t.Fatalf("assigned: %+v", nu)
	}
	if old.Owner != "w1" || old.OwnerEpoch != 3 {
		t.Fatal("Assigned changed the repo it was called on")
	}
	if got := old.Assigned(AssignRepo{Owner: "w3", ExpectEpoch: 3, State: RepoPending}); got.State != RepoPending || got.SyncRequested != true {
		t.Fatalf("state and sync: %+v", got)
	}
}
