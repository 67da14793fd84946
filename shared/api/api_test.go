package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/repos"
	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// seedFleet stores a leader, three workers in different health and a ring over two of
// them, the way a coordinator and workers would.
func seedFleet(t *testing.T, e *env) {
	t.Helper()
	ctx := t.Context()
	el, err := e.store.CASElection(ctx, 0, store.Election{Term: 1, VotedFor: "coord-1", LeaseUntil: t0.Add(30 * time.Second), LastCallTime: t0})
	if err != nil {
		t.Fatalf("CASElection: %v", err)
	}
	type wk struct {
		id    string
		hbAgo time.Duration
		state store.WorkerState
	}
	var members []store.Member
	var muts []store.Mutation
	for i, w := range []wk{{"w-alpha", 2 * time.Second, store.WorkerActive}, {"w-bravo", 45 * time.Second, store.WorkerActive}, {"w-charlie", 10 * time.Minute, store.WorkerSuspect}} {
		got, err := e.store.ClaimSlot(ctx, store.Worker{ID: w.id, StartedAt: t0.Add(-time.Hour)}, 64)
		if err != nil {
			t.Fatalf("ClaimSlot(%s): %v", w.id, err)
		}
		_, err = e.store.Heartbeat(ctx, w.id, store.Heartbeat{At: t0.Add(-w.hbAgo), DiskUsed: int64(i+1) << 30, DiskTotal: 10 << 30, Fetching: i, QueueLen: 10 * i})
		if err != nil {
			t.Fatalf("Heartbeat(%s): %v", w.id, err)
		}
		muts = append(muts, store.SetWorkerState{ID: w.id, State: w.state})
		members = append(members, store.Member{ID: got.ID, Slot: got.Slot})
	}
	rg, err := ring.New().AddAll(members...)
	if err != nil {
		t.Fatalf("ring: %v", err)
	}
	muts = append(muts, store.PutRing{Ring: store.Ring{Hash: ring.HashID, Members: rg.Members(), Tokens: rg.Tokens(), WarmupUntil: t0.Add(-time.Hour), Batch: 10}})
	if err := e.store.Apply(ctx, el.Term, muts); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func TestCreateRepoIdempotent(t *testing.T) {
	e := newEnv(t)
	spellings := []string{
		"https://GitHub.com/Git/git.git",
		"https://github.com:443/Git/git",
		"  https://github.com/Git/git/  ",
		"https://github.com/git/GIT", // github.com's paths are case-insensitive
	}
	var id string
	for i, u := range spellings {
		want := http.StatusOK
		if i == 0 {
			want = http.StatusCreated
		}
		r := e.want(e.add(u), want, "add "+u)
		if i == 0 {
			id = str(r.body["id"])
			if got := r.header.Get("Location"); got != "/v1/repos/"+id {
				t.Errorf("Location = %q, want /v1/repos/%s", got, id)
			}
		}
		if str(r.body["id"]) != id {
			t.Fatalf("add %q: id %v, want %s (same repo)", u, r.body["id"], id)
		}
	}
	rs := e.storedRepos()
	if len(rs) != 1 {
		t.Fatalf("store holds %d repos, want 1", len(rs))
	}
	norm, _ := urlpolicy.Default().Normalize(spellings[0])
	r := rs[0]
	if r.URL != norm || r.ID != repos.ID(urlpolicy.Default(), norm) || r.ID != store.RepoID("https://github.com/git/git") || r.ID != id || r.Source != store.SourceAPI || r.State != store.RepoPending || !r.CreatedAt.Equal(t0) {
		t.Fatalf("stored repo %+v; want url %s, source api, state pending, created %s", r, norm, t0)
	}
	if n := e.pokes.Load(); n != 1 {
		t.Errorf("Poke called %d times, want 1 (only the create writes)", n)
	}
}

// TestCreateRepoMirrorPathTaken: twins that are two repositories get two records; a
// URL whose mirror directory another record holds (here one stored with the "%21"
// spelling an older normalization kept) is refused with 409 naming that repo, alone
// and in a bulk add, and nothing is written.
func TestCreateRepoMirrorPathTaken(t *testing.T) {
	e := newEnv(t)
	ids := map[string]bool{}
	for _, u := range []string{"https://example.com/a/twin", "http://example.com/a/twin", "https://example.com:8443/a/twin"} {
		ids[str(e.want(e.add(u), 201, "add "+u).body["id"])] = true
	}
	if len(ids) != 3 {
		t.Fatalf("http/https/port twins got %d ids, want 3", len(ids))
	}

	old := "https://example.com/a/b%21c"
	held, _, err := e.store.CreateRepo(t.Context(), store.Repo{ID: store.RepoID(old), URL: old, Source: store.SourceAPI,
		State: store.RepoOK, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	before := e.repoCount()
	r := e.want(e.add("https://example.com/a/b!c"), 409, "add a URL whose mirror path is taken")
	code, msg := r.errCode()
	ex, _ := r.body["error"].(map[string]any)["existing"].(map[string]any)
	if code != "mirror_path_taken" || !strings.Contains(msg, held.ID) || !strings.Contains(msg, old) ||
		!strings.Contains(msg, "example.com/a/b=21c.git") || str(ex["id"]) != held.ID || str(ex["url"]) != old {
		t.Fatalf("409 body %s; want code mirror_path_taken naming %s (%s) and the path", r.raw, held.ID, old)
	}
	bulk := e.want(e.do("POST", "/v1/repos", jsonBody(map[string]any{"urls": []string{"https://example.com/a/b!c", "https://example.com/a/new"}})), 200, "bulk")
	res := bulk.body["results"].([]any)
	first := res[0].(map[string]any)
	if first["status"] != "error" || first["error"].(map[string]any)["code"] != "mirror_path_taken" || res[1].(map[string]any)["status"] != "created" {
		t.Fatalf("bulk results %s", bulk.raw)
	}
	if got := e.repoCount(); got != before+1 {
		t.Fatalf("store holds %d repos, want %d (only the new one)", got, before+1)
	}
	if got, err := e.store.GetRepo(t.Context(), held.ID); err != nil || got.URL != old {
		t.Fatalf("held repo now %+v, %v", got, err)
	}
}

func TestRepoJSON(t *testing.T) {
	e := newEnv(t)
	id := str(e.want(e.add("https://example.com/a/b.git"), 201, "add").body["id"])
	r := e.want(e.do("GET", "/v1/repos/"+id, nil), 200, "get")
	want := []string{"id", "url", "upstream", "source", "state", "owner", "owner_epoch", "salt", "priority", "last_fetch_at", "last_checked_at",
		"last_success_at", "last_change_at", "last_commit_at", "fetch_fail_cnt", "clone_fail_cnt", "size_bytes",
		"last_error", "created_at", "sync_requested", "clone_url"}
	for _, k := range want {
		if _, ok := r.body[k]; !ok {
			t.Errorf("repo JSON lacks %q: %s", k, r.raw)
		}
	}
	if len(r.body) != len(want) {
		t.Errorf("repo JSON has %d fields, want %d: %s", len(r.body), len(want), r.raw)
	}
	// Never-happened times and the missing owner are null, not omitted or zero.
	for _, k := range []string{"owner", "last_fetch_at", "last_checked_at", "last_success_at", "last_change_at", "last_commit_at", "clone_url"} {
		if r.body[k] != nil {
			t.Errorf("%s = %v, want null", k, r.body[k])
		}
	}
	// The identity is normalized; the upstream is the URL as added, fetched as is.
	if r.body["url"] != "https://example.com/a/b" || r.body["upstream"] != "https://example.com/a/b.git" {
		t.Errorf("url %v, upstream %v: want the normalized URL and the one added", r.body["url"], r.body["upstream"])
	}
	if got := str(r.body["created_at"]); got != "2025-06-01T12:00:00Z" {
		t.Errorf("created_at = %q", got)
	}
	if str(r.body["url"]) != "https://example.com/a/b" || str(r.body["state"]) != "pending" || str(r.body["source"]) != "api" {
		t.Errorf("repo = %s", r.raw)
	}
}

// TestCloneURL: with a clone base URL every repo, listed, fetched or among the
// stalest, carries <base>/git/<mirror path>.
func TestCloneURL(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.CloneBaseURL = "http://127.0.0.1:8080" })
	id := str(e.want(e.add("https://example.com/a/b.git"), 201, "add").body["id"])
	e.want(e.add("https://example.com:8443/c/b!d"), 201, "add")
	r := e.want(e.do("GET", "/v1/repos/"+id, nil), 200, "get")
	if got := str(r.body["clone_url"]); got != "http://127.0.0.1:8080/git/example.com/a/b.git" {
		t.Errorf("clone_url = %q", got)
	}
	l := e.want(e.do("GET", "/v1/repos", nil), 200, "list")
	var got []string
	for _, x := range l.body["repos"].([]any) {
		got = append(got, str(x.(map[string]any)["clone_url"]))
	}
	slices.Sort(got)
	want := []string{"http://127.0.0.1:8080/git/example.com/a/b.git", "http://127.0.0.1:8080/git/example.com:8443/c/b=21d.git"}
	if !slices.Equal(got, want) {
		t.Errorf("listed clone URLs %v, want %v", got, want)
	}
	st := e.want(e.do("GET", "/v1/status", nil), 200, "status")
	for _, x := range st.body["stalest"].([]any) {
		if u := str(x.(map[string]any)["clone_url"]); !slices.Contains(want, u) {
			t.Errorf("stalest clone_url %q", u)
		}
	}
}

func TestBulkAdd(t *testing.T) {
	e := newEnv(t)
	e.want(e.add("https://example.com/pre/existing.git"), 201, "pre-existing")
	urls := []string{
		"https://example.com/x/one.git",
		"file:///etc/passwd",
		"https://example.com/x/ONE.git/", // not a duplicate: paths are case-sensitive
		"https://EXAMPLE.com/x/one",      // duplicate of the first
		"https://user:pw@example.com/x.git",
		"https://example.com/pre/existing",
		"http://169.254.169.254/latest",
		"git://example.org/two",
	}
	r := e.want(e.do("POST", "/v1/repos", jsonBody(map[string]any{"urls": urls})), 200, "bulk")
	results, _ := r.body["results"].([]any)
	if len(results) != len(urls) {
		t.Fatalf("%d results for %d urls: %s", len(results), len(urls), r.raw)
	}
	wantStatus := []string{"created", "error", "created", "exists", "error", "exists", "error", "error"}
	wantReason := map[int]string{1: "local_path", 4: "credentials", 6: "metadata_host", 7: "scheme"}
	for i, res := range results {
		m := res.(map[string]any)
		if str(m["url"]) != urls[i] || str(m["status"]) != wantStatus[i] {
			t.Errorf("result %d = %v, want url %q status %s", i, m, urls[i], wantStatus[i])
		}
		if reason, bad := wantReason[i]; bad {
			er, _ := m["error"].(map[string]any)
			if str(er["code"]) != "invalid_url" || str(er["reason"]) != reason || str(er["message"]) == "" || m["id"] != nil {
				t.Errorf("result %d error = %v, want invalid_url/%s with a message and no id", i, m, reason)
			}
		} else if !hexID(str(m["id"])) {
			t.Errorf("result %d has no id: %v", i, m)
		}
	}
	if str(results[3].(map[string]any)["id"]) != str(results[0].(map[string]any)["id"]) {
		t.Errorf("duplicate got another id: %v vs %v", results[3], results[0])
	}
	if num(r.body["created"]) != 2 || num(r.body["exists"]) != 2 || num(r.body["errors"]) != 4 {
		t.Errorf("counts = created %v exists %v errors %v, want 2 2 4", r.body["created"], r.body["exists"], r.body["errors"])
	}
	if msg := str(results[7].(map[string]any)["error"].(map[string]any)["message"]); !strings.Contains(msg, "https://") {
		t.Errorf("git:// refusal does not point to https: %q", msg)
	}
	// Only the good URLs are stored, each normalized.
	var stored []string
	for _, rp := range e.storedRepos() {
		stored = append(stored, rp.URL)
	}
	slices.Sort(stored)
	want := []string{"https://example.com/pre/existing", "https://example.com/x/ONE", "https://example.com/x/one"}
	if !slices.Equal(stored, want) {
		t.Errorf("stored %v, want %v", stored, want)
	}
	if n := e.pokes.Load(); n != 2 {
		t.Errorf("Poke called %d times, want 2 (single add + bulk)", n)
	}
}

func TestBulkLimits(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBulk = 3 })
	r := e.want(e.do("POST", "/v1/repos", jsonBody(map[string]any{"urls": []string{"https://a.example/1", "https://a.example/2", "https://a.example/3", "https://a.example/4"}})), 400, "too many")
	if code, msg := r.errCode(); code != "too_many_urls" || !strings.Contains(msg, "4") || !strings.Contains(msg, "3") {
		t.Errorf("error %s: %s", code, msg)
	}
	r = e.want(e.do("POST", "/v1/repos", []byte(`{"urls":[]}`)), 400, "empty")
	if code, msg := r.errCode(); code != "invalid_request" || !strings.Contains(msg, "empty") {
		t.Errorf("error %s: %s", code, msg)
	}
	for _, body := range []string{`{}`, `null`, `{"url":"https://a.example/x","urls":["https://a.example/y"]}`, `{"url":null}`} {
		r = e.want(e.do("POST", "/v1/repos", []byte(body)), 400, body)
		if code, msg := r.errCode(); code != "invalid_request" || !strings.Contains(msg, `"url"`) || !strings.Contains(msg, `"urls"`) {
			t.Errorf("%s: error %s: %s", body, code, msg)
		}
	}
	if n := e.repoCount(); n != 0 {
		t.Errorf("store holds %d repos, want 0", n)
	}
}

func TestListReposPagination(t *testing.T) {
	e := newEnv(t)
	want := map[string]bool{}
	for i := range 23 {
		st := []store.RepoState{store.RepoOK, store.RepoPending, store.RepoFailing}[i%3]
		want[e.seedRepo(fmt.Sprintf("https://example.com/org/r%02d.git", i), st, "", time.Time{}).ID] = true
	}
	for _, limit := range []int{1, 2, 5, 22, 23, 100} {
		seen := map[string]int{}
		cursor, pages := "", 0
		for {
			r := e.want(e.do("GET", fmt.Sprintf("/v1/repos?limit=%d&cursor=%s", limit, cursor), nil), 200, "list")
			repos, _ := r.body["repos"].([]any)
			if len(repos) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(repos))
			}
			for _, x := range repos {
				seen[str(x.(map[string]any)["id"])]++
			}
			pages++
			cursor = str(r.body["next_cursor"])
			if cursor == "" {
				break
			}
			if pages > 100 {
				t.Fatalf("limit %d: listing does not end", limit)
			}
		}
		if len(seen) != len(want) {
			t.Errorf("limit %d: saw %d repos, want %d", limit, len(seen), len(want))
		}
		for id, n := range seen {
			if n != 1 || !want[id] {
				t.Errorf("limit %d: repo %s seen %d times (known %v)", limit, id, n, want[id])
			}
		}
	}
	// The default page is 100.
	r := e.want(e.do("GET", "/v1/repos", nil), 200, "default")
	if n := len(r.body["repos"].([]any)); n != 23 || str(r.body["next_cursor"]) != "" {
		t.Errorf("default listing: %d repos, cursor %v", n, r.body["next_cursor"])
	}
}

func TestListReposByState(t *testing.T) {
	e := newEnv(t)
	wantFailing := map[string]bool{}
	for i := range 40 {
		st := store.RepoOK
		if i%7 == 3 {
			st = store.RepoFailing
		}
		r := e.seedRepo(fmt.Sprintf("https://example.com/s/r%02d", i), st, "", time.Time{})
		if st == store.RepoFailing {
			wantFailing[r.ID] = true
		}
	}
	for _, limit := range []int{1, 2, 3, 100} {
		seen := map[string]int{}
		cursor := ""
		for range 100 {
			r := e.want(e.do("GET", fmt.Sprintf("/v1/repos?state=failing&limit=%d&cursor=%s", limit, cursor), nil), 200, "list failing")
			for _, x := range r.body["repos"].([]any) {
				m := x.(map[string]any)
				if str(m["state"]) != "failing" {
					t.Fatalf("state filter returned %v", m)
				}
				seen[str(m["id"])]++
			}
			if len(r.body["repos"].([]any)) > limit {
				t.Fatalf("limit %d exceeded", limit)
			}
			if cursor = str(r.body["next_cursor"]); cursor == "" {
				break
			}
		}
		if len(seen) != len(wantFailing) {
			t.Errorf("limit %d: %d failing repos listed, want %d", limit, len(seen), len(wantFailing))
		}
		for id, n := range seen {
			if n != 1 || !wantFailing[id] {
				t.Errorf("limit %d: %s seen %d times", limit, id, n)
			}
		}
	}
}

func TestGetRepo(t *testing.T) {
	e := newEnv(t)
	rp := e.seedRepo("https://example.com/g/one.git", store.RepoOK, "w-alpha", t0.Add(-time.Hour))
	r := e.want(e.do("GET", "/v1/repos/"+rp.ID, nil, noAuth), 200, "get without token (reads are open)")
	if str(r.body["id"]) != rp.ID || str(r.body["owner"]) != "w-alpha" || str(r.body["last_success_at"]) != "2025-06-01T11:00:00Z" {
		t.Errorf("repo = %s", r.raw)
	}
	r = e.want(e.do("GET", "/v1/repos/0123456789abcdef", nil), 404, "unknown id")
	if code, msg := r.errCode(); code != "not_found" || !strings.Contains(msg, "0123456789abcdef") {
		t.Errorf("error %s: %s", code, msg)
	}
}

func TestDeleteAndSync(t *testing.T) {
	e := newEnv(t)
	a := e.seedRepo("https://example.com/d/a.git", store.RepoOK, "w-alpha", t0)
	b := e.seedRepo("https://example.com/d/b.git", store.RepoOK, "w-alpha", t0)

	r := e.want(e.do("POST", "/v1/repos/"+a.ID+"/sync", nil), 202, "sync")
	if str(r.body["status"]) != "sync_requested" {
		t.Errorf("sync body %s", r.raw)
	}
	if got, _ := e.store.GetRepo(t.Context(), a.ID); !got.SyncRequested || got.State != store.RepoOK {
		t.Errorf("after sync: %+v", got)
	}
	if n := e.pokes.Load(); n != 1 {
		t.Errorf("pokes after sync = %d, want 1", n)
	}

	r = e.want(e.do("DELETE", "/v1/repos/"+b.ID, nil), 202, "delete")
	if str(r.body["status"]) != "deleting" {
		t.Errorf("delete body %s", r.raw)
	}
	if got, _ := e.store.GetRepo(t.Context(), b.ID); got.State != store.RepoDeleting {
		t.Errorf("after delete: %+v", got)
	}
	if n := e.pokes.Load(); n != 2 {
		t.Errorf("pokes after delete = %d, want 2", n)
	}
	e.want(e.do("DELETE", "/v1/repos/"+b.ID, nil), 202, "delete again")

	// A repo being deleted can be neither synced nor re-added.
	r = e.want(e.do("POST", "/v1/repos/"+b.ID+"/sync", nil), 409, "sync deleting")
	if code, msg := r.errCode(); code != "conflict" || !strings.Contains(msg, "deleted") {
		t.Errorf("error %s: %s", code, msg)
	}
	r = e.want(e.add("https://example.com/d/b"), 409, "re-add deleting")
	if code, msg := r.errCode(); code != "conflict" || !strings.Contains(msg, b.ID) {
		t.Errorf("error %s: %s", code, msg)
	}

	for _, m := range []string{"DELETE /v1/repos/%s", "POST /v1/repos/%s/sync"} {
		method, path, _ := strings.Cut(fmt.Sprintf(m, "00000000000000aa"), " ")
		r = e.want(e.do(method, path, nil), 404, m)
		if code, _ := r.errCode(); code != "not_found" {
			t.Errorf("%s: code %s", m, code)
		}
	}
	if n := e.pokes.Load(); n != 3 {
		t.Errorf("pokes = %d, want 3 (failed writes do not poke)", n)
	}
}

func TestWorkers(t *testing.T) {
	e := newEnv(t)
	seedFleet(t, e)
	r := e.want(e.do("GET", "/v1/workers", nil), 200, "workers")
	ws := r.body["workers"].([]any)
	if len(ws) != 3 {
		t.Fatalf("%d workers: %s", len(ws), r.raw)
	}
	want := []struct {
		id, state string
		slot      float64
		age       float64
	}{{"w-alpha", "active", 0, 2}, {"w-bravo", "active", 1, 45}, {"w-charlie", "suspect", 2, 600}}
	for i, w := range want {
		m := ws[i].(map[string]any)
		if str(m["id"]) != w.id || str(m["state"]) != w.state || num(m["slot"]) != w.slot || num(m["heartbeat_age_seconds"]) != w.age {
			t.Errorf("worker %d = %v, want %+v", i, m, w)
		}
		for _, k := range []string{"started_at", "heartbeat_at", "disk_used", "disk_total", "fetching", "queue_len"} {
			if m[k] == nil {
				t.Errorf("worker %s lacks %s", w.id, k)
			}
		}
	}
	if m := ws[2].(map[string]any); num(m["disk_used"]) != 3<<30 || num(m["queue_len"]) != 20 || num(m["fetching"]) != 2 {
		t.Errorf("worker figures %v", m)
	}
}

func TestRing(t *testing.T) {
	e := newEnv(t)
	r := e.want(e.do("GET", "/v1/ring", nil), 200, "empty ring")
	if num(r.body["version"]) != 0 || len(r.body["members"].([]any)) != 0 || len(r.body["arcs"].([]any)) != 0 || r.body["warmup_until"] != nil {
		t.Errorf("empty ring = %s", r.raw)
	}
	seedFleet(t, e)
	r = e.want(e.do("GET", "/v1/ring", nil), 200, "ring")
	if num(r.body["version"]) != 1 || str(r.body["hash"]) != ring.HashID || num(r.body["tokens"]) < 3 || r.body["arcs_exact"] != true {
		t.Errorf("ring = %s", r.raw)
	}
	total := 0.0
	for _, m := range r.body["members"].([]any) {
		total += num(m.(map[string]any)["share"])
	}
	if math.Abs(total-1) > 1e-9 {
		t.Errorf("shares sum to %v", total)
	}
	checkArcs(t, r.body["arcs"].([]any), []string{"w-alpha", "w-bravo", "w-charlie"})
}

// checkArcs asserts arcs tile [0, 1] in order, neighbours differ, members are known.
func checkArcs(t *testing.T, arcs []any, members []string) {
	t.Helper()
	if len(arcs) == 0 {
		t.Fatal("no arcs")
	}
	prev, prevOwner := 0.0, ""
	for i, a := range arcs {
		x := a.([]any)
		start, end, owner := num(x[0]), num(x[1]), str(x[2])
		if start != prev || end <= start || end > 1 || !slices.Contains(members, owner) || (i > 0 && owner == prevOwner && i != len(arcs)-1) {
			t.Fatalf("arc %d = %v after end %v owner %s", i, x, prev, prevOwner)
		}
		prev, prevOwner = end, owner
	}
	if prev != 1 {
		t.Fatalf("arcs end at %v, want 1", prev)
	}
}

func TestArcsSampledForBigRings(t *testing.T) {
	var ms []store.Member
	var ids []string
	for i := range 120 {
		ms = append(ms, store.Member{ID: fmt.Sprintf("w%03d", i), Slot: i})
		ids = append(ids, ms[i].ID)
	}
	rg, err := ring.New().AddAll(ms...)
	if err != nil {
		t.Fatal(err)
	}
	if rg.NumTokens() <= maxArcs {
		t.Fatalf("ring has only %d tokens; the test needs more than %d", rg.NumTokens(), maxArcs)
	}
	got, exact := arcs(rg)
	if exact || len(got) > maxArcs {
		t.Fatalf("arcs: %d, exact %v", len(got), exact)
	}
	var as []any
	for _, a := range got {
		as = append(as, []any{a[0], a[1], a[2]})
	}
	checkArcs(t, as, ids)
	// Each arc is whole buckets of 1/maxArcs, owned by the owner of each bucket's middle.
	step := ^uint64(0) / maxArcs
	for _, a := range got {
		lo, hi := a[0].(float64)*maxArcs, a[1].(float64)*maxArcs
		if math.Abs(lo-math.Round(lo)) > 1e-6 || math.Abs(hi-math.Round(hi)) > 1e-6 {
			t.Fatalf("arc %v is not whole buckets", a)
		}
		for b := int(math.Round(lo)); b < int(math.Round(hi)); b++ {
			if owner, _ := rg.Owner(uint64(b)*step + step/2); owner != a[2] {
				t.Fatalf("bucket %d drawn for %v, owned by %s", b, a[2], owner)
			}
		}
	}
}

func TestStatus(t *testing.T) {
	e := newEnv(t)
	r := e.want(e.do("GET", "/v1/status", nil), 200, "empty status")
	if r.body["leader"] != nil || num(r.body["repos_total"]) != 0 || len(r.body["stalest"].([]any)) != 0 {
		t.Errorf("empty status = %s", r.raw)
	}
	seedFleet(t, e)
	never := e.seedRepo("https://example.com/st/never", store.RepoCloning, "w-alpha", time.Time{})
	old := e.seedRepo("https://example.com/st/old", store.RepoFailing, "w-bravo", t0.Add(-3*time.Hour))
	e.seedRepo("https://example.com/st/fresh", store.RepoOK, "w-bravo", t0.Add(-time.Minute))
	del := e.seedRepo("https://example.com/st/deleted", store.RepoDeleting, "", time.Time{})
	e.seedRepo("https://example.com/st/pending", store.RepoPending, "", time.Time{})
	for i := range 25 {
		e.seedRepo(fmt.Sprintf("https://example.com/st/ok%02d", i), store.RepoOK, "w-alpha", t0.Add(-time.Duration(i)*time.Second))
	}

	r = e.want(e.do("GET", "/v1/status", nil), 200, "status")
	leader := r.body["leader"].(map[string]any)
	if str(leader["id"]) != "coord-1" || num(leader["term"]) != 1 || str(leader["lease_until"]) != "2025-06-01T12:00:30Z" {
		t.Errorf("leader = %v", leader)
	}
	if num(r.body["ring_version"]) != 1 || num(r.body["repos_total"]) != 30 {
		t.Errorf("ring_version %v repos_total %v", r.body["ring_version"], r.body["repos_total"])
	}
	wantRepos := map[string]float64{"pending": 1, "cloning": 1, "ok": 26, "failing": 1, "gone": 0, "overflow": 0, "deleting": 1}
	if got := r.body["repos_by_state"].(map[string]any); len(got) != len(wantRepos) {
		t.Errorf("repos_by_state = %v", got)
	} else {
		for k, v := range wantRepos {
			if num(got[k]) != v {
				t.Errorf("repos_by_state[%s] = %v, want %v", k, got[k], v)
			}
		}
	}
	wantWorkers := map[string]float64{"joining": 0, "active": 2, "suspect": 1, "dead": 0, "draining": 0}
	for k, v := range wantWorkers {
		if got := r.body["workers_by_state"].(map[string]any); num(got[k]) != v {
			t.Errorf("workers_by_state[%s] = %v, want %v", k, got[k], v)
		}
	}
	stalest := r.body["stalest"].([]any)
	if len(stalest) != 20 {
		t.Fatalf("%d stalest, want 20", len(stalest))
	}
	// Never-succeeded first (the deleting one left out), then the oldest success.
	first, second := stalest[0].(map[string]any), stalest[2].(map[string]any)
	neverIDs := []string{str(first["id"]), str(stalest[1].(map[string]any)["id"])}
	if !slices.Contains(neverIDs, never.ID) || slices.Contains(neverIDs, del.ID) || str(second["id"]) != old.ID {
		t.Errorf("stalest starts %v, %v, %v", first, stalest[1], second)
	}
	if first["last_success_at"] != nil || num(first["age_seconds"]) != 48*3600 {
		t.Errorf("never-succeeded entry %v: want null last_success_at, age since creation", first)
	}
	if num(second["age_seconds"]) != 3*3600 || str(second["owner"]) != "w-bravo" || str(second["url"]) != old.URL || str(second["state"]) != "failing" {
		t.Errorf("stalest[2] = %v", second)
	}
}

func TestAuth(t *testing.T) {
	body := jsonBody(map[string]string{"url": "https://example.com/auth.git"})
	t.Run("writes need the token", func(t *testing.T) {
		e := newEnv(t)
		for _, c := range []struct {
			name string
			opt  reqOpt
			msg  string
		}{
			{"none", noAuth, "missing Authorization"},
			{"wrong", withHeader("Authorization", "Bearer nope"), "invalid bearer token"},
			{"prefix of the token", withHeader("Authorization", "Bearer "+testToken[:4]), "invalid bearer token"},
			{"basic", withHeader("Authorization", "Basic "+testToken), "Bearer scheme"},
		} {
			r := e.want(e.do("POST", "/v1/repos", body, c.opt), 401, c.name)
			if code, msg := r.errCode(); code != "unauthorized" || !strings.Contains(msg, c.msg) {
				t.Errorf("%s: error %s: %s", c.name, code, msg)
			}
			if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
				t.Errorf("%s: WWW-Authenticate %q", c.name, got)
			}
		}
		e.want(e.do("DELETE", "/v1/repos/0123456789abcdef", nil, noAuth), 401, "delete without token")
		e.want(e.do("POST", "/v1/repos/0123456789abcdef/sync", nil, noAuth), 401, "sync without token")
		if n := e.repoCount(); n != 0 || e.pokes.Load() != 0 {
			t.Fatalf("refused writes stored %d repos, poked %d", n, e.pokes.Load())
		}
		e.want(e.do("POST", "/v1/repos", body, withHeader("Authorization", "bearer "+testToken)), 201, "scheme is case-insensitive")
	})
	t.Run("no token configured refuses writes", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.Token = "" })
		r := e.want(e.do("POST", "/v1/repos", body, withHeader("Authorization", "Bearer ")), 401, "empty token")
		if _, msg := r.errCode(); !strings.Contains(msg, "no API token") {
			t.Errorf("message %q", msg)
		}
	})
	t.Run("reads need auth when configured", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.ReadsNeedAuth = true })
		for _, p := range []string{"/v1/repos", "/v1/workers", "/v1/ring", "/v1/status", "/v1/repos/0123456789abcdef"} {
			e.want(e.do("GET", p, nil, noAuth), 401, p)
		}
		e.want(e.do("GET", "/v1/status", nil), 200, "status with token")
		e.want(e.do("GET", "/", nil, noAuth), 200, "page stays open")
		e.want(e.do("GET", "/openapi.yaml", nil, noAuth), 200, "openapi stays open")
	})
	t.Run("custom auth may answer 403", func(t *testing.T) {
		e := newEnv(t, func(c *Config) {
			c.Auth = func(*http.Request) error {
				return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: "role may not write"}
			}
		})
		r := e.want(e.do("POST", "/v1/repos", body), 403, "custom")
		if code, _ := r.errCode(); code != "forbidden" || r.header.Get("WWW-Authenticate") != "" {
			t.Errorf("custom auth error %s, WWW-Authenticate %q", code, r.header.Get("WWW-Authenticate"))
		}
	})
}

func TestRouting(t *testing.T) {
	e := newEnv(t)
	r := e.want(e.do("GET", "/v1/nope", nil), 404, "unknown route")
	if code, msg := r.errCode(); code != "not_found" || !strings.Contains(msg, "/v1/nope") {
		t.Errorf("error %s: %s", code, msg)
	}
	r = e.want(e.do("PUT", "/v1/repos", []byte(`{}`)), 405, "PUT /v1/repos")
	if code, msg := r.errCode(); code != "method_not_allowed" || !strings.Contains(msg, "PUT") {
		t.Errorf("error %s: %s", code, msg)
	}
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "POST") {
		t.Errorf("Allow = %q", allow)
	}
	r = e.want(e.do("DELETE", "/v1/workers", nil), 405, "DELETE /v1/workers")
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") || strings.Contains(allow, "DELETE") {
		t.Errorf("Allow = %q", allow)
	}
	r = e.want(e.do("GET", "/v1/workers?verbose=1", nil), 400, "unknown query parameter")
	if code, msg := r.errCode(); code != "invalid_parameter" || !strings.Contains(msg, "verbose") {
		t.Errorf("error %s: %s", code, msg)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=abc", "limit=", "state=bogus", "limit=%zz"} {
		r = e.want(e.do("GET", "/v1/repos?"+q, nil), 400, q)
		if code, msg := r.errCode(); code != "invalid_parameter" || msg == "" {
			t.Errorf("%s: error %s: %s", q, code, msg)
		}
	}
	if _, msg := e.want(e.do("GET", "/v1/repos?state=bogus", nil), 400, "").errCode(); !strings.Contains(msg, "bogus") || !strings.Contains(msg, "pending") {
		t.Errorf("state message %q should name the value and the valid states", msg)
	}

	page := e.want(e.do("GET", "/", nil), 200, "page")
	if ct := page.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !strings.Contains(string(page.raw), "/ui/app.js") {
		t.Errorf("page: %s\n%.200s", ct, page.raw)
	}
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	for name, ct := range map[string]string{"app.js": "text/javascript", "style.css": "text/css"} {
		a := e.want(e.do("GET", "/ui/"+name, nil), 200, name)
		if !strings.HasPrefix(a.header.Get("Content-Type"), ct) || len(a.raw) < 100 {
			t.Errorf("%s: %s, %d bytes", name, a.header.Get("Content-Type"), len(a.raw))
		}
	}
	for _, p := range []string{"/ui/nope.js", "/ui/index.html", "/ui/..%2fapi.go"} {
		if code, _ := e.want(e.do("GET", p, nil), 404, p).errCode(); code != "not_found" {
			t.Errorf("%s: code %s", p, code)
		}
	}
	spec := e.want(e.do("GET", "/openapi.yaml", nil), 200, "openapi")
	if !strings.HasPrefix(spec.header.Get("Content-Type"), "application/yaml") || !strings.HasPrefix(string(spec.raw), "openapi: 3.1") {
		t.Errorf("openapi: %s", spec.header.Get("Content-Type"))
	}
}

// brokenStore fails ListWorkers and panics in GetRing.
type brokenStore struct{ Store }

func (brokenStore) ListWorkers(context.Context) ([]store.Worker, error) {
	return nil, errors.New("disk on fire")
}

func (brokenStore) GetRing(context.Context) (store.Ring, error) { panic("kaboom") }

func newTestLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func serve(h http.Handler, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

func TestInternalErrorsHideDetail(t *testing.T) {
	e := newEnv(t)
	var logged strings.Builder
	h := New(Config{Store: brokenStore{e.store}, Log: newTestLogger(&logged)})
	for _, p := range []string{"/v1/workers", "/v1/status"} {
		rec := serve(h, "GET", p)
		if rec.Code != 500 || !strings.Contains(rec.Body.String(), `"code":"internal"`) || strings.Contains(rec.Body.String(), "disk on fire") {
			t.Errorf("%s: %d %s", p, rec.Code, rec.Body)
		}
	}
	rec := serve(h, "GET", "/v1/ring")
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "kaboom") {
		t.Errorf("panic: %d %s", rec.Code, rec.Body)
	}
	if !strings.Contains(logged.String(), "disk on fire") || !strings.Contains(logged.String(), "kaboom") {
		t.Errorf("the detail is not logged:\n%s", logged.String())
	}
}

func TestAddRepo(t *testing.T) {
	e := newEnv(t)
	at := t0.Add(-time.Hour)
	res := AddRepo(t.Context(), e.store, urlpolicy.Default(), " https://Example.com/list/one.git ", store.SourceList, at)
	if res.Err != nil || !res.Created || res.Repo.URL != "https://example.com/list/one" || res.Repo.Source != store.SourceList || !res.Repo.CreatedAt.Equal(at) || res.Repo.State != store.RepoPending {
		t.Fatalf("AddRepo = %+v", res)
	}
	if again := AddRepo(t.Context(), e.store, urlpolicy.Default(), "https://example.com/list/one", store.SourceAPI, t0); again.Err != nil || again.Created || again.Repo.Source != store.SourceList {
		t.Fatalf("AddRepo of an existing repo = %+v", again)
	}
	bad := AddRepo(t.Context(), e.store, urlpolicy.Default(), "file:///etc/passwd", store.SourceList, at)
	var ae *Error
	if !errors.As(bad.Err, &ae) || ae.Code != "invalid_url" || ae.Reason != "local_path" || bad.Created {
		t.Fatalf("AddRepo of a file URL = %+v", bad)
	}
	failed := AddRepo(t.Context(), brokenCreate{}, urlpolicy.Default(), "https://example.com/x", store.SourceList, at)
	if failed.Err == nil || errors.As(failed.Err, &ae) || !strings.Contains(failed.Err.Error(), "disk on fire") {
		t.Fatalf("AddRepo with a failing store = %+v", failed)
	}
	if n := e.repoCount(); n != 1 {
		t.Fatalf("store holds %d repos, want 1", n)
	}
}

type brokenCreate struct{}

func (brokenCreate) CreateRepo(context.Context, store.Repo) (store.Repo, bool, error) {
	return store.Repo{}, false, errors.New("disk on fire")
}

func (brokenCreate) GetRepo(context.Context, string) (store.Repo, error) {
	return store.Repo{}, store.ErrNotFound
}

// TestRepoByURL: every /v1/repos/{id} route takes the repo's URL (path-escaped, in any
// form that normalizes to it) in place of its id.
func TestRepoByURL(t *testing.T) {
	e := newEnv(t)
	rp := e.seedRepo("https://example.com/u/one.git", store.RepoOK, "w-alpha", t0)
	for _, u := range []string{"https://example.com/u/one.git", "https://example.com/u/one", "HTTPS://EXAMPLE.COM/u/one/"} {
		r := e.want(e.do("GET", "/v1/repos/"+url.PathEscape(u), nil), 200, "get by URL "+u)
		if str(r.body["id"]) != rp.ID {
			t.Errorf("GET by %s: %s", u, r.raw)
		}
	}
	esc := url.PathEscape("https://example.com/u/one")
	e.want(e.do("POST", "/v1/repos/"+esc+"/sync", nil), 202, "sync by URL")
	if got, _ := e.store.GetRepo(t.Context(), rp.ID); !got.SyncRequested {
		t.Error("sync by URL did not request a sync")
	}
	r := e.want(e.do("GET", "/v1/repos/"+url.PathEscape("https://example.com/u/other"), nil), 404, "unknown URL")
	if code, msg := r.errCode(); code != "not_found" || !strings.Contains(msg, "does not exist") {
		t.Errorf("unknown URL: %s %s", code, msg)
	}
	r = e.want(e.do("GET", "/v1/repos/"+url.PathEscape("file:///etc/passwd"), nil), 400, "refused URL")
	if code, _ := r.errCode(); code != "invalid_url" {
		t.Errorf("refused URL: %s", r.raw)
	}
	r = e.want(e.do("GET", "/v1/repos/not-an-id", nil), 400, "neither")
	if code, msg := r.errCode(); code != "invalid_id" || !strings.Contains(msg, "URL") {
		t.Errorf("neither id nor URL: %s", r.raw)
	}
	e.want(e.do("DELETE", "/v1/repos/"+esc, nil), 202, "delete by URL")
	if got, _ := e.store.GetRepo(t.Context(), rp.ID); got.State != store.RepoDeleting {
		t.Errorf("delete by URL: repo is %s", got.State)
	}
}

// TestStalestNeverFetchedByAge: repos that never succeeded are listed longest waiting
// first (by when they were added), not in the store's id order.
func TestStalestNeverFetchedByAge(t *testing.T) {
	e := newEnv(t)
	var want []string
	for i, age := range []time.Duration{5 * time.Hour, 3 * time.Hour, time.Hour, 30 * time.Minute} {
		u := fmt.Sprintf("https://example.com/never/r%d.git", i)
		_, _, err := e.store.CreateRepo(t.Context(), store.Repo{ID: store.RepoID(u), URL: u, State: store.RepoPending, CreatedAt: t0.Add(-age)})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, u)
	}
	r := e.want(e.do("GET", "/v1/status", nil), 200, "status")
	var st Status
	if err := json.Unmarshal(r.raw, &st); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range st.Stalest {
		got = append(got, s.URL)
	}
	if !slices.Equal(got, want) {
		t.Errorf("stalest = %v, want %v", got, want)
	}
}

// TestNextPoll: a repo's next poll comes from NextPoll (its worker) on GET of the repo,
// and is absent where there is none to ask or it cannot say.
func TestNextPoll(t *testing.T) {
	due := time.Date(2026, 7, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	var asked []string
	e := newEnv(t, func(c *Config) {
		c.NextPoll = func(id string) (time.Time, bool) {
			asked = append(asked, id)
			return due, id != "" && len(asked) == 1
		}
	})
	id := str(e.want(e.add("https://example.com/a/next.git"), 201, "add").body["id"])
	r := e.want(e.do("GET", "/v1/repos/"+id, nil), 200, "get")
	if got := str(r.body["next_poll_at"]); got != "2026-07-01T10:00:00Z" {
		t.Errorf("next_poll_at = %q, want the worker's estimate in UTC", got)
	}
	if !slices.Equal(asked, []string{id}) {
		t.Errorf("asked for %v, want %s", asked, id)
	}
	r = e.want(e.do("GET", "/v1/repos/"+id, nil), 200, "get")
	if _, ok := r.body["next_poll_at"]; ok {
		t.Errorf("next_poll_at present when the worker cannot say: %v", r.body["next_poll_at"])
	}
	plain := newEnv(t)
	id = str(plain.want(plain.add("https://example.com/a/next.git"), 201, "add").body["id"])
	if r := plain.want(plain.do("GET", "/v1/repos/"+id, nil), 200, "get"); r.body["next_poll_at"] != nil || r.body["poll_stretch"] != nil {
		t.Errorf("next_poll_at, or poll_stretch before a fetch, without a worker to ask: %v, %v", r.body["next_poll_at"], r.body["poll_stretch"])
	}
}

// TestPollStretch: GET of a repo shows the factor its worker puts on its poll step, and
// nothing where the worker cannot say.
func TestPollStretch(t *testing.T) {
	stretch := map[string]float64{}
	e := newEnv(t, func(c *Config) {
		c.PollStretch = func(id string) (float64, bool) { f, ok := stretch[id]; return f, ok }
	})
	hooked := str(e.want(e.add("https://example.com/a/hooked.git"), 201, "add").body["id"])
	other := str(e.want(e.add("https://example.com/a/other.git"), 201, "add").body["id"])
	stretch[hooked] = 10
	if r := e.want(e.do("GET", "/v1/repos/"+hooked, nil), 200, "get"); r.body["poll_stretch"] != 10.0 {
		t.Errorf("poll_stretch = %v, want 10", r.body["poll_stretch"])
	}
	if r := e.want(e.do("GET", "/v1/repos/"+other, nil), 200, "get"); r.body["poll_stretch"] != nil {
		t.Errorf("poll_stretch of a repo no worker holds: %v", r.body["poll_stretch"])
	}
}

// TestPollStretchFromTheRecord: where no worker is in process (AWS), GET of a repo shows
// the stretch its last written fetch report carried; 1 when none, nothing before its
// first fetch.
func TestPollStretchFromTheRecord(t *testing.T) {
	e := newEnv(t)
	hooked := e.seedRepo("https://git.example.org/a/hooked.git", store.RepoOK, "w1", t0.Add(-time.Hour))
	plain := e.seedRepo("https://git.example.org/a/plain.git", store.RepoOK, "w1", t0.Add(-time.Hour))
	fresh := e.seedRepo("https://git.example.org/a/fresh.git", store.RepoCloning, "w1", time.Time{})
	for _, c := range []struct {
		r       store.Repo
		stretch float64
	}{{hooked, 10}, {plain, 0}} {
		if err := e.store.ReportFetch(t.Context(), c.r.ID, "w1", c.r.OwnerEpoch, store.FetchReport{State: store.RepoOK,
			LastFetchAt: t0.Add(-time.Minute), LastSuccessAt: t0.Add(-time.Minute), PollStretch: c.stretch}); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string]any{hooked.ID: 10.0, plain.ID: 1.0, fresh.ID: nil} {
		if r := e.want(e.do("GET", "/v1/repos/"+id, nil), 200, "get"); r.body["poll_stretch"] != want {
			t.Errorf("poll_stretch of %s = %v, want %v", id, r.body["poll_stretch"], want)
		}
	}
}
