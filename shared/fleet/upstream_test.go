package fleet_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// TestTheURLFetchedIsTheURLGiven: a repo added as …/alpha.git is fetched from
// …/alpha.git, from an upstream that serves only the path it was given (git
// http-backend would find alpha.git from alpha; many forges do not), while its
// identity, mirror path and clone URL stay those of the normalized URL.
func TestTheURLFetchedIsTheURLGiven(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	up := srv.NewRepo(t, "strict/alpha.git")
	up.Commit(t, "init", map[string][]byte{"README": []byte("alpha\n")})
	// A forge that does not guess: only /strict/alpha.git/... is a repository.
	srv.Intercept(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if !strings.HasPrefix(r.URL.Path, "/strict/alpha.git/") {
			http.NotFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
	logs := dumpOnFailure(t)
	f := start(t, t.TempDir(), coordinator.NoWarmup, logs)
	waitRing(t, f, 3)
	id := addRepos(t, f, srv.URL+"/strict/alpha.git")[0]

	eventually(t, f, 30*time.Second, "the repo is mirrored", func() string {
		r, err := f.Store.GetRepo(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != store.RepoOK {
			return string(r.State) + " " + r.LastError
		}
		return ""
	})
	r, _ := f.Store.GetRepo(context.Background(), id)
	if r.URL != srv.URL+"/strict/alpha" || r.Upstream != srv.URL+"/strict/alpha.git" {
		t.Errorf("stored url %q, upstream %q: want the normalized identity and the URL given", r.URL, r.Upstream)
	}
	asked := false
	for _, req := range srv.Requests() {
		if strings.HasPrefix(req, "GET /strict/alpha/") {
			t.Errorf("the fleet asked for the normalized path: %s", req)
		}
		asked = asked || strings.HasPrefix(req, "GET /strict/alpha.git/info/refs")
	}
	if !asked {
		t.Errorf("the upstream never saw /strict/alpha.git/info/refs: %v", srv.Requests())
	}
}
