// Package feeds probes forges' change feeds: listings that name, in one request, many
// repos that changed since a given time. A worker whose repos' host has a feed learns of
// pushes from it every few minutes and polls those repos only as a fall-back.
//
//   - GitLab: GET /api/v4/projects (or /groups/:id/projects) with last_activity_after,
//     ordered by last_activity_at, 100 a page.
//   - Gitea and Forgejo: GET /api/v1/repos/search?sort=updated&order=desc, 50 a page,
//     read until a repo older than the last probe.
//   - GitHub: GraphQL, pushedAt of up to 100 named repositories per query (GitHub has no
//     public listing by last push); each query costs 1 point of the 5,000 an hour a token
//     has, so one token checks 500,000 repos an hour at most.
//
// A feed's answers are hints: a repo it names is fetched (and the fetch finds what
// changed); a repo it misses is still polled, only less often.
package feeds

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// Kind is a forge's API dialect.
type Kind string

const (
	GitHub Kind = "github"
	GitLab Kind = "gitlab"
	Gitea  Kind = "gitea" // Forgejo speaks the same API
)

// Source is one configured feed: a forge, the part of it listed, and its credential.
type Source struct {
	Kind Kind
	// Web is the forge's web root (https://gitlab.com); repos whose URL starts with
	// Web + Scope are the feed's.
	Web *url.URL
	// Scope narrows the listing: a GitLab group's full path ("gnome", "a/b"). Empty: the
	// whole instance (GitLab and Gitea), or every repo asked for (GitHub).
	Scope string
	Token string // never logged, never stored; required for GitHub
}

// LogValue keeps the token out of logs.
func (s Source) LogValue() slog.Value {
	return slog.StringValue(s.String())
}

func (s Source) String() string {
	out := string(s.Kind) + "=" + s.Web.String()
	if s.Scope != "" {
		out += "/" + s.Scope
	}
	if s.Token != "" {
		out += " (token set)"
	}
	return out
}

// ParseSource reads a --feed value, KIND=URL: the forge's web root, for GitLab with the
// path of a group to list only it (gitlab=https://gitlab.com/gnome). tokens maps a host
// to its credential (--forge-token HOST=TOKEN).
func ParseSource(spec string, tokens map[string]string) (Source, error) {
	kind, raw, ok := strings.Cut(spec, "=")
	if !ok {
		return Source{}, fmt.Errorf("feed %q: want KIND=URL (kind github, gitlab or gitea)", spec)
	}
	s := Source{Kind: Kind(strings.ToLower(strings.TrimSpace(kind)))}
	switch s.Kind {
	case GitHub, GitLab, Gitea:
	case "forgejo":
		s.Kind = Gitea
	default:
		return Source{}, fmt.Errorf("feed %q: unknown kind %q (want github, gitlab, gitea or forgejo)", spec, kind)
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return Source{}, fmt.Errorf("feed %q: the URL must be a forge's http(s) web root, with no credentials, query or fragment", spec)
	}
	u.Host = strings.ToLower(u.Host)
	s.Scope = strings.Trim(u.Path, "/")
	u.Path, u.RawPath = "", ""
	s.Web = u
	if s.Scope != "" && s.Kind != GitLab {
		return Source{}, fmt.Errorf("feed %q: only a GitLab feed takes a group path; %s feeds list the whole instance", spec, s.Kind)
	}
	s.Token = tokens[u.Hostname()]
	if err := s.takes(s.Token); err != nil {
		return Source{}, fmt.Errorf("feed %q: %w", spec, err)
	}
	return s, nil
}

// takes says why the feed cannot be probed with token tok ("": none), if it cannot.
func (s Source) takes(tok string) error {
	if s.Kind == GitHub && tok == "" {
		return fmt.Errorf("GitHub's GraphQL API needs a token: --forge-token %s=TOKEN", s.Web.Hostname())
	}
	if tok != "" && s.Web.Scheme != "https" {
		return fmt.Errorf("a token is never sent over plain http; use https")
	}
	return nil
}

// ParseTokens reads --forge-token values and lines of a token file, HOST=TOKEN each
// (blank lines and lines starting with # are skipped). Errors never quote a token.
func ParseTokens(lines []string) (map[string]string, error) {
	out := map[string]string{}
	for n, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		host, tok, ok := strings.Cut(l, "=")
		host, tok = strings.ToLower(strings.TrimSpace(host)), strings.TrimSpace(tok)
		if !ok || host == "" || tok == "" || strings.ContainsAny(host, "/: ") {
			return nil, fmt.Errorf("forge token %d: want HOST=TOKEN (a host name, no scheme or port)", n+1)
		}
		if _, dup := out[host]; dup {
			return nil, fmt.Errorf("forge token %d: a second token for %s", n+1, host)
		}
		out[host] = tok
	}
	return out, nil
}

// Covers reports whether the repo at repoURL (normalized: https, lower-case host) is
// one this feed lists.
func (s Source) Covers(repoURL string) bool {
	u, err := url.Parse(repoURL)
	if err != nil || !strings.EqualFold(u.Host, s.Web.Host) {
		return false
	}
	if s.Scope == "" {
		return true
	}
	p := strings.Trim(u.Path, "/")
	return strings.HasPrefix(strings.ToLower(p), strings.ToLower(s.Scope)+"/")
}

// Change is a repo a feed says changed, at the time it gives (a last push or last
// activity).
type Change struct {
	URL string // the repo's web or clone URL as the forge spells it
	At  time.Time
	// Recheck, if set, asks for a second look then: GitLab moves last_activity_at at
	// most once an hour, so pushes in the hour after At are not listed.
	Recheck time.Time
}
