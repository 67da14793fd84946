package fleet_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
)

// TestSyncOfUnchangedRepoMovesLastChecked: `repos sync` of a repo whose upstream has
// not changed writes nothing to the store (invariant 6), yet last_checked_at moves
// within 5 s, read from the repo's worker.
func TestSyncOfUnchangedRepoMovesLastChecked(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	logs := dumpOnFailure(t)
	// A long minimum interval: the only poll after the clone is the one asked for.
	f := startWith(t, logs, func(c *fleet.Config) {
		c.Data, c.Warmup, c.MinInterval = t.TempDir(), coordinator.NoWarmup, time.Hour
	})
	waitRing(t, f, 3)
	id := mirrorOne(t, f, srv, "checked")
	var before api.Repo
	getJSON(t, f, "/v1/repos/"+id, &before)
	if before.LastCheckedAt == nil || before.LastFetchAt == nil {
		t.Fatalf("a mirrored repo has last_checked_at %v, last_fetch_at %v", before.LastCheckedAt, before.LastFetchAt)
	}
	stored, err := f.Store.GetRepo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}

	accepted(t, f, http.MethodPost, "/v1/repos/"+id+"/sync")
	var after api.Repo
	eventually(t, f, 5*time.Second, "last_checked_at moves after repos sync", func() string {
		getJSON(t, f, "/v1/repos/"+id, &after)
		if after.LastCheckedAt == nil || !after.LastCheckedAt.After(*before.LastCheckedAt) {
			return "last_checked_at " + before.LastCheckedAt.String() + " has not moved"
		}
		return ""
	})
	now, err := f.Store.GetRepo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !now.LastFetchAt.Equal(stored.LastFetchAt) {
		t.Errorf("the no-change poll wrote the repo: last_fetch_at %v, was %v", now.LastFetchAt, stored.LastFetchAt)
	}
	var list api.RepoList
	getJSON(t, f, "/v1/repos", &list)
	if len(list.Repos) != 1 || list.Repos[0].LastCheckedAt == nil || !list.Repos[0].LastCheckedAt.Equal(*after.LastCheckedAt) {
		t.Errorf("GET /v1/repos shows last_checked_at %+v, want %v", list.Repos, after.LastCheckedAt)
	}

	// The tunasync feed shows it with the same last poll.
	var jobs []api.TunasyncJob
	getJSON(t, f, "/tunasync.json", &jobs)
	if len(jobs) != 1 || jobs[0].Status != "success" || jobs[0].Upstream != before.URL || jobs[0].Size == "unknown" ||
		jobs[0].LastEndedTS != after.LastCheckedAt.Unix() || jobs[0].LastUpdateTS == 0 ||
		jobs[0].NextScheduleTS < jobs[0].LastEndedTS+3500 { // the next poll: not before the 1 h minimum interval
		t.Errorf("GET /tunasync.json = %+v", jobs)
	}
}
