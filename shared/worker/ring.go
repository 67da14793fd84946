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
// brought (Announced), pushes a poll of a hooked repo found first (Lost: no hook came
// for them, or it came after the poll), and pushes a poll found first in repos that
// counted as hooked only through their owner (Outside: most likely repos the owner's
// hook does not cover, not lost deliveries, so they are not in Share).
type HookLoss struct{ Announced, Lost, Outside int }

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

// Ask is what asks for a fetch at once (FetchNow).
type Ask uint8

const (
	// AskSync is a user's sync or a feed's listing: it says nothing of hooks.
	AskSync Ask = iota
	// AskHook is a forge's push webhook.
	AskHook
	// AskOwnerHook is a push webhook the forge marked as set on the repo's owner (an
	// organization or a user): it covers every repo of the owner (OwnerHooks).
	AskOwnerHook
)

// FetchNow asks for a fetch of an owned repo at once, ahead of the queue and whatever
// its minimum interval (per-host politeness and the byte and disk caps still apply):
// a forge's push webhook or a user's sync. Requests coalesce: while a fetch of the repo
// runs, one more is queued behind it, never more. A hook records that the repo's forge
// sends webhooks, and what it says of the repo's owner (its polls, and those of the
// owner's other repos, are stretched while it does: PollStretch). It reports whether
// the worker owns the repo; when it does not, the durable request the caller also made
// reaches the owner through the coordinator.
func (w *Worker) FetchNow(id string, ask Ask) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.repos[id]
	if !ok || r.dropped {
		return false
	}
	now := w.clock.Now()
	r.rungAt = now
	if ask != AskSync {
		r.hook, r.hookPending = HookState{At: now}, true
		w.sawHookLocked(id, r.rec.URL, ask, now)
	}
	w.fetchNowLocked(id, r)
	return true
}

// NoteHook records what a hook of a repo another worker owns (id, at url) says of the
// repo's owner: the workers of one process share what they learn of organizations'
// hooks, so an organization's quiet repos count as covered whichever worker owns them.
func (w *Worker) NoteHook(id, url string, ask Ask) {
	if ask == AskSync {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sawHookLocked(id, url, ask, w.clock.Now())
}

// sawHookLocked records a hook of repo id at url in its owner's hooks.
func (w *Worker) sawHookLocked(id, url string, ask Ask, now time.Time) {
	owner, ok := OwnerOf(url)
	if !ok {
		return
	}
	o := w.owners[owner]
	if o == nil {
		o = &OwnerHooks{}
		w.owners[owner] = o
	}
	o.Saw(id, ask == AskOwnerHook, now)
}

// ownerHooksLocked is the hooks of r's owner, nil when none came within HookMemory.
func (w *Worker) ownerHooksLocked(r *repoState) *OwnerHooks {
	if len(w.owners) == 0 {
		return nil
	}
	owner, ok := OwnerOf(r.rec.URL)
	if !ok {
		return nil
	}
	return w.owners[owner]
}

// PollStretchOf is the factor on repo id's next poll step as the worker would set it
// now (PollStretch): what status pages and tests read to see whether the worker counts
// the repo as hooked or feed-covered. False if the worker does not hold the repo.
func (w *Worker) PollStretchOf(id string) (float64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.repos[id]
	if !ok || r.dropped {
		return 0, false
	}
	return w.pollStretchLocked(r, w.clock.Now()), true
}

// pollStretchLocked is PollStretch for r at now, with what the worker knows: whether a
// feed covers it, its owner's hooks, and its host's hook loss (AssumedHookLoss until the
// host's hooks are counted).
func (w *Worker) pollStretchLocked(r *repoState, now time.Time) float64 {
	covered := w.cfg.FeedCovered != nil && w.cfg.FeedCovered(r.rec.URL)
	share := AssumedHookLoss
	if loss := w.hookLoss[r.host]; loss != nil {
		share = loss.Share()
	}
	return PollStretch(r.hook, w.ownerHooksLocked(r), now, covered, share)
}

// forgetOwnersLocked drops the owners none of whose hooks is within HookMemory, so the
// state is bounded by the owners hooked in the last HookMemory.
func (w *Worker) forgetOwnersLocked(now time.Time) {
	for k, o := range w.owners {
		if o.Expired(now) {
			delete(w.owners, k)
		}
	}
}

// fetchNowLocked queues id next in line, or once more behind the fetch in flight.
func (w *Worker) fetchNowLocked(id string, r *repoState) {
	r.wakeBeat, r.askPending = true, true
	if r.inFlight {
		r.syncAgain = true // the fetch in flight may have started before the push
		return
	}
	w.hosts.unpark(id)
	w.queue.PushFront(id)
	w.poke()
}

// Scored reports whether a fetch is scored for the hazard a worker learns
// (priority.Scores): only a poll made on the repo's own schedule (not asked for) of a
// repo no signal covers (its step not stretched). A fetch a hook or a feed asked for
// comes because the repo changed, and a covered repo's polls fall in the silences its
// signals leave: either, scored, tells the hazard the wrong thing (a fleet behind a feed
// learned 30% a month where its repos change behaviour 10%, at the top candidate).
// Pure: the worker and the freshness benchmark decide with it.
func Scored(stretch float64, asked bool) bool { return stretch == 1 && !asked }

// PollStretch is the factor on a repo's poll step at now: FeedStretch while a feed
// covers it, StretchForLoss(hookLoss) while it counts as hooked, by its own hooks or
// its owner's (owner, nil when none: HookState.HookedBy), else 1. hookLoss is the
// repo's host's HookLoss.Share. Pure: the worker and the freshness benchmark decide
// with it.
func PollStretch(h HookState, owner *OwnerHooks, now time.Time, feedCovered bool, hookLoss float64) float64 {
	switch {
	case feedCovered:
		return FeedStretch
	case h.HookedBy(owner, now) != NotHooked:
		return StretchForLoss(hookLoss)
	}
	return 1
}

// HookState is what a worker knows of one repo's hooks: when the latest came, whether
// a poll has since found a push that no hook announced, and whether a poll found one
// while the repo counted as hooked only through its owner.
type HookState struct {
	At        time.Time
	Lost      bool
	OwnerLost bool
}

// Hooked is whether the repo counts as hooked by its own hooks at now: a hook came,
// within HookMemory, and no poll found a push behind its back since. A repo whose hook
// was removed is polled as before from the first push a poll finds; one that only lost
// a hook (ℓ of them) is hooked again at its next.
func (h HookState) Hooked(now time.Time) bool {
	return recent(h.At, now) && !h.Lost
}

// Hooking is how a repo counts as hooked.
type Hooking uint8

const (
	NotHooked   Hooking = iota
	HookedOwn           // by its own hooks
	HookedOwner         // by its owner's only (OwnerHooks.Covered)
)

// HookedBy is how the repo counts as hooked at now, its owner's hooks being owner (nil
// when none): by its own hooks (Hooked), else by its owner's when it has no hook of its
// own within HookMemory and no poll found a push of it that no hook announced since
// its last. A repo whose own hook was missed stays unhooked whatever its owner: it has
// hooks of its own, and one was lost.
func (h HookState) HookedBy(owner *OwnerHooks, now time.Time) Hooking {
	switch {
	case h.Hooked(now):
		return HookedOwn
	case recent(h.At, now) || h.OwnerLost || !owner.Covered(now):
		return NotHooked
	}
	return HookedOwner
}

// HookFind is what a fetch that brought pushes of a hooked repo tells of its host's
// hooks (HookLoss), for the hook metrics.
type HookFind uint8

const (
	NoHookFind    HookFind = iota // nothing counted (an owner-hooked repo's fetch a hook asked for)
	HookAnnounced                 // a hook asked for the fetch
	HookLost                      // a poll found the pushes first: no hook came for them, or it came late
	HookOutside                   // a poll found pushes of a repo hooked only through its owner
)

// Fetched records a fetch that brought pushes of a repo that counted as hooked by
// (HookedBy), asked for by a hook or a poll, and returns what it counted. By its own
// hooks it counts in its host's loss, and a poll's find unhooks it until its next hook.
// By its owner's, a poll's find unhooks it from its owner's hooks (it is most likely
// outside them) and counts as Outside, not as a lost hook.
func (h *HookState) Fetched(by Hooking, hookAsked bool, loss *HookLoss) HookFind {
	switch {
	case by == HookedOwn:
		loss.Saw(hookAsked)
		h.Lost = h.Lost || !hookAsked
		if hookAsked {
			return HookAnnounced
		}
		return HookLost
	case by == HookedOwner && !hookAsked:
		loss.Outside++
		h.OwnerLost = true
		return HookOutside
	}
	return NoHookFind
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
