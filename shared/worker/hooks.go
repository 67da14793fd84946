// Hooks: what a worker knows of the push webhooks of its repos, their owners and their
// hosts, and how that stretches the polls of the repos they cover. Pure: the step
// (step.go) decides with it.

package worker

import (
	"math"
	"time"
)

// A repo whose forge sends push webhooks is fetched when the hook comes, so its polls
// are there only for the hooks that get lost. With a share ℓ of them lost, the pushes
// left for polls arrive at ℓ·λ, and the √-allocation polls that at √ℓ of the rate: its
// poll step is 1/√ℓ times the policy's (StretchForLoss), and the polls it no longer
// needs go to the other repos (the budget is the same). ℓ is learned per host
// (HookLoss): until a host's hooks are counted it is AssumedHookLoss, which gives
// HookStretch. A repo counts as hooked from its first hook until a poll finds a push no
// hook announced (HookState), or for HookMemory after its latest hook at most. A repo
// that may be hooked, though nothing says it is (Hooking.Maybe), is stretched by the
// share of the pushes of repos like it that the host's hooks missed, learned as ℓ is
// (HookLoss.Missed): a hooked repo's missed share is ℓ, an unhooked one's 1, and one in
// doubt's in between, as the hooks have shown.
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
// hook does not cover, not lost deliveries, so they are not in Share). Maybe counts,
// for each level at which a repo may be hooked (Hooking.Maybe), how its next push
// reached the worker (MaybeFind).
type HookLoss struct {
	Announced, Lost, Outside int
	Maybe                    [hookings]MaybeCount
}

// MaybeCount is how the pushes of repos at one level that may be hooked reached the
// worker: by a hook (Announced) or found by a poll (Found).
type MaybeCount struct{ Announced, Found int }

// MaybeFind is what a fetch that brought a push of a repo that may be hooked tells:
// the level it was at before the push (Level; NotHooked: nothing to count), and
// whether a hook announced the push.
type MaybeFind struct {
	Level     Hooking
	Announced bool
}

// CountMaybe counts f (nothing for a zero f).
func (l *HookLoss) CountMaybe(f MaybeFind) {
	if !f.Level.Maybe() {
		return
	}
	if f.Announced {
		l.Maybe[f.Level].Announced++
	} else {
		l.Maybe[f.Level].Found++
	}
}

// Missed is the estimated share of the pushes of a repo at level by (Hooking.Maybe)
// that no hook will announce: its counts, shrunk towards all of them, so that a host
// whose hooks have not shown what a level tells polls its repos as if none came.
func (l HookLoss) Missed(by Hooking) float64 {
	c := l.Maybe[by]
	return (float64(c.Found) + maybeWeight) / (float64(c.Announced+c.Found) + maybeWeight)
}

// maybeWeight is how many pushes the assumption that a level's pushes are all missed
// counts for: each repo counts once per level (its next push moves it on), so a few
// tens of first pushes teach what a level tells.
const maybeWeight = 20.0

// Count counts what a fetch of a hooked repo found (HookState.Fetched).
func (l *HookLoss) Count(f HookFind) {
	switch f {
	case HookAnnounced:
		l.Announced++
	case HookLost:
		l.Lost++
	case HookOutside:
		l.Outside++
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

// HookState is what a worker knows of one repo's hooks: when the latest came, whether
// a poll has since found a push that no hook announced (Lost), and a second one (Gone),
// and whether a poll found one while the repo had no hook of its own (OwnerLost).
type HookState struct {
	At        time.Time
	Lost      bool
	Gone      bool
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
	// The levels at which a repo may be hooked: what the host's hooks did for the repos
	// at each is learned (HookLoss.Missed), as a forge promises nothing of it.
	MaybeLapsed  // its own hooks came, but a push since came without one, or the latest is older than HookMemory
	MaybeSibling // no hook of its own; one of another repo of its owner came within HookMemory, too few to cover it
	MaybeUnknown // no hook of its own or of its owner, and no poll found a push of its owner's repos
	hookings
)

// Maybe is whether the repo may be hooked at level h, and its share of missed pushes
// is learned.
func (h Hooking) Maybe() bool { return h >= MaybeLapsed && h < hookings }

// HookedBy is how the repo counts as hooked at now, its owner's hooks being owner (nil
// when none): by its own hooks (Hooked), else by its owner's when it has no recent hook
// of its own and no poll found a push of it that no hook announced, else at a level
// where it may be (Maybe). A repo with hooks of its own of which one push came without
// a hook may have lost a delivery or its hook: it is at MaybeLapsed whatever its owner,
// and a second such push unhooks it until its next hook. A poll that finds a push of a repo
// with no hook of its own unhooks it, and one of a repo whose owner showed nothing
// unhooks the owner's other repos too (OwnerHooks.FoundAt).
func (h HookState) HookedBy(owner *OwnerHooks, now time.Time) Hooking {
	switch {
	case h.Hooked(now):
		return HookedOwn
	case h.Gone || h.OwnerLost:
		return NotHooked
	case h.Lost && recent(h.At, now):
		return MaybeLapsed
	case owner.Covered(now):
		return HookedOwner
	case !h.At.IsZero():
		return MaybeLapsed
	case owner.hooked(now):
		return MaybeSibling
	case owner.found(now):
		return NotHooked
	}
	return MaybeUnknown
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
// (HookedBy), asked for by a hook or not, and returns what it tells of the host's hooks
// (HookLoss.Count). By its own hooks a poll's find unhooks the repo until its next
// hook. By its owner's, a poll's find unhooks it from its owner's hooks (it is most
// likely outside them) and counts as Outside, not as a lost hook.
func (h *HookState) Fetched(by Hooking, hookAsked bool) HookFind {
	switch {
	case by == HookedOwn && hookAsked:
		return HookAnnounced
	case by == HookedOwn:
		h.Lost = true
		return HookLost
	case by == HookedOwner && !hookAsked:
		h.OwnerLost = true
		return HookOutside
	case by == MaybeLapsed && !hookAsked:
		h.Gone = true
	case (by == MaybeSibling || by == MaybeUnknown) && !hookAsked:
		h.OwnerLost = true
	}
	return NoHookFind
}
