package feeds

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
)

// Prober asks one feed what changed. It is not safe for concurrent use: one goroutine
// probes a feed, every Period.
type Prober struct {
	src    Source
	token  string // src.Token, or the one that replaced it (Runner.Tokens)
	client *http.Client
	clock  clock.Clock

	since       time.Time            // the listing is asked from here (last probe's start, less Overlap)
	seen        map[string]time.Time // changes reported, by URL, so an overlap repeats none
	etags       map[string]string
	pausedUntil time.Time
	remaining   int // the forge's count of requests (GitHub: points) left, -1 unknown
	resetAt     time.Time
	maxPages    int
	period      time.Duration
	cursor      int // GitHub: where the next probe's batches start in the repos asked about
}

// Overlap is how far back each probe reaches past the previous one: forges stamp
// activity when they process it, a little after the push, and clocks differ.
const Overlap = 2 * time.Minute

// GitLabActivityStep is how long GitLab waits before it moves a project's
// last_activity_at again (it is written at most once an hour), so a push within an hour
// of the activity GitLab reported is not listed: a changed project is named for a
// second look that long after (Change.Recheck).
const GitLabActivityStep = time.Hour

// MaxPages bounds the pages one probe reads; a feed that names more repos than that in
// one period is behind, and its repos are still polled.
const MaxPages = 50

// MaxChanges bounds the changes one probe takes: a feed that names more in one period
// is behind (or hostile), and the rest of its repos wait for their polls (GitHub's
// next probe goes on where this one stopped). The listings' own bounds (MaxPages of
// 100 or 50) stay below it.
const MaxChanges = 5000

// New is a prober for src over client (which bounds each request's time); the first
// probe asks for the changes since one period before now. The prober follows a
// redirect within the feed's origin only (keepHome): a copy of client is made with
// that policy, whatever client's own.
func New(src Source, client *http.Client, clk clock.Clock, period time.Duration) *Prober {
	c := *client
	c.CheckRedirect = keepHome
	return &Prober{src: src, token: src.Token, client: &c, clock: clk, since: clk.Now().Add(-period - Overlap),
		seen: map[string]time.Time{}, etags: map[string]string{}, remaining: -1, maxPages: MaxPages, period: period}
}

// Source is the feed probed.
func (p *Prober) Source() Source { return p.src }

// PausedUntil is when a rate-limited feed may be asked again (zero: not paused).
func (p *Prober) PausedUntil() time.Time { return p.pausedUntil }

// Probe returns the changes since the last probe. GitHub's feed asks about the repos
// given (web URLs of the repos this worker mirrors on that host), at most
// GitHubBatch a query; the listing feeds ignore them. A rate-limited feed returns
// *RateLimited without asking until its pause ends.
func (p *Prober) Probe(ctx context.Context, repos []string) ([]Change, error) {
	now := p.clock.Now()
	if now.Before(p.pausedUntil) {
		return nil, &RateLimited{p.pausedUntil}
	}
	var (
		cs  []Change
		err error
	)
	switch p.src.Kind {
	case GitLab:
		cs, err = p.gitlab(ctx)
	case Gitea:
		cs, err = p.gitea(ctx)
	case GitHub:
		cs, err = p.github(ctx, repos)
	default:
		return nil, fmt.Errorf("feed %s: unknown kind", p.src)
	}
	if err != nil {
		return cs, err
	}
	// Next time, from this probe's start (less the overlap); forget what is older.
	p.since = now.Add(-Overlap)
	for u, at := range p.seen {
		if at.Before(p.since.Add(-Overlap)) {
			delete(p.seen, u)
		}
	}
	return cs, nil
}

// fresh keeps a change not reported before.
func (p *Prober) fresh(out []Change, c Change) []Change {
	if last, ok := p.seen[c.URL]; ok && !c.At.After(last) {
		return out
	}
	p.seen[c.URL] = c.At
	return append(out, c)
}

// gitlabProject is what a GitLab project listing gives of each project.
type gitlabProject struct {
	HTTPURL        string    `json:"http_url_to_repo"`
	WebURL         string    `json:"web_url"`
	LastActivityAt time.Time `json:"last_activity_at"`
}

// decodePage decodes a JSON array of at most limit items (null is none). It stops at
// the item past the limit: a forge that ignores the page size it was asked for
// answers badly, and its page is neither decoded whole nor taken.
func decodePage[T any](raw []byte, limit int) ([]T, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, fmt.Errorf("not a JSON array")
	}
	var out []T
	for dec.More() {
		if len(out) == limit {
			return nil, fmt.Errorf("more than the %d items asked for", limit)
		}
		var item T
		if err := dec.Decode(&item); err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the array")
	}
	return out, nil
}

// gitlabPage is the projects asked for a page: 100, GitLab's ceiling.
const gitlabPage = 100

// gitlab lists the projects (of the group, with its subgroups) active since p.since,
// the most recent first, 100 a page, following X-Next-Page.
func (p *Prober) gitlab(ctx context.Context) ([]Change, error) {
	base := p.src.Web.JoinPath("api", "v4", "projects")
	if p.src.Scope != "" {
		// A group is named by its full path, escaped as one segment (a%2Fb).
		var err error
		if base, err = url.Parse(p.src.Web.String() + "/api/v4/groups/" + url.PathEscape(p.src.Scope) + "/projects"); err != nil {
			return nil, fmt.Errorf("feed %s: %w", p.src, err)
		}
	}
	q := url.Values{"last_activity_after": {p.since.UTC().Format(time.RFC3339)}, "order_by": {"last_activity_at"},
		"sort": {"desc"}, "per_page": {strconv.Itoa(gitlabPage)}, "simple": {"true"}, "archived": {"false"}}
	if p.src.Scope != "" {
		q.Set("include_subgroups", "true")
	}
	var out []Change
	page := "1"
	for n := 0; page != "" && n < p.maxPages; n++ {
		q.Set("page", page)
		u := *base
		u.RawQuery = q.Encode()
		req, _ := http.NewRequest(http.MethodGet, u.String(), nil)
		a, err := p.do(ctx, req)
		if err != nil {
			return out, err
		}
		if a.status == http.StatusNotModified {
			return out, nil
		}
		ps, err := decodePage[gitlabProject](a.body, gitlabPage)
		if err != nil {
			return out, &BadAnswer{fmt.Sprintf("GitLab projects page %s: %v", page, err)}
		}
		for _, pr := range ps {
			if len(out) >= MaxChanges {
				return out, nil
			}
			link := pr.WebURL
			if link == "" {
				link = pr.HTTPURL
			}
			if link == "" || pr.LastActivityAt.IsZero() {
				return out, &BadAnswer{"GitLab project without web_url or last_activity_at"}
			}
			before := len(out)
			out = p.fresh(out, Change{URL: link, At: pr.LastActivityAt})
			if len(out) > before {
				out[len(out)-1].Recheck = pr.LastActivityAt.Add(GitLabActivityStep + Overlap)
			}
		}
		page = strings.TrimSpace(a.header.Get("X-Next-Page"))
		if _, err := strconv.Atoi(page); page != "" && err != nil {
			return out, &BadAnswer{fmt.Sprintf("GitLab X-Next-Page %q", page)}
		}
	}
	return out, nil
}

// giteaRepo is what Gitea's repo search gives of each repo.
type giteaRepo struct {
	HTMLURL   string    `json:"html_url"`
	CloneURL  string    `json:"clone_url"`
	UpdatedAt time.Time `json:"updated_at"`
}

// giteaPage is 50, the default ceiling of a Gitea instance's API pages.
const giteaPage = 50

// gitea reads the instance's repos, the most recently updated first, until one was
// updated before p.since.
func (p *Prober) gitea(ctx context.Context) ([]Change, error) {
	base := p.src.Web.JoinPath("api", "v1", "repos", "search")
	var out []Change
	for page := 1; page <= p.maxPages; page++ {
		q := url.Values{"sort": {"updated"}, "order": {"desc"}, "limit": {strconv.Itoa(giteaPage)}, "page": {strconv.Itoa(page)}}
		u := *base
		u.RawQuery = q.Encode()
		req, _ := http.NewRequest(http.MethodGet, u.String(), nil)
		a, err := p.do(ctx, req)
		if err != nil {
			return out, err
		}
		if a.status == http.StatusNotModified {
			return out, nil
		}
		var res struct {
			OK   *bool           `json:"ok"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(a.body, &res); err != nil || res.OK == nil {
			return out, &BadAnswer{fmt.Sprintf("Gitea repos/search page %d: not a search result", page)}
		}
		if !*res.OK {
			return out, &BadAnswer{fmt.Sprintf("Gitea repos/search page %d: ok is false", page)}
		}
		data, err := decodePage[giteaRepo](res.Data, giteaPage)
		if err != nil {
			return out, &BadAnswer{fmt.Sprintf("Gitea repos/search page %d: %v", page, err)}
		}
		for _, r := range data {
			if len(out) >= MaxChanges {
				return out, nil
			}
			if r.UpdatedAt.Before(p.since) {
				return out, nil // sorted by update: the rest is older
			}
			link := r.HTMLURL
			if link == "" {
				link = r.CloneURL
			}
			if link == "" {
				return out, &BadAnswer{"Gitea repo without html_url or clone_url"}
			}
			out = p.fresh(out, Change{URL: link, At: r.UpdatedAt})
		}
		if len(data) < giteaPage {
			return out, nil
		}
	}
	return out, nil
}
