package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
)

// ErrKilled, as the cancel cause of Run's context, stops the worker abruptly: no drain and
// no goodbye, as a crash would (tests use it to kill one worker of an in-process fleet).
var ErrKilled = errors.New("worker killed")

// ErrPaused, as the cancel cause of Run's context, stops the worker cleanly (its
// fetches drain) but without leaving the fleet: its record stays, and the next start
// under the same id resumes it with its repos, as after a crash. The local fleet stops
// this way: its workers come back with the process, under the same names, and nothing
// moves. Were they not to come back, the coordinator's grace moves their repos.
var ErrPaused = errors.New("worker paused")

// Run is the worker's real-time loop: a heartbeat loop and Fetchers fetch loops, until
// ctx ends. Then dispatching stops, in-flight fetches get Drain to finish (a fetch that is
// cut short leaves the previous mirror intact), and the worker leaves the fleet so its
// repos move at the next coordinator tick instead of after the grace.
func (w *Worker) Run(ctx context.Context) error {
	fetchCtx, cancelFetches := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelFetches()
	for {
		err := w.Heartbeat(ctx)
		if err == nil {
			break
		}
		w.log.Warn("first heartbeat failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.cfg.Heartbeat):
		}
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		clock.Every(ctx, w.cfg.Heartbeat, w.beatWake, func() {
			if err := w.Heartbeat(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("heartbeat failed", "err", err)
			}
		})
	}()

	if w.maint != nil && w.cfg.MaintainEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One maintenance at a time, every MaintainCheck and soon after a fetch made
			// a mirror due; stopped at once on shutdown (git leaves only temp files).
			clock.Every(ctx, w.cfg.MaintainCheck, w.maintWake, func() { w.MaintainOnce(ctx) })
		}()
	}

	var fetchers sync.WaitGroup
	for range w.cfg.Fetchers {
		fetchers.Add(1)
		go func() {
			defer fetchers.Done()
			for ctx.Err() == nil {
				if j, ok := w.Next(w.clock.Now()); ok {
					w.Do(fetchCtx, j)
					continue
				}
				select {
				case <-ctx.Done():
				case <-w.wake: // one idle fetcher wakes per poke; the others within a second
				case <-time.After(w.idleWait()):
				}
			}
		}()
	}

	<-ctx.Done()
	if errors.Is(context.Cause(ctx), ErrKilled) {
		cancelFetches()
		fetchers.Wait()
		wg.Wait()
		return nil
	}
	done := make(chan struct{})
	go func() { fetchers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.cfg.Drain):
		w.log.Warn("abandoning in-flight fetches")
		cancelFetches()
		<-done
	}
	wg.Wait()
	if errors.Is(context.Cause(ctx), ErrPaused) {
		return nil
	}
	leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return w.Leave(leaveCtx)
}

// idleWait is how long an idle fetcher sleeps: until the next held repo is eligible or
// paused host opens, at most one second so rate-limit tokens and pokes are picked up.
func (w *Worker) idleWait() time.Duration {
	w.mu.Lock()
	at, ok := w.queue.NextEligible(w.clock.Now())
	if open, parked := w.hosts.nextOpen(); parked && (!ok || !at.IsZero() && open.Before(at)) {
		at, ok = open, true // a paused host opens sooner than any held repo is due
	}
	w.mu.Unlock()
	if !ok || at.IsZero() {
		return time.Second
	}
	return min(max(at.Sub(w.clock.Now()), 10*time.Millisecond), time.Second)
}
