package feeds

import (
	"context"
	"io"
	"log/slog"
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
}
