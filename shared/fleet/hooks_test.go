package fleet_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/feeds"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
)

const hookSecret = "hook-secret"

// githubPush is a signed GitHub push delivery for the repo at cloneURL.
func githubPush(t *testing.T, addr, cloneURL, delivery, secret string) (int, string) {
	t.Helper()
	return githubPushWith(t, addr, cloneURL, delivery, secret, nil)
}

// githubPushWith is githubPush with the headers of extra added.
func githubPushWith(t *testing.T, addr, cloneURL, delivery, secret string, extra http.Header) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"ref": "refs/heads/master", "before": strings.Repeat("0", 40), "after": strings.Repeat("1", 40),
		"repository": map[string]any{"clone_url": cloneURL, "html_url": strings.TrimSuffix(cloneURL, ".git")}})
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/hooks/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	for k, vs := range extra {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	// A proxy in front of the fleet passes the site's public name: hooks answer it.
	req.Host = "mirrors.example.org"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHookAndSyncFetchAtOnce: a signed push webhook, and a sync, reach the owning worker
// at once. The heartbeat (which carries the coordinator's durable sync request) is a
// minute and the minimum interval an hour, so only the fast path can fetch within the
// seconds the test waits.
func TestHookAndSyncFetchAtOnce(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	logs := dumpOnFailure(t)
	f := startWith(t, logs, func(c *fleet.Config) {
		c.Data, c.Warmup, c.Workers = t.TempDir(), -1, 1
		c.Heartbeat, c.Tick, c.MinInterval, c.Grace = time.Minute, time.Minute, time.Hour, 10*time.Minute
		c.WebhookSecret = hookSecret
	})
	waitRing(t, f, 1)
	up := srv.NewRepo(t, "org/app")
	up.Commit(t, "init", map[string][]byte{"a": []byte("1")})
	ups := addUpstreams(t, f, []*gittest.Repo{up})
	waitMirrored(t, f, ups, 90*time.Second) // the first assignment rides a heartbeat
	id := onlyID(ups)
	mirrored := func() string {
		r, err := f.Store.GetRepo(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		dir, err := f.Mirror.Path(fetch.Target{ID: id, URL: r.URL})
		if err != nil {
			t.Fatal(err)
		}
		return gittest.RefsOf(t, dir)
	}

	// A forged signature: 401, and nothing fetched.
	up.Commit(t, "second", map[string][]byte{"a": []byte("2")})
	if code, body := githubPush(t, f.Addr(), up.URL()+".git", "d-forged", "not-the-secret"); code != http.StatusUnauthorized {
		t.Fatalf("forged hook: %d %s", code, body)
	}
	time.Sleep(2 * time.Second)
	if mirrored() == up.Refs(t) {
		t.Fatal("a forged hook made the fleet fetch")
	}

	// A signed push: the mirror follows within seconds.
	begin := time.Now()
	if code, body := githubPush(t, f.Addr(), up.URL()+".git", "d-1", hookSecret); code != http.StatusAccepted || !strings.Contains(body, `"accepted"`) {
		t.Fatalf("hook: %d %s", code, body)
	}
	eventually(t, f, 15*time.Second, "the hook's push mirrored", func() string {
		if mirrored() != up.Refs(t) {
			return "mirror behind upstream"
		}
		return ""
	})
	t.Logf("hook → mirrored in %v", time.Since(begin).Round(time.Millisecond))
	// The fetch the hook asked for counts as announced in the host's hook metrics.
	u, err := url.Parse(up.URL())
	if err != nil {
		t.Fatal(err)
	}
	announced := `mirrorfleet_hook_pushes_announced_total{host="` + strings.ToLower(u.Host) + `"} 1`
	eventually(t, f, 5*time.Second, "the hook counted", func() string {
		resp, err := http.Get("http://" + f.Addr() + "/metrics")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), announced) {
			return "no " + announced
		}
		return ""
	})

	// The forge's redelivery of the same delivery fetches nothing new.
	if code, body := githubPush(t, f.Addr(), up.URL(), "d-1", hookSecret); code != http.StatusAccepted || !strings.Contains(body, `"duplicate"`) {
		t.Fatalf("redelivery: %d %s", code, body)
	}
	// A payload naming no mirrored repo gets the same answer as a hit.
	if code, body := githubPush(t, f.Addr(), srv.URL+"/org/unknown.git", "d-2", hookSecret); code != http.StatusAccepted || !strings.Contains(body, `"accepted"`) {
		t.Fatalf("unknown repo: %d %s", code, body)
	}

	// repos sync: the same fast path.
	up.Commit(t, "third", map[string][]byte{"a": []byte("3")})
	accepted(t, f, http.MethodPost, "/v1/repos/"+id+"/sync")
	begin = time.Now()
	eventually(t, f, 15*time.Second, "the synced push mirrored", func() string {
		if mirrored() != up.Refs(t) {
			return "mirror behind upstream"
		}
		return ""
	})
	t.Logf("sync → mirrored in %v", time.Since(begin).Round(time.Millisecond))
}

// TestHooksOffWithoutASecret: no secret configured, every hook is 403 and fetches nothing.
func TestHooksOffWithoutASecret(t *testing.T) {
	t.Parallel()
	f := startWith(t, io.Discard, func(c *fleet.Config) { c.Data, c.Warmup = t.TempDir(), -1 })
	if code, body := githubPush(t, f.Addr(), "https://github.com/git/git", "d", "anything"); code != http.StatusForbidden || !strings.Contains(body, "webhook-secret") {
		t.Fatalf("hook with no secret configured: %d %s", code, body)
	}
}

// TestFeedNamesAPushAndItIsFetched: a Gitea-style change feed on the upstream's host
// lists the repo as updated, and the fleet fetches it without a hook, a sync or a poll
// (minimum interval an hour, heartbeat a minute).
func TestFeedNamesAPushAndItIsFetched(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	var mu sync.Mutex
	var listed []map[string]any
	srv.Intercept(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.URL.Path != "/api/v1/repos/search" {
			next.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "data": listed})
	})
	logs := dumpOnFailure(t)
	src, err := feeds.ParseSource("gitea="+srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := startWith(t, logs, func(c *fleet.Config) {
		c.Data, c.Warmup, c.Workers = t.TempDir(), -1, 1
		c.Heartbeat, c.Tick, c.MinInterval, c.Grace = time.Minute, time.Minute, time.Hour, 10*time.Minute
		c.Feeds, c.FeedEvery = []feeds.Source{src}, 500*time.Millisecond
	})
	waitRing(t, f, 1)
	up := srv.NewRepo(t, "org/fed")
	up.Commit(t, "init", map[string][]byte{"a": []byte("1")})
	ups := addUpstreams(t, f, []*gittest.Repo{up})
	waitMirrored(t, f, ups, 90*time.Second)

	up.Commit(t, "second", map[string][]byte{"a": []byte("2")})
	mu.Lock()
	listed = []map[string]any{{"html_url": up.URL(), "updated_at": time.Now().UTC().Format(time.RFC3339)}}
	mu.Unlock()
	waitMirrored(t, f, ups, 20*time.Second)
}
