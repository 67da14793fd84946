package api

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/repos"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// FuzzCreateRepo posts arbitrary bodies: the handler must never fail with a 5xx (or
// panic), and whatever it stores must be exactly Policy.Normalize of a URL it was sent.
func FuzzCreateRepo(f *testing.F) {
	for _, s := range []string{
		`{"url":"https://github.com/git/git.git"}`,
		`{"url":"HTTPS://GitHub.com:443/git/git/"}`,
		`{"urls":["https://a.example/x","file:///etc/passwd","https://a.example/x.git","http://[::1]/x"]}`,
		`{"url":"ext::sh -c id"}`,
		`{"url":"https://user:pw@host.example/x"}`,
		`{"url":"http://169.254.169.254/latest/meta-data"}`,
		`{"url":"git@github.com:git/git.git"}`,
		`{"url":"https://xn--e1afmkfd.example/\u0000"}`,
		`{"url":"https://a.example/%2e%2e/x"}`,
		`{"url":5}`, `{"urls":[1,null]}`, `{"urls":null,"url":null}`, `null`, `[]`, `"x"`,
		`{"url":"https://a.example/x"} trailing`, `{"url":"https://a.example/x","x":1}`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	e := newEnv(f, func(c *Config) { c.MaxBulk = 50 })
	policy := urlpolicy.Default()
	count := func(t *testing.T) int {
		counts, err := e.store.CountRepos(t.Context())
		if err != nil {
			t.Fatalf("CountRepos: %v", err)
		}
		n := 0
		for _, k := range counts {
			n += k
		}
		return n
	}
	// checkStored asserts id is stored under exactly Normalize(raw).
	checkStored := func(t *testing.T, raw, id string) {
		want, err := policy.Normalize(raw)
		if err != nil {
			t.Fatalf("accepted %q, which Normalize refuses: %v", raw, err)
		}
		r, err := e.store.GetRepo(t.Context(), id)
		if err != nil {
			t.Fatalf("accepted %q as %s, not in the store: %v", raw, id, err)
		}
		// On a host whose paths are case-insensitive an earlier add may hold the repo
		// in another case.
		if !repos.SameRepo(policy, r.URL, want) || r.ID != repos.ID(policy, want) {
			t.Fatalf("accepted %q: stored %q under %s, want %q under %s", raw, r.URL, r.ID, want, repos.ID(policy, want))
		}
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		before := count(t)
		req := httptest.NewRequest("POST", "/v1/repos", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d for body %q: %s", rec.Code, body, rec.Body)
		}
		var resp map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("status %d, response is not JSON: %v\n%s", rec.Code, err, rec.Body)
		}
		created := 0
		switch rec.Code {
		case 200, 201:
			// The handler accepted the body, so it decodes strictly here too.
			var cr createRequest
			if err := json.Unmarshal(body, &cr); err != nil {
				t.Fatalf("accepted a body encoding/json refuses: %v", err)
			}
			if cr.URL != nil {
				checkStored(t, *cr.URL, str(resp["id"]))
				if rec.Code == 201 {
					created = 1
				}
				break
			}
			results, _ := resp["results"].([]any)
			if cr.URLs == nil || len(results) != len(*cr.URLs) {
				t.Fatalf("bulk answer %s for %q", rec.Body, body)
			}
			for i, x := range results {
				res := x.(map[string]any)
				if str(res["url"]) != (*cr.URLs)[i] {
					t.Fatalf("result %d is for %q, sent %q", i, res["url"], (*cr.URLs)[i])
				}
				switch str(res["status"]) {
				case "created":
					created++
					checkStored(t, (*cr.URLs)[i], str(res["id"]))
				case "exists":
					checkStored(t, (*cr.URLs)[i], str(res["id"]))
				case "error":
				default:
					t.Fatalf("result %d status %v", i, res["status"])
				}
			}
			if int(num(resp["created"])) != created {
				t.Fatalf("created = %v, counted %d", resp["created"], created)
			}
		default:
			if e, _ := resp["error"].(map[string]any); str(e["code"]) == "" || str(e["message"]) == "" {
				t.Fatalf("status %d without an error code and message: %s", rec.Code, rec.Body)
			}
		}
		if after := count(t); after != before+created {
			t.Fatalf("store went from %d to %d repos, but %d were reported created (body %q)", before, after, created, body)
		}
	})
}
