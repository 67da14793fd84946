package serve

import (
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Lister pages through the fleet's repos for the /git/ index; the bbolt and the
// DynamoDB stores both provide it.
type Lister interface {
	ListRepos(ctx context.Context, cursor string, limit int) ([]store.Repo, string, error)
}

const (
	defaultIndexLimit = 100
	maxIndexLimit     = 1000
	maxIndexCursor    = 1024
)

// indexEntry is one repo of the index.
type indexEntry struct {
	ID            string          `json:"id"`
	URL           string          `json:"url"`
	CloneURL      string          `json:"clone_url"`
	State         store.RepoState `json:"state"`
	LastSuccessAt *time.Time      `json:"last_success_at"`
}

type indexPage struct {
	Repos      []indexEntry `json:"repos"`
	NextCursor string       `json:"next_cursor"`
	next       template.URL // the next page's link, for the HTML
}

// index answers GET /git/: the repos and their clone URLs, a page at a time, as
// HTML or (?format=json) JSON.
func (h *Handler) index(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		fail(w, http.StatusMethodNotAllowed, "the index takes GET")
		return
	}
	if h.cfg.Index == nil {
		fail(w, http.StatusNotFound, "this server has no repo index (no store configured); clone "+Prefix+"<mirror path>")
		return
	}
	q := r.URL.Query()
	format := q.Get("format")
	if format != "" && format != "json" && format != "html" {
		fail(w, http.StatusBadRequest, "format is json or html")
		return
	}
	limit := defaultIndexLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxIndexLimit {
			fail(w, http.StatusBadRequest, "limit is an integer from 1 to "+strconv.Itoa(maxIndexLimit))
			return
		}
		limit = n
	}
	cursor := q.Get("cursor")
	if len(cursor) > maxIndexCursor || strings.ContainsRune(cursor, 0) {
		fail(w, http.StatusBadRequest, "cursor is not one this index returned")
		return
	}
	repos, next, err := h.mirrored(r.Context(), cursor, limit)
	if err != nil {
		h.cfg.Log.Warn("serve: index", "err", err)
		fail(w, http.StatusBadRequest, "cannot list from this cursor; start again at "+Prefix)
		return
	}
	// The configured base, never the request's Host: a client must not be able to
	// put its own host into the URLs the index shows others. No base: path-only URLs.
	base := h.cfg.BaseURL
	page := indexPage{Repos: make([]indexEntry, 0, len(repos)), NextCursor: next}
	for _, rp := range repos {
		e := indexEntry{ID: rp.ID, URL: rp.URL, State: rp.State}
		if !rp.LastSuccessAt.IsZero() {
			t := rp.LastSuccessAt.UTC()
			e.LastSuccessAt = &t
		}
		e.CloneURL, _ = CloneURL(base, rp.URL) // a stored URL always maps; "" if not
		page.Repos = append(page.Repos, e)
	}
	hd := w.Header()
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Content-Type-Options", "nosniff")
	if format == "json" {
		hd.Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(page)
		return
	}
	if next != "" {
		v := "cursor=" + url.QueryEscape(next)
		if limit != defaultIndexLimit {
			v += "&limit=" + strconv.Itoa(limit)
		}
		page.next = template.URL("?" + v) // built here from an escaped cursor
	}
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	_ = indexHTML.Execute(w, struct {
		Repos []indexEntry
		Next  template.URL
	}{page.Repos, page.next})
}

// indexScan bounds the repos one index page reads from the store: in a fleet where most
// repos are not cloned yet a page may hold fewer than its limit, with a next link.
const indexScan = 20 * maxIndexLimit

// hasMirror says whether a repo's clone URL answers: it was cloned once (a failing or
// gone repo keeps its mirror) and is not being deleted.
func hasMirror(r store.Repo) bool {
	return !r.LastSuccessAt.IsZero() && r.State != store.RepoDeleting
}

// mirrored reads up to limit repos that have a mirror, from cursor on, reading at most
// indexScan repos; next is where the following page starts ("" at the end).
func (h *Handler) mirrored(ctx context.Context, cursor string, limit int) ([]store.Repo, string, error) {
	var out []store.Repo
	next, scanned := cursor, 0
	for {
		repos, n, err := h.cfg.Index.ListRepos(ctx, next, limit-len(out))
		if err != nil {
			return nil, "", err
		}
		scanned += len(repos)
		for _, rp := range repos {
			if hasMirror(rp) {
				out = append(out, rp)
			}
		}
		next = n
		if next == "" || len(out) >= limit || scanned >= indexScan {
			return out, next, nil
		}
	}
}

var indexHTML = template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mirrorfleet: git mirrors</title>
<style>body{font:14px system-ui,sans-serif;margin:2em}td,th{padding:.2em .8em;text-align:left}code{user-select:all}</style>
</head><body>
<h1>Git mirrors</h1>
<p>Clone any of them: <code>git clone &lt;clone URL&gt;</code>. This list as JSON: <a href="?format=json">?format=json</a>.</p>
<table>
<thead><tr><th>clone URL</th><th>upstream</th><th>state</th><th>last fetched</th></tr></thead>
<tbody>
{{range .Repos}}<tr><td><code>{{.CloneURL}}</code></td><td>{{.URL}}</td><td>{{.State}}</td><td>{{if .LastSuccessAt}}{{.LastSuccessAt.Format "2006-01-02 15:04:05Z07:00"}}{{else}}never{{end}}</td></tr>
{{else}}<tr><td colspan="4">no repos</td></tr>
{{end}}</tbody></table>
{{if .Next}}<p><a href="{{.Next}}">next page</a></p>{{end}}
</body></html>
`))
