package health

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
)

func get(t *testing.T, c *Checker) (int, Report) {
	t.Helper()
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q", ct)
	}
	var rep Report
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return rec.Code, rep
}

// TestCheckerAnswersAndKeepsTheAnswer: 200 while every check passes, 503 naming the
// failing one, and the checks run once per TTL however often it is asked.
func TestCheckerAnswersAndKeepsTheAnswer(t *testing.T) {
	vc := clock.NewVirtual(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	runs := 0
	var storeErr error
	c := New(vc, Check{Name: "a", Run: func(context.Context) error { runs++; return nil }},
		Store(func(context.Context) error { return storeErr }))

	if code, rep := get(t, c); code != 200 || rep.Status != "ok" || rep.Checks["a"] != "ok" || rep.Checks["store"] != "ok" {
		t.Fatalf("healthy: %d %+v", code, rep)
	}
	storeErr = errors.New("database not open")
	get(t, c)
	if code, _ := get(t, c); code != 200 || runs != 1 {
		t.Fatalf("within the TTL: %d after %d runs, want the kept 200 after 1", code, runs)
	}
	vc.Advance(TTL)
	code, rep := get(t, c)
	if code != 503 || rep.Status != "unhealthy" || rep.Checks["store"] != "store: database not open" || rep.Checks["a"] != "ok" || runs != 2 {
		t.Fatalf("store down: %d %+v after %d runs", code, rep, runs)
	}
}

// TestRealChecks runs the git and mirrors-root checks against the real binary and
// directories.
func TestRealChecks(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	ctx := t.Context()
	if err := Git(gitcmd.Git{Path: git}.CheckRuns).Run(ctx); err != nil {
		t.Errorf("real git: %v", err)
	}
	if err := Git(gitcmd.Git{Path: filepath.Join(dir, "no-git")}.CheckRuns).Run(ctx); err == nil || !strings.HasPrefix(err.Error(), "git: ") {
		t.Errorf("missing git: %v", err)
	}
	if err := MirrorsRoot(dir).Run(ctx); err != nil {
		t.Errorf("readable root: %v", err)
	}
	if err := MirrorsRoot(filepath.Join(dir, "gone")).Run(ctx); err == nil || !strings.Contains(err.Error(), "mirrors root") {
		t.Errorf("missing root: %v", err)
	}
}
