package api

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

const testToken = "s3cret-token"

// t0 is the virtual clock's start.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

type env struct {
	t     testing.TB
	store *bolt.Store
	clock *clock.Virtual
	h     http.Handler
	pokes atomic.Int64
}

type envOpt func(*Config)

func newEnv(t testing.TB, opts ...envOpt) *env {
	t.Helper()
	s, err := bolt.OpenWith(filepath.Join(t.TempDir(), "fleet.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatalf("bolt.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	e := &env{t: t, store: s, clock: clock.NewVirtual(t0)}
	cfg := Config{
		Store: s, Policy: urlpolicy.Default(), Token: testToken, Clock: e.clock,
		Poke: func() { e.pokes.Add(1) },
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, o := range opts {
		o(&cfg)
	}
	e.h = New(cfg)
	return e
}

type resp struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// errCode returns error.code and error.message of an error body.
func (r resp) errCode() (code, msg string) {
	e, _ := r.body["error"].(map[string]any)
	code, _ = e["code"].(string)
	msg, _ = e["message"].(string)
	return code, msg
}

type reqOpt func(*http.Request)

func withHeader(k, v string) reqOpt { return func(r *http.Request) { r.Header.Set(k, v) } }

var noAuth reqOpt = func(r *http.Request) { r.Header.Del("Authorization") }

// do sends a request through the handler. Writes carry the token unless noAuth is given.
func (e *env) do(method, path string, body []byte, opts ...reqOpt) resp {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(req)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	r := resp{status: rec.Code, header: rec.Header(), raw: rec.Body.Bytes()}
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(r.raw, &r.body); err != nil {
			e.t.Fatalf("%s %s: response is not a JSON object: %v\n%s", method, path, err, r.raw)
		}
	}
	return r
}

func (e *env) want(r resp, status int, what string) resp {
	e.t.Helper()
	if r.status != status {
		e.t.Fatalf("%s: status %d, want %d; body %s", what, r.status, status, r.raw)
	}
	return r
}

func jsonBody(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// add creates one repo through the API and returns the response.
func (e *env) add(url string) resp {
	e.t.Helper()
	return e.do("POST", "/v1/repos", jsonBody(map[string]string{"url": url}))
}

// storedRepos lists every repo in the store, directly.
func (e *env) storedRepos() []store.Repo {
	e.t.Helper()
	var all []store.Repo
	cursor := ""
	for {
		page, next, err := e.store.ListRepos(e.t.Context(), cursor, 0)
		if err != nil {
			e.t.Fatalf("ListRepos: %v", err)
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		cursor = next
	}
}

func (e *env) repoCount() int {
	e.t.Helper()
	return len(e.storedRepos())
}

// seedRepo stores a repo directly, bypassing the API, with the given state and times.
func (e *env) seedRepo(raw string, state store.RepoState, owner string, lastSuccess time.Time) store.Repo {
	e.t.Helper()
	url, err := urlpolicy.Default().Normalize(raw)
	if err != nil {
		e.t.Fatalf("seed %s: %v", raw, err)
	}
	r := store.Repo{ID: store.RepoID(url), URL: url, Source: store.SourceList, State: state, Owner: owner,
		CreatedAt: t0.Add(-48 * time.Hour), LastSuccessAt: lastSuccess}
	got, created, err := e.store.CreateRepo(e.t.Context(), r)
	if err != nil || !created {
		e.t.Fatalf("CreateRepo(%s) = %v, %v", url, created, err)
	}
	return got
}

func str(v any) string { s, _ := v.(string); return s }

func num(v any) float64 { f, _ := v.(float64); return f }
