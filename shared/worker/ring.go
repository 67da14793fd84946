package worker

import (
	"math"
	"time"
)

// RungCovers is how long after a ring (FetchNow) the durable sync request that goes with
// it (store.RequestSync, carried by the coordinator through the outbox) is taken as
// answered by a fetch that started after the ring. The outbox delivers it within a tick
// and a heartbeat; past this, the request is honoured again.
const RungCovers = 5 * time.Minute

// A repo whose forge sends push webhooks is fetched when the hook comes, so its polls
// are there only for the hooks that get lost. With a share ℓ of them lost, the pushes
// left for polls arrive at ℓ·λ, and the √-allocation polls that at √ℓ of the rate: its
// poll step is 1/√ℓ times the policy's (StretchForLoss), and the polls it no longer
// needs go to the other repos (the budget is the same). ℓ is learned per host
// (HookLoss): until a host's hooks are counted it is AssumedHookLoss, which gives
// HookStretch. A repo counts as hooked from its first hook until a poll finds a push no
// hook announced (HookState), or for HookMemory after its latest hook at most.
const (
	AssumedHookLoss = 0.01
	HookStretch     = 10.0 // StretchForLoss(AssumedHookLoss)
	HookMemory      = 365 * 24 * time.Hour
	// hookLossWeight is how many pushes the assumed loss counts for against a host's
	// own: a few lost hooks among a few hundred pushes move it, one does not.
	hookLossWeight = 200.0
)

// FeedStretch is the same for a repo a forge's change feed covers (shared/feeds): a
// feed misses nothing while it answers (a feed that fails stops covering its repos), so
// its repos are polled a hundred times less, as the freshness benchmark's feed sections
// do. It also bounds StretchForLoss.
const FeedStretch = 100.0

// HookLoss is what a worker saw of one host's hooks: pushes a fetch a hook asked for
// brought (Announced), and pushes a poll of a hooked repo found first (Lost: no hook
// came for them, or it came after the poll).
type HookLoss struct{ Announced, Lost int }

// Saw counts a fetch of a hooked repo that brought something: asked for by a hook, or
// a poll.
func (l *HookLoss) Saw(hookAsked bool) {
	if hookAsked {
		l.Announced++
	} else {
		l.Lost++
	}
}

// Share is the estimated share of the host's pushes whose hook is lost: its counts,
// shrunk towards AssumedHookLoss.
func (l HookLoss) Share() float64 {
	return (float64(l.Lost) + AssumedHookLoss*hookLossWeight) / (float64(l.Announced+l.Lost) + hookLossWeight)
}

// StretchForLoss is the poll step factor of a hooked repo whose hooks are lost at
// share loss: 1/√loss, between 1 and FeedStretch.
func StretchForLoss(loss float64) float64 {
	if loss <= 0 {
		return FeedStretch
	}
	return min(max(1/math.Sqrt(loss), 1), FeedStretch)
}

// FetchNow asks for a fetch of an owned repo at once, ahead of the queue and whatever
// its minimum interval (per-host politeness and the byte and disk caps still apply):
// a forge's push webhook or a user's sync. Requests coalesce: while a fetch of the repo
// runs, one more is queued behind it, never more. hook records that the repo's forge
// sends webhooks (its polls are stretched while it does: PollStretch). It reports
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
		r.hook, r.hookPending = HookState{At: now}, true
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

// PollStretch is the factor on a repo's poll step at now: FeedStretch while a feed
// covers it, StretchForLoss(hookLoss) while it counts as hooked, else 1. hookLoss is
// the repo's host's HookLoss.Share. Pure: the worker and the freshness benchmark decide
// with it.
func PollStretch(h HookState, now time.Time, feedCovered bool, hookLoss float64) float64 {
	switch {
	case feedCovered:
		return FeedStretch
	case h.Hooked(now):
		return StretchForLoss(hookLoss)
	}
	return 1
}

// HookState is what a worker knows of one repo's hooks: when the latest came, and
// whether a poll has since found a push that no hook announced.
type HookState struct {
	At   time.Time
	Lost bool
}

// Hooked is whether the repo counts as hooked at now: a hook came, within HookMemory,
// and no poll found a push behind its back since. A repo whose hook was removed is
// polled as before from the first push a poll finds; one that only lost a hook (ℓ of
// them) is hooked again at its next.
func (h HookState) Hooked(now time.Time) bool {
	return !h.At.IsZero() && !h.Lost && now.Sub(h.At) <= HookMemory
}

// Fetched records a fetch of a hooked repo that brought pushes, asked for by a hook or
// a poll, and counts it in its host's loss.
func (h *HookState) Fetched(hookAsked bool, loss *HookLoss) {
	loss.Saw(hookAsked)
	if !hookAsked {
		h.Lost = true
	}
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
