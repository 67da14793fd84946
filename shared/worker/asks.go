// Asks: a fetch asked for at once (push webhooks, feeds' listings, users' syncs), and
// what the worker learns of repos' hooks on the way. The decisions are the step's
// (step.go); these are the worker's doors to it.

package worker

import "time"

// Ask is what asks for a fetch at once (FetchNow).
type Ask uint8

const (
	// AskSync is a user's sync: it says nothing of hooks.
	AskSync Ask = iota
	// AskHook is a forge's push webhook.
	AskHook
	// AskOwnerHook is a push webhook the forge marked as set on the repo's owner (an
	// organization or a user): it covers every repo of the owner (OwnerHooks).
	AskOwnerHook
	// AskFeed is a forge's change feed naming the repo: like a sync, it says nothing of
	// hooks.
	AskFeed
)

// hook reports whether the ask is a push webhook's.
func (a Ask) hook() bool { return a == AskHook || a == AskOwnerHook }

// FetchNow asks for a fetch of an owned repo at once, ahead of the queue and whatever
// its minimum interval and the poll budget (per-host politeness and the byte and disk
// caps still apply): a forge's push webhook, a feed's listing or a user's sync. Asks
// coalesce: while a fetch of the repo runs, one more is queued behind it, never more. A
// hook records that the repo's forge sends webhooks, and what it says of the repo's
// owner (its polls, and those of the owner's other repos, are stretched while it does:
// RepoState.Stretch). It reports whether the worker owns the repo; when it does not,
// the durable request the caller also made reaches the owner through the coordinator.
func (w *Worker) FetchNow(id string, ask Ask) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	a := w.stepLocked(id, now, Asked{By: ask})
	if a.Taken {
		w.sawHookLocked(id, w.repos[id].Rec.URL, ask, now)
	}
	return a.Taken
}

// NoteHook records what a hook of a repo another worker owns (id, at url) says of the
// repo's owner: the workers of one process share what they learn of organizations'
// hooks, so an organization's quiet repos count as covered whichever worker owns them.
func (w *Worker) NoteHook(id, url string, ask Ask) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sawHookLocked(id, url, ask, w.clock.Now())
}

// sawHookLocked records a hook of repo id at url in its owner's hooks (nothing for an
// ask that is no hook).
func (w *Worker) sawHookLocked(id, url string, ask Ask, now time.Time) {
	if !ask.hook() {
		return
	}
	if o := w.ownerLocked(url); o != nil {
		o.Saw(id, ask == AskOwnerHook, now)
	}
}

// ownerLocked is what the worker knows of the owner of the repo at url, made if need
// be; nil for a repo with no owner.
func (w *Worker) ownerLocked(url string) *OwnerHooks {
	owner, ok := OwnerOf(url)
	if !ok {
		return nil
	}
	o := w.owners[owner]
	if o == nil {
		o = &OwnerHooks{}
		w.owners[owner] = o
	}
	return o
}

// ownerHooksLocked is what the worker knows of the hooks of the owner of the repo at
// url, nil when nothing within HookMemory.
func (w *Worker) ownerHooksLocked(url string) *OwnerHooks {
	if len(w.owners) == 0 {
		return nil
	}
	owner, ok := OwnerOf(url)
	if !ok {
		return nil
	}
	return w.owners[owner]
}

// forgetOwnersLocked drops the owners of which nothing is within HookMemory
// (OwnerHooks.Expired), so the state is bounded by the owners hooked, or found
// unhooked, in the last HookMemory.
func (w *Worker) forgetOwnersLocked(now time.Time) {
	for k, o := range w.owners {
		if o.Expired(now) {
			delete(w.owners, k)
		}
	}
}

// PollStretchOf is the factor on repo id's next poll step as the worker would set it
// now (RepoState.Stretch): what status pages and tests read to see whether the worker
// counts the repo as hooked or feed-covered. False if the worker does not hold the repo.
func (w *Worker) PollStretchOf(id string) (float64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.repos[id]
	if !ok || !r.Held() {
		return 0, false
	}
	return r.Stretch(w.viewLocked(w.clock.Now(), r.Rec.URL)), true
}

// OwnedURLs are the URLs of the repos the worker owns on host (a forge's feed asks
// about them).
func (w *Worker) OwnedURLs(host string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.repos {
		if r.Held() && r.host == host {
			out = append(out, r.Rec.URL)
		}
	}
	return out
}
