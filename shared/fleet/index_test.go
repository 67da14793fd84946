package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// TestIndexListsMirrorsAndRmIsPrompt runs a fleet whose workers heartbeat only every
// 20 s: the /git/ index lists the repo that has a mirror and not the one whose upstream
// does not exist (its clone URL would answer 404), and `repos rm` removes the record
// and the mirror within seconds, not at the owner's next heartbeat.
func TestIndexListsMirrorsAndRmIsPrompt(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	logs := dumpOnFailure(t)
	f := startWith(t, logs, func(c *fleet.Config) {
		c.Data, c.Warmup, c.Heartbeat, c.Grace = t.TempDir(), coordinator.NoWarmup, 20*time.Second, 2*time.Minute
	})
	waitRing(t, f, 3)
	missing := addRepos(t, f, srv.URL+"/index/never-existed")[0]
	id := mirrorOne(t, f, srv, "index")
	eventually(t, f, 30*time.Second, "the missing upstream's clone failed", func() string {
		r, err := f.Store.GetRepo(context.Background(), missing)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != store.RepoGone && r.State != store.RepoFailing {
			return string(r.State)
		}
		return ""
	})

	var index struct {
		Repos []struct {
			ID       string `json:"id"`
			CloneURL string `json:"clone_url"`
		}
	}
	getJSON(t, f, "/git/?format=json", &index)
	if len(index.Repos) != 1 || index.Repos[0].ID != id {
		t.Fatalf("the /git/ index lists %+v, want only the mirrored repo %s", index.Repos, id)
	}

	r, err := f.Store.GetRepo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := f.Mirror.Path(fetch.Target{ID: id, URL: r.URL})
	if err != nil {
		t.Fatal(err)
	}
	accepted(t, f, http.MethodDelete, "/v1/repos/"+id)
	eventually(t, f, 5*time.Second, "repos rm removes the record and the mirror", func() string {
		_, err := f.Store.GetRepo(context.Background(), id)
		if !errors.Is(err, store.ErrNotFound) {
			return fmt.Sprintf("the record is still there (%v)", err)
		}
		if _, err := os.Stat(dir); err == nil {
			return "the mirror is still at " + dir
		}
		return ""
	})
}
