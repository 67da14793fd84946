package api

import (
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// TestFailuresPanelCountsGone: a repo whose upstream answers "not found" is gone, and
// the status page's failure panel counts and lists it beside the failing ones.
func TestFailuresPanelCountsGone(t *testing.T) {
	e := newEnv(t)
	e.seedRepo("https://git.example.org/ok.git", store.RepoOK, "w1", t0)
	gone := e.seedRepo("https://git.example.org/vanished.git", store.RepoGone, "w1", t0.Add(-100))
	page := string(e.want(e.do("GET", "/", nil), 200, "GET /").raw)
	start := strings.Index(page, `id="failures-card"`)
	end := strings.Index(page, `id="repos-section"`)
	if start < 0 || end < start {
		t.Fatalf("no failures panel:\n%s", page)
	}
	panel := page[start:end]
	if !strings.Contains(panel, `id="failures-total" class="big">1<`) || !strings.Contains(panel, "1 gone") {
		t.Errorf("the failures panel does not count the gone repo:\n%s", panel)
	}
	if !strings.Contains(panel, gone.URL) || strings.Contains(panel, "no repo is failing") {
		t.Errorf("the failures panel does not list the gone repo:\n%s", panel)
	}

	// The listing by state finds it (repos ls --state gone).
	list := e.want(e.do("GET", "/v1/repos?state=gone", nil), 200, "GET /v1/repos?state=gone")
	repos, _ := list.body["repos"].([]any)
	if len(repos) != 1 || str(repos[0].(map[string]any)["url"]) != gone.URL {
		t.Errorf("GET /v1/repos?state=gone = %s", list.raw)
	}
}
