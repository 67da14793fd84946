package api

import (
	"context"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// hostileError is a last error as an upstream could make it: the page must show it as
// text, never run it.
const hostileError = `other: list refs: server said <script>window.pwned=1</script><img src=x onerror="window.pwned=2">`

// seedSearch stores 30 repos (every third failing with an error naming it) and one repo
// whose URL and error carry markup, stored directly as a bug elsewhere might.
func seedSearch(t *testing.T, e *env) (hostileID string) {
	t.Helper()
	for i := range 30 {
		st, owner := store.RepoOK, "w-alpha"
		if i%3 == 0 {
			st = store.RepoFailing
		}
		url := fmt.Sprintf("https://git.example.org/team-%d/project-%02d.git", i%4, i)
		r := store.Repo{ID: store.RepoID(url), URL: url, Source: store.SourceList, State: st, Owner: owner,
			CreatedAt: t0.Add(-48 * time.Hour), LastSuccessAt: t0.Add(-time.Hour)}
		if st == store.RepoFailing {
			r.LastError = fmt.Sprintf("timeout: fetch project-%02d: no answer in 60s", i)
		}
		if _, _, err := e.store.CreateRepo(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	// w-alpha reports the staleness of what it owns, as workers do with each heartbeat.
	if _, err := e.store.Heartbeat(t.Context(), "w-alpha", store.Heartbeat{At: t0.Add(-2 * time.Second), DiskUsed: 1 << 30, DiskTotal: 10 << 30,
		Staleness: store.Staleness{P50: time.Minute, P99: 50 * time.Minute, Max: time.Hour, Repos: 30, Never: 2}}); err != nil {
		t.Fatal(err)
	}
	url := `https://evil.example/"><script>window.pwned=3</script>.git`
	r := store.Repo{ID: store.RepoID(url), URL: url, State: store.RepoFailing, Source: store.SourceAPI,
		CreatedAt: t0.Add(-time.Hour), LastError: hostileError}
	if _, _, err := e.store.CreateRepo(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// getPage fetches a page through the handler and returns its status and HTML.
func getPage(e *env, path string) (int, string) {
	e.t.Helper()
	r := e.do("GET", path, nil, noAuth)
	if ct := r.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		e.t.Fatalf("GET %s: Content-Type %q", path, ct)
	}
	return r.status, string(r.raw)
}

var repoRow = regexp.MustCompile(`<table id="repos"[\s\S]*?</table>`)

// repoIDs lists the data-repo ids of the #repos table of a page.
func repoIDs(html string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`data-repo="([0-9a-f]+)"`).FindAllStringSubmatch(repoRow.FindString(html), -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestPageSearchAndPages checks the server-rendered page without a browser: the search
// by text and by state, pages that together list every repo once, the error column, the
// escaping of markup, the 400 page for bad parameters, and no data behind a token.
func TestPageSearchAndPages(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.CloneBaseURL = "http://git.test" })
	seedFleet(t, e)
	hostile := seedSearch(t, e)

	code, html := getPage(e, "/")
	if code != 200 || !strings.Contains(html, `<span id="repos-total" class="big">31</span>`) {
		t.Fatalf("GET /: %d\n%s", code, html)
	}
	for _, bad := range []string{"<script>window.pwned", `<img src=x`, `"><script>`} {
		if strings.Contains(html, bad) {
			t.Errorf("the page carries unescaped markup %q from a repo", bad)
		}
	}
	if !strings.Contains(html, "&lt;script&gt;window.pwned=1&lt;/script&gt;") {
		t.Errorf("the hostile error is not shown escaped")
	}

	// Search by text: the URL, the id or the error.
	code, html = getPage(e, "/?q=PROJECT-0")
	if ids := repoIDs(html); code != 200 || len(ids) != 10 {
		t.Errorf("q=PROJECT-0: %d, %d repos, want 10 (project-00..09)", code, len(ids))
	}
	_, html = getPage(e, "/?q=no+answer&state=failing")
	if ids := repoIDs(html); len(ids) != 10 || !strings.Contains(html, `<b class="kind">timeout</b> <span class="msg">fetch project-03: no answer in 60s</span>`) {
		t.Errorf("q=no answer in failing: %d repos, want 10, with the error's kind and message\n%s", len(ids), repoRow.FindString(html))
	}
	_, html = getPage(e, "/?q="+hostile)
	if ids := repoIDs(html); len(ids) != 1 || ids[0] != hostile {
		t.Errorf("search by id: %v", ids)
	}
	_, html = getPage(e, "/?q=nothing-like-this")
	if !strings.Contains(html, "no repo matches") {
		t.Errorf("an empty search does not say so")
	}
	if _, html = getPage(e, "/?state=failing"); len(repoIDs(html)) != 11 {
		t.Errorf("state=failing: %d repos, want 11", len(repoIDs(html)))
	}

	// Pages of 7 follow each other's links and list every repo exactly once.
	seen := map[string]bool{}
	next, pages := "/?limit=7", 0
	for next != "" {
		code, html = getPage(e, strings.ReplaceAll(next, "&amp;", "&"))
		if code != 200 {
			t.Fatalf("GET %s: %d", next, code)
		}
		for _, id := range repoIDs(html) {
			if seen[id] {
				t.Fatalf("repo %s listed twice", id)
			}
			seen[id] = true
		}
		m := regexp.MustCompile(`href="([^"]*)" rel="next"`).FindStringSubmatch(html)
		next = ""
		if m != nil {
			next = m[1]
		}
		if pages++; pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if len(seen) != 31 || pages != 5 {
		t.Errorf("paging listed %d repos in %d pages, want 31 in 5", len(seen), pages)
	}

	// Bad parameters: a 400 page saying which and why, with the way back.
	for path, want := range map[string]string{
		"/?state=broken":                        `state &#34;broken&#34; is not a repo state`,
		"/?limit=0":                             "limit &#34;0&#34; is not an integer from 1 to 500",
		"/?q=" + strings.Repeat("x", 201):       "longer than 200 characters",
		"/?cursor=" + strings.Repeat("c", 2000): "cursor is not one this page made",
		"/?q=%zz":                               "malformed query string",
		"/?state=%3Cscript%3E":                  "state &#34;&lt;script&gt;&#34;",
	} {
		code, html := getPage(e, path)
		if code != 400 || !strings.Contains(html, want) || !strings.Contains(html, `id="problem"`) || !strings.Contains(html, `<a href="/">Back`) {
			t.Errorf("GET %.40s: %d, want 400 saying %q\n%.600s", path, code, want, html)
		}
		if strings.Contains(html, `id="repos"`) {
			t.Errorf("GET %.40s: the 400 page shows repos", path)
		}
	}

	// Reads behind a token: the page is open but shows no fleet data.
	locked := New(Config{Store: e.store, Token: testToken, ReadsNeedAuth: true, Clock: e.clock})
	rec := httptest.NewRecorder()
	locked.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if body := rec.Body.String(); rec.Code != 200 || strings.Contains(body, "git.example.org") || strings.Contains(body, "w-alpha") ||
		!strings.Contains(body, `data-locked="1"`) {
		t.Errorf("locked page without a token: %d\n%s", rec.Code, body)
	}
	req := httptest.NewRequest("GET", "/?q=project-01", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	rec = httptest.NewRecorder()
	locked.ServeHTTP(rec, req)
	if ids := repoIDs(rec.Body.String()); rec.Code != 200 || len(ids) != 1 {
		t.Errorf("locked page with the token: %d, %d repos", rec.Code, len(ids))
	}
}

// newBrowser starts headless Chromium, with or without JavaScript, and returns a tab.
func newBrowser(t *testing.T, javascript bool) context.Context {
	t.Helper()
	return browser(t, javascript, 1280, 1200)
}

// newBrowserSized is a tab with JavaScript in a window of w×h pixels.
func newBrowserSized(t *testing.T, w, h int) context.Context {
	t.Helper()
	return browser(t, true, w, h)
}

func browser(t *testing.T, javascript bool, w, h int) context.Context {
	t.Helper()
	bin := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(w, h),
	}
	if !javascript {
		opts = append(opts, chromedp.Flag("blink-settings", "scriptEnabled=false"))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(cancelCtx)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // only a hung browser; a loaded machine is slow
	t.Cleanup(cancel)
	return ctx
}

// pageText is the text of the element sel selects in the browser tab ctx.
func pageText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// TestStatusPageSearchInBrowser uses the page in Chromium as a person would, first with
// JavaScript off (everything is there, the search form works, no copy buttons) and then
// on (the same search, refreshed in place, with the copy buttons), and checks that the
// markup a repo carries is shown as text and never runs.
func TestStatusPageSearchInBrowser(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.CloneBaseURL = "http://git.test" })
	seedFleet(t, e)
	seedSearch(t, e)
	ts := httptest.NewServer(e.h)
	defer ts.Close()

	for _, js := range []bool{false, true} {
		t.Run(fmt.Sprintf("javascript=%v", js), func(t *testing.T) {
			ctx := newBrowser(t, js)
			text := func(sel string) string { t.Helper(); return pageText(t, ctx, sel) }
			if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/?refresh=1"), chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="1"] #repos`))); err != nil {
				t.Fatalf("loading the page: %v", err)
			}
			if got := text("#repos-total"); got != "31" {
				t.Errorf("repos total %q", got)
			}
			if w := text("#workers tbody"); !strings.Contains(w, "w-charlie") || !strings.Contains(w, "10m 0s ago") {
				t.Errorf("workers:\n%s", w)
			}
			if f := text("#failures"); !strings.Contains(f, "timeout") || !strings.Contains(f, "no answer in 60s") ||
				!strings.Contains(f, "<script>window.pwned=1</script>") {
				t.Errorf("failures table lacks the errors, shown as text:\n%s", f)
			}
			// A heartbeating worker's figures as it sent them (never aged by its own clock).
			if s := text("#staleness"); !strings.Contains(s, "p99 50m 0s") || !strings.Contains(s, "2 never fetched") {
				t.Errorf("staleness %q", s)
			}

			if err := chromedp.Do(ctx,
				chromedp.SendKeys(chromedp.CSS(`#search input[name="q"]`), "project-1"),
				chromedp.SetValue(chromedp.CSS(`#search select[name="state"]`), "failing"),
				chromedp.Submit(chromedp.CSS(`#search input[name="q"]`)),
				chromedp.WaitVisible(chromedp.ID("clear-search")), // shown on the results of a search
			); err != nil {
				t.Fatalf("searching: %v", err)
			}
			rows := text("#repos tbody")
			for _, want := range []string{"project-12", "project-15", "project-18", "timeout", "fetch project-12: no answer in 60s"} {
				if !strings.Contains(rows, want) {
					t.Errorf("search results lack %q:\n%s", want, rows)
				}
			}
			if strings.Contains(rows, "project-10") || strings.Contains(rows, "project-13") {
				t.Errorf("search results hold repos that are not failing:\n%s", rows)
			}
			loc, err := chromedp.Run(ctx, chromedp.Location())
			if err != nil || !strings.Contains(loc, "q=project-1") || !strings.Contains(loc, "state=failing") {
				t.Errorf("the search is not in the URL: %q (%v)", loc, err)
			}
			buttons, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`[...document.querySelectorAll("#repos button.copy")].filter(b => b.offsetParent !== null).length`))
			if err != nil {
				t.Fatalf("counting copy buttons: %v", err)
			}
			if js && buttons != 3 || !js && buttons != 0 {
				t.Errorf("%v visible copy buttons with javascript=%v", buttons, js)
			}
			if js {
				// Refreshed in place (period 1s), the search stays and no markup ran.
				time.Sleep(2500 * time.Millisecond)
				if rows2 := text("#repos tbody"); rows2 != rows {
					t.Errorf("after refreshing, the results changed:\n%s", rows2)
				}
				if st, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.state`)); st != "ok" {
					t.Errorf("page state %q after refreshing", st)
				}
			}
			if pwned, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.pwned !== undefined`)); err != nil || pwned {
				t.Errorf("markup from a repo ran (%v)", err)
			}

			if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/?state=broken"), chromedp.WaitVisible(chromedp.ID("problem"))); err != nil {
				t.Fatalf("the 400 page: %v", err)
			}
			if p := text("#problem"); !strings.Contains(p, `state "broken" is not a repo state`) {
				t.Errorf("the 400 page says %q", p)
			}
		})
	}
}
