package api

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

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

// TestStatusPageThousandFailures: 1,000 repos failing alike are a few rows, one per
// host, state and kind of error, with counts and an example, each opening onto its
// first repos; on a 1,400 px page nothing is wider than its card, and every error and
// clone URL stays on one line.
func TestStatusPageThousandFailures(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.CloneBaseURL = "http://git.test" })
	seedFleet(t, e)
	type kind struct {
		host, err string
		state     store.RepoState
		n         int
	}
	kinds := []kind{
		{"a.example", "network: dial tcp 10.1.2.3:443: connect: connection refused", store.RepoFailing, 600},
		{"b.example", "auth: the upstream asks for credentials (HTTP 401); mirror public repositories only", store.RepoFailing, 300},
		{"a.example", "timeout: no answer within 60s " + strings.Repeat("while reading the ref advertisement ", 4), store.RepoFailing, 60},
		{"c.example", "gone: the upstream answers 404 Not Found", store.RepoGone, 40},
	}
	ctx := t.Context()
	for _, k := range kinds {
		for i := range k.n {
			u := fmt.Sprintf("https://%s/a-rather-long-organization-name/%s-project-number-%04d.git", k.host, strings.Split(k.err, ":")[0], i)
			r := store.Repo{ID: store.RepoID(u), URL: u, Source: store.SourceList, State: k.state, Owner: "w-alpha",
				CreatedAt: t0.Add(-48 * time.Hour), LastError: k.err}
			if _, _, err := e.store.CreateRepo(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	page := string(e.want(e.do("GET", "/", nil), 200, "GET /").raw)
	if groups := strings.Count(page, `<tbody class="group"`); groups != len(kinds) {
		t.Errorf("%d failure groups, want %d", groups, len(kinds))
	}
	for _, k := range kinds {
		want := fmt.Sprintf(`data-host="%s" data-kind="%s" data-state="%s"`, k.host, strings.Split(k.err, ":")[0], k.state)
		i := strings.Index(page, want)
		if i < 0 {
			t.Errorf("no group %s", want)
			continue
		}
		if !strings.Contains(page[i:i+600], fmt.Sprintf(">%d</a></td>", k.n)) {
			t.Errorf("group %s does not count %d repos:\n%.600s", want, k.n, page[i:])
		}
	}
	if rows := strings.Count(page, "<tr data-repo="); rows > len(kinds)*failuresShown+2*defaultPageLimit {
		t.Errorf("the page lists %d repo rows: failures are not grouped", rows)
	}

	ctx2 := newBrowserSized(t, 1400, 1000)
	ts := httptest.NewServer(e.h)
	defer ts.Close()
	if err := chromedp.Do(ctx2, chromedp.Navigate(ts.URL+"/?refresh=60"), chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="1"] #failures`))); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	eval := func(js string) any {
		t.Helper()
		v, err := chromedp.Run(ctx2, chromedp.Evaluate[any](js))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		return v
	}
	// The largest group first, closed: its repos are not on the page until opened.
	if first := pageText(t, ctx2, "#failures tbody.group"); !strings.Contains(first, "a.example") || !strings.Contains(first, "600") {
		t.Errorf("the first group is not the largest:\n%s", first)
	}
	if h, _ := eval(`document.querySelector("#failures-card").getBoundingClientRect().height`).(float64); h > 500 {
		t.Errorf("the failures panel is %.0f px high with its groups closed", h)
	}
	if err := chromedp.Do(ctx2, chromedp.Click(chromedp.CSS(`#failures tbody.group details > summary`), chromedp.NodeVisible)); err != nil {
		t.Fatal(err)
	}
	if n, _ := eval(`document.querySelectorAll("#failures-1 tbody tr").length`).(float64); int(n) != failuresShown {
		t.Errorf("the opened group lists %v repos, want its first %d", n, failuresShown)
	}
	wide, _ := eval(`[...document.querySelectorAll("main table")].filter(t => t.offsetParent !== null && t.scrollWidth > t.closest(".card").clientWidth + 1).map(t => t.id + " " + t.scrollWidth + ">" + t.closest(".card").clientWidth).join(", ")`).(string)
	if wide != "" {
		t.Errorf("tables wider than their card on a 1,400 px page: %s", wide)
	}
	if scroll, _ := eval(`document.documentElement.scrollWidth > window.innerWidth`).(bool); scroll {
		t.Error("the page scrolls sideways at 1,400 px")
	}
	multi, _ := eval(`[...document.querySelectorAll("td.clip1, td.clone code")].filter(c => c.offsetParent !== null && c.getBoundingClientRect().height > 2 * (parseFloat(getComputedStyle(c).lineHeight) || 18)).length`).(float64)
	if multi > 0 {
		t.Errorf("%v errors or clone URLs wrap onto more lines", multi)
	}
	png, err := chromedp.Run(ctx2, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(t.ArtifactDir(), "failures.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Errorf("screenshot not saved: %v", err)
	}
	t.Logf("screenshot: %s (kept with go test -artifacts)", shot)
}
