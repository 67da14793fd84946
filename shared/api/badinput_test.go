package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

func TestBadInput(t *testing.T) {
	huge := `{"url":"https://example.com/` + strings.Repeat("a", MaxBodyBytes) + `"}`
	cases := []struct {
		name         string
		method, path string
		body         string
		opts         []reqOpt
		status       int
		code, reason string
		mention      []string // the message must contain each
		hide         string   // and must not contain this
	}{
		{name: "file URL", body: `{"url":"file:///etc/passwd"}`, status: 400, code: "invalid_url", reason: "local_path", mention: []string{"file:///etc/passwd", "file"}},
		{name: "local path", body: `{"url":"/etc"}`, status: 400, code: "invalid_url", reason: "local_path", mention: []string{"/etc"}},
		{name: "credentials", body: `{"url":"https://user:pw@host.example/x.git"}`, status: 400, code: "invalid_url", reason: "credentials", mention: []string{"credential"}, hide: "pw@"},
		{name: "metadata host", body: `{"url":"http://169.254.169.254/latest"}`, status: 400, code: "invalid_url", reason: "metadata_host", mention: []string{"169.254.169.254"}},
		{name: "loopback", body: `{"url":"http://127.0.0.1/x"}`, status: 400, code: "invalid_url", reason: "private_host", mention: []string{"127.0.0.1"}},
		{name: "ssh not enabled", body: `{"url":"ssh://git@host.example/x.git"}`, status: 400, code: "invalid_url", reason: "scheme", mention: []string{"ssh"}},
		{name: "remote helper", body: `{"url":"ext::sh -c touch% /tmp/pwned"}`, status: 400, code: "invalid_url", reason: "scheme", mention: []string{"ext::"}},
		{name: "control character", body: `{"url":"https://host.example/a\nb"}`, status: 400, code: "invalid_url", reason: "malformed", mention: []string{"U+000A"}},
		{name: "empty url", body: `{"url":""}`, status: 400, code: "invalid_url", reason: "malformed", mention: []string{"empty"}},
		{name: "body too large", body: huge, status: 413, code: "body_too_large", mention: []string{"1048576", "1 MiB"}},
		{name: "malformed JSON", body: `{"url": "https://a.example/x",}`, status: 400, code: "invalid_json", mention: []string{"after 31 bytes", "invalid character '}'"}},
		{name: "not an object", body: `["https://a.example/x"]`, status: 400, code: "invalid_json", mention: []string{"JSON object", "array"}},
		{name: "wrong field type", body: `{"url": 5}`, status: 400, code: "invalid_json", mention: []string{`"url"`, "string", "number"}},
		{name: "wrong element type", body: `{"urls": ["https://a.example/x", 7]}`, status: 400, code: "invalid_json", mention: []string{`"urls"`, "number"}},
		{name: "truncated JSON", body: `{"url": "https://a.exa`, status: 400, code: "invalid_json", mention: []string{"ends in the middle"}},
		{name: "empty body", body: ``, status: 400, code: "invalid_json", mention: []string{"empty"}},
		{name: "unknown field", body: `{"url":"https://a.example/x","force":true}`, status: 400, code: "unknown_field", mention: []string{`"force"`}},
		{name: "trailing garbage", body: `{"url":"https://a.example/x"} xyz`, status: 400, code: "invalid_json", mention: []string{"after the JSON value"}},
		{name: "two values", body: `{"url":"https://a.example/x"}{"url":"https://a.example/y"}`, status: 400, code: "invalid_json", mention: []string{"after the JSON value"}},
		{name: "wrong content type", body: `{"url":"https://a.example/x"}`, opts: []reqOpt{withHeader("Content-Type", "application/xml")}, status: 415, code: "unsupported_media_type", mention: []string{"application/xml", "application/json"}},
		{name: "form body under curl's default type", body: `url=https://a.example/x`, opts: []reqOpt{withHeader("Content-Type", "application/x-www-form-urlencoded")}, status: 400, code: "invalid_json", mention: []string{"not JSON", "JSON object"}},
		{name: "multipart", body: `{"url":"https://a.example/x"}`, opts: []reqOpt{withHeader("Content-Type", "multipart/form-data; boundary=x")}, status: 415, code: "unsupported_media_type", mention: []string{"multipart/form-data", "application/json"}},
		{name: "no token", body: `{"url":"https://a.example/x"}`, opts: []reqOpt{noAuth}, status: 401, code: "unauthorized", mention: []string{"Authorization"}},
		{name: "wrong token", body: `{"url":"https://a.example/x"}`, opts: []reqOpt{withHeader("Authorization", "Bearer "+testToken+"x")}, status: 401, code: "unauthorized", mention: []string{"invalid bearer token"}},
		{name: "bad id", method: "GET", path: "/v1/repos/not-an-id", status: 400, code: "invalid_id", mention: []string{"not-an-id", "16 lowercase hex"}},
		{name: "uppercase id", method: "GET", path: "/v1/repos/0123456789ABCDEF", status: 400, code: "invalid_id", mention: []string{"0123456789ABCDEF"}},
		{name: "bad id delete", method: "DELETE", path: "/v1/repos/abc", status: 400, code: "invalid_id", mention: []string{`"abc"`}},
		{name: "bad id sync", method: "POST", path: "/v1/repos/0123456789abcdeg/sync", status: 400, code: "invalid_id", mention: []string{"0123456789abcdeg"}},
		{name: "unknown route", method: "GET", path: "/v2/repos", status: 404, code: "not_found", mention: []string{"/v2/repos"}},
		{name: "invalid UTF-8", body: "{\"url\":\"https://a.example/x\xff\"}", status: 400, code: "invalid_json", mention: []string{"UTF-8", "offset 27"}},
		{name: "lone surrogate", body: `{"url":"https://a.example/x\ud800"}`, status: 400, code: "invalid_json", mention: []string{"surrogate", "offset 27"}},
		{name: "lone low surrogate", body: `{"urls":["https://a.example/\udc00y"]}`, status: 400, code: "invalid_json", mention: []string{"surrogate"}},
		{name: "duplicate key", body: `{"url":"https://a.example/x","url":"https://a.example/y"}`, status: 400, code: "duplicate_field", mention: []string{`"url"`, "twice"}},
		{name: "duplicate key escaped", body: `{"url":"https://a.example/x","\u0075rl":"https://a.example/y"}`, status: 400, code: "duplicate_field", mention: []string{`"url"`}},
		{name: "duplicate key nested", body: `{"list":[{"a":1,"a":2}]}`, status: 400, code: "unknown_field", mention: []string{`"list"`}},
		{name: "field name case", body: `{"URL":"https://a.example/x"}`, status: 400, code: "unknown_field", mention: []string{`"URL"`, "case-sensitive", `"url"`}},
		{name: "field name case bulk", body: `{"Urls":["https://a.example/x"]}`, status: 400, code: "unknown_field", mention: []string{`"Urls"`, `"urls"`}},
		{name: "unknown route POST", method: "POST", path: "/v1/repos/0123456789abcdef/refresh", body: `{}`, status: 404, code: "not_found", mention: []string{"/refresh"}},
	}
	e := newEnv(t)
	e.seedRepo("https://example.com/already/there", store.RepoOK, "", t0)
	before := e.storedRepos()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method, path := c.method, c.path
			if method == "" {
				method, path = "POST", "/v1/repos"
			}
			var body []byte
			if c.body != "" || method == "POST" {
				body = []byte(c.body)
			}
			r := e.do(method, path, body, c.opts...)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %.300s", r.status, c.status, r.raw)
			}
			code, msg := r.errCode()
			if code != c.code {
				t.Errorf("code %q, want %q: %.300s", code, c.code, r.raw)
			}
			if reason := str(r.body["error"].(map[string]any)["reason"]); reason != c.reason {
				t.Errorf("reason %q, want %q", reason, c.reason)
			}
			for _, m := range c.mention {
				if !strings.Contains(msg, m) {
					t.Errorf("message %q does not mention %q", msg, m)
				}
			}
			if c.hide != "" && strings.Contains(string(r.raw), c.hide) {
				t.Errorf("response leaks %q: %s", c.hide, r.raw)
			}
			if len(msg) > 600 {
				t.Errorf("message is %d bytes long", len(msg))
			}
		})
	}
	after := e.storedRepos()
	if len(after) != len(before) || after[0].ID != before[0].ID || after[0].State != store.RepoOK {
		t.Fatalf("bad input changed the store: before %+v, after %+v", before, after)
	}
	if n := e.pokes.Load(); n != 0 {
		t.Errorf("bad input poked the coordinator %d times", n)
	}
}

func TestPrivateHostsWhenAllowed(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Policy.AllowPrivateHosts = true })
	r := e.want(e.add("http://127.0.0.1/x"), 201, "loopback with AllowPrivateHosts")
	if str(r.body["url"]) != "http://127.0.0.1/x" {
		t.Errorf("stored url %v", r.body["url"])
	}
	// Metadata endpoints stay refused even then.
	r = e.want(e.add("http://169.254.169.254/latest"), 400, "metadata with AllowPrivateHosts")
	if reason := str(r.body["error"].(map[string]any)["reason"]); reason != "metadata_host" {
		t.Errorf("reason %q", reason)
	}
	if n := e.repoCount(); n != 1 {
		t.Errorf("store holds %d repos, want 1", n)
	}
}

// TestJSONWithoutContentType: what plain clients send by default is read as JSON:
// `curl -d` (application/x-www-form-urlencoded), a fetch of a string (text/plain), or no
// Content-Type at all.
func TestJSONWithoutContentType(t *testing.T) {
	e := newEnv(t)
	for i, ct := range []string{"", "application/x-www-form-urlencoded", "text/plain;charset=UTF-8"} {
		url := fmt.Sprintf("https://example.com/plain/r%d", i)
		r := e.want(e.do("POST", "/v1/repos", []byte(`{"url":"`+url+`"}`), func(r *http.Request) {
			r.Header.Del("Content-Type")
			if ct != "" {
				r.Header.Set("Content-Type", ct)
			}
		}), 201, "Content-Type "+ct)
		if !strings.Contains(string(r.raw), `"url":"`+url+`"`) {
			t.Errorf("Content-Type %q: %s", ct, r.raw)
		}
	}
}
