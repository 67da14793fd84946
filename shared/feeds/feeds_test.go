package feeds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func source(t *testing.T, spec string, tokens map[string]string) Source {
	t.Helper()
	s, err := ParseSource(spec, tokens)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func urls(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.URL[strings.LastIndex(c.URL[:strings.LastIndex(c.URL, "/")], "/")+1:])
	}
	return out
}

func TestParseSource(t *testing.T) {
	tokens, err := ParseTokens([]string{"# tokens", "", "GitHub.com = ghp_x", "gitlab.example.org=glpat"})
	if err != nil {
		t.Fatal(err)
	}
	if tokens["github.com"] != "ghp_x" || tokens["gitlab.example.org"] != "glpat" {
		t.Fatalf("tokens %v", tokens)
	}
	s := source(t, "gitlab=https://GitLab.example.org/gnome/sub/", tokens)
	if s.Kind != GitLab || s.Web.String() != "https://gitlab.example.org" || s.Scope != "gnome/sub" || s.Token != "glpat" {
		t.Fatalf("parsed %+v", s)
	}
	if !s.Covers("https://gitlab.example.org/gnome/sub/app") || s.Covers("https://gitlab.example.org/gnome/other") || s.Covers("https://gitlab.com/gnome/sub/app") {
		t.Error("a group feed covers the wrong repos")
	}
	if f := source(t, "forgejo=https://codeberg.org", nil); f.Kind != Gitea || !f.Covers("https://codeberg.org/a/b") {
		t.Errorf("forgejo feed %+v", f)
	}
	// The token is never in a log line or an error.
	var buf strings.Builder
	slog.New(slog.NewTextHandler(&buf, nil)).Info("feed", "source", source(t, "github=https://github.com", tokens))
	if strings.Contains(buf.String(), "ghp_x") || !strings.Contains(buf.String(), "token set") {
		t.Errorf("log line %q", buf.String())
	}
	for spec, want := range map[string]string{
		"github=https://github.com":               "needs a token",
		"gitlab=http://gitlab.example.org":        "plain http",
		"gitea=https://codeberg.org/forgejo":      "only a GitLab feed",
		"bitbucket=https://bitbucket.org":         "unknown kind",
		"gitlab":                                  "KIND=URL",
		"gitlab=https://user:pw@gitlab.com":       "no credentials",
		"gitlab=https://gitlab.com/?private=true": "no credentials, query",
	} {
		toks := tokens
		if strings.HasPrefix(spec, "github") {
			toks = nil
		}
		_, err := ParseSource(spec, toks)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "glpat") {
			t.Errorf("%s: %v, want %q", spec, err, want)
		}
	}
	if _, err := ParseTokens([]string{"github.com=a", "github.com=secret2"}); err == nil || strings.Contains(err.Error(), "secret2") {
		t.Errorf("duplicate token: %v", err)
	}
	if _, err := ParseTokens([]string{"https://github.com=tok"}); err == nil || strings.Contains(err.Error(), "tok") && !strings.Contains(err.Error(), "TOKEN") {
		t.Errorf("token with a scheme: %v", err)
	}
}

func TestGitLabListsWhatChangedSinceTheLastProbe(t *testing.T) {
	f := newFakeGitLab(t, "glpat")
	for i := range 150 {
		f.add(fmt.Sprintf("grp/p%03d", i), t0.Add(-time.Duration(i)*time.Second))
	}
	f.add("grp/old", t0.Add(-time.Hour))
	f.add("other/x", t0.Add(-time.Second))
	clk := clock.NewVirtual(t0)
	src := source(t, "gitlab="+f.srv.URL, map[string]string{"127.0.0.1": "glpat"})
	p := New(src, f.srv.Client(), clk, 5*time.Minute)
	cs, err := p.Probe(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Two pages (100 + 51), the most recent first; the hour-old project is outside.
	if len(cs) != 151 || !strings.HasSuffix(cs[0].URL, "/grp/p000") || len(f.requests) != 2 {
		t.Fatalf("%d changes from %d requests; first %v", len(cs), len(f.requests), cs[0])
	}
	for _, c := range cs {
		if strings.HasSuffix(c.URL, "/grp/old") {
			t.Fatal("a project idle for an hour was listed")
		}
		if !c.Recheck.Equal(c.At.Add(GitLabActivityStep + Overlap)) {
			t.Fatalf("change %v has no second look an hour on", c)
		}
	}
	if r := f.requests[0]; r.Header.Get("PRIVATE-TOKEN") != "glpat" || r.URL.Query().Get("per_page") != "100" {
		t.Fatalf("request %v %v", r.URL, r.Header)
	}
	// Nothing new: the overlap repeats no change, and the unchanged first page is a 304.
	clk.Advance(5 * time.Minute)
	cs, err = p.Probe(context.Background(), nil)
	if err != nil || len(cs) != 0 {
		t.Fatalf("second probe: %v %v", urls(cs), err)
	}
	// One project moves.
	clk.Advance(5 * time.Minute)
	f.add("grp/p007", clk.Now().Add(-30*time.Second))
	cs, err = p.Probe(context.Background(), nil)
	if err != nil || len(cs) != 1 || !strings.HasSuffix(cs[0].URL, "/grp/p007") {
		t.Fatalf("third probe: %v %v", urls(cs), err)
	}
	// A group feed asks the group, its name escaped as one segment.
	gp := New(source(t, "gitlab="+f.srv.URL+"/other", map[string]string{"127.0.0.1": "glpat"}), f.srv.Client(), clock.NewVirtual(t0), 5*time.Minute)
	cs, err = gp.Probe(context.Background(), nil)
	if err != nil || len(cs) != 1 || !strings.HasSuffix(cs[0].URL, "/other/x") {
		t.Fatalf("group probe: %v %v", urls(cs), err)
	}
}

func TestConditionalRequestsSpareTheListing(t *testing.T) {
	f := newFakeGitea(t, "")
	f.add("a/one", t0.Add(-time.Minute))
	clk := clock.NewVirtual(t0)
	p := New(source(t, "gitea="+f.srv.URL, nil), f.srv.Client(), clk, 5*time.Minute)
	if cs, err := p.Probe(context.Background(), nil); err != nil || len(cs) != 1 {
		t.Fatalf("first probe %v %v", cs, err)
	}
	clk.Advance(5 * time.Minute)
	if cs, err := p.Probe(context.Background(), nil); err != nil || len(cs) != 0 {
		t.Fatalf("second probe %v %v", cs, err)
	}
	if last := f.requests[len(f.requests)-1]; last.Header.Get("If-None-Match") == "" {
		t.Error("the second probe sent no validator")
	}
}

func TestGiteaReadsUntilTheFirstOlderRepo(t *testing.T) {
	f := newFakeGitea(t, "tok")
	for i := range 120 {
		f.add(fmt.Sprintf("o/r%03d", i), t0.Add(-time.Duration(i)*time.Second))
	}
	for i := range 500 { // the rest of the instance, idle: never read
		f.add(fmt.Sprintf("idle/r%03d", i), t0.Add(-48*time.Hour))
	}
	p := New(source(t, "gitea="+f.srv.URL, map[string]string{"127.0.0.1": "tok"}), f.srv.Client(), clock.NewVirtual(t0), 5*time.Minute)
	cs, err := p.Probe(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 120 || len(f.requests) != 3 {
		t.Fatalf("%d changes in %d requests, want 120 in 3 (50 a page, stopping at the first idle repo)", len(cs), len(f.requests))
	}
	if f.requests[0].Header.Get("Authorization") != "token tok" {
		t.Errorf("authorization %q", f.requests[0].Header.Get("Authorization"))
	}
}

func TestGitHubAsksInBatchesWithinTheBudget(t *testing.T) {
	g := newFakeGitHub(t, "ghp", 5000, t0.Add(time.Hour))
	var repos []string
	for i := range 250 {
		at := t0.Add(-48 * time.Hour)
		if i%50 == 0 {
			at = t0.Add(-time.Minute) // pushed since the last probe
		}
		g.add(fmt.Sprintf("own/r%03d", i), at)
		repos = append(repos, fmt.Sprintf("%s/own/r%03d", g.srv.URL, i))
	}
	repos = append(repos, g.srv.URL+"/own/deleted", "https://elsewhere.example/own/x", g.srv.URL+"/not-a-repo")
	clk := clock.NewVirtual(t0)
	p := New(source(t, "github="+g.srv.URL, map[string]string{"127.0.0.1": "ghp"}), g.srv.Client(), clk, 5*time.Minute)
	cs, err := p.Probe(context.Background(), repos)
	if err != nil {
		t.Fatal(err)
	}
	if g.queries != 3 || len(cs) != 5 {
		t.Fatalf("%d queries found %v; want 3 queries (100 a query) and 5 changes", g.queries, urls(cs))
	}
	if p.remaining != 4997 {
		t.Errorf("remaining points %d, want 4997 (read from rateLimit)", p.remaining)
	}
	// The names travel as variables: a quote in a name cannot change the query.
	g.add(`own/x"){a}`, t0)
	if _, err := p.Probe(context.Background(), []string{g.srv.URL + `/own/x"){a}`}); err != nil {
		t.Fatalf("a name with a quote: %v", err)
	}

	// A nearly spent budget is spread over the probes left before the reset.
	g.mu.Lock()
	g.points, g.queries = 120, 0
	g.mu.Unlock()
	p.remaining = 120
	clk.Advance(5 * time.Minute)
	if _, err := p.Probe(context.Background(), repos); err != nil {
		t.Fatal(err)
	}
	if g.queries != 3 { // 120 × 0.9 / 11 probes left: 9 queries' worth, of which 3 are needed
		t.Fatalf("%d queries with 120 points left, want the 3 needed", g.queries)
	}
	p.remaining, p.resetAt = 30, clk.Now().Add(55*time.Minute)
	g.mu.Lock()
	g.queries = 0
	g.mu.Unlock()
	clk.Advance(time.Minute)
	if _, err := p.Probe(context.Background(), repos); err != nil {
		t.Fatal(err)
	}
	if g.queries != 2 { // 30 × 0.9 / 11 = 2
		t.Errorf("%d queries with 30 points left for 11 probes, want 2", g.queries)
	}
}

func TestRefusals(t *testing.T) {
	f := newFakeGitLab(t, "glpat")
	f.add("g/a", t0)
	clk := clock.NewVirtual(t0)
	mk := func(tok string) *Prober {
		return New(source(t, "gitlab="+f.srv.URL, map[string]string{"127.0.0.1": tok}), f.srv.Client(), clk, 5*time.Minute)
	}
	// A wrong token: ErrAuth, and the message names no token.
	if _, err := mk("wrong").Probe(context.Background(), nil); !errors.Is(err, ErrAuth) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("wrong token: %v", err)
	}
	// 429 with Retry-After pauses the feed; a probe inside the pause asks nothing.
	p := mk("glpat")
	f.script(http.StatusTooManyRequests, map[string]string{"Retry-After": "120"}, `{"message":"429 Too Many Requests"}`)
	var rl *RateLimited
	if _, err := p.Probe(context.Background(), nil); !errors.As(err, &rl) || !rl.Until.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("429: %v", err)
	}
	n := len(f.requests)
	clk.Advance(time.Minute)
	if _, err := p.Probe(context.Background(), nil); !errors.As(err, &rl) || len(f.requests) != n {
		t.Fatalf("probe inside the pause: %v, %d requests", err, len(f.requests)-n)
	}
	clk.Advance(time.Minute)
	if cs, err := p.Probe(context.Background(), nil); err != nil || len(cs) != 1 {
		t.Fatalf("after the pause: %v %v", cs, err)
	}
	// 403 with no requests left is a rate limit until the reset, not a refused token.
	f.script(http.StatusForbidden, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": fmt.Sprint(clk.Now().Add(10 * time.Minute).Unix())}, "")
	if _, err := p.Probe(context.Background(), nil); !errors.As(err, &rl) || errors.Is(err, ErrAuth) {
		t.Fatalf("403 rate limit: %v", err)
	}
	// Malformed bodies and bad headers are errors that say what was wrong.
	for body, want := range map[string]string{`{"not":"a list"}`: "GitLab projects page 1", `[{"web_url":"x"}]`: "without web_url or last_activity_at", `<html>`: "GitLab projects page 1"} {
		q := mk("glpat")
		f.script(http.StatusOK, map[string]string{"Content-Type": "application/json"}, body)
		var bad *BadAnswer
		if _, err := q.Probe(context.Background(), nil); !errors.As(err, &bad) || !strings.Contains(err.Error(), want) {
			t.Errorf("body %s: %v", body, err)
		}
	}
	f.script(http.StatusOK, map[string]string{"X-Next-Page": "two"}, `[]`)
	if _, err := mk("glpat").Probe(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "X-Next-Page") {
		t.Errorf("bad X-Next-Page: %v", err)
	}
	// A body past the cap is refused, not read whole.
	big := strings.Repeat(" ", MaxBody+10)
	f.script(http.StatusOK, nil, "["+big+"]")
	if _, err := mk("glpat").Probe(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("huge body: %v", err)
	}
	// Gitea's {"ok":false} and GitHub's RATE_LIMITED.
	gt := newFakeGitea(t, "")
	gt.script(http.StatusOK, nil, `{"ok":false,"data":[]}`)
	if _, err := New(source(t, "gitea="+gt.srv.URL, nil), gt.srv.Client(), clk, time.Minute).Probe(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "ok is false") {
		t.Errorf("gitea ok=false: %v", err)
	}
	gh := newFakeGitHub(t, "ghp", 0, clk.Now().Add(30*time.Minute))
	gh.add("o/r", t0)
	gp := New(source(t, "github="+gh.srv.URL, map[string]string{"127.0.0.1": "ghp"}), gh.srv.Client(), clk, 5*time.Minute)
	if _, err := gp.Probe(context.Background(), []string{gh.srv.URL + "/o/r"}); !errors.As(err, &rl) || !rl.Until.Equal(clk.Now().Add(30*time.Minute).Truncate(time.Second)) {
		t.Errorf("RATE_LIMITED: %v", err)
	}
}
