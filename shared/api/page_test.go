package api

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// chromium returns the Chromium or Chrome binary the browser tests drive:
// $MIRRORFLEET_CHROMIUM (make unit sets it, and then a missing binary fails the test),
// else one on PATH; without any the test skips.
func chromium(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("MIRRORFLEET_CHROMIUM"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("MIRRORFLEET_CHROMIUM: %v", err)
		}
		return bin
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium not installed (apt-get install chromium; make unit installs it where it can)")
	return ""
}

// TestStatusPage loads the status page in headless Chromium against a seeded store and
// checks what it renders, then that it says so when the API goes away.
func TestStatusPage(t *testing.T) {
	bin := chromium(t)
	e := newEnv(t, func(c *Config) { c.CloneBaseURL = "http://git.test" })
	seedFleet(t, e)
	wantCounts := map[store.RepoState]int{store.RepoOK: 5, store.RepoPending: 2, store.RepoFailing: 1, store.RepoGone: 1, store.RepoCloning: 3, store.RepoOverflow: 0, store.RepoDeleting: 1}
	n := 0
	for st, k := range wantCounts {
		for range k {
			owner := ""
			if st != store.RepoPending {
				owner = []string{"w-alpha", "w-bravo", "w-charlie"}[n%3]
			}
			var success time.Time
			if st == store.RepoOK || st == store.RepoFailing {
				success = t0.Add(-time.Duration(n) * time.Hour)
			}
			e.seedRepo(fmt.Sprintf("https://git.example.org/team-%d/project-%02d.git", n%4, n), st, owner, success)
			n++
		}
	}
	// A long URL: its clone URL must stay on one line, cut with an ellipsis.
	long := e.seedRepo("https://git.example.org/a-very-long-group-name/with-a-subgroup/and-another-one/"+strings.Repeat("long-project-name-", 6)+"end.git",
		store.RepoOK, "w-alpha", t0.Add(-30*time.Minute))
	n++
	wantCounts[store.RepoOK]++
	ts := httptest.NewServer(e.h)
	defer ts.Close()

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelCtx()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // only a hung browser; a loaded machine is slow
	defer cancel()

	if err := chromedp.Do(ctx,
		chromedp.Navigate(ts.URL+"/?refresh=1"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="1"]`)),
	); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	text := func(sel string) string { t.Helper(); return pageText(t, ctx, sel) }
	eval := func(js string) any {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](js))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		return v
	}
	workersText, stalestText, total, leader := text("#workers tbody"), text("#stalest tbody"), text("#repos-total"), text("#leader")
	arcs := eval(`document.querySelectorAll("#ring path.arc").length`)
	legend := eval(`document.querySelectorAll("#legend li").length`)
	counts, _ := eval(`Object.fromEntries([...document.querySelectorAll("#repo-counts li")].map(li => [li.dataset.state, li.querySelector("b").textContent]))`).(map[string]any)
	charlieClass := eval(`document.querySelector('tr[data-worker="w-charlie"] td:nth-child(5)').className`)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(t.ArtifactDir(), "status.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Errorf("screenshot not saved: %v", err)
	}
	t.Logf("screenshot: %s (kept with go test -artifacts)", shot)

	// An operator's order: the failures (failing and gone) and the stalest repos come
	// before the workers and the ring.
	order, _ := eval(`[...document.querySelectorAll("main > section")].map(s => s.id).join(" ")`).(string)
	if fi, st, wi, ri := strings.Index(order, "failures-card"), strings.Index(order, "stalest-card"), strings.Index(order, "workers-card"), strings.Index(order, "ring-card"); fi < 0 || st < fi || wi < st || ri < wi {
		t.Errorf("sections in order %q; want failures, stalest, then workers and ring", order)
	}
	failures := text("#failures")
	if !strings.Contains(failures, "gone") || !strings.Contains(failures, "failing") {
		t.Errorf("the failures table lacks the gone or the failing repo:\n%s", failures)
	}
	heads := text("#stalest thead")
	for _, col := range []string{"STATE", "LAST SUCCESS", "LAST CHECKED", "NEXT SYNC", "SIZE", "CLONE URL"} {
		if !strings.Contains(strings.ToUpper(heads), col) {
			t.Errorf("repo tables lack the %s column: %q", col, heads)
		}
	}
	// The long clone URL is cut, not wrapped: its code element is one line high and
	// narrower than its text; the copy button still copies all of it.
	clip, _ := eval(`(() => { const c = document.querySelector('#repos tr[data-repo="` + long.ID + `"] td.clone code');
		if (!c) return "missing"; const lh = parseFloat(getComputedStyle(c).lineHeight) || 16;
		return (c.scrollWidth > c.clientWidth) + " " + (c.getBoundingClientRect().height <= lh * 1.5); })()`).(string)
	if clip != "true true" {
		t.Errorf("the long clone URL is not cut to one line with an ellipsis (cut, one line = %q)", clip)
	}

	for _, id := range []string{"w-alpha", "w-bravo", "w-charlie"} {
		if !strings.Contains(workersText, id) {
			t.Errorf("workers table lacks %s:\n%s", id, workersText)
		}
	}
	if !strings.Contains(workersText, "10m 0s ago") || charlieClass != "age-bad" {
		t.Errorf("w-charlie's 10-minute-old heartbeat is not shown as bad (class %q):\n%s", charlieClass, workersText)
	}
	if total != fmt.Sprint(n) {
		t.Errorf("repos total %q, want %d", total, n)
	}
	for st, k := range wantCounts {
		if counts[string(st)] != any(fmt.Sprint(k)) {
			t.Errorf("repo count %s = %q, want %d (all: %v)", st, counts[string(st)], k, counts)
		}
	}
	if n, _ := arcs.(float64); n < 3 || legend != 3.0 {
		t.Errorf("ring has %d arcs and %d legend entries; want >= 3 and 3", arcs, legend)
	}
	if !strings.Contains(leader, "coord-1") || !strings.Contains(leader, "term 1") {
		t.Errorf("leader line %q", leader)
	}
	if !strings.Contains(stalestText, "git.example.org/team-") || !strings.Contains(stalestText, "never") {
		t.Errorf("stalest table:\n%s", stalestText)
	}

	// Every listed repo has its clone URL and a button that copies it.
	clones := text("#repos tbody")
	if !strings.Contains(clones, "http://git.test/git/git.example.org/team-") {
		t.Errorf("repos table:\n%s", clones)
	}
	first := eval(`document.querySelector("#repos td.clone code").textContent`)
	// Headless Chromium has no clipboard to grant: record what the button writes.
	eval(`Object.defineProperty(navigator, "clipboard", {value: {writeText: async (s) => { window.copied = s; }}}), 1`)
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS("#repos button.copy")),
		chromedp.WaitVisible(chromedp.CSS(`#repos button.copy[data-copied]`)),
	); err != nil {
		t.Fatalf("copy button: %v", err)
	}
	if got := eval(`window.copied`); got != first {
		t.Errorf("clipboard holds %v, want the clone URL %v", got, first)
	}

	// The API goes away: the page must say so, not keep showing the data as current.
	ts.Close()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`body[data-state="error"] #banner`))); err != nil {
		t.Fatalf("waiting for the unreachable banner: %v", err)
	}
	banner := text("#banner")
	if !strings.Contains(banner, "unreachable") {
		t.Errorf("banner %q does not say the API is unreachable", banner)
	}

	// With reads protected the page asks for the token, then shows the data. A new tab in
	// the same browser saves a start.
	locked := httptest.NewServer(New(Config{Store: e.store, Token: testToken, ReadsNeedAuth: true, Clock: e.clock}))
	defer locked.Close()
	tab, cancelTab := chromedp.NewContext(ctx)
	defer cancelTab()
	for i, step := range []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(locked.URL + "/?refresh=1"),
		chromedp.WaitVisible(chromedp.ID("auth")),
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.CSS("#auth button")),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="1"]`)),
	} {
		if err := chromedp.Do(tab, step); err != nil {
			html, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.body.outerHTML`))
			t.Fatalf("token prompt, step %d: %v\n%.2000s", i, err, html)
		}
	}
	if got, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#workers tbody"))); err != nil || !strings.Contains(got, "w-alpha") {
		t.Errorf("after entering the token the workers table is %q (%v)", got, err)
	}
}
