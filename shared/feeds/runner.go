package feeds

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
)

// DefaultPeriod is how often each feed is probed.
const DefaultPeriod = 5 * time.Minute

// maxRechecks bounds the second looks waiting (GitLab's hourly activity stamp); past it
// the ones due soonest are dropped, and those repos wait for their polls.
const maxRechecks = 100000

// FailuresBeforeUncovered is how many probes of a feed in a row may fail (errors, rate
// limits, refused redirects) before its repos stop counting as covered: a feed that
// delivers nothing must not keep their polls stretched. The first probe that answers
// makes them covered again.
const FailuresBeforeUncovered = 3

// Recorder takes metric samples: metrics.Prometheus and metrics.EMF are both one.
type Recorder interface {
	Record(...metrics.Sample) error
}

// Runner probes every configured feed once a period and hands what changed to a sink.
//
// Covered, asked by the workers under their own lock for every poll they schedule,
// reads atomics only: nothing a feed answers (a page of a hundred thousand projects, a
// forge that never answers) can make it wait. Tick is for one goroutine at a time
// (Run's); it holds no lock across the network or a loop over changes.
type Runner struct {
	probers []*Prober
	state   []*feedState // by prober
	clock   clock.Clock
	log     *slog.Logger
	// Metrics, if set, counts the feeds that stop covering (metrics.FeedsUncovered).
	Metrics Recorder
	// Tokens, if set, gives the feeds' tokens by host again before each tick (a cache
	// of where they are kept: read it at most every few minutes), so a rotated token is
	// taken up without a restart, and a feed that refused the old one is probed again.
	Tokens func(context.Context) (map[string]string, error)

	probes, changes, rechecked, errs, rateLimited atomic.Int64
	rechecks                                      recheckQueue // Tick's own
}

// feedState is what Covered and Stats read of one feed.
type feedState struct {
	stopped atomic.Bool  // refused its credential: stopped until it has a new one
	failing atomic.Int64 // probes that failed in a row
}

// covering reports whether the feed counts as coverage now.
func (f *feedState) covering() bool {
	return !f.stopped.Load() && f.failing.Load() < FailuresBeforeUncovered
}

// Stats are the runner's counters, for metrics.
type Stats struct {
	Probes, Changes, Rechecks, Errors, RateLimited int64
	// Feeds is how many are configured, FeedsStopped how many refused their
	// credential, FeedsFailing how many failed FailuresBeforeUncovered probes in a row
	// and answer nothing since.
	Feeds, FeedsStopped, FeedsFailing int
}

// NewRunner runs probers (one per feed).
func NewRunner(probers []*Prober, clk clock.Clock, log *slog.Logger) *Runner {
	r := &Runner{probers: probers, clock: clk, log: log}
	for range probers {
		r.state = append(r.state, &feedState{})
	}
	return r
}

// Sources are the feeds run, so the worker knows which repos a feed covers.
func (r *Runner) Sources() []Source {
	out := make([]Source, 0, len(r.probers))
	for _, p := range r.probers {
		out = append(out, p.src)
	}
	return out
}

// Covered reports whether a working feed lists repoURL: such a repo's polls are only
// the fall-back. A feed that refused its credential, or whose last
// FailuresBeforeUncovered probes failed, covers nothing.
func (r *Runner) Covered(repoURL string) bool {
	for i, p := range r.probers {
		if r.state[i].covering() && p.src.Covers(repoURL) {
			return true
		}
	}
	return false
}

// Stats is a snapshot of the counters.
func (r *Runner) Stats() Stats {
	s := Stats{Probes: r.probes.Load(), Changes: r.changes.Load(), Rechecks: r.rechecked.Load(),
		Errors: r.errs.Load(), RateLimited: r.rateLimited.Load(), Feeds: len(r.probers)}
	for _, f := range r.state {
		switch {
		case f.stopped.Load():
			s.FeedsStopped++
		case f.failing.Load() >= FailuresBeforeUncovered:
			s.FeedsFailing++
		}
	}
	return s
}

// Tick probes every feed once (repos gives, for a feed, the URLs of the repos it should
// ask about: GitHub's), then hands the changes and the second looks that are due to sink.
// A feed's error is logged and counted; the others go on.
func (r *Runner) Tick(ctx context.Context, repos func(Source) []string, sink func(context.Context, []Change)) {
	r.takeTokens(ctx)
	var out []Change
	for i, p := range r.probers {
		f := r.state[i]
		if f.stopped.Load() || ctx.Err() != nil {
			continue
		}
		cs, err := p.Probe(ctx, repos(p.src))
		if ctx.Err() != nil {
			return // shutting down: neither a failure of the feed nor changes to act on
		}
		r.note(p, f, len(cs), err)
		for _, c := range cs {
			if !c.Recheck.IsZero() {
				r.rechecks.add(c.URL, c.Recheck)
			}
		}
		out = append(out, cs...)
	}
	due := r.rechecks.due(r.clock.Now())
	r.rechecked.Add(int64(len(due)))
	out = append(out, due...)
	if len(out) > 0 && ctx.Err() == nil {
		sink(ctx, out)
	}
}

// takeTokens gives each feed its host's token from Tokens where it changed. A feed
// that refused its credential is probed again with a new one. A read that fails, or a
// token a feed cannot take (none for GitHub, one over plain http), leaves the feeds'
// tokens as they were; tokens are never logged.
func (r *Runner) takeTokens(ctx context.Context) {
	if r.Tokens == nil {
		return
	}
	tokens, err := r.Tokens(ctx)
	if err != nil {
		r.log.Warn("feed tokens not read again; the feeds keep theirs", "err", err)
		return
	}
	for i, p := range r.probers {
		tok := tokens[p.src.Web.Hostname()]
		if tok == p.token {
			continue
		}
		if err := p.src.takes(tok); err != nil {
			r.log.Warn("feed keeps its token: the new one cannot be used", "feed", p.src, "err", err)
			continue
		}
		p.token = tok
		if r.state[i].stopped.Swap(false) {
			r.log.Info("feed has a new token; probing it again", "feed", p.src)
		} else {
			r.log.Info("feed has a new token", "feed", p.src)
		}
	}
}

// note counts one probe of feed p and logs what went wrong.
func (r *Runner) note(p *Prober, f *feedState, changes int, err error) {
	r.probes.Add(1)
	r.changes.Add(int64(changes))
	if changes >= MaxChanges {
		r.log.Warn("feed named more changes than one probe takes; the rest wait for their polls", "feed", p.src, "taken", changes)
	}
	var rl *RateLimited
	switch {
	case err == nil:
		if f.failing.Swap(0) >= FailuresBeforeUncovered {
			r.log.Info("feed answers again; its repos count as covered", "feed", p.src)
		}
		return
	case errors.Is(err, ErrAuth):
		f.stopped.Store(true)
		r.errs.Add(1)
		r.log.Error("feed refused its credential; its repos are polled as usual until it has a new one", "feed", p.src, "err", err)
		return
	case errors.As(err, &rl):
		r.rateLimited.Add(1)
		r.log.Warn("feed rate-limited", "feed", p.src, "until", rl.Until)
	default:
		r.errs.Add(1)
		r.log.Warn("feed probe failed", "feed", p.src, "err", err)
	}
	if f.failing.Add(1) == FailuresBeforeUncovered {
		r.log.Warn("feed failed its last probes; its repos are polled as usual until it answers again",
			"feed", p.src, "failed_in_a_row", FailuresBeforeUncovered)
		if r.Metrics != nil {
			_ = r.Metrics.Record(metrics.FeedUncovered())
		}
	}
}

// Run ticks every period until ctx ends.
func (r *Runner) Run(ctx context.Context, period time.Duration, repos func(Source) []string, sink func(context.Context, []Change)) {
	if len(r.probers) == 0 {
		return
	}
	clock.Every(ctx, period, nil, func() { r.Tick(ctx, repos, sink) })
}

// recheckQueue holds the second looks by URL, in a heap by time: adding one, dropping
// the one due first at the bound and taking those due cost O(log n) each.
type recheckQueue struct {
	byURL map[string]*recheck
	h     recheckHeap
}

type recheck struct {
	url string
	at  time.Time
	i   int // index in the heap
}

// add asks for a second look at u at t (the later one wins), within maxRechecks.
func (q *recheckQueue) add(u string, t time.Time) {
	if q.byURL == nil {
		q.byURL = map[string]*recheck{}
	}
	if old, ok := q.byURL[u]; ok {
		if t.After(old.at) {
			old.at = t
			heap.Fix(&q.h, old.i)
		}
		return
	}
	if len(q.h) >= maxRechecks {
		first := heap.Pop(&q.h).(*recheck)
		delete(q.byURL, first.url)
	}
	rc := &recheck{url: u, at: t}
	heap.Push(&q.h, rc)
	q.byURL[u] = rc
}

// due takes the second looks due at now, earliest first.
func (q *recheckQueue) due(now time.Time) []Change {
	var out []Change
	for len(q.h) > 0 && !q.h[0].at.After(now) {
		rc := heap.Pop(&q.h).(*recheck)
		delete(q.byURL, rc.url)
		out = append(out, Change{URL: rc.url, At: rc.at})
	}
	return out
}

func (q *recheckQueue) len() int { return len(q.h) }

type recheckHeap []*recheck

func (h recheckHeap) Len() int           { return len(h) }
func (h recheckHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h recheckHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}
func (h *recheckHeap) Push(x any) {
	rc := x.(*recheck)
	rc.i = len(*h)
	*h = append(*h, rc)
}
func (h *recheckHeap) Pop() any {
	old := *h
	rc := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return rc
}
