package worker

import "time"

// RungCovers is how long after a ring (FetchNow) the durable sync request that goes with
// it (store.RequestSync, carried by the coordinator through the outbox) is taken as
// answered by a fetch that started after the ring. The outbox delivers it within a tick
// and a heartbeat; past this, the request is honoured again.
const RungCovers = 5 * time.Minute

// HookStretch is how many times longer a poll step is for a repo whose forge sends
// push webhooks: its pushes are fetched when the hook comes, so polls are there only for
// the hooks that get lost. With a share ℓ of them lost the pushes left for polls arrive
// at ℓ·λ, and the √-allocation polls that at √ℓ of the rate: 10 for ℓ = 1% (the
// freshness benchmark's hook sections measure it). HookMemory is how long a hook keeps
// a repo counted as hooked.
const (
	HookStretch = 10.0
	HookMemory  = 30 * 24 * time.Hour
)

// FeedStretch is the same for a repo a forge's change feed covers (shared/feeds): a
// feed misses nothing while it answers (a feed that fails stops covering its repos), so
// its repos are polled a hundred times less, as the freshness benchmark's feed sections
// do.
const FeedStretch = 100.0

// FetchNow asks for a fetch of an owned repo at once, ahead of the queue and whatever
// its minimum interval (per-host politeness and the byte and disk caps still apply):
// a forge's push webhook or a user's sync. Requests coalesce: while a fetch of the repo
// runs, one more is queued behind it, never more. hook records that the repo's forge
// sends webhooks (its polls are stretched by HookStretch while it does). It reports
// whether the worker owns the repo; when it does not, the durable request the caller
// also made reaches the owner through the coordinator.
func (w *Worker) FetchNow(id string, hook bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.repos[id]
	if !ok || r.dropped {
		return false
	}
	now := w.clock.Now()
	r.rungAt = now
	if hook {
		r.hookAt = now
	}
	w.fetchNowLocked(id, r)
	return true
}

// fetchNowLocked queues id next in line, or once more behind the fetch in flight.
func (w *Worker) fetchNowLocked(id string, r *repoState) {
	r.wakeBeat = true
	if r.inFlight {
		r.syncAgain = true // the fetch in flight may have started before the push
		return
	}
	w.hosts.unpark(id)
	w.queue.PushFront(id)
	w.poke()
}

// pollStretch is the factor on a repo's poll step at now: FeedStretch while a feed
// covers it, HookStretch while a hook came within HookMemory, else 1. Pure, for the
// policy's step.
func pollStretch(hookAt, now time.Time, feedCovered bool) float64 {
	switch {
	case feedCovered:
		return FeedStretch
	case !hookAt.IsZero() && now.Sub(hookAt) <= HookMemory:
		return HookStretch
	}
	return 1
}

// OwnedURLs are the URLs of the repos the worker owns on host (a forge's feed asks
// about them).
func (w *Worker) OwnedURLs(host string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.repos {
		if !r.dropped && r.host == host {
			out = append(out, r.rec.URL)
		}
	}
	return out
}
