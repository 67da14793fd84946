package worker

import (
	"path/filepath"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/mirrorpath"
)

// Forges also set hooks on an organization (GitHub organization webhooks, GitLab group
// hooks, Gitea and Forgejo organization hooks), which cover every repo of it, so a
// quiet repo of a hooked organization need not wait for its own first hook to count as
// hooked. A worker learns that an owner (a repo's host and namespace) is covered when
// a hook the forge marked as set on the owner arrives (ownerLevel: GitHub's and
// Gitea's X-*-Hook-Installation-Target-Type), or when hooks of OwnerRepos distinct
// repos of it arrived within HookMemory: per-repo hooks on two of its repos say its
// maintainers hook their repos. A repo of a covered owner with no hook of its own counts
// as hooked (HookState.HookedBy) until a poll finds a push no hook announced: it is
// then most likely outside the owner's hook, not a lost delivery, so the find is not
// counted in the host's HookLoss (it is counted as Outside). Being wrong costs that
// repo one stretched poll for its first push.

// OwnerRepos is how many distinct repos of an owner must have sent hooks within
// HookMemory for the owner to count as covered without an owner-level hook.
const OwnerRepos = 2

// OwnerHooks is what a worker knows of one owner's hooks: when the latest owner-level
// hook came, and the OwnerRepos repos whose hooks came last. Owners that never sent a hook
// have none.
type OwnerHooks struct {
	OwnerAt time.Time            // the latest hook the forge marked as set on the owner
	Last    [OwnerRepos]RepoHook // the latest hook of the last distinct repos, latest first
	// FoundAt is when a poll last found a push of one of its repos while nothing said
	// any was hooked (MaybeUnknown): its repos are then taken as unhooked.
	FoundAt time.Time
}

// RepoHook is one repo's latest hook.
type RepoHook struct {
	Repo string
	At   time.Time
}

// Saw records a hook of repo at now; ownerLevel when the forge marked it as set on the
// owner.
func (o *OwnerHooks) Saw(repo string, ownerLevel bool, now time.Time) {
	if ownerLevel {
		o.OwnerAt = now
	}
	k := len(o.Last) - 1 // the oldest goes, unless repo is among them
	for i, h := range o.Last {
		if h.Repo == repo {
			k = i
			break
		}
	}
	copy(o.Last[1:k+1], o.Last[:k])
	o.Last[0] = RepoHook{Repo: repo, At: now}
}

// Covered is whether the owner's hooks cover its repos at now: an owner-level hook, or
// hooks of OwnerRepos distinct repos, within HookMemory. A nil owner covers nothing.
func (o *OwnerHooks) Covered(now time.Time) bool {
	if o == nil {
		return false
	}
	oldest := o.Last[len(o.Last)-1]
	return recent(o.OwnerAt, now) || (oldest.Repo != "" && recent(oldest.At, now))
}

// hooked is whether any hook of the owner's came within HookMemory.
func (o *OwnerHooks) hooked(now time.Time) bool {
	return o != nil && (recent(o.OwnerAt, now) || recent(o.Last[0].At, now))
}

// found is whether a poll found a push of the owner's that no hook announced, while
// none of its repos was hooked, within HookMemory.
func (o *OwnerHooks) found(now time.Time) bool { return o != nil && recent(o.FoundAt, now) }

// Expired is whether nothing the owner sent or showed is within HookMemory at now: a
// worker forgets it.
func (o *OwnerHooks) Expired(now time.Time) bool { return !o.hooked(now) && !o.found(now) }

func recent(at, now time.Time) bool { return !at.IsZero() && now.Sub(at) <= HookMemory }

// OwnerOf is the owner of the repo at a normalized URL: its mirror path (the repo's
// identity, ADR 9) without the last segment, so host and namespace are spelled as the
// identity spells them. A repo directly under its host ("https://host/repo") has no
// owner (ok false): the host is not an organization.
func OwnerOf(url string) (owner string, ok bool) {
	rel, err := mirrorpath.Rel(url)
	if err != nil {
		return "", false
	}
	dir := filepath.Dir(rel)
	if filepath.Dir(dir) == "." {
		return "", false
	}
	return dir, true
}
