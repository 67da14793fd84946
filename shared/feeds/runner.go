package feeds

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
)

// DefaultPeriod is how often each feed is probed.
const DefaultPeriod = 5 * time.Minute

// maxRechecks bounds the second looks waiting (GitLab's hourly activity stamp); past it
// the oldest are dropped, and those repos wait for their polls.
const maxRechecks = 100000

// Runner probes every configured feed once a period and hands what changed to a sink.
type Runner struct {
	probers []*Prober
	clock   clock.Clock
	log     *slog.Logger

	mu       sync.Mutex
	stats    Stats
	rechecks map[string]time.Time // URL → when to look again
	stopped  map[*Prober]error    // feeds that refused their credential
}

// Stats are the runner's counters, for metrics.
type Stats struct {
	Probes, Changes, Rechecks, Errors, RateLimited int64
	Feeds, FeedsStopped                            int
}

// NewRunner runs probers (one per feed).
func NewRunner(probers []*Prober, clk clock.Clock, log *slog.Logger) *Runner {
	return &Runner{probers: probers, clock: clk, log: log, rechecks: map[string]time.Time{}, stopped: map[*Prober]error{}}
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
// the fall-back. A feed that refused its credential covers nothing.
func (r *Runner) Covered(repoURL string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.probers {
		if _, bad := r.stopped[p]; !bad && p.src.Covers(repoURL) {
			return true
		}
	}
	return false
}

// Stats is a snapshot of the counters.
func (r *Runner) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Feeds, s.FeedsStopped = len(r.probers), len(r.stopped)
	return s
}

// Tick probes every feed once (repos gives, for a feed, the URLs of the repos it should
// ask about: GitHub's), then hands the changes and the second looks that are due to sink.
// A feed's error is logged and counted; the others go on.
func (r *Runner) Tick(ctx context.Context, repos func(Source) []string, sink func(context.Context, []Change)) {
	var out []Change
	for _, p := range r.probers {
		r.mu.Lock()
		_, bad := r.stopped[p]
		r.mu.Unlock()
		if bad || ctx.Err() != nil {
			continue
		}
		cs, err := p.Probe(ctx, repos(p.src))
		r.mu.Lock()
		r.stats.Probes++
		r.stats.Changes += int64(len(cs))
		var rl *RateLimited
		switch {
		case err == nil:
		case errors.Is(err, ErrAuth):
			r.stopped[p] = err
			r.stats.Errors++
			r.log.Error("feed refused its credential; its repos are polled as usual until it is reconfigured", "feed", p.src, "err", err)
		case errors.As(err, &rl):
			r.stats.RateLimited++
			r.log.Warn("feed rate-limited", "feed", p.src, "until", rl.Until)
		default:
			r.stats.Errors++
			r.log.Warn("feed probe failed", "feed", p.src, "err", err)
		}
		for _, c := range cs {
			if !c.Recheck.IsZero() {
				r.recheckLocked(c.URL, c.Recheck)
			}
		}
		r.mu.Unlock()
		out = append(out, cs...)
	}
	now := r.clock.Now()
	r.mu.Lock()
	for u, at := range r.rechecks {
		if !at.After(now) {
			out = append(out, Change{URL: u, At: at})
			delete(r.rechecks, u)
			r.stats.Rechecks++
		}
	}
	r.mu.Unlock()
	if len(out) > 0 {
		sink(ctx, out)
	}
}

// recheckLocked asks for a second look at u at t (the later one wins), within the bound.
func (r *Runner) recheckLocked(u string, t time.Time) {
	if old, ok := r.rechecks[u]; ok {
		r.rechecks[u] = later(old, t)
		return
	}
	if len(r.rechecks) >= maxRechecks {
		oldest, at := "", time.Time{}
		for k, v := range r.rechecks {
			if oldest == "" || v.Before(at) {
				oldest, at = k, v
			}
		}
		delete(r.rechecks, oldest)
	}
	r.rechecks[u] = t
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Run ticks every period until ctx ends.
func (r *Runner) Run(ctx context.Context, period time.Duration, repos func(Source) []string, sink func(context.Context, []Change)) {
	if len(r.probers) == 0 {
		return
	}
	clock.Every(ctx, period, nil, func() { r.Tick(ctx, repos, sink) })
}
