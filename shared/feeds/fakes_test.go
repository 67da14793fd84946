package feeds

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The fakes below answer as the forges' documentation says their APIs do, for the
// requests a Prober makes: the same paths, parameters, headers, pagination and refusals.
// They are fakes: nothing here runs a forge.

// fakeRepo is a repository of a fake forge.
type fakeRepo struct {
	path   string // owner/name (GitLab: full path with groups)
	active time.Time
}

// fakeForge holds what every fake shares: repos, a token, scripted refusals, a log.
type fakeForge struct {
	mu       sync.Mutex
	repos    []fakeRepo
	token    string
	refuse   []func(w http.ResponseWriter) bool // consumed one per request, first
	requests []*http.Request
	srv      *httptest.Server
}

func (f *fakeForge) add(path string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos = append(f.repos, fakeRepo{path, at})
}

// script makes the next request answer with status and headers (and body).
func (f *fakeForge) script(status int, hdr map[string]string, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse = append(f.refuse, func(w http.ResponseWriter) bool {
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
		return true
	})
}

// front logs the request and plays a scripted answer, if any; true means answered.
func (f *fakeForge) front(w http.ResponseWriter, r *http.Request, authOK bool) bool {
	f.mu.Lock()
	f.requests = append(f.requests, r)
	var next func(http.ResponseWriter) bool
	if len(f.refuse) > 0 {
		next, f.refuse = f.refuse[0], f.refuse[1:]
	}
	f.mu.Unlock()
	if next != nil {
		return next(w)
	}
	if !authOK {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"message":"401 Unauthorized"}`)
		return true
	}
	return false
}

func (f *fakeForge) sorted(since time.Time) []fakeRepo {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeRepo
	for _, r := range f.repos {
		if !r.active.Before(since) {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b fakeRepo) int { return b.active.Compare(a.active) })
	return out
}

// etagged answers body with a strong validator, or 304 when the client already has it.
func etagged(w http.ResponseWriter, r *http.Request, body []byte) {
	sum := sha256.Sum256(body)
	tag := `"` + hex.EncodeToString(sum[:8]) + `"`
	w.Header().Set("ETag", tag)
	if r.Header.Get("If-None-Match") == tag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// newFakeGitLab serves GET /api/v4/projects and /api/v4/groups/:id/projects with
// last_activity_after, order_by=last_activity_at, sort, per_page (≤ 100) and page,
// paginated with X-Page, X-Next-Page, X-Per-Page, X-Total and Link, authenticated by
// PRIVATE-TOKEN (a listing of public projects needs none: here every request must carry
// the fake's token when it has one).
func newFakeGitLab(t *testing.T, token string) *fakeForge {
	f := &fakeForge{token: token}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.front(w, r, f.token == "" || r.Header.Get("PRIVATE-TOKEN") == f.token) {
			return
		}
		group := ""
		switch {
		case r.URL.Path == "/api/v4/projects":
		case strings.HasPrefix(r.URL.EscapedPath(), "/api/v4/groups/") && strings.HasSuffix(r.URL.Path, "/projects"):
			g := strings.TrimSuffix(strings.TrimPrefix(r.URL.EscapedPath(), "/api/v4/groups/"), "/projects")
			if strings.Contains(g, "/") { // a group path must come escaped as one segment
				http.NotFound(w, r)
				return
			}
			group, _ = url.PathUnescape(g)
		default:
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		if q.Get("order_by") != "last_activity_at" || q.Get("sort") != "desc" {
			http.Error(w, `{"error":"order_by/sort"}`, http.StatusBadRequest)
			return
		}
		since, err := time.Parse(time.RFC3339, q.Get("last_activity_after"))
		if err != nil {
			http.Error(w, `{"error":"last_activity_after is invalid"}`, http.StatusBadRequest)
			return
		}
		per, _ := strconv.Atoi(q.Get("per_page"))
		per = min(max(per, 1), 100)
		page, _ := strconv.Atoi(q.Get("page"))
		page = max(page, 1)
		var all []fakeRepo
		for _, p := range f.sorted(since) {
			if group == "" || strings.HasPrefix(p.path, group+"/") {
				all = append(all, p)
			}
		}
		lo, hi := min((page-1)*per, len(all)), min(page*per, len(all))
		type proj struct {
			ID           int       `json:"id"`
			PathNS       string    `json:"path_with_namespace"`
			WebURL       string    `json:"web_url"`
			HTTPURL      string    `json:"http_url_to_repo"`
			LastActivity time.Time `json:"last_activity_at"`
		}
		var out []proj
		for k, p := range all[lo:hi] {
			out = append(out, proj{lo + k + 1, p.path, f.srv.URL + "/" + p.path, f.srv.URL + "/" + p.path + ".git", p.active})
		}
		w.Header().Set("X-Page", strconv.Itoa(page))
		w.Header().Set("X-Per-Page", strconv.Itoa(per))
		w.Header().Set("X-Total", strconv.Itoa(len(all)))
		next := ""
		if hi < len(all) {
			next = strconv.Itoa(page + 1)
			nq := r.URL.Query()
			nq.Set("page", next)
			w.Header().Set("Link", fmt.Sprintf(`<%s%s?%s>; rel="next"`, f.srv.URL, r.URL.Path, nq.Encode()))
		}
		w.Header().Set("X-Next-Page", next)
		body, _ := json.Marshal(out)
		if out == nil {
			body = []byte("[]")
		}
		etagged(w, r, body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// newFakeGitea serves GET /api/v1/repos/search with sort=updated, order=desc, limit
// (≤ 50) and page: {"ok":true,"data":[...]} with X-Total-Count and Link; a token comes
// as "Authorization: token T".
func newFakeGitea(t *testing.T, token string) *fakeForge {
	f := &fakeForge{token: token}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.front(w, r, f.token == "" || r.Header.Get("Authorization") == "token "+f.token) {
			return
		}
		if r.URL.Path != "/api/v1/repos/search" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		if q.Get("sort") != "updated" || q.Get("order") != "desc" {
			http.Error(w, `{"message":"sort"}`, http.StatusUnprocessableEntity)
			return
		}
		limit, _ := strconv.Atoi(q.Get("limit"))
		limit = min(max(limit, 1), 50)
		page, _ := strconv.Atoi(q.Get("page"))
		page = max(page, 1)
		all := f.sorted(time.Time{})
		lo, hi := min((page-1)*limit, len(all)), min(page*limit, len(all))
		type repo struct {
			FullName  string    `json:"full_name"`
			HTMLURL   string    `json:"html_url"`
			CloneURL  string    `json:"clone_url"`
			UpdatedAt time.Time `json:"updated_at"`
		}
		out := []repo{}
		for _, p := range all[lo:hi] {
			out = append(out, repo{p.path, f.srv.URL + "/" + p.path, f.srv.URL + "/" + p.path + ".git", p.active})
		}
		w.Header().Set("X-Total-Count", strconv.Itoa(len(all)))
		if hi < len(all) {
			nq := r.URL.Query()
			nq.Set("page", strconv.Itoa(page+1))
			w.Header().Set("Link", fmt.Sprintf(`<%s%s?%s>; rel="next"`, f.srv.URL, r.URL.Path, nq.Encode()))
		}
		body, _ := json.Marshal(map[string]any{"ok": true, "data": out})
		etagged(w, r, body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// fakeGitHub serves POST /api/graphql (a GitHub Enterprise Server's path) for queries
// of aliased repository(owner:, name:) fields with their names in variables, answering
// url and pushedAt, rateLimit{cost remaining resetAt}, NOT_FOUND errors for unknown
// repositories, FORBIDDEN errors with saml_failure for the repositories of an
// organization that enforces SAML SSO the token is not authorized for (the field null,
// the other repositories answered beside it), x-ratelimit-* headers, and a RATE_LIMITED
// error once the points are spent.
type fakeGitHub struct {
	*fakeForge
	points  int
	resetAt time.Time
	queries int
	saml    map[string]bool // owners (organizations) enforcing SAML SSO
	asked   []string        // the owner/name of every repository asked for, in order
}

var ghField = regexp.MustCompile(`(r\d+):repository\(owner:\$(o\d+),name:\$(n\d+)\)\{url pushedAt\}`)

func newFakeGitHub(t *testing.T, token string, points int, resetAt time.Time) *fakeGitHub {
	g := &fakeGitHub{fakeForge: &fakeForge{token: token}, points: points, resetAt: resetAt}
	g.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.front(w, r, r.Header.Get("Authorization") == "bearer "+g.token) {
			return
		}
		if r.URL.Path != "/api/graphql" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Query     string            `json:"query"`
			Variables map[string]string `json:"variables"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"message":"Problems parsing JSON"}`, http.StatusBadRequest)
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		g.queries++
		fields := ghField.FindAllStringSubmatch(req.Query, -1)
		if len(fields) > 100 {
			http.Error(w, `{"errors":[{"message":"too many nodes"}]}`, http.StatusOK)
			return
		}
		hdr := w.Header()
		hdr.Set("Content-Type", "application/json")
		hdr.Set("X-RateLimit-Limit", "5000")
		hdr.Set("X-RateLimit-Reset", strconv.FormatInt(g.resetAt.Unix(), 10))
		hdr.Set("X-RateLimit-Resource", "graphql")
		if g.points <= 0 {
			hdr.Set("X-RateLimit-Remaining", "0")
			json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]any{{"type": "RATE_LIMITED", "message": "API rate limit exceeded"}}})
			return
		}
		g.points--
		hdr.Set("X-RateLimit-Remaining", strconv.Itoa(g.points))
		data := map[string]any{"rateLimit": map[string]any{"cost": 1, "remaining": g.points, "resetAt": g.resetAt.UTC().Format(time.RFC3339)}}
		var errs []map[string]any
		for _, m := range fields {
			path := req.Variables[m[2]] + "/" + req.Variables[m[3]]
			g.asked = append(g.asked, path)
			if g.saml[strings.ToLower(req.Variables[m[2]])] {
				data[m[1]] = nil
				errs = append(errs, map[string]any{"type": "FORBIDDEN", "path": []string{m[1]}, "extensions": map[string]any{"saml_failure": true},
					"message": "Resource protected by organization SAML enforcement. You must grant your Personal Access token access to this organization."})
				continue
			}
			var found *fakeRepo
			for k := range g.repos {
				if strings.EqualFold(g.repos[k].path, path) {
					found = &g.repos[k]
				}
			}
			if found == nil {
				data[m[1]] = nil
				errs = append(errs, map[string]any{"type": "NOT_FOUND", "path": []string{m[1]}, "message": "Could not resolve to a Repository with the name '" + path + "'."})
				continue
			}
			data[m[1]] = map[string]any{"url": "https://" + r.Host + "/" + found.path, "pushedAt": found.active.UTC().Format(time.RFC3339)}
		}
		out := map[string]any{"data": data}
		if errs != nil {
			out["errors"] = errs
		}
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(g.srv.Close)
	return g
}
