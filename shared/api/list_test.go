package api

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// fakeList is an api.ListSync that records confirmations.
type fakeList struct {
	st        ListStatus
	confirmed []string
	err       error
}

func (f *fakeList) ListStatus(context.Context) (ListStatus, error) { return f.st, nil }

func (f *fakeList) ConfirmPurge(_ context.Context, commit string) (ListStatus, error) {
	if f.err != nil {
		return ListStatus{}, f.err
	}
	f.confirmed = append(f.confirmed, commit)
	st := f.st
	if st.HeldPurge != nil {
		h := *st.HeldPurge
		h.Confirmed = true
		st.HeldPurge = &h
	}
	return st, nil
}

const heldCommit = "3f2c1a9d0b7e5c4d3f2c1a9d0b7e5c4d3f2c1a9d"

func sampleListStatus() ListStatus {
	repo, commit, branch := "https://git.example.org/mirrors/list", heldCommit, "main"
	at := t0.Add(-time.Minute)
	return ListStatus{
		Configured: true, Message: "purge held", Repo: &repo, Branch: &branch, Paths: []string{"repos.txt"},
		IntervalSeconds: ptr(60.0), PurgeThresholdPercent: ptr(5.0), Commit: &commit, AppliedAt: &at, Entries: 20,
		LastChange: &ListChange{Mode: "diff", Added: 2, Removed: 0},
		BadLines:   []ListBadLine{{File: "repos.txt", Line: 3, Text: "not a url", Reason: "malformed"}}, BadTotal: 1,
		HeldPurge: &ListHeldPurge{Commit: commit, Remove: 20, Of: 40, Percent: 50, ThresholdPercent: 5, Since: at,
			Sample: []string{"https://git.example.org/a"}},
		Pending: []string{}, LastAttemptAt: &at,
	}
}

func TestListNotConfigured(t *testing.T) {
	e := newEnv(t)
	r := e.want(e.do("GET", "/v1/list", nil), 200, "GET /v1/list without a list")
	if r.body["configured"] != false || !strings.Contains(str(r.body["message"]), "--list-repo") || r.body["commit"] != nil {
		t.Fatalf("body %s", r.raw)
	}
	checkSchemaKeys(t, "ListStatus", r.body)
	r = e.want(e.do("POST", "/v1/list/confirm", jsonBody(map[string]string{"commit": heldCommit})), 409, "confirm without a list")
	if code, msg := r.errCode(); code != "conflict" || !strings.Contains(msg, "no list repository") {
		t.Fatalf("error %s: %s", code, msg)
	}
	if e.pokes.Load() != 0 {
		t.Fatal("a refused confirmation poked the coordinator")
	}
}

func TestListStatusAndConfirm(t *testing.T) {
	fl := &fakeList{st: sampleListStatus()}
	e := newEnv(t, func(c *Config) { c.List = fl })
	r := e.want(e.do("GET", "/v1/list", nil, noAuth), 200, "GET /v1/list")
	checkSchemaKeys(t, "ListStatus", r.body)
	held, _ := r.body["held_purge"].(map[string]any)
	if held["commit"] != heldCommit || held["remove"] != 20.0 || held["confirmed"] != false || r.body["bad_lines_total"] != 1.0 {
		t.Fatalf("body %s", r.raw)
	}

	for _, c := range []struct {
		body, code, mention string
		status              int
	}{
		{`{}`, "invalid_request", `"commit"`, 400},
		{`{"commit":"xyz"}`, "invalid_request", "xyz", 400},
		{`{"commit":"abc"}`, "invalid_request", "7 hex", 400},
		{`{"commit":5}`, "invalid_json", "string", 400},
		{`{"commit":"abcdef0","force":true}`, "unknown_field", "force", 400},
	} {
		r := e.want(e.do("POST", "/v1/list/confirm", []byte(c.body)), c.status, c.body)
		if code, msg := r.errCode(); code != c.code || !strings.Contains(msg, c.mention) {
			t.Errorf("%s: error %s: %s", c.body, code, msg)
		}
	}
	e.want(e.do("POST", "/v1/list/confirm", jsonBody(map[string]string{"commit": heldCommit}), noAuth), 401, "confirm without the token")
	if len(fl.confirmed) != 0 || e.pokes.Load() != 0 {
		t.Fatalf("refused requests confirmed %v, poked %d", fl.confirmed, e.pokes.Load())
	}

	r = e.want(e.do("POST", "/v1/list/confirm", jsonBody(map[string]string{"commit": strings.ToUpper(heldCommit[:12])})), 202, "confirm")
	checkSchemaKeys(t, "ListStatus", r.body)
	if held, _ := r.body["held_purge"].(map[string]any); held["confirmed"] != true {
		t.Fatalf("body %s", r.raw)
	}
	if !slices.Equal(fl.confirmed, []string{heldCommit[:12]}) || e.pokes.Load() != 1 {
		t.Fatalf("confirmed %v, poked %d", fl.confirmed, e.pokes.Load())
	}

	// The implementation's own refusals pass through.
	fl.err = &Error{Status: http.StatusConflict, Code: "conflict", Message: "the held purge is for commit X"}
	if code, _ := e.want(e.do("POST", "/v1/list/confirm", jsonBody(map[string]string{"commit": "abcdef0"})), 409, "other commit").errCode(); code != "conflict" {
		t.Fatalf("code %s", code)
	}

	locked := newEnv(t, func(c *Config) { c.List = fl; c.ReadsNeedAuth = true })
	locked.want(locked.do("GET", "/v1/list", nil, noAuth), 401, "GET /v1/list with reads protected")
	locked.want(locked.do("GET", "/v1/list", nil), 200, "GET /v1/list with the token")
}

// checkSchemaKeys checks that body has exactly the properties openapi.yaml documents
// for the schema, every required one present.
func checkSchemaKeys(t *testing.T, schema string, body map[string]any) {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(openapiYAML, &doc); err != nil {
		t.Fatal(err)
	}
	sch, _ := resolve(doc, "#/components/schemas/"+schema).(map[string]any)
	props, _ := sch["properties"].(map[string]any)
	if len(props) == 0 {
		t.Fatalf("schema %s has no properties", schema)
	}
	documented := slices.Sorted(maps.Keys(props))
	got := slices.Sorted(maps.Keys(body))
	if !slices.Equal(documented, got) {
		t.Fatalf("%s: response has %v, openapi.yaml documents %v", schema, got, documented)
	}
	for _, r := range sch["required"].([]any) {
		if _, ok := body[r.(string)]; !ok {
			t.Errorf("%s: required %s missing", schema, r)
		}
	}
}
