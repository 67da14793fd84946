package api

import (
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestStatusPageListPanel checks the repo-list panel: a held purge with the command to
// confirm it, the bad lines with file:line; and "not configured" without a list.
func TestStatusPageListPanel(t *testing.T) {
	ctx := newBrowser(t, true)
	fl := &fakeList{st: sampleListStatus()}
	e := newEnv(t, func(c *Config) { c.List = fl })
	seedFleet(t, e)
	ts := httptest.NewServer(e.h)
	defer ts.Close()
	bare := httptest.NewServer(New(Config{Store: e.store, Clock: e.clock}))
	defer bare.Close()

	load := func(url string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(url+"/?refresh=1"), chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="1"]`))); err != nil {
			t.Fatalf("loading %s: %v", url, err)
		}
	}
	text := func(sel string) string { t.Helper(); return pageText(t, ctx, sel) }

	load(ts.URL)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("list-held"))); err != nil {
		t.Fatalf("held purge not shown: %v", err)
	}
	held, facts, bad := text("#list-held"), text("#list-facts"), text("#list-bad tbody")
	for _, want := range []string{"Purge held", "20 of 40", "50.0%", "mirrorfleet list confirm " + heldCommit, "https://git.example.org/a"} {
		if !strings.Contains(held, want) {
			t.Errorf("held panel lacks %q:\n%s", want, held)
		}
	}
	for _, want := range []string{"https://git.example.org/mirrors/list", "main", heldCommit, "diff: +2 −0", "5%"} {
		if !strings.Contains(facts, want) {
			t.Errorf("list facts lack %q:\n%s", want, facts)
		}
	}
	if !strings.Contains(bad, "repos.txt:3") || !strings.Contains(bad, "malformed") {
		t.Errorf("bad lines table:\n%s", bad)
	}
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		_ = os.WriteFile("/tmp/status-list.png", png, 0o644)
	}

	load(bare.URL)
	if err := chromedp.Do(ctx, chromedp.WaitNotVisible(chromedp.ID("list-held"))); err != nil {
		t.Fatal(err)
	}
	if msg := text("#list-message"); !strings.Contains(msg, "no list repository is configured") {
		t.Errorf("without a list the panel says %q", msg)
	}
}
