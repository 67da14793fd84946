package feeds

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
)

func TestRunnerDeliversChangesAndSecondLooks(t *testing.T) {
	gl := newFakeGitLab(t, "glpat")
	gt := newFakeGitea(t, "")
	gl.add("g/busy", t0.Add(-time.Minute))
	gt.add("o/quiet", t0.Add(-time.Minute))
	clk := clock.NewVirtual(t0)
	// The Gitea fake and the GitLab fake share 127.0.0.1: the Gitea feed's token is the
	// GitLab one, which the Gitea fake does not ask for.
	toks := map[string]string{"127.0.0.1": "glpat"}
	glp := New(source(t, "gitlab="+gl.srv.URL, toks), gl.srv.Client(), clk, DefaultPeriod)
	gtp := New(source(t, "gitea="+gt.srv.URL, toks), gt.srv.Client(), clk, DefaultPeriod)
	r := NewRunner([]*Prober{glp, gtp}, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var got []Change
	sink := func(_ context.Context, cs []Change) { got = append(got, cs...) }
	none := func(Source) []string { return nil }

	r.Tick(context.Background(), none, sink)
	if len(got) != 2 {
		t.Fatalf("first tick: %v", got)
	}
	if !r.Covered(gl.srv.URL+"/g/busy") || !r.Covered(gt.srv.URL+"/o/quiet") {
		t.Error("a working feed's repos are not covered")
	}
	// GitLab's project gets its second look an hour after its activity, not before.
	got = nil
	clk.Advance(30 * time.Minute)
	r.Tick(context.Background(), none, sink)
	if len(got) != 0 {
		t.Fatalf("half an hour on: %v", got)
	}
	clk.Advance(40 * time.Minute)
	r.Tick(context.Background(), none, sink)
	if len(got) != 1 || !strings.HasSuffix(got[0].URL, "/g/busy") {
		t.Fatalf("an hour on: %v, want the GitLab project's second look", got)
	}
	if s := r.Stats(); s.Probes != 6 || s.Changes != 2 || s.Rechecks != 1 || s.Feeds != 2 || s.FeedsStopped != 0 {
		t.Errorf("stats %+v", s)
	}

	// A feed that refuses its credential stops, and its repos fall back to polling.
	gl.mu.Lock()
	gl.token = "rotated"
	gl.mu.Unlock()
	clk.Advance(5 * time.Minute)
	r.Tick(context.Background(), none, sink)
	if r.Covered(gl.srv.URL+"/g/busy") || !r.Covered(gt.srv.URL+"/o/quiet") {
		t.Error("coverage after the GitLab feed was refused")
	}
	n := len(gl.requests)
	r.Tick(context.Background(), none, sink)
	if len(gl.requests) != n {
		t.Error("a stopped feed was asked again")
	}
	if s := r.Stats(); s.FeedsStopped != 1 || s.Errors != 1 {
		t.Errorf("stats after the refusal %+v", s)
	}

	// The rotated token is taken up where the tokens are kept: the stopped feed is
	// probed again with it and covers again. A read that fails, or a token a feed cannot
	// take, leaves the tokens as they were.
	var logs strings.Builder
	r.log = slog.New(slog.NewTextHandler(&logs, nil))
	kept := map[string]string{"127.0.0.1": "glpat"}
	var readErr error
	r.Tokens = func(context.Context) (map[string]string, error) { return kept, readErr }
	kept["127.0.0.1"] = "rotated"
	readErr = errors.New("secrets manager unreachable")
	clk.Advance(5 * time.Minute)
	r.Tick(context.Background(), none, sink)
	if len(gl.requests) != n || r.Covered(gl.srv.URL+"/g/busy") {
		t.Error("a feed took a token from a read that failed")
	}
	readErr = nil
	gl.add("g/woke", clk.Now().Add(-time.Minute))
	got = nil
	clk.Advance(5 * time.Minute)
	r.Tick(context.Background(), none, sink)
	if len(gl.requests) == n || !r.Covered(gl.srv.URL+"/g/busy") || r.Stats().FeedsStopped != 0 {
		t.Fatalf("the feed did not take its rotated token: %d requests, stats %+v", len(gl.requests)-n, r.Stats())
	}
	if !slices.ContainsFunc(got, func(c Change) bool { return strings.HasSuffix(c.URL, "/g/woke") }) {
		t.Errorf("a change after the rotation not delivered: %v", got)
	}
	// No token reaches the logs.
	if strings.Contains(logs.String(), "rotated") || strings.Contains(logs.String(), "glpat") {
		t.Errorf("a token in the logs:\n%s", logs.String())
	}
}

func TestRunnerKeepsATokenItCannotReplace(t *testing.T) {
	gh := newFakeGitHub(t, "ghp_old", 5000, t0.Add(time.Hour))
	clk := clock.NewVirtual(t0)
	p := New(source(t, "github="+gh.srv.URL, map[string]string{"127.0.0.1": "ghp_old"}), gh.srv.Client(), clk, DefaultPeriod)
	var logs strings.Builder
	r := NewRunner([]*Prober{p}, clk, slog.New(slog.NewTextHandler(&logs, nil)))
	r.Tokens = func(context.Context) (map[string]string, error) { return map[string]string{"other.example": "x"}, nil }
	r.Tick(context.Background(), func(Source) []string { return nil }, func(context.Context, []Change) {})
	if p.token != "ghp_old" || !strings.Contains(logs.String(), "GitHub's GraphQL API needs a token") {
		t.Errorf("a GitHub feed lost its token to a list without its host (token %q):\n%s", p.token, logs.String())
	}
	if r.Stats().FeedsStopped != 0 {
		t.Error("the feed stopped")
	}
}
