// Package fetch holds the vocabulary shared by the worker and the mirror implementations:
// what to fetch, what a fetch found, and how a failure is classified.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Target is one repo to mirror.
type Target struct {
	ID  string
	URL string // normalized, already checked by the URL policy: the mirror's identity
	// Upstream is what is fetched when it is not URL: the URL as given (store.Repo's),
	// already checked by the URL policy too.
	Upstream string
	// MaxBytes, when > 0, lowers the byte cap of this one sync below the mirror's own
	// (the worker passes the disk headroom left under its guard's threshold).
	MaxBytes int64
	// RefsDigest is what the caller knows of the mirror's refs: the Result.RefsDigest of
	// its last sync (kept in memory, and in the store with the repo). Given, a sync
	// whose upstream advertises the same refs returns at once, having opened, listed
	// and locked nothing under the mirror root (a no-change poll: DESIGN invariant 13);
	// any other sync reads the mirror as it is, which stays the truth. "" when unknown.
	RefsDigest string
	// Admit, if set, is called once the sync knows it will write (a clone, or refs
	// that differ from RefsDigest) and before it touches the mirror: the worker's disk
	// guard, which a no-change poll need not consult. Its error ends the sync as it
	// is; a positive result lowers the byte cap as MaxBytes does.
	Admit func(ctx context.Context) (maxBytes int64, err error)
}

// FetchURL is the URL the target is fetched from.
func (t Target) FetchURL() string {
	if t.Upstream != "" {
		return t.Upstream
	}
	return t.URL
}

// Result is what a successful Sync found.
type Result struct {
	Cloned  bool // the mirror was created by this call
	Changed bool // refs differ from before (always true for a clone)
	// LastCommitAt is the newest commit time over all refs, on a clone and when the
	// refs changed; zero for an empty repo, and when the refs did not change (a poll
	// that finds nothing new reads no object: the caller keeps the time it has).
	LastCommitAt  time.Time
	BytesReceived int64
	// SizeBytes is the mirror's size on disk after the sync; 0 when the sync touched no
	// file (the caller keeps the size it had).
	SizeBytes int64
	// RefsDigest names the refs the mirror has after the sync (a hash of every ref's
	// name and object id, and of HEAD): the caller passes it back as
	// Target.RefsDigest. When the mirror matches what the upstream advertised, it is
	// the digest of that advertisement.
	RefsDigest string
	// Commits are the commits this sync brought, newest first: on a fetch those
	// reachable from the new ref tips and not from the old ones, on a clone the newest of
	// the history, back to HistorySince. Both walks are bounded (MaxNewCommits,
	// HistoryWindow, MaxHistoryCommits), so a fetch never walks a whole history.
	Commits []Commit
	// HistorySince, on a clone, is where the history in Commits begins: HistoryWindow
	// before now, or the oldest commit listed when the walk reached its bound first, or
	// the repo's first commit (then HistoryFromRoot is set).
	HistorySince    time.Time
	HistoryFromRoot bool
	// Packs is the mirror's pack count after a sync that wrote something (every go-git
	// fetch adds a pack until maintenance rolls them up); 0 when nothing changed.
	Packs int
	// Refs are the refs this sync moved, by name: created (Old is ZeroHash), updated,
	// deleted (New is ZeroHash); every ref of a clone is created. Read from the refs
	// before and after, never from the packs. Empty when no ref moved (a HEAD that
	// only changed its target sets Changed without a ref here).
	Refs []RefUpdate
}

// RefUpdate is one ref a sync moved, with its object ids in hex.
type RefUpdate struct {
	Name string
	Old  string
	New  string
}

// ZeroHash stands for the missing side of a created or deleted ref, as git writes it.
const ZeroHash = "0000000000000000000000000000000000000000"

// MaintainRequest asks for the maintenance of one mirror (repack, commit-graph, and a
// connectivity check now and then).
type MaintainRequest struct {
	// Since skips the mirror if it was maintained at or after Since: by this worker or
	// by the repo's previous owner. Zero: run anyway.
	Since time.Time
	// Fsck asks for a full run (repack with bitmap, commit-graph from all refs,
	// connectivity check) now: after a fetch found the mirror corrupt.
	Fsck bool
	// ScrubSince asks for a full run if the mirror's last one was before it (the start
	// of the repo's current scrub slot); zero: none unless due otherwise.
	ScrubSince time.Time
	// ScrubChangedOnly skips that full run when the mirror is as its last full run
	// left it (nothing was written to it since): on storage that keeps its bytes
	// redundantly (EFS), a scrub finds damage from writes, and such a mirror had none.
	ScrubChangedOnly bool
}

// Maintenance is what a maintenance run did.
type Maintenance struct {
	Skipped     bool // maintained since MaintainRequest.Since already: nothing done
	Unchanged   bool // nothing changed since the last maintenance: no git run, nothing read
	Steps       []string
	PacksBefore int
	PacksAfter  int
	Fscked      bool
	Recloned    bool // the mirror was corrupt: moved to the trash and cloned again
}

// Commit is when a commit was made, as it says itself.
type Commit struct {
	Author, Committer time.Time
}

// Time is the later of the author and committer times: the closest a commit tells of
// when it was pushed (a rebase or a merge restamps the committer).
func (c Commit) Time() time.Time {
	if c.Committer.After(c.Author) {
		return c.Committer
	}
	return c.Author
}

// Bounds of the commit walks that tell the scheduler what a sync brought.
const (
	MaxNewCommits     = 1000                     // commits listed after a fetch
	HistoryWindow     = 5 * 365 * 24 * time.Hour // how far back a first clone's history is listed
	MaxHistoryCommits = 1000                     // commits listed from it
)

// Kind classifies a failed fetch so the worker can decide between retry, back-off and gone.
type Kind string

const (
	KindNotFound    Kind = "not_found"
	KindAuth        Kind = "auth_required"
	KindTimeout     Kind = "timeout"
	KindNetwork     Kind = "network"
	KindRateLimited Kind = "rate_limited"
	KindCorrupt     Kind = "corrupt"
	KindPolicy      Kind = "refused_by_policy"
	KindBusy        Kind = "busy" // another fetch holds the repo's lock
	// KindConflict: the repo's mirror directory records another origin URL; it is
	// never fetched into (nor trashed) for this repo.
	KindConflict Kind = "mirror_conflict"
	// KindLimit: the upstream sent more than a limit allows (ref advertisement bytes or
	// refs, pack bytes or objects); retrying only helps once the upstream or the limit
	// changes.
	KindLimit Kind = "over_limit"
	// KindDiskFull: the mirror file system is above the disk guard's threshold, so the
	// fetch was not made. Not the repo's fault: it does not count as a failure.
	KindDiskFull Kind = "disk_full"
	KindOther    Kind = "other"
)

// Error is a classified fetch failure.
type Error struct {
	Kind       Kind
	RetryAfter time.Duration // from Retry-After on 429/503, else 0
	Err        error
}

// Error is the kind, then the message. A classified error wrapped again and classified
// once more ("sync URL: network: list refs: ...") names its kind once, in front:
// "network: sync URL: list refs: ...".
func (e *Error) Error() string {
	msg := e.Err.Error()
	var inner *Error
	if errors.As(e.Err, &inner) && inner.Kind == e.Kind {
		full := inner.Error()
		if i := strings.LastIndex(msg, full); i >= 0 {
			msg = msg[:i] + strings.TrimPrefix(full, string(inner.Kind)+": ") + msg[i+len(full):]
		}
	}
	return string(e.Kind) + ": " + msg
}
func (e *Error) Unwrap() error { return e.Err }

// Errorf builds a classified error.
func Errorf(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// KindOf returns the Kind of err, KindOther when it is not classified.
func KindOf(err error) Kind {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Kind
	}
	return KindOther
}

// RetryAfterOf returns the upstream's Retry-After hint carried by err, if any.
func RetryAfterOf(err error) time.Duration {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.RetryAfter
	}
	return 0
}
