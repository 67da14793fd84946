package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/mirrorpath"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// GET /mirrorz.json: the fleet as one mirror site in the format MirrorZ reads
// (github.com/mirrorz-org/mirrorz, "Data Format" v1.x), so university and community
// mirror sites can list it beside the others. It is streamed as /tunasync.json is, and
// answers 404 until the site is named (Site.Abbr: --site-abbr).

// mirrorzVersion is the format version written; 1.x versions are backward compatible.
const mirrorzVersion = 1.4

// Site is the mirror site's own description: Abbr and URL are the format's mandatory
// fields (URL is the clone base when not given).
type Site struct {
	Abbr     string `json:"abbr"`
	Name     string `json:"name,omitempty"`
	URL      string `json:"url"`
	Homepage string `json:"homepage,omitempty"`
	Email    string `json:"email,omitempty"`
}

// MirrorzMirror is one repo in the format's "mirrors" list.
type MirrorzMirror struct {
	Cname    string `json:"cname"` // the mirror path, as the clone URL ends
	Desc     string `json:"desc"`
	URL      string `json:"url"` // the clone URL, under site.url
	Status   string `json:"status"`
	Upstream string `json:"upstream"`
	Size     string `json:"size,omitempty"`
}

// mirrorzStatus is the format's status: one main status, [SYFPU] with its time, then
// auxiliary ones: X (next sync), N (new: added, not yet synced), O (the last success,
// beside a failure).
//
//	ok        S<last success>
//	failing   F<last attempt> O<last success>
//	gone      F<last attempt> O<last success>  (the upstream answers "not found")
//	cloning   Y N<added>                       (held by a worker, first clone to come)
//	pending   U N<added>                       (waiting for a worker)
//	overflow  P                                (handed back by a full worker)
func mirrorzStatus(r store.Repo, checked, next time.Time) string {
	var b strings.Builder
	stamp := func(c byte, t time.Time) {
		b.WriteByte(c)
		if !t.IsZero() {
			fmt.Fprint(&b, t.Unix())
		}
	}
	switch r.State {
	case store.RepoOK:
		stamp('S', r.LastSuccessAt)
	case store.RepoFailing, store.RepoGone:
		stamp('F', checked)
		if !r.LastSuccessAt.IsZero() {
			stamp('O', r.LastSuccessAt)
		}
	case store.RepoCloning:
		stamp('Y', time.Time{})
		stamp('N', r.CreatedAt)
	case store.RepoPending:
		stamp('U', time.Time{})
		stamp('N', r.CreatedAt)
	case store.RepoOverflow:
		stamp('P', time.Time{})
	}
	if !next.IsZero() && r.State != store.RepoOverflow {
		stamp('X', next)
	}
	return b.String()
}

func (s *server) mirrorzMirror(r store.Repo, sc *schedule) any {
	if r.State == store.RepoDeleting {
		return nil
	}
	m := MirrorzMirror{Cname: r.URL, Upstream: r.FetchURL()}
	if rel, err := mirrorpath.Rel(r.URL); err == nil {
		m.Cname = filepath.ToSlash(rel)
	}
	if u := s.cloneURL(r.URL); u != nil {
		m.URL = *u
	}
	if r.SizeBytes > 0 {
		m.Size = humanSize(r.SizeBytes)
	}
	next, _ := sc.NextPoll(r)
	m.Status = mirrorzStatus(r, sc.LastChecked(r), next)
	return m
}

func (s *server) mirrorz(w http.ResponseWriter, r *http.Request) error {
	site := s.cfg.Site
	if site.Abbr == "" {
		return &Error{Status: http.StatusNotFound, Code: "not_found",
			Message: "/mirrorz.json is off: name the mirror site with --site-abbr (on AWS, the stack's siteAbbr context value)"}
	}
	if site.URL == "" {
		site.URL = strings.TrimRight(s.cfg.CloneBaseURL, "/")
	}
	head, err := json.Marshal(map[string]any{"version": mirrorzVersion, "site": site, "info": []any{}})
	if err != nil {
		return err
	}
	// {"info":[],"site":{…},"version":1.4} becomes {…,"mirrors":[ … ]}.
	open := string(head[:len(head)-1]) + `,"mirrors":[`
	return s.streamRepos(w, r, "/mirrorz.json", open, "]}\n", s.mirrorzMirror)
}
