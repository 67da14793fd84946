package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 512: "512", 1536: "1.5K", 12897485: "12.3M", 2 << 30: "2.0G", 3 << 40: "3.0T"} {
		if got := humanSize(n); got != want {
			t.Errorf("humanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestTunasyncJSON reads /tunasync.json whole and in pages: every repo once, with
// tunasync's fields, the status mapped from the state, the size human-readable.
func TestTunasyncJSON(t *testing.T) {
	e := newEnv(t)
	ok := e.seedRepo("https://git.example.org/a/ok.git", store.RepoOK, "w1", t0.Add(-time.Hour))
	if err := e.store.ReportFetch(t.Context(), ok.ID, "w1", ok.OwnerEpoch, store.FetchReport{State: store.RepoOK,
		LastFetchAt: t0.Add(-time.Minute), LastSuccessAt: t0.Add(-time.Minute), SizeBytes: 12897485}); err != nil {
		t.Fatal(err)
	}
	e.seedRepo("https://git.example.org/a/gone.git", store.RepoGone, "w1", time.Time{})
	e.seedRepo("https://git.example.org/a/new.git", store.RepoPending, "", time.Time{})
	for i := range 7 {
		e.seedRepo(fmt.Sprintf("https://git.example.org/b/r%d", i), store.RepoCloning, "w2", time.Time{})
	}

	r := rawGet(t, e, "/tunasync.json", true)
	var jobs []map[string]any
	if err := json.Unmarshal(r.raw, &jobs); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, r.raw)
	}
	if len(jobs) != 10 {
		t.Fatalf("%d jobs, want 10", len(jobs))
	}
	byName := map[string]map[string]any{}
	for _, j := range jobs {
		for _, k := range []string{"name", "status", "last_update", "last_update_ts", "last_started_ts", "last_ended_ts", "next_schedule_ts", "upstream", "size"} {
			if _, present := j[k]; !present {
				t.Errorf("job %v lacks %s", j["name"], k)
			}
		}
		byName[str(j["name"])] = j
	}
	okJob := byName["git.example.org/a/ok.git"]
	if okJob == nil || okJob["status"] != "success" || okJob["size"] != "12.3M" || okJob["upstream"] != "https://git.example.org/a/ok" ||
		num(okJob["last_update_ts"]) != float64(t0.Add(-time.Minute).Unix()) || okJob["last_update"] != "2025-06-01 11:59:00 +0000" {
		t.Errorf("the ok repo's job: %v", okJob)
	}
	for name, want := range map[string]string{"git.example.org/a/gone.git": "failed", "git.example.org/a/new.git": "pre-syncing", "git.example.org/b/r0.git": "syncing"} {
		if j := byName[name]; j == nil || j["status"] != want {
			t.Errorf("job %s: %v, want status %s", name, j, want)
		}
	}

	// Paged: the Link header walks every repo once.
	seen := map[string]bool{}
	next := "/tunasync.json?limit=3"
	for pages := 0; next != ""; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		r := rawGet(t, e, next, true)
		var page []map[string]any
		if err := json.Unmarshal(r.raw, &page); err != nil || len(page) > 3 {
			t.Fatalf("%s: %d jobs, %v", next, len(page), err)
		}
		for _, j := range page {
			if seen[str(j["name"])] {
				t.Errorf("%s listed twice", j["name"])
			}
			seen[str(j["name"])] = true
		}
		next = ""
		if link := r.header.Get("Link"); link != "" {
			next = strings.TrimPrefix(strings.Split(link, ">")[0], "<")
		}
	}
	if len(seen) != 10 {
		t.Errorf("paging saw %d jobs, want 10", len(seen))
	}

	// An empty fleet is an empty array; reads that need a token need one here too.
	empty := newEnv(t)
	if r := rawGet(t, empty, "/tunasync.json", true); strings.TrimSpace(string(r.raw)) != "[]" {
		t.Errorf("empty fleet: %q", r.raw)
	}
	locked := newEnv(t, func(c *Config) { c.ReadsNeedAuth = true })
	if r := rawGet(t, locked, "/tunasync.json", false); r.status != http.StatusUnauthorized {
		t.Errorf("without the token reads need: %d %s", r.status, r.raw)
	}
	if r := rawGet(t, locked, "/tunasync.json?limit=0", true); r.status != http.StatusBadRequest {
		t.Errorf("limit=0: %d %s", r.status, r.raw)
	}
	if r := rawGet(t, locked, "/tunasync.json", true); r.status != http.StatusOK {
		t.Errorf("with the token: %d %s", r.status, r.raw)
	}
}

// rawGet sends a GET through the handler without decoding the body.
func rawGet(t *testing.T, e *env, path string, auth bool) resp {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	if auth {
		req.Header.Set("Authorization", "Bearer "+testToken)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return resp{status: rec.Code, header: rec.Header(), raw: rec.Body.Bytes()}
}
