// Package store defines the shared state of a mirrorfleet (docs/architecture.md,
// State): its records, the coordinator's mutations and the errors of conditional
// writes. Its backends (bbolt in store/bolt, DynamoDB in store/dynamo) implement the
// same methods; each part of the fleet states the ones it uses in an interface of its
// own, where it uses it (coordinator.Store, worker.Store, api.Store, listsync.Store,
// ...). The conformance suite, internal/testkit/storetest, holds the whole method set
// (storetest.Store) with each method's contract and checks both backends against
// it.
package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/mirrorpath"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
)

// RepoState is the lifecycle state of a mirrored repository.
type RepoState string

const (
	RepoPending  RepoState = "pending"  // known, not yet assigned to a worker
	RepoCloning  RepoState = "cloning"  // assigned, no mirror yet
	RepoOK       RepoState = "ok"       // mirror exists and the last fetch succeeded
	RepoFailing  RepoState = "failing"  // its clone failed, or FailAfter fetches in a row; retried with back-off, then a long cooldown
	RepoGone     RepoState = "gone"     // upstream says not found; mirror kept
	RepoOverflow RepoState = "overflow" // handed back by a full worker; awaits a re-hash
	RepoDeleting RepoState = "deleting" // removed through the API; awaits the coordinator
)

// Source says who added a repo; the list sync only ever removes its own.
type Source string

const (
	SourceAPI  Source = "api"
	SourceList Source = "list"
)

// Repo is one upstream repository and its mirror's bookkeeping.
type Repo struct {
	ID  string `json:"id"`
	URL string `json:"url"` // normalized: the repo's identity
	// Upstream is the URL the repo is fetched from when it is not URL: the one given,
	// with the ".git" normalization took off (urlpolicy.Policy.Upstream). FetchURL.
	Upstream   string    `json:"upstream,omitempty"`
	Source     Source    `json:"source"`
	Owner      string    `json:"owner,omitempty"`
	OwnerEpoch int64     `json:"owner_epoch"` // bumped on every (re)assignment: fences stale owners
	Salt       int       `json:"salt"`        // disk-guard re-hash count
	State      RepoState `json:"state"`
	Priority   float64   `json:"priority"`
	// SyncRequested is set by the API; the coordinator turns it into a sync outbox entry.
	SyncRequested bool      `json:"sync_requested,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	LastFetchAt   time.Time `json:"last_fetch_at"`
	LastSuccessAt time.Time `json:"last_success_at"`
	LastChangeAt  time.Time `json:"last_change_at"`
	LastCommitAt  time.Time `json:"last_commit_at"`
	CloneFailCnt  int       `json:"clone_fail_cnt"`
	FetchFailCnt  int       `json:"fetch_fail_cnt"`
	SizeBytes     int64     `json:"size_bytes"`
	LastError     string    `json:"last_error,omitempty"`
	// Stats is the poll history the change-rate policy learns from; it moves with the
	// repo so a new owner does not start from nothing.
	Stats priority.Stats `json:"stats"`
	// PollStretch is the factor its worker put on the repo's poll step at its last fetch
	// (push webhooks or a change feed announce its pushes, so polls are the fall-back);
	// 0: none. It rides on the reports written anyway, so it may lag the worker.
	PollStretch float64 `json:"poll_stretch,omitempty"`
	// RefsDigest names the mirror's refs as its last fetch left them
	// (fetch.Result.RefsDigest): what a worker compares an upstream's refs with
	// without reading the mirror, after a restart or a move. Written with the reports
	// that are written anyway (changes, checkpoints), never for it alone; "" when
	// unknown (the worker then reads the mirror once).
	RefsDigest string `json:"refs_digest,omitempty"`
}

// FetchURL is the URL the repo is fetched from, shown to people as its upstream: the URL
// as it was added.
func (r Repo) FetchURL() string {
	if r.Upstream != "" {
		return r.Upstream
	}
	return r.URL
}

// NeedsDecision reports whether the coordinator must act on the repo at its next tick.
// Backends index exactly these repos so a tick never scans the whole table.
func (r Repo) NeedsDecision() bool {
	return r.State == RepoPending || r.State == RepoOverflow || r.State == RepoDeleting || r.SyncRequested
}

// Need says which part of the needs-decision index holds a repo, so the few repos that
// need an action are never queued behind a million that only wait for an owner.
type Need int

const (
	NeedAction Need = iota // overflow, being deleted or a sync requested: decided at the next tick
	NeedOwner              // pending: assigned in growing batches (anti-thrashing)
)

// Need is the part of the needs-decision index that holds r, when NeedsDecision holds.
func (r Repo) Need() Need {
	if r.State == RepoPending && !r.SyncRequested {
		return NeedOwner
	}
	return NeedAction
}

// RingPos is the repo's position on the ring: the hash of its RingKey. Backends index
// owned repos by owner and position, so the repos of one arc are a range read.
func (r Repo) RingPos() uint64 { return RingHash(RingKey(r.URL, r.Salt)) }

// CheckFence is the condition of a worker's write to a repo (ReportFetch, HandBack): the
// worker must still own it at the epoch it was given, and it must not be being deleted.
func (r Repo) CheckFence(owner string, epoch int64) error {
	if r.State == RepoDeleting {
		return fmt.Errorf("repo %s is being deleted: %w", r.ID, ErrConflict)
	}
	if r.Owner != owner || r.OwnerEpoch != epoch {
		return fmt.Errorf("repo %s is owned by %q at epoch %d, not %q at epoch %d: %w",
			r.ID, r.Owner, r.OwnerEpoch, owner, epoch, ErrConflict)
	}
	return nil
}

// ApplyReport is what a fetch report does to the repo, the same in every store: refused
// unless owner still holds the repo at epoch (and it is not being deleted).
func (r *Repo) ApplyReport(owner string, epoch int64, rep FetchReport) error {
	if err := r.CheckFence(owner, epoch); err != nil {
		return err
	}
	r.State, r.Priority = rep.State, rep.Priority
	r.LastFetchAt, r.LastSuccessAt = rep.LastFetchAt, rep.LastSuccessAt
	r.LastChangeAt, r.LastCommitAt = rep.LastChangeAt, rep.LastCommitAt
	r.CloneFailCnt, r.FetchFailCnt = rep.CloneFailCnt, rep.FetchFailCnt
	r.SizeBytes, r.LastError = rep.SizeBytes, rep.LastError
	r.Stats, r.PollStretch, r.RefsDigest = rep.Stats, rep.PollStretch, rep.RefsDigest
	return nil
}

// Assigned is the repo after assignment m, which the store applies only while the
// repo is still at m.ExpectOwner and m.ExpectEpoch: the new owner at the next epoch.
func (r Repo) Assigned(m AssignRepo) Repo {
	r.Owner, r.OwnerEpoch = m.Owner, m.ExpectEpoch+1
	r.Salt, r.Priority = m.Salt, m.Priority
	if m.State != "" {
		r.State = m.State
	}
	if m.ClearSync {
		r.SyncRequested = false
	}
	return r
}

// RepoID derives the stable id of a repo from its normalized URL: a hash of the
// mirror's path (mirrorpath.Rel), so two URLs that would share a mirror directory share
// an id, and the store's primary key keeps one repo per directory (a second CreateRepo
// finds the first; the API answers it with 409). A URL that has no mirror path (a
// scheme the fetcher does not mirror) is hashed as the URL itself; a path never
// contains "://", so the two kinds of key never meet.
func RepoID(normalizedURL string) string {
	key := normalizedURL
	if rel, err := mirrorpath.Rel(normalizedURL); err == nil {
		key = filepath.ToSlash(rel)
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// RingKey is the string hashed onto the ring: the normalized URL, plus a suffix once the
// disk guard has re-hashed the repo.
func RingKey(normalizedURL string, salt int) string {
	if salt == 0 {
		return normalizedURL
	}
	return normalizedURL + "#" + strconv.Itoa(salt)
}

// RingHashID names RingHash; it is stored in Ring.Hash so a reader knows how keys map
// onto the stored token positions.
const RingHashID = "fnv1a64-splitmix64"

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// RingHash maps a ring key (RingKey) to its position on the ring. It lives beside
// RingKey, not in package ring, because the stores index repos by it.
func RingHash(key string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= fnvPrime
	}
	// FNV-1a leaves the last bytes of a key mostly in the low bits, and keys differ mostly
	// at the end ("repo-1", "repo-2"). The splitmix64 finalizer is a bijection with full
	// avalanche, so positions are uniform over the whole circle without adding collisions.
	return Mix(h)
}

// Mix is the splitmix64 finalizer: a cheap bijection of 64-bit values with full
// avalanche.
func Mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// WorkerState is the coordinator's view of a worker.
type WorkerState string

const (
	WorkerJoining  WorkerState = "joining"  // registered, not yet in the ring
	WorkerActive   WorkerState = "active"   // in the ring, heartbeating
	WorkerSuspect  WorkerState = "suspect"  // missed heartbeats, still in the ring
	WorkerDead     WorkerState = "dead"     // silent past the grace; out of the ring
	WorkerDraining WorkerState = "draining" // asked to leave; out of the ring at next tick
)

// Worker is a fetch worker's membership record.
type Worker struct {
	ID          string      `json:"id"`
	Slot        int         `json:"slot"`
	StartedAt   time.Time   `json:"started_at"`
	HeartbeatAt time.Time   `json:"heartbeat_at"` // the worker's own clock: shown, never judged
	State       WorkerState `json:"state"`
	// Beats counts the worker's heartbeats (registering is the first). Liveness is judged
	// by when the coordinator saw it change, on the coordinator's clock (ADR 3).
	Beats uint64 `json:"beats"`
	// SilentBeats and SilentSince are what the coordinator recorded when it found the
	// worker silent: the count it saw, and since when (its own clock) it had not moved.
	// Set while the worker is suspect, so any coordinator can finish judging it.
	SilentBeats uint64    `json:"silent_beats,omitempty"`
	SilentSince time.Time `json:"silent_since,omitzero"`
	DiskUsed    int64     `json:"disk_used"`
	DiskTotal   int64     `json:"disk_total"`
	Fetching    int       `json:"fetching"`    // fetches in flight at the last heartbeat
	QueueLen    int       `json:"queue_len"`   // repos in its queue at the last heartbeat
	AckSeq      uint64    `json:"ack_seq"`     // last outbox entry the worker applied
	OutboxHead  uint64    `json:"outbox_head"` // last outbox seq the coordinator wrote
	TrimmedTo   uint64    `json:"trimmed_to"`  // entries <= this are gone from the outbox
	Staleness   Staleness `json:"staleness"`   // of its repos, at the last heartbeat
	// Checks are the worker's latest polls that its repos' records do not show, newest
	// first, as of the last heartbeat (at most MaxChecks, to the millisecond).
	Checks []Check `json:"checks,omitempty"`
	// FetchRate is the worker's fetches per second since it joined, at the last
	// heartbeat: with QueueLen, a reader's estimate of when a repo is polled next.
	FetchRate float64 `json:"fetch_rate,omitempty"`
}

// Check is one poll of a repo that the repo's record does not show: a poll that found
// nothing new is written only at the checkpoint (invariant 6), so the worker's heartbeat
// carries its latest ones, and a reader of the store alone (the API Lambda) still shows
// when each repo was last checked.
type Check struct {
	RepoID string    `json:"r"`
	At     time.Time `json:"t"`
}

// MaxChecks bounds a heartbeat's Checks. At 8 bytes of repo id and about 3 of age each,
// 48 checks keep a worker's DynamoDB item under 1 KB, so a heartbeat still costs one
// write unit (ADR 29).
const MaxChecks = 48

// Staleness summarises how long ago a worker's repos were last fetched successfully, as
// the worker saw them at a heartbeat. The coordinator aggregates the fleet's staleness
// from these without reading a single repo record. Percentiles are nearest-rank.
type Staleness struct {
	P50   time.Duration `json:"p50,omitempty"`
	P99   time.Duration `json:"p99,omitempty"`
	Max   time.Duration `json:"max,omitempty"`
	Repos int           `json:"repos,omitempty"` // repos with a last success: the percentiles' population
	Never int           `json:"never,omitempty"` // owned repos never fetched successfully
}

// MembershipChanged reports whether b differs from a in what the membership rests on
// (WorkersVersion): state, slot, registration, recorded silence.
func MembershipChanged(a, b Worker) bool {
	return a.State != b.State || a.Slot != b.Slot || !a.StartedAt.Equal(b.StartedAt) ||
		a.SilentBeats != b.SilentBeats || !a.SilentSince.Equal(b.SilentSince)
}

// Heartbeat is what a worker reports each heartbeat.
type Heartbeat struct {
	At        time.Time
	DiskUsed  int64
	DiskTotal int64
	Fetching  int
	QueueLen  int
	AckSeq    uint64
	Staleness Staleness
	Checks    []Check // newest first; a store keeps the first MaxChecks
	FetchRate float64
}

// Token is one virtual node: the member owns the arc (previous token, Pos].
type Token struct {
	Pos    uint64 `json:"p"`
	Member string `json:"m"`
}

// Member is a worker placed in the ring.
type Member struct {
	ID   string `json:"id"`
	Slot int    `json:"slot"`
}

// Ring is the stored consistent-hash ring and the coordinator's start-up bookkeeping.
type Ring struct {
	Version     int64     `json:"version"` // 0 = never written
	Hash        string    `json:"hash"`    // hash function id, so a reader knows how keys map
	Members     []Member  `json:"members"`
	Tokens      []Token   `json:"tokens"` // sorted by Pos
	WarmupUntil time.Time `json:"warmup_until"`
	// Batch is the current assignment batch size; it grows after warm-up (anti-thrashing).
	Batch int `json:"batch"`
	// Scans are the ranges of the ring whose repos may still sit with an owner the ring
	// no longer gives them: the ring is written first, the repos move after, over as many
	// ticks as it takes. A scan is dropped once its range holds none of its owner's repos.
	Scans []Scan `json:"scans,omitempty"`
}

// Scan is a range of ring positions [From, To] (From <= To) in which Owner's repos
// belong to other members.
type Scan struct {
	Owner string `json:"owner"`
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
}

// MaxPos is the last position on the ring.
const MaxPos = ^uint64(0)

// PosCursor is the cursor of an owner listing (ListReposByOwner, ListReposByOwnerRange):
// the last repo's ring position in 16 hex digits, then its id. Both backends use it.
func PosCursor(pos uint64, id string) string { return fmt.Sprintf("%016x%s", pos, id) }

// ParsePosCursor splits a PosCursor.
func ParsePosCursor(c string) (uint64, string, error) {
	if len(c) <= 16 {
		return 0, "", fmt.Errorf("owner listing cursor %q: too short", c)
	}
	pos, err := strconv.ParseUint(c[:16], 16, 64)
	if err != nil {
		return 0, "", fmt.Errorf("owner listing cursor %q: %w", c, err)
	}
	return pos, c[16:], nil
}

// Election is the Raft-style leadership record; Term is the fencing token.
type Election struct {
	Version      int64     `json:"version"` // 0 = never written
	Term         int64     `json:"term"`
	VotedFor     string    `json:"voted_for"`
	LeaseUntil   time.Time `json:"lease_until"`
	LastCallTime time.Time `json:"last_call_time"`
}

// OutboxOp is what an outbox entry tells a worker to do with a repo.
type OutboxOp string

const (
	OpAdd   OutboxOp = "add"   // start fetching the repo
	OpDel   OutboxOp = "del"   // stop fetching; the mirror stays (another worker continues it)
	OpPurge OutboxOp = "purge" // the repo was deleted: stop and move its mirror to the trash
	OpSync  OutboxOp = "sync"  // fetch it as soon as possible
)

// OutboxEntry is one change delivered to a worker with its heartbeat (ADR 2).
type OutboxEntry struct {
	Seq    uint64   `json:"seq"`
	Op     OutboxOp `json:"op"`
	RepoID string   `json:"repo_id"`
	URL    string   `json:"url"`
	Epoch  int64    `json:"epoch"` // owner epoch the entry belongs to
	// Priority is the repo's priority at assignment; 0 means "front of the queue".
	Priority float64 `json:"priority"`
}

// Sweep is where the anti-entropy pass stands (invariant 12): the coordinator reads
// every worker's repos in turn, a slice a tick, and moves those the ring gives to
// another, so a repo a lagging index hid from a move is found again within a period.
type Sweep struct {
	Version int64 `json:"version"`
	// Owner and Cursor: the worker whose repos the pass reads now, and where in its
	// owner listing; Owner "" with Cursor "" is the start of a pass.
	Owner  string `json:"owner,omitempty"`
	Cursor string `json:"cursor,omitempty"`
	// PassStart is when the pass began and TickAt when the sweep last read, on the
	// coordinator's clock. Size is what the pass expects to read (the repos counted at
	// its start, or the last pass's count if more), which sets its pace; Read counts the
	// repos it has read so far and LastPass the repos the last complete pass read.
	PassStart time.Time `json:"pass_start"`
	TickAt    time.Time `json:"tick_at"`
	Size      int64     `json:"size"`
	Read      int64     `json:"read"`
	LastPass  int64     `json:"last_pass"`
	// Passes counts complete passes; Found counts the repos found off their owner.
	Passes int64 `json:"passes"`
	Found  int64 `json:"found"`
}

// ListSync is the state of the upstream-list synchronisation.
type ListSync struct {
	Version   int64     `json:"version"`
	Commit    string    `json:"commit"`
	AppliedAt time.Time `json:"applied_at"`
	// Extra holds list-sync details (bad lines, held purge) as JSON the store does not read.
	Extra []byte `json:"extra,omitempty"`
}

// FetchReport is a worker's record of a fetch, written only when something worth
// storing happened (invariant 6).
type FetchReport struct {
	State         RepoState
	Priority      float64
	LastFetchAt   time.Time
	LastSuccessAt time.Time
	LastChangeAt  time.Time
	LastCommitAt  time.Time
	CloneFailCnt  int
	FetchFailCnt  int
	SizeBytes     int64
	LastError     string
	Stats         priority.Stats
	PollStretch   float64
	RefsDigest    string
}

// CompareStaleness orders repos for ListStalest: the one waiting longest for a good
// fetch first. Never succeeded is oldest, and among those the one added first; then by
// last success; ties broken by id, so the order is total.
func CompareStaleness(a, b Repo) int {
	if c := a.LastSuccessAt.Compare(b.LastSuccessAt); c != 0 {
		return c
	}
	if a.LastSuccessAt.IsZero() {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
	}
	return strings.Compare(a.ID, b.ID)
}
