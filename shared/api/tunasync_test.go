package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
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

// The types below decode /tunasync.json as tunasync's own Go types do
// (github.com/tuna/tunasync internal/status_web.go and status.go, written again here
// to the same semantics): a text time is parsed with the layout
// "2006-01-02 15:04:05 -0700" inside its quotes, a stamp is strconv.Atoi of the JSON
// number, and a status is one of seven quoted names. tunasynctl and any Go client built
// on these fail on the whole list as soon as one job does not decode.

type tunaTextTime struct{ time.Time }

func (t *tunaTextTime) UnmarshalJSON(b []byte) error {
	v, err := time.Parse(`"2006-01-02 15:04:05 -0700"`, string(b))
	*t = tunaTextTime{v}
	return err
}

type tunaStampTime struct{ time.Time }

func (t *tunaStampTime) UnmarshalJSON(b []byte) error {
	n, err := strconv.Atoi(string(b))
	if err != nil {
		return err
	}
	*t = tunaStampTime{time.Unix(int64(n), 0)}
	return nil
}

type tunaSyncStatus uint8

func (s *tunaSyncStatus) UnmarshalJSON(b []byte) error {
	for i, name := range []string{"none", "failed", "success", "syncing", "pre-syncing", "paused", "disabled"} {
		if string(b) == `"`+name+`"` {
			*s = tunaSyncStatus(i)
			return nil
		}
	}
	return fmt.Errorf("Invalid status value: %s", b)
}

type tunaWebMirrorStatus struct {
	Name          string         `json:"name"`
	IsMaster      bool           `json:"is_master"`
	Status        tunaSyncStatus `json:"status"`
	LastUpdate    tunaTextTime   `json:"last_update"`
	LastUpdateTs  tunaStampTime  `json:"last_update_ts"`
	LastStarted   tunaTextTime   `json:"last_started"`
	LastStartedTs tunaStampTime  `json:"last_started_ts"`
	LastEnded     tunaTextTime   `json:"last_ended"`
	LastEndedTs   tunaStampTime  `json:"last_ended_ts"`
	Scheduled     tunaTextTime   `json:"next_schedule"`
	ScheduledTs   tunaStampTime  `json:"next_schedule_ts"`
	Upstream      string         `json:"upstream"`
	Size          string         `json:"size"`
}

// TestTunasyncDecodesWithTunasyncsTypes: a healthy repo, a gone one and one never
// synced decode with tunasync's types; a time that never came is the zero time, as
// tunasync writes it ("0001-01-01 00:00:00 +0000", stamp -62135596800).
func TestTunasyncDecodesWithTunasyncsTypes(t *testing.T) {
	e := newEnv(t)
	ok := e.seedRepo("https://git.example.org/a/ok.git", store.RepoOK, "w1", t0.Add(-time.Hour))
	if err := e.store.ReportFetch(t.Context(), ok.ID, "w1", ok.OwnerEpoch, store.FetchReport{State: store.RepoOK,
		LastFetchAt: t0.Add(-time.Minute), LastSuccessAt: t0.Add(-time.Minute), SizeBytes: 4096}); err != nil {
		t.Fatal(err)
	}
	e.seedRepo("https://git.example.org/a/gone.git", store.RepoGone, "w1", time.Time{})
	e.seedRepo("https://git.example.org/a/never.git", store.RepoPending, "", time.Time{})
	r := rawGet(t, e, "/tunasync.json", true)
	var jobs []tunaWebMirrorStatus
	if err := json.Unmarshal(r.raw, &jobs); err != nil {
		t.Fatalf("tunasync's types do not decode /tunasync.json: %v\n%s", err, r.raw)
	}
	byName := map[string]tunaWebMirrorStatus{}
	for _, j := range jobs {
		byName[j.Name] = j
	}
	healthy := byName["git.example.org/a/ok.git"]
	if healthy.Status != 2 || !healthy.LastUpdate.Equal(t0.Add(-time.Minute)) || healthy.LastUpdateTs.Unix() != t0.Add(-time.Minute).Unix() {
		t.Errorf("healthy repo: %+v", healthy)
	}
	zero := time.Time{}
	for _, name := range []string{"git.example.org/a/gone.git", "git.example.org/a/never.git"} {
		j, found := byName[name]
		if !found {
			t.Fatalf("%s not listed", name)
		}
		if !j.LastUpdate.Equal(zero) || j.LastUpdateTs.Unix() != zero.Unix() || !j.Scheduled.Equal(zero) {
			t.Errorf("%s: last update %v (%d), next %v; want the zero time", name, j.LastUpdate, j.LastUpdateTs.Unix(), j.Scheduled)
		}
	}
	if byName["git.example.org/a/gone.git"].Status != 1 || byName["git.example.org/a/never.git"].Status != 4 {
		t.Errorf("statuses: %+v", byName)
	}
	// Byte for byte what tunasync writes for a time that never came.
	if !strings.Contains(string(r.raw), `"last_update":"0001-01-01 00:00:00 +0000","last_update_ts":-62135596800`) {
		t.Errorf("the zero time is not written as tunasync writes it:\n%s", r.raw)
	}
}
