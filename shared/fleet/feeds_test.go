package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/feeds"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
)

// bloatedPage is a GitLab projects page that ignores per_page: as many projects as
// fit in the feed's body bound (about a hundred thousand), each named once across pages.
func bloatedPage(base string, page int) []byte {
	var b bytes.Buffer
	at := time.Now().UTC().Format(time.RFC3339)
	b.WriteByte('[')
	for i := 0; ; i++ {
		item := fmt.Sprintf(`{"web_url":"%s/g%d/p%d","last_activity_at":%q}`, base, page, i, at)
		if b.Len()+len(item)+2 > feeds.MaxBody {
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// TestBloatedFeedDoesNotFreezeTheFleet: a GitLab-style feed on the repos' own host
// answers every page with about 8 MiB of projects (some 100,000, past the 100 asked
// for) and an endless X-Next-Page. Throughout, the worker answers (its repo's record
// with the poll stretch it reads under its lock), the coordinator ticks and /healthz
// says so; the feed's pages are refused, after FailuresBeforeUncovered probes its repos
// stop counting as covered; and the fleet stops within its grace.
func TestBloatedFeedDoesNotFreezeTheFleet(t *testing.T) {
	srv := gittest.NewServer(t)
	pages := [][]byte{bloatedPage(srv.URL, 1), bloatedPage(srv.URL, 2)}
	var served atomic.Int64
	srv.Intercept(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.URL.Path != "/api/v4/projects" {
			next.ServeHTTP(w, r)
			return
		}
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Next-Page", strconv.Itoa(page+1))
		w.Write(pages[page%2])
	})
	logs := dumpOnFailure(t)
	src, err := feeds.ParseSource("gitlab="+srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := startWith(t, logs, func(c *fleet.Config) {
		c.Data, c.Warmup, c.Workers = t.TempDir(), -1, 1
		c.Feeds, c.FeedEvery = []feeds.Source{src}, 100*time.Millisecond
	})
	waitRing(t, f, 1)
	up := srv.NewRepo(t, "org/app")
	up.Commit(t, "init", map[string][]byte{"a": []byte("1")})
	ups := addUpstreams(t, f, []*gittest.Repo{up})
	id := onlyID(ups)
	waitMirrored(t, f, ups, 60*time.Second)

	client := &http.Client{Timeout: 3 * time.Second}
	deadline := time.Now().Add(8 * time.Second)
	uncovered := false
	for time.Now().Before(deadline) || !uncovered {
		start := time.Now()
		resp, err := client.Get("http://" + f.Addr() + "/v1/repos/" + id)
		if err != nil {
			t.Fatalf("GET /v1/repos/%s while the feed floods: %v (served %d pages)", id, err, served.Load())
		}
		var rec map[string]any
		json.NewDecoder(resp.Body).Decode(&rec)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET /v1/repos/%s: %s", id, resp.Status)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("GET /v1/repos/%s took %s while the feed floods", id, took)
		}
		resp, err = client.Get("http://" + f.Addr() + "/healthz")
		if err != nil {
			t.Fatalf("/healthz while the feed floods: %v", err)
		}
		var h map[string]any
		json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/healthz while the feed floods: %s %v", resp.Status, h)
		}
		if s, ok := f.PollStretch(id); ok && s == 1 {
			uncovered = true
		}
		if time.Since(deadline) > 30*time.Second {
			t.Fatalf("the failing feed still covers the repo (stretch %v)", rec["poll_stretch"])
		}
		time.Sleep(200 * time.Millisecond)
	}
	if served.Load() < int64(feeds.FailuresBeforeUncovered) {
		t.Fatalf("the feed was asked %d times", served.Load())
	}

	// A stop within its grace, whatever the feed is doing.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- f.Fleet.Stop(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Stop did not return within its 10 s grace")
	}
	t.Logf("stopped in %s; the feed served %d pages", time.Since(start).Round(time.Millisecond), served.Load())
	f.once.Do(func() {}) // stopped: the cleanup has nothing left to do
}
