package serve

import (
	"context"
	"sync"
	"time"
)

// limiter bounds the git processes a front runs at once, per repo and in all. A
// request past a bound waits up to its wait for a place, then is refused: the caller
// answers 429 (the repo is busy) or 503 (the server is).
type limiter struct {
	perRepo, total int

	mu      sync.Mutex
	running int
	repos   map[string]int
	freed   chan struct{} // closed and replaced whenever a place frees up
}

type refusal int

const (
	admitted refusal = iota
	repoBusy
	serverBusy
)

func newLimiter(perRepo, total int) *limiter {
	return &limiter{perRepo: perRepo, total: total, repos: map[string]int{}, freed: make(chan struct{})}
}

// acquire takes a place for repo, waiting at most wait. On admitted the caller must
// call the returned release once.
func (l *limiter) acquire(ctx context.Context, repo string, wait time.Duration) (func(), refusal) {
	var timeout <-chan time.Time
	for {
		l.mu.Lock()
		why := l.tryLocked(repo)
		freed := l.freed
		l.mu.Unlock()
		if why == admitted {
			return func() { l.release(repo) }, admitted
		}
		if timeout == nil {
			if wait <= 0 {
				return nil, why
			}
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-freed:
		case <-timeout:
			return nil, why
		case <-ctx.Done():
			return nil, why
		}
	}
}

func (l *limiter) tryLocked(repo string) refusal {
	if l.repos[repo] >= l.perRepo {
		return repoBusy
	}
	if l.running >= l.total {
		return serverBusy
	}
	l.running++
	l.repos[repo]++
	return admitted
}

func (l *limiter) release(repo string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running--
	if l.repos[repo]--; l.repos[repo] <= 0 {
		delete(l.repos, repo)
	}
	close(l.freed)
	l.freed = make(chan struct{})
}
