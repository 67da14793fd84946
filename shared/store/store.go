package store

import (
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
