package worker

import (
	"fmt"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// The heartbeat's checks are the k newest polls that the store does not show: written
// polls, dropped repos and never-polled repos are left out.
func TestLatestChecks(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	repos := map[string]*repoEntry{}
	for i := range 10 {
		at := t0.Add(time.Duration(i) * time.Second)
		repos[fmt.Sprintf("%016x", i)] = &repoEntry{RepoState: RepoState{Phase: Queued, Rec: store.Repo{LastFetchAt: at}, LastWritten: t0.Add(-time.Hour)}}
	}
	repos["written"] = &repoEntry{RepoState: RepoState{Phase: Queued, Rec: store.Repo{LastFetchAt: t0.Add(time.Minute)}, LastWritten: t0.Add(time.Minute)}}
	repos["dropped"] = &repoEntry{RepoState: RepoState{Phase: Leaving, Rec: store.Repo{LastFetchAt: t0.Add(time.Minute)}}}
	repos["never"] = &repoEntry{RepoState: RepoState{Phase: Queued}}
	got := latestChecks(repos, 3)
	want := []store.Check{
		{RepoID: fmt.Sprintf("%016x", 9), At: t0.Add(9 * time.Second)},
		{RepoID: fmt.Sprintf("%016x", 8), At: t0.Add(8 * time.Second)},
		{RepoID: fmt.Sprintf("%016x", 7), At: t0.Add(7 * time.Second)},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("latestChecks = %v, want %v", got, want)
	}
	if all := latestChecks(repos, 50); len(all) != 10 {
		t.Fatalf("latestChecks(50) has %d checks, want the 10 unwritten polls", len(all))
	}
	if none := latestChecks(repos, 0); len(none) != 0 {
		t.Fatalf("latestChecks(0) = %v", none)
	}
}
