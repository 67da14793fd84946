package store

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrNotFound: the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a condition of a conditional write did not hold; nothing was written.
	ErrConflict = errors.New("conditional write failed")
	// ErrFenced: the write carried a term that is no longer current; nothing was written.
	ErrFenced = errors.New("stale term: write fenced off")
	// ErrNoSlot: every worker slot in the bitmap is taken.
	ErrNoSlot = errors.New("no free worker slot")
	// ErrTooLarge: an Apply carried more items than the backend writes atomically.
	ErrTooLarge = errors.New("batch too large")
)

// MaxApplyItems bounds the items one Apply may touch, so every backend can apply a batch
// atomically (DynamoDB transactions take 100 actions, one of which is the term check).
const MaxApplyItems = 99

// Store is the shared state of the fleet. Every write that others race on is conditional.
type Store interface {
	// Election. CASElection writes e with Version = expectVersion+1 if the stored version
	// is still expectVersion (0: no record yet), else ErrConflict.
	GetElection(ctx context.Context) (Election, error)
	CASElection(ctx context.Context, expectVersion int64, e Election) (Election, error)

	// Apply performs the coordinator's writes atomically, fenced by term: if the stored
	// election term is not term, ErrFenced; if any mutation's condition fails, ErrConflict.
	// Either way nothing is written. At most MaxApplyItems items (Mutation.Items) per call.
	// Mutations of one stored item are applied in order (a backend whose transactions take
	// each item once folds them). Any other error may mean the write landed (a timeout
	// after commit): callers must be idempotent, as the coordinator is.
	Apply(ctx context.Context, term int64, muts []Mutation) error

	GetRing(ctx context.Context) (Ring, error) // zero Ring (Version 0) when never written
	// GetRingHead is GetRing without Members and Tokens: what a coordinator reads every
	// tick to learn whether the ring it decoded before is still current.
	GetRingHead(ctx context.Context) (Ring, error)

	// Workers. ClaimSlot registers w in the lowest free slot below maxSlots (a conditional
	// write on the slot bitmap) and returns it with Slot set and Beats 1 (registering is
	// the first sign of life); an existing id is ErrConflict.
	ClaimSlot(ctx context.Context, w Worker, maxSlots int) (Worker, error)
	// Heartbeat records hb, adds one to Beats and returns the worker record; ErrNotFound
	// once the worker has been removed. It never changes State.
	Heartbeat(ctx context.Context, id string, hb Heartbeat) (Worker, error)
	// Leave marks a worker draining (a graceful exit); the coordinator moves its repos.
	Leave(ctx context.Context, id string) error
	GetWorker(ctx context.Context, id string) (Worker, error)
	ListWorkers(ctx context.Context) ([]Worker, error)
	// WorkersVersion is a number that changes with every change of the membership: a
	// worker record created or removed, or its state, slot, registration or recorded
	// silence changed (MembershipChanged). Heartbeats, acks and outbox heads and trims
	// do not move it: a reader that saw it unchanged knows ListWorkers would return the
	// same workers in the same states, with only those figures moved. A backend that
	// cannot tell cheaply returns errors.ErrUnsupported.
	WorkersVersion(ctx context.Context) (uint64, error)
	ReadOutbox(ctx context.Context, worker string, after uint64, limit int) ([]OutboxEntry, error)

	// Repos. CreateRepo inserts r unless a repo with r.ID exists; it returns the stored repo
	// and whether it was created. r.ID is RepoID(r.URL), a function of the mirror path, so
	// the id's uniqueness is the mirror path's: a URL whose path is taken gets the stored
	// repo back, with its own (different) URL.
	CreateRepo(ctx context.Context, r Repo) (Repo, bool, error)
	// CreateRepoFenced is CreateRepo for the coordinator (the list sync): it writes only
	// while term is the stored election term, else ErrFenced and nothing is written.
	CreateRepoFenced(ctx context.Context, term int64, r Repo) (Repo, bool, error)
	GetRepo(ctx context.Context, id string) (Repo, error)
	// ListRepos pages through all repos by id; pass the returned cursor to continue ("" ends).
	ListRepos(ctx context.Context, cursor string, limit int) ([]Repo, string, error)
	// Listings by owner, needing a decision and stalest read indexes that may lag behind
	// writes (DynamoDB GSIs): they may miss a repo that just qualified, but never return
	// one that no longer does.
	// ListReposByOwner pages through owner's repos in ring-position order (Repo.RingPos).
	ListReposByOwner(ctx context.Context, owner string, cursor string, limit int) ([]Repo, string, error)
	// ListReposByOwnerRange is ListReposByOwner limited to the repos whose RingPos lies in
	// [from, to] (from <= to): the repos of one arc of the ring are one range read.
	ListReposByOwnerRange(ctx context.Context, owner string, from, to uint64, cursor string, limit int) ([]Repo, string, error)
	// ListReposNeedingDecision pages through the repos for which Repo.NeedsDecision holds
	// and Repo.Need is need, by id.
	ListReposNeedingDecision(ctx context.Context, need Need, cursor string, limit int) ([]Repo, string, error)
	// ListStalest returns up to limit repos (limit <= 0: a backend default) ordered by
	// CompareStaleness — never-succeeded repos first, the first added first — leaving out
	// repos being deleted. It feeds the status page's "stalest" table; both backends serve
	// it from an index (O(limit)).
	ListStalest(ctx context.Context, limit int) ([]Repo, error)
	RequestDelete(ctx context.Context, id string) error
	// RequestDeleteFenced is RequestDelete for the coordinator (the list sync), fenced by
	// term like CreateRepoFenced.
	RequestDeleteFenced(ctx context.Context, term int64, id string) error
	RequestSync(ctx context.Context, id string) error
	// ReportFetch records a fetch outcome if owner/epoch still hold the repo and it is not
	// being deleted, else ErrConflict.
	ReportFetch(ctx context.Context, id, owner string, epoch int64, rep FetchReport) error
	// HandBack marks an owned repo overflow (the disk guard), fenced like ReportFetch.
	HandBack(ctx context.Context, id, owner string, epoch int64, reason string) error
	CountRepos(ctx context.Context) (map[RepoState]int, error)

	// Signals (ADR 21): a worker's hints to fetch repos now, beside the durable
	// RequestSync. AddSignals adds ids to worker's signal sets without any condition
	// (a hint for a worker that is gone is harmless and expires); GetSignals reads them
	// strongly consistently (zero Signals when there are none); RemoveSignals takes the
	// given ids out, leaving any added meanwhile.
	AddSignals(ctx context.Context, worker string, sig Signals) error
	GetSignals(ctx context.Context, worker string) (Signals, error)
	RemoveSignals(ctx context.Context, worker string, sig Signals) error

	GetListSync(ctx context.Context) (ListSync, error)
	// GetSweep returns the anti-entropy sweep's state (zero before the first write).
	GetSweep(ctx context.Context) (Sweep, error)

	Close() error
}

// Signals are the repo ids a worker is asked to fetch at once: Hook those a forge's
// push webhook named, OwnerHook those a hook the forge marked as set on the repo's
// owner (an organization's hook covers all its repos: worker.OwnerHooks) named, Sync
// those a user asked to sync. Each set holds an id once.
type Signals struct {
	Hook      []string
	OwnerHook []string
	Sync      []string
}

// Empty reports whether there is nothing to signal.
func (s Signals) Empty() bool { return s.Len() == 0 }

// Len is how many ids the signals carry.
func (s Signals) Len() int { return len(s.Hook) + len(s.OwnerHook) + len(s.Sync) }

// MaxSignalIDs bounds the ids one AddSignals or RemoveSignals call carries (a DynamoDB
// item holds 400 KB; a worker's pending signals stay far below that).
const MaxSignalIDs = 1000

// Mutation is one coordinator write inside a fenced Apply.
type Mutation interface {
	// Items is how many stored items the mutation touches.
	Items() int
}

// PutRing replaces the ring if its stored version is ExpectVersion; the stored version
// becomes ExpectVersion+1.
type PutRing struct {
	Ring          Ring
	ExpectVersion int64
}

// SetWorkerState changes a worker's state. If ExpectBeats is not zero the worker's
// heartbeat count must still be exactly that (ADR 3: a heartbeat since cancels the
// decision). SilentSince, with ExpectBeats, is recorded as the worker's silence
// (Worker.SilentSince, SilentBeats); zero clears it.
type SetWorkerState struct {
	ID          string
	State       WorkerState
	ExpectBeats uint64
	SilentSince time.Time
}

// DeleteWorker removes a worker, frees its slot and drops its outbox; if ExpectBeats is
// not zero, only if its heartbeat count is still that.
type DeleteWorker struct {
	ID          string
	ExpectBeats uint64
}

// AssignRepo (re)assigns a repo if its owner and epoch are still ExpectOwner and
// ExpectEpoch and it is not being deleted (a delete request always wins); the stored
// epoch becomes ExpectEpoch+1.
type AssignRepo struct {
	ID          string
	ExpectOwner string
	ExpectEpoch int64
	Owner       string
	State       RepoState // "" keeps the stored state (a worker may have just updated it)
	Salt        int
	Priority    float64
	ClearSync   bool
}

// DeleteRepo removes a repo if its epoch is still ExpectEpoch.
type DeleteRepo struct {
	ID          string
	ExpectEpoch int64
}

// AppendOutbox appends entries numbered ExpectHead+1, ExpectHead+2, ... to a worker's
// outbox if its head is still ExpectHead, and moves the head to the last one.
type AppendOutbox struct {
	Worker     string
	ExpectHead uint64
	Entries    []OutboxEntry // Seq is assigned by the store
}

// TrimOutbox records the trim point Through (it never moves back) and drops the
// worker's entries at or below it, the oldest first, at most Max of them (0: all). The
// entries left below the trim point are never read again; later trims drop them. A cut
// (a worker far behind, which resyncs in full) thus moves the trim point to the head at
// once, while each Apply deletes a bounded number of entries.
type TrimOutbox struct {
	Worker  string
	Through uint64
	Max     uint64
}

// PutSweep records the anti-entropy sweep's state if the stored version is
// ExpectVersion.
type PutSweep struct {
	Sweep         Sweep
	ExpectVersion int64
}

// PutListSync records the applied list commit if the stored version is ExpectVersion.
type PutListSync struct {
	ListSync      ListSync
	ExpectVersion int64
}

func (PutRing) Items() int        { return 1 }
func (SetWorkerState) Items() int { return 1 }
func (DeleteWorker) Items() int   { return 2 }
func (AssignRepo) Items() int     { return 1 }
func (DeleteRepo) Items() int     { return 1 }
func (m AppendOutbox) Items() int { return 1 + len(m.Entries) }
func (TrimOutbox) Items() int     { return 1 }
func (PutListSync) Items() int    { return 1 }
func (PutSweep) Items() int       { return 1 }

// CountItems sums Items over muts.
func CountItems(muts []Mutation) int {
	n := 0
	for _, m := range muts {
		n += m.Items()
	}
	return n
}
