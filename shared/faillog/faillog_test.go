package faillog

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// logged is what a Log wrote: its lines, and how many at WARN or worse.
type logged struct{ buf bytes.Buffer }

func (g *logged) lines() []string {
	s := strings.TrimSpace(g.buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func (g *logged) warns() int { return strings.Count(g.buf.String(), "level=WARN") }

func newLog(each int) (*Log, *logged) {
	g := &logged{}
	return New(slog.New(slog.NewTextHandler(&g.buf, nil)), "fetch").WithInterval(time.Minute, each), g
}

func urlOf(host string, i int) string { return fmt.Sprintf("https://%s/org/repo-%04d.git", host, i) }

// errFor is an error as go-git words one: it names the URL it asked.
func errFor(u string) error {
	return fmt.Errorf("network: Get %q: dial tcp 10.0.0.1:443: connect: connection refused", u+"/info/refs?service=git-upload-pack")
}

// A thousand repos failing alike, retried every 40 s for three minutes: a few lines of
// their own at first, then one summary a minute, never a line per repo.
func TestThousandFailingAlike(t *testing.T) {
	l, g := newLog(DefaultEach)
	for tick := 0; tick*40 <= 180; tick++ {
		now := t0.Add(time.Duration(tick*40) * time.Second)
		for i := range 1000 {
			u := urlOf("down.example", i)
			l.Failed(now.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("id%04d", i), u, "down.example", "network", errFor(u))
		}
		l.Flush(now.Add(time.Second))
	}
	l.Flush(t0.Add(10 * time.Minute))
	if w := g.warns(); w > 60 || w < 4 {
		t.Fatalf("%d WARN lines for 1,000 repos failing alike over 3 minutes, want a few (≤ 60):\n%s", w, g.buf.String())
	}
	own, sums := strings.Count(g.buf.String(), `msg="fetch failing"`), strings.Count(g.buf.String(), `msg="fetch failures"`)
	if own != DefaultEach {
		t.Errorf("%d repos got a line of their own, want the first %d", own, DefaultEach)
	}
	if sums < 3 {
		t.Errorf("%d summaries over 3 minutes, want one a minute", sums)
	}
	first := g.lines()[DefaultEach] // the first summary
	for _, want := range []string{"host=down.example", "kind=network", "repos=1000", "new=1000", "failing=1000", "example_repo=id0000"} {
		if !strings.Contains(first, want) {
			t.Errorf("the summary lacks %s:\n%s", want, first)
		}
	}
	for _, line := range g.lines() {
		for i := range 1000 {
			u := urlOf("down.example", i)
			if c := strings.Count(line, strings.TrimSuffix(u, ".git")); c > 1 {
				t.Fatalf("a line names its URL %d times:\n%s", c, line)
			}
		}
	}
}

// One repo: its first failure is a line, failing again the same way is not, a new kind
// of failure is, and so is its recovery, once.
func TestOneRepo(t *testing.T) {
	l, g := newLog(DefaultEach)
	u := urlOf("h.example", 1)
	l.Failed(t0, "r1", u, "h.example", "network", errFor(u))
	l.Failed(t0.Add(time.Second), "r1", u, "h.example", "network", errFor(u))
	l.Failed(t0.Add(2*time.Second), "r1", u, "h.example", "timeout", errors.New("timeout: no answer in 60s"))
	if n := strings.Count(g.buf.String(), `msg="fetch failing"`); n != 2 {
		t.Errorf("%d failure lines, want 2 (the first, and the new kind):\n%s", n, g.buf.String())
	}
	l.Succeeded(t0.Add(3*time.Second), "r1", u, "h.example")
	l.Succeeded(t0.Add(4*time.Second), "r1", u, "h.example")
	if n := strings.Count(g.buf.String(), `msg="fetch recovered"`); n != 1 || !strings.Contains(g.buf.String(), "was=timeout") {
		t.Errorf("%d recovery lines, want 1 saying what it was:\n%s", n, g.buf.String())
	}
	if l.Failing() != 0 {
		t.Errorf("%d failing after the recovery", l.Failing())
	}
	// Its failures of the interval had lines of their own: no summary repeats them...
	before := len(g.lines())
	l.Flush(t0.Add(2 * time.Minute))
	if got := g.lines()[before:]; len(got) != 0 {
		t.Errorf("a summary of what was said already:\n%s", strings.Join(got, "\n"))
	}
	// ...and a repo that keeps failing the same way later is counted, once an interval.
	l.Failed(t0.Add(3*time.Minute), "r1", u, "h.example", "network", errFor(u))
	l.Failed(t0.Add(3*time.Minute+time.Second), "r1", u, "h.example", "network", errFor(u))
	l.Failed(t0.Add(3*time.Minute+2*time.Second), "r1", u, "h.example", "network", errFor(u))
	l.Flush(t0.Add(5 * time.Minute))
	if n := strings.Count(g.buf.String(), `msg="fetch failing"`); n != 3 {
		t.Errorf("failing anew after a recovery: %d failure lines, want 3", n)
	}
}

// Hosts and kinds are summarized apart; recoveries of many repos are one line.
func TestGroupsAndRecoveries(t *testing.T) {
	l, g := newLog(1)
	for i := range 50 {
		for _, h := range []string{"a.example", "b.example"} {
			u := urlOf(h, i)
			l.Failed(t0, h+fmt.Sprint(i), u, h, "auth_required", errors.New("auth_required: the upstream asks for credentials"))
		}
	}
	l.Flush(t0.Add(time.Minute))
	for _, h := range []string{"a.example", "b.example"} {
		if !strings.Contains(g.buf.String(), `msg="fetch failures" host=`+h+" kind=auth_required repos=50 new=50") {
			t.Errorf("no summary for %s:\n%s", h, g.buf.String())
		}
	}
	for i := range 50 {
		l.Succeeded(t0.Add(90*time.Second), "a.example"+fmt.Sprint(i), urlOf("a.example", i), "a.example")
	}
	l.Flush(t0.Add(3 * time.Minute))
	if !strings.Contains(g.buf.String(), `msg="fetch recoveries" host=a.example repos=50`) ||
		strings.Count(g.buf.String(), `msg="fetch recovered"`) != 1 {
		t.Errorf("50 recoveries are not one line of their own and one summary:\n%s", g.buf.String())
	}
	if l.Failing() != 50 {
		t.Errorf("%d failing, want b.example's 50", l.Failing())
	}
	// A repo that moved away is forgotten: its success elsewhere is no recovery here.
	l.Forget("b.example0")
	l.Succeeded(t0.Add(4*time.Minute), "b.example0", urlOf("b.example", 0), "b.example")
	if strings.Contains(g.buf.String(), "repo=b.example0 url="+urlOf("b.example", 0)+" was=") {
		t.Error("a forgotten repo's success was logged as a recovery")
	}
}

func TestScrub(t *testing.T) {
	u := "https://h.example/org/repo.git"
	for in, want := range map[string]string{
		`Get "https://h.example/org/repo.git/info/refs?service=git-upload-pack": EOF`: `Get "<url>/info/refs?service=git-upload-pack": EOF`,
		`Get "https://h.example/org/repo/info/refs": EOF`:                             `Get "<url>/info/refs": EOF`,
		"timeout: no answer": "timeout: no answer",
	} {
		if got := Scrub(in, u); got != want {
			t.Errorf("Scrub(%q) = %q, want %q", in, got, want)
		}
	}
}
