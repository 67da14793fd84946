package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/hostile"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// heapBound is what the whole fleet process may grow its heap to under the attacks
// below; without the guards single attacks reach gigabytes.
const heapBound = 384 << 20

// startHardened runs a one-worker fleet with small limits, so attacks are cut quickly.
func startHardened(t *testing.T, logs io.Writer) *running {
	t.Helper()
	return startWith(t, logs, func(c *fleet.Config) {
		c.Data, c.Workers, c.Fetchers, c.Warmup = t.TempDir(), 1, 10, -1
		c.HostConcurrency, c.HostRate = 0, 0 // the defaults: the hostile host is one, the good repos another
		c.Fetch = mirror.Limits{MaxRefBytes: 1 << 20, MaxRefs: 10_000, MaxPackBytes: 16 << 20, MaxObjectBytes: 8 << 20,
			MaxPackObjects: 1_000_000, MinRate: 1 << 10, RateWindow: 5 * time.Second}
		c.HTTP = httpguard.Limits{ReadHeaderTimeout: time.Second, BodyTimeout: time.Second, MaxConns: 4000}
	})
}

// TestHostileUpstreamsInTheFleet adds every hostile upstream beside good repos: the
// good ones are mirrored as usual, each hostile one ends with its classified error on
// its record (in the repo and in the status's stalest list), the process's heap stays
// bounded, and nothing crashes.
func TestHostileUpstreamsInTheFleet(t *testing.T) {
	logs := dumpOnFailure(t)
	up, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	up.RetryAfter = time.Second // a pause of the hostile host must not hold the others' errors back
	t.Cleanup(up.Close)
	srv := gittest.NewServer(t)
	mem := hostile.StartSampler()
	f := startHardened(t, logs)
	waitRing(t, f, 1)

	want := map[string]string{} // repo id -> error kind
	var urls []string
	kinds := map[hostile.Attack]string{
		hostile.EndlessRefs: "over_limit", hostile.EndlessPack: "over_limit", hostile.Trickle: "timeout",
		hostile.LyingCount: "over_limit", hostile.LyingCountRaw: "over_limit", hostile.LyingSize: "over_limit",
		hostile.Bomb: "over_limit", hostile.DeltaBomb: "over_limit", hostile.RedirectLoop: "refused_by_policy",
		hostile.RateLimited: "rate_limited",
	}
	for _, a := range hostile.Attacks {
		u := up.RepoURL(a)
		urls = append(urls, u)
		want[store.RepoID(u)] = kinds[a]
	}
	ids := addRepos(t, f, urls...)
	good := addUpstreams(t, f, newUpstreams(t, srv, "good", 4))
	waitMirrored(t, f, good, time.Minute)
	eventually(t, f, 2*time.Minute, "every hostile repo refused with its kind", func() string {
		repos := allRepos(t, f.Store)
		var missing []string
		for _, id := range ids {
			r := repos[id]
			if !strings.HasPrefix(r.LastError, want[id]+":") {
				missing = append(missing, fmt.Sprintf("%s: %q", r.URL, r.LastError))
			}
		}
		return strings.Join(missing, "; ")
	})
	peak := mem.Stop()
	if peak > heapBound {
		t.Fatalf("heap peaked at %d MiB, over %d MiB", peak>>20, heapBound>>20)
	}

	var status struct {
		Stalest []struct {
			URL       string `json:"url"`
			LastError string `json:"last_error"`
		} `json:"stalest"`
	}
	getJSON(t, f, "/v1/status", &status)
	shown := 0
	for _, s := range status.Stalest {
		if k, ok := want[store.RepoID(s.URL)]; ok && strings.HasPrefix(s.LastError, k+":") {
			shown++
		}
	}
	if shown != len(ids) {
		t.Fatalf("the status's stalest list shows %d of the %d hostile repos with their errors: %+v", shown, len(ids), status.Stalest)
	}
	t.Logf("%d hostile upstreams refused, %d good repos mirrored, heap peak %d MiB", len(ids), len(good), peak>>20)
}

func getJSON(t *testing.T, f *running, path string, out any) {
	t.Helper()
	resp, err := http.Get("http://" + f.Addr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// TestHostileClients runs the client attacks against the fleet's API: other Host
// names, slowloris headers, bodies announced and never sent, huge headers, bad JSON,
// floods of adds. Every one is refused or cut, nothing it sent is stored, the heap
// stays bounded and the API answers normally throughout.
func TestHostileClients(t *testing.T) {
	logs := dumpOnFailure(t)
	mem := hostile.StartSampler()
	f := startHardened(t, logs)
	base := "http://" + f.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Another site's page reaching 127.0.0.1 through DNS rebinding sends its own name.
	for _, path := range []string{"/v1/status", "/v1/repos", "/metrics", "/"} {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Host = "rebind.attacker.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "host_not_allowed") {
			t.Fatalf("GET %s for another Host: %s %s", path, resp.Status, b)
		}
	}

	const conns = 500
	if closed, err := hostile.Slowloris(ctx, f.Addr(), conns, 200*time.Millisecond); err != nil || closed != conns {
		t.Fatalf("slowloris: the server closed %d of %d connections (%v)", closed, conns, err)
	}
	if closed, err := hostile.SilentBody(ctx, f.Addr(), "/v1/repos", token, conns); err != nil || closed != conns {
		t.Fatalf("silent bodies: the server closed %d of %d connections (%v)", closed, conns, err)
	}
	if status, err := hostile.HugeHeader(ctx, base+"/v1/status", 1<<20); err != nil || status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("1 MiB header: %d (%v), want 431", status, err)
	}
	for name, body := range hostile.BadJSON {
		status, resp, err := hostile.Post(ctx, base+"/v1/repos", token, body)
		if err != nil || status < 400 || status >= 500 {
			t.Fatalf("bad JSON (%s): %d %s (%v), want a 4xx", name, status, resp, err)
		}
	}
	if n := len(allRepos(t, f.Store)); n != 0 {
		t.Fatalf("%d repos stored from refused requests", n)
	}

	const clients, requests, per = 8, 20, 250
	counts, err := hostile.AddFlood(ctx, base+"/v1/repos", token, clients, requests, per)
	if err != nil || counts[http.StatusOK] != requests {
		t.Fatalf("flood of adds: statuses %v (%v)", counts, err)
	}
	if n := len(allRepos(t, f.Store)); n != requests*per {
		t.Fatalf("%d repos stored from the flood, want %d", n, requests*per)
	}
	var status struct {
		ReposTotal int `json:"repos_total"`
	}
	getJSON(t, f, "/v1/status", &status)
	if status.ReposTotal != requests*per {
		t.Fatalf("status after the attacks: %d repos", status.ReposTotal)
	}
	if peak := mem.Stop(); peak > heapBound {
		t.Fatalf("heap peaked at %d MiB, over %d MiB", peak>>20, heapBound>>20)
	} else {
		t.Logf("client attacks survived; heap peak %d MiB", peak>>20)
	}
}

// TestRateLimitedHostIsLeftAlone: 40 repos on a forge that answers 429 with a
// Retry-After of two minutes. After the first answers the whole host is paused, not
// each repo: the forge sees no more than one round of requests (HostConcurrency of
// the one worker), however many of its repos come due.
func TestRateLimitedHostIsLeftAlone(t *testing.T) {
	logs := dumpOnFailure(t)
	up, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	f := startWith(t, logs, func(c *fleet.Config) {
		c.Data, c.Workers, c.Fetchers, c.Warmup, c.HostConcurrency, c.HostRate = t.TempDir(), 1, 10, -1, 3, -1
	})
	waitRing(t, f, 1)
	var urls []string
	for i := range 40 {
		urls = append(urls, fmt.Sprintf("%s.%02d", up.RepoURL(hostile.RateLimited), i))
	}
	addRepos(t, f, urls...)
	eventually(t, f, time.Minute, "every repo assigned and refused once or waiting", func() string {
		n := 0
		for _, r := range allRepos(t, f.Store) {
			if r.Owner != "" {
				n++
			}
		}
		if n != len(urls) {
			return fmt.Sprintf("%d of %d assigned", n, len(urls))
		}
		if up.Requests(hostile.RateLimited) == 0 {
			return "no request yet"
		}
		return ""
	})
	time.Sleep(2 * time.Second) // ticks and heartbeats go on; due repos are popped and parked
	if got := up.Requests(hostile.RateLimited); got > 3 {
		t.Fatalf("the rate-limited forge got %d requests; after its 429s the host should have been left alone (at most 3, one round)", got)
	}
	limited := 0
	for _, r := range allRepos(t, f.Store) {
		if strings.HasPrefix(r.LastError, "rate_limited:") {
			limited++
		}
	}
	if limited == 0 || limited > 3 {
		t.Fatalf("%d repos carry a rate_limited error, want the 1 to 3 that were asked", limited)
	}
	t.Logf("40 repos on a forge answering 429: %d requests, %d repos refused, the rest wait for the host", up.Requests(hostile.RateLimited), limited)
}
