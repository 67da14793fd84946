// Package faillog keeps the log of fetch failures in proportion to the problems, not to
// the repos: a thousand repos failing alike on one host are one line a minute, not a
// thousand lines.
//
// A repo's first failure of a kind is logged once, as is its recovery, but only the
// first few of a host's in one interval get a line of their own; the others are
// counted. At the end of each interval every host and kind with failures that had no
// line of their own gets one summary line: how many repos, how many failed anew, one
// example. A repo that keeps failing the same way adds only to the counts.
//
// Nothing here does I/O but the logger, and time comes from the caller, so the whole
// behaviour is tested without sleeps.
package faillog

import (
	"cmp"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults: an interval of a minute, three lines of their own per host and kind in it.
const (
	DefaultInterval = time.Minute
	DefaultEach     = 3
)

// Log is one component's failure log; safe for concurrent use.
type Log struct {
	log      *slog.Logger
	what     string // "fetch", "maintenance": the lines' subject
	interval time.Duration
	each     int

	mu      sync.Mutex
	start   time.Time      // of the current interval; zero before the first event
	failing map[string]key // repo id → the host and kind it fails with
	counts  map[key]int    // repos failing now, by host and kind
	groups  map[key]*group
}

type key struct{ host, kind string }

// group is what one host and kind did in the current interval.
type group struct {
	failed    map[string]struct{} // repos that failed (anew or again)
	anew      int                 // of them, failing anew
	told      int                 // lines of their own
	recovered int                 // repos of the host recovered (kind "")
	exRepo    string
	exURL     string
	exErr     string
}

// New is a failure log writing to log; what names the operation ("fetch").
func New(log *slog.Logger, what string) *Log {
	return &Log{log: log, what: what, interval: DefaultInterval, each: DefaultEach,
		failing: map[string]key{}, counts: map[key]int{}, groups: map[key]*group{}}
}

// WithInterval sets the summary interval and how many repos of one host and kind get a
// line of their own in it.
func (l *Log) WithInterval(d time.Duration, each int) *Log {
	l.interval, l.each = d, each
	return l
}

// Failed records a failure of repo (its id and URL) with an error of kind at now.
func (l *Log) Failed(now time.Time, repo, url, host, kind string, err error) {
	msg := Scrub(err.Error(), url)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.turn(now)
	k := key{host, kind}
	prev, was := l.failing[repo]
	l.set(repo, k)
	g := l.group(k)
	g.failed[repo] = struct{}{}
	if g.exRepo == "" {
		g.exRepo, g.exURL, g.exErr = repo, url, msg
	}
	if was && prev == k {
		return // it keeps failing the same way: a count in the summary
	}
	g.anew++
	if g.told < l.each {
		g.told++
		l.log.Warn(l.what+" failing", "repo", repo, "url", url, "kind", kind, "err", msg)
	}
}

// Succeeded records a success of repo at now: a recovery when it was failing.
func (l *Log) Succeeded(now time.Time, repo, url, host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.turn(now)
	prev, was := l.failing[repo]
	if !was {
		return
	}
	l.unset(repo)
	g := l.group(key{host, ""})
	g.recovered++
	if g.told < l.each {
		g.told++
		l.log.Info(l.what+" recovered", "repo", repo, "url", url, "was", prev.kind)
	}
}

// Forget drops a repo the caller no longer handles (moved away, deleted): its later
// success elsewhere is no recovery here.
func (l *Log) Forget(repo string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unset(repo)
}

func (l *Log) set(repo string, k key) {
	l.unset(repo)
	l.failing[repo] = k
	l.counts[k]++
}

func (l *Log) unset(repo string) {
	if k, ok := l.failing[repo]; ok {
		delete(l.failing, repo)
		if l.counts[k]--; l.counts[k] == 0 {
			delete(l.counts, k)
		}
	}
}

// Flush writes the summaries of an interval that has ended by now; call it often (a
// heartbeat), it writes nothing until then.
func (l *Log) Flush(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.turn(now)
}

// Failing is how many repos are failing now.
func (l *Log) Failing() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.failing)
}

func (l *Log) group(k key) *group {
	g := l.groups[k]
	if g == nil {
		g = &group{failed: map[string]struct{}{}}
		l.groups[k] = g
	}
	return g
}

// turn ends the interval if now is past it: the summaries, then a fresh interval.
func (l *Log) turn(now time.Time) {
	if l.start.IsZero() {
		l.start = now
		return
	}
	if now.Sub(l.start) < l.interval {
		return
	}
	keys := make([]key, 0, len(l.groups))
	for k := range l.groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.host, b.host), cmp.Compare(a.kind, b.kind)) })
	for _, k := range keys {
		g := l.groups[k]
		switch {
		case k.kind == "" && g.recovered > g.told:
			l.log.Info(l.what+" recoveries", "host", k.host, "repos", g.recovered, "interval", l.interval)
		case k.kind != "" && len(g.failed) > g.told:
			// Every failure of the interval had no line of its own: one line for all.
			l.log.Warn(l.what+" failures", "host", k.host, "kind", k.kind, "repos", len(g.failed), "new", g.anew,
				"failing", l.counts[k], "interval", l.interval, "example_repo", g.exRepo, "example_url", g.exURL, "example_err", g.exErr)
		}
	}
	clear(l.groups)
	l.start = now
}

// Scrub takes url out of an error message, where the error repeats it (git's and Go's
// HTTP errors name the URL they asked): a log line names the URL once, in its own
// attribute.
func Scrub(msg, url string) string {
	if url == "" {
		return msg
	}
	for _, u := range []string{url, strings.TrimSuffix(url, ".git"), strings.TrimSuffix(url, "/")} {
		if len(u) > len("https://") {
			msg = strings.ReplaceAll(msg, u, "<url>")
		}
	}
	return msg
}
