package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// hookEnv is the webhook receiver on a real bbolt store, recording the rings.
type hookEnv struct {
	t     *testing.T
	store *bolt.Store
	srv   *httptest.Server
	mu    sync.Mutex
	rung  []string
	owner []bool // each ring's ownerLevel
	h     http.Handler
}

func newHookEnv(t *testing.T, mod func(*HookConfig)) *hookEnv {
	t.Helper()
	s, err := bolt.OpenWith(filepath.Join(t.TempDir(), "fleet.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	e := &hookEnv{t: t, store: s}
	cfg := HookConfig{Store: s, Policy: urlpolicy.Default(), Secret: "topsecret",
		Ring: func(_ context.Context, id string, ownerLevel bool) {
			e.mu.Lock()
			e.rung, e.owner = append(e.rung, id), append(e.owner, ownerLevel)
			e.mu.Unlock()
		},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mod != nil {
		mod(&cfg)
	}
	e.h = NewHooks(cfg)
	mux := http.NewServeMux()
	mux.Handle(HookPrefix, e.h)
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

// add stores a mirrored repo and returns its id.
func (e *hookEnv) add(raw string) string {
	e.t.Helper()
	n, err := urlpolicy.Default().Normalize(raw)
	if err != nil {
		e.t.Fatal(err)
	}
	r, _, err := e.store.CreateRepo(context.Background(), store.Repo{ID: store.RepoID(n), URL: n, State: store.RepoPending})
	if err != nil {
		e.t.Fatal(err)
	}
	return r.ID
}

func (e *hookEnv) rings() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.rung...)
}

// A hook the forge says is set on an organization (or a Gitea or Forgejo user) rings
// as owner-level; a repository's, a system's, or one that does not say (GitLab) does not.
func TestHooksSayWhenTheyAreSetOnTheOwner(t *testing.T) {
	e := newHookEnv(t, nil)
	gh := e.add("https://github.com/org/app")
	gl := e.add("https://gitlab.com/group/proj")
	gt := e.add("https://codeberg.org/forgejo/forgejo")
	ghBody := githubBody("https://github.com/org/app.git", "")
	glBody, _ := json.Marshal(map[string]any{"project": map[string]any{"web_url": "https://gitlab.com/group/proj"}})
	gtBody, _ := json.Marshal(map[string]any{"repository": map[string]any{"clone_url": "https://codeberg.org/forgejo/forgejo.git"}})
	github := func(delivery, target string) map[string]string {
		return map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": "sha256=" + sign("topsecret", ghBody),
			"X-GitHub-Hook-Installation-Target-Type": target}
	}
	for _, c := range []struct {
		forge string
		hdr   map[string]string
		body  []byte
		want  bool
	}{
		{"github", github("o1", "organization"), ghBody, true},
		{"github", github("o2", "repository"), ghBody, false},
		{"github", github("o3", ""), ghBody, false},
		{"gitlab", map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "topsecret", "X-Gitlab-Event-UUID": "o4"}, glBody, false},
		{"gitea", map[string]string{"X-Gitea-Event": "push", "X-Gitea-Delivery": "o5", "X-Gitea-Signature": sign("topsecret", gtBody),
			"X-Gitea-Hook-Installation-Target-Type": "organization"}, gtBody, true},
		{"gitea", map[string]string{"X-Forgejo-Event": "push", "X-Forgejo-Delivery": "o6", "X-Forgejo-Signature": sign("topsecret", gtBody),
			"X-Forgejo-Hook-Installation-Target-Type": "user"}, gtBody, true},
		{"gitea", map[string]string{"X-Gitea-Event": "push", "X-Gitea-Delivery": "o7", "X-Gitea-Signature": sign("topsecret", gtBody),
			"X-Gitea-Hook-Installation-Target-Type": "system"}, gtBody, false},
	} {
		e.mu.Lock()
		e.rung, e.owner = nil, nil
		e.mu.Unlock()
		if code, body := e.post(c.forge, c.hdr, c.body); code != 202 {
			t.Fatalf("%s %v: %d %s", c.forge, c.hdr, code, body)
		}
		e.mu.Lock()
		rung, owner := e.rung, e.owner
		e.mu.Unlock()
		if len(rung) != 1 || (rung[0] != gh && rung[0] != gl && rung[0] != gt) || owner[0] != c.want {
			t.Errorf("%s %v: rung %v owner-level %v, want one ring, owner-level %v", c.forge, c.hdr, rung, owner, c.want)
		}
	}
}

func sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func (e *hookEnv) post(forge string, hdr map[string]string, body []byte) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+HookPrefix+forge, strings.NewReader(string(body)))
	if _, ok := hdr["Content-Type"]; !ok {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func githubBody(clone, html string) []byte {
	b, _ := json.Marshal(map[string]any{"ref": "refs/tags/v2", "before": strings.Repeat("0", 40), "after": strings.Repeat("a", 40),
		"repository": map[string]any{"clone_url": clone, "html_url": html}})
	return b
}

func (e *hookEnv) github(event, delivery, secret string, body []byte) (int, string) {
	return e.post("github", map[string]string{"X-GitHub-Event": event, "X-GitHub-Delivery": delivery,
		"X-Hub-Signature-256": "sha256=" + sign(secret, body)}, body)
}

func TestHooksOfEachForgeRequestASyncAndRing(t *testing.T) {
	e := newHookEnv(t, nil)
	gh := e.add("https://github.com/Org/App")
	gl := e.add("https://gitlab.com/group/sub/proj")
	gt := e.add("https://codeberg.org/forgejo/forgejo")

	// GitHub: a tag push, naming the repo by its clone URL with .git and another host case.
	if code, body := e.github("push", "g1", "topsecret", githubBody("https://GitHub.com/Org/App.git", "https://github.com/Org/App")); code != 202 || !strings.Contains(body, `"accepted"`) {
		t.Fatalf("github: %d %s", code, body)
	}
	// GitLab: a branch deletion (after = zeros), by the project's web URL.
	glBody, _ := json.Marshal(map[string]any{"object_kind": "push", "after": strings.Repeat("0", 40),
		"project": map[string]any{"web_url": "https://gitlab.com/group/sub/proj"}, "repository": map[string]any{"git_http_url": "https://gitlab.com/group/sub/proj.git"}})
	if code, body := e.post("gitlab", map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "topsecret", "X-Gitlab-Event-UUID": "u1"}, glBody); code != 202 {
		t.Fatalf("gitlab: %d %s", code, body)
	}
	// Forgejo's own headers, by the http twin of the repo's https URL.
	gtBody, _ := json.Marshal(map[string]any{"repository": map[string]any{"clone_url": "http://codeberg.org/forgejo/forgejo.git"}})
	if code, body := e.post("gitea", map[string]string{"X-Forgejo-Event": "push", "X-Forgejo-Delivery": "f1", "X-Forgejo-Signature": sign("topsecret", gtBody)}, gtBody); code != 202 {
		t.Fatalf("forgejo: %d %s", code, body)
	}
	if got := e.rings(); fmt.Sprint(got) != fmt.Sprint([]string{gh, gl, gt}) {
		t.Fatalf("rung %v, want %v", got, []string{gh, gl, gt})
	}
	for _, id := range []string{gh, gl, gt} {
		if r, err := e.store.GetRepo(context.Background(), id); err != nil || !r.SyncRequested {
			t.Errorf("repo %s: sync not requested (%v)", id, err)
		}
	}
	// GitHub's form-encoded deliveries are signed over the form body.
	form := []byte("payload=" + url.QueryEscape(string(githubBody("https://github.com/Org/App", ""))))
	if code, body := e.post("github", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-GitHub-Event": "push",
		"X-GitHub-Delivery": "g2", "X-Hub-Signature-256": "sha256=" + sign("topsecret", form)}, form); code != 202 || len(e.rings()) != 4 {
		t.Fatalf("form-encoded github: %d %s, %d rings", code, body, len(e.rings()))
	}
}

func TestHooksRefuseBadInputAndFetchNothing(t *testing.T) {
	e := newHookEnv(t, func(c *HookConfig) {
		c.SecretFor = map[string]string{"gitlab.example.org": "gitlab-only"}
		c.MaxBody = 4096
	})
	e.add("https://github.com/org/app")
	e.add("https://gitlab.example.org/g/p")
	good := githubBody("https://github.com/org/app", "")
	cases := []struct {
		name   string
		forge  string
		hdr    map[string]string
		body   []byte
		status int
		want   string
	}{
		{"no signature", "github", map[string]string{"X-GitHub-Event": "push"}, good, 401, "bad_signature"},
		{"forged signature", "github", map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + sign("guess", good)}, good, 401, "bad_signature"},
		{"signature without its prefix", "github", map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": sign("topsecret", good)}, good, 401, "bad_signature"},
		{"another host's secret", "gitlab", map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "topsecret"},
			[]byte(`{"project":{"web_url":"https://gitlab.example.org/g/p"}}`), 401, "bad_signature"},
		{"malformed JSON", "github", map[string]string{"X-GitHub-Event": "push"}, []byte(`{"repository":`), 400, "bad_json"},
		{"no event header", "github", map[string]string{"X-Hub-Signature-256": "sha256=" + sign("topsecret", good)}, good, 400, "event header"},
		{"wrong content type", "github", map[string]string{"Content-Type": "text/plain", "X-GitHub-Event": "push"}, good, 415, "application/json"},
		{"form for gitlab", "gitlab", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-Gitlab-Event": "Push Hook"}, good, 415, "application/json"},
		{"huge body", "github", map[string]string{"X-GitHub-Event": "push"}, []byte(`{"x":"` + strings.Repeat("a", 5000) + `"}`), 413, "4096 bytes"},
		{"unknown forge", "bitbucket", map[string]string{}, good, 404, "github"},
		{"no repository", "github", map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + sign("topsecret", []byte(`{}`))}, []byte(`{}`), 400, "names no repository URL"},
	}
	for _, c := range cases {
		code, body := e.post(c.forge, c.hdr, c.body)
		if code != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, code, body, c.status, c.want)
		}
	}
	// Signed but not a push: ignored; a ping: pong.
	if code, body := e.github("issues", "i1", "topsecret", good); code != 202 || !strings.Contains(body, `"ignored"`) {
		t.Errorf("issues event: %d %s", code, body)
	}
	if code, body := e.github("ping", "p1", "topsecret", good); code != 200 || !strings.Contains(body, `"pong"`) {
		t.Errorf("ping: %d %s", code, body)
	}
	if n := len(e.rings()); n != 0 {
		t.Fatalf("bad input rang %d times", n)
	}
	// The per-host secret does work for its host.
	glBody := []byte(`{"project":{"web_url":"https://gitlab.example.org/g/p"}}`)
	if code, body := e.post("gitlab", map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "gitlab-only"}, glBody); code != 202 || len(e.rings()) != 1 {
		t.Errorf("per-host secret: %d %s", code, body)
	}
	// A replay fetches nothing new.
	if code, _ := e.github("push", "same", "topsecret", good); code != 202 {
		t.Fatal(code)
	}
	if code, body := e.github("push", "same", "topsecret", good); code != 202 || !strings.Contains(body, `"duplicate"`) || len(e.rings()) != 2 {
		t.Errorf("replay: %d %s, %d rings", code, body, len(e.rings()))
	}
	// An unknown repo: the same answer as a hit, nothing rung, nothing stored.
	if code, body := e.github("push", "u1", "topsecret", githubBody("https://github.com/org/other", "")); code != 202 || !strings.Contains(body, `"accepted"`) || len(e.rings()) != 2 {
		t.Errorf("unknown repo: %d %s", code, body)
	}
	if _, err := e.store.GetRepo(context.Background(), store.RepoID("https://github.com/org/other")); err == nil {
		t.Error("a hook for an unknown repo created it")
	}
}

func TestHooksFloodKeepsMemoryBounded(t *testing.T) {
	e := newHookEnv(t, func(c *HookConfig) { c.Replays = 100 })
	e.add("https://github.com/org/app")
	h := e.h.(*hooks)
	body := githubBody("https://github.com/org/app", "")
	sig := "sha256=" + sign("topsecret", body)
	for i := range 3000 {
		req := httptest.NewRequest(http.MethodPost, HookPrefix+"github", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("flood-%d", i))
		req.Header.Set("X-Hub-Signature-256", sig)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 202 {
			t.Fatalf("delivery %d: %d", i, rec.Code)
		}
	}
	h.mu.Lock()
	n, m := len(h.seen), h.order.Len()
	h.mu.Unlock()
	if n != 100 || m != 100 {
		t.Fatalf("replay cache holds %d/%d ids, bound 100", n, m)
	}
	// The oldest ids were forgotten, the newest are still known.
	if h.replayed("github/flood-0") || !h.replayed("github/flood-2999") {
		t.Error("the replay cache does not keep the newest ids")
	}
}

func TestHooksOffWithoutSecret(t *testing.T) {
	e := newHookEnv(t, func(c *HookConfig) { c.Secret = "" })
	e.add("https://github.com/org/app")
	if code, body := e.github("push", "x", "", githubBody("https://github.com/org/app", "")); code != 403 || !strings.Contains(body, "--webhook-secret") {
		t.Fatalf("%d %s", code, body)
	}
	if len(e.rings()) != 0 {
		t.Fatal("rang with hooks off")
	}
}

// TestHooksSecretsFromASource: with Secrets set (AWS: Secrets Manager) each delivery is
// checked against what it returns, per host too; a failing source answers 503 with
// Retry-After and fetches nothing; a source with no secret turns the hooks off.
func TestHooksSecretsFromASource(t *testing.T) {
	var keys HookSecrets
	var fail error
	e := newHookEnv(t, func(c *HookConfig) {
		c.Secret = ""
		c.Secrets = func(context.Context) (HookSecrets, error) { return keys, fail }
	})
	id := e.add("https://github.com/org/app")
	body := githubBody("https://github.com/org/app", "")
	keys = HookSecrets{Secret: "fromstore"}
	if code, b := e.github("push", "d1", "fromstore", body); code != 202 || len(e.rings()) != 1 || e.rings()[0] != id {
		t.Fatalf("signed with the source's secret: %d %s, rings %v", code, b, e.rings())
	}
	if code, _ := e.github("push", "d2", "topsecret", body); code != 401 {
		t.Fatalf("signed with another secret: %d, want 401", code)
	}
	keys = HookSecrets{Secret: "fromstore", SecretFor: map[string]string{"github.com": "per-host"}}
	if code, _ := e.github("push", "d3", "per-host", body); code != 202 {
		t.Fatalf("signed with the host's secret: %d, want 202", code)
	}
	fail = fmt.Errorf("secrets manager down")
	if code, b := e.github("push", "d4", "per-host", body); code != 503 || !strings.Contains(b, "secrets_unavailable") {
		t.Fatalf("failing source: %d %s, want 503", code, b)
	}
	fail, keys = nil, HookSecrets{}
	if code, _ := e.github("push", "d5", "", body); code != 403 {
		t.Fatalf("no secret from the source: %d, want 403", code)
	}
	if n := len(e.rings()); n != 2 {
		t.Fatalf("%d rings, want 2 (the two accepted deliveries)", n)
	}
}
