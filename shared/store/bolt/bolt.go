// Package bolt implements store.Store on a local bbolt file, for single-host fleets and
// tests. Every write is one bbolt read-write transaction; bbolt serialises those, so each
// conditional write is checked and applied atomically.
package bolt

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// LockTimeout is how long Open waits for another process to release the file.
const LockTimeout = time.Second

// ErrLocked: the file is held open by another Store (usually another process).
var ErrLocked = errors.New("store file is in use by another process")

// defaultLimit bounds a page when the caller passes limit <= 0.
const defaultLimit = 1000

// Buckets. Records are JSON, so times round-trip with nanoseconds and index-only
// buckets hold empty values.
var (
	bktMeta       = []byte("meta")               // singletons, see key* below
	bktWorkers    = []byte("workers")            // worker id -> Worker
	bktOutbox     = []byte("outbox")             // worker id \x00 seq (8 bytes BE) -> OutboxEntry
	bktRepos      = []byte("repos")              // repo id -> Repo
	bktByOwner    = []byte("repos_by_owner_pos") // owner \x00 ring position (8 bytes BE) repo id -> ""
	bktNeedAction = []byte("repos_need_action")  // repo id -> "" while NeedsDecision and Need is NeedAction
	bktNeedOwner  = []byte("repos_need_owner")   // repo id -> "" while NeedsDecision and Need is NeedOwner
	bktCounts     = []byte("repo_counts")        // state -> count (8 bytes BE)

	keyElection = []byte("election")
	keyRing     = []byte("ring")      // ringHead: the ring without its members and tokens
	keyRingBody = []byte("ring_body") // ringBody: the members and tokens, rewritten only when they change
	keyListSync = []byte("list_sync")
	keySlots    = []byte("slots")  // bitmap: bit i of byte i/8 set = slot i taken
	keyLayout   = []byte("layout") // layout version (8 bytes BE); older files are upgraded by Open

	// Index buckets of layout 1, replaced by the ones above.
	oldByOwner = []byte("repos_by_owner")
	oldNeeds   = []byte("repos_needing_decision")
)

// layout is the version of the file layout this code writes.
const layout = 2

// Store is a store.Store backed by one bbolt file. It is safe for concurrent use.
type Store struct {
	db    *bbolt.DB
	cache bodyCache
}

var _ store.Store = (*Store)(nil)

// Options tune a store.
type Options struct {
	// NoSync skips the fsync after each write: much faster, but a machine crash may lose
	// recent writes. For simulations and tests, never for a fleet you care about.
	NoSync bool
}

// Open opens (creating if needed) the store file at path. If another process holds it,
// Open fails with ErrLocked after LockTimeout rather than waiting forever.
func Open(path string) (*Store, error) { return OpenWith(path, Options{}) }

// OpenWith is Open with options.
func OpenWith(path string, o Options) (*Store, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: LockTimeout, NoSync: o.NoSync, NoFreelistSync: o.NoSync})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("bolt: open %s: %w (gave up after %s): %w", path, ErrLocked, LockTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bktMeta, bktWorkers, bktOutbox, bktRepos, bktByOwner, bktNeedAction, bktNeedOwner, bktCounts} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return upgrade(tx)
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close releases the file.
func (s *Store) Close() error { return s.db.Close() }

func (s *Store) view(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

func (s *Store) update(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(fn)
}

// ---- encoding helpers ----

// getJSON decodes key into v; false if absent. Decoding copies, so results never alias
// bbolt's mmap.
func getJSON(b *bbolt.Bucket, key []byte, v any) (bool, error) {
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("bolt: decode %q: %w", key, err)
	}
	return true, nil
}

func putJSON(b *bbolt.Bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("bolt: encode %q: %w", key, err)
	}
	return b.Put(key, raw)
}

func seqKey(worker string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(outboxPrefix(worker), seq)
}

func outboxPrefix(worker string) []byte { return []byte(worker + "\x00") }

func ownerPrefix(owner string) []byte { return []byte(owner + "\x00") }

// ownerKey is a repo's key in the owner index: owned repos sort by ring position.
func ownerKey(owner string, pos uint64, id string) []byte {
	return append(binary.BigEndian.AppendUint64(ownerPrefix(owner), pos), id...)
}

// needBucket is the needs-decision index bucket of need.
func needBucket(tx *bbolt.Tx, need store.Need) *bbolt.Bucket {
	if need == store.NeedOwner {
		return tx.Bucket(bktNeedOwner)
	}
	return tx.Bucket(bktNeedAction)
}

// validID keeps ids usable inside the \x00-separated composite keys.
func validID(kind, id string) error {
	if id == "" || strings.Contains(id, "\x00") {
		return fmt.Errorf("bolt: invalid %s id %q", kind, id)
	}
	return nil
}

// ---- election, ring, list sync ----

func (s *Store) GetElection(ctx context.Context) (store.Election, error) {
	var e store.Election
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		_, err := getJSON(tx.Bucket(bktMeta), keyElection, &e)
		return err
	})
	return e, err
}

func (s *Store) CASElection(ctx context.Context, expectVersion int64, e store.Election) (store.Election, error) {
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		if err := checkVersion(tx, keyElection, expectVersion); err != nil {
			return fmt.Errorf("bolt: %w", err)
		}
		e.Version = expectVersion + 1
		return putJSON(tx.Bucket(bktMeta), keyElection, e)
	})
	if err != nil {
		return store.Election{}, err
	}
	return e, nil
}

func (s *Store) GetListSync(ctx context.Context) (store.ListSync, error) {
	var l store.ListSync
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		_, err := getJSON(tx.Bucket(bktMeta), keyListSync, &l)
		return err
	})
	return l, err
}

// ---- Apply ----

func (s *Store) Apply(ctx context.Context, term int64, muts []store.Mutation) error {
	if n := store.CountItems(muts); n > store.MaxApplyItems {
		return fmt.Errorf("bolt: apply touches %d items, max %d: %w", n, store.MaxApplyItems, store.ErrTooLarge)
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if err := checkTerm(tx, term); err != nil {
			return fmt.Errorf("bolt: apply: %w", err)
		}
		// Returning an error rolls the whole transaction back, so a failed condition
		// anywhere leaves nothing written.
		for i, m := range muts {
			if err := s.apply(tx, m); err != nil {
				return fmt.Errorf("bolt: apply mutation %d (%T): %w", i, m, err)
			}
		}
		return nil
	})
}

// checkTerm is the fence of every coordinator write: the stored election term must be term.
func checkTerm(tx *bbolt.Tx, term int64) error {
	var e store.Election
	ok, err := getJSON(tx.Bucket(bktMeta), keyElection, &e)
	if err != nil {
		return err
	}
	if !ok || e.Term != term {
		return fmt.Errorf("write with term %d, stored term %d: %w", term, e.Term, store.ErrFenced)
	}
	return nil
}

func (s *Store) apply(tx *bbolt.Tx, m store.Mutation) error {
	switch m := m.(type) {
	case store.PutRing:
		return s.putRing(tx, m)
	case store.PutListSync:
		if err := checkVersion(tx, keyListSync, m.ExpectVersion); err != nil {
			return err
		}
		m.ListSync.Version = m.ExpectVersion + 1
		return putJSON(tx.Bucket(bktMeta), keyListSync, m.ListSync)
	case store.SetWorkerState:
		w, err := workerForBeats(tx, m.ID, m.ExpectBeats)
		if err != nil {
			return err
		}
		w.State = m.State
		w.SilentSince, w.SilentBeats = m.SilentSince, 0
		if !m.SilentSince.IsZero() {
			w.SilentBeats = m.ExpectBeats
		}
		return putJSON(tx.Bucket(bktWorkers), []byte(w.ID), w)
	case store.DeleteWorker:
		w, err := workerForBeats(tx, m.ID, m.ExpectBeats)
		if err != nil {
			return err
		}
		return deleteWorker(tx, w)
	case store.AssignRepo:
		old, err := repoForEpoch(tx, m.ID, &m.ExpectOwner, m.ExpectEpoch)
		if err != nil {
			return err
		}
		if old.State == store.RepoDeleting {
			return fmt.Errorf("repo %s is being deleted: %w", m.ID, store.ErrConflict)
		}
		nu := old
		nu.Owner, nu.OwnerEpoch = m.Owner, m.ExpectEpoch+1
		nu.Salt, nu.Priority = m.Salt, m.Priority
		if m.State != "" {
			nu.State = m.State
		}
		if m.ClearSync {
			nu.SyncRequested = false
		}
		return writeRepo(tx, &old, &nu)
	case store.DeleteRepo:
		old, err := repoForEpoch(tx, m.ID, nil, m.ExpectEpoch)
		if err != nil {
			return err
		}
		return writeRepo(tx, &old, nil)
	case store.AppendOutbox:
		w, err := worker(tx, m.Worker)
		if err != nil {
			return err
		}
		if w.OutboxHead != m.ExpectHead {
			return fmt.Errorf("worker %s outbox head is %d, want %d: %w", w.ID, w.OutboxHead, m.ExpectHead, store.ErrConflict)
		}
		ob := tx.Bucket(bktOutbox)
		for _, e := range m.Entries {
			w.OutboxHead++
			e.Seq = w.OutboxHead
			if err := putJSON(ob, seqKey(w.ID, e.Seq), e); err != nil {
				return err
			}
		}
		return putJSON(tx.Bucket(bktWorkers), []byte(w.ID), w)
	case store.TrimOutbox:
		w, err := worker(tx, m.Worker)
		if err != nil {
			return err
		}
		if err := deleteOutbox(tx, w.ID, m.Through); err != nil {
			return err
		}
		w.TrimmedTo = max(w.TrimmedTo, m.Through)
		return putJSON(tx.Bucket(bktWorkers), []byte(w.ID), w)
	default:
		return fmt.Errorf("bolt: unsupported mutation type %T", m)
	}
}

// checkVersion is the condition of a versioned singleton (election, ring, list sync):
// its stored version, 0 when absent, must be expect.
func checkVersion(tx *bbolt.Tx, key []byte, expect int64) error {
	var cur struct {
		Version int64 `json:"version"`
	}
	if _, err := getJSON(tx.Bucket(bktMeta), key, &cur); err != nil {
		return err
	}
	if cur.Version != expect {
		return fmt.Errorf("%s version is %d, want %d: %w", key, cur.Version, expect, store.ErrConflict)
	}
	return nil
}

// worker reads a worker for a conditional write: a missing one is a failed condition.
func worker(tx *bbolt.Tx, id string) (store.Worker, error) {
	var w store.Worker
	ok, err := getJSON(tx.Bucket(bktWorkers), []byte(id), &w)
	if err != nil {
		return w, err
	}
	if !ok {
		return w, fmt.Errorf("worker %s does not exist: %w", id, store.ErrConflict)
	}
	return w, nil
}

// workerForBeats reads a worker for a liveness decision: if expect is not zero, no
// heartbeat may have come since the coordinator saw the count expect.
func workerForBeats(tx *bbolt.Tx, id string, expect uint64) (store.Worker, error) {
	w, err := worker(tx, id)
	if err != nil {
		return w, err
	}
	if expect != 0 && w.Beats != expect {
		return w, fmt.Errorf("worker %s heartbeat count is %d, want %d: %w", id, w.Beats, expect, store.ErrConflict)
	}
	return w, nil
}

func deleteWorker(tx *bbolt.Tx, w store.Worker) error {
	if err := deleteOutbox(tx, w.ID, ^uint64(0)); err != nil {
		return err
	}
	meta := tx.Bucket(bktMeta)
	bits := bytes.Clone(meta.Get(keySlots)) // clone: values from Get live in the read-only mmap
	if i := w.Slot / 8; w.Slot >= 0 && i < len(bits) {
		bits[i] &^= 1 << (w.Slot % 8)
		if err := meta.Put(keySlots, bits); err != nil {
			return err
		}
	}
	return tx.Bucket(bktWorkers).Delete([]byte(w.ID))
}

// deleteOutbox drops the worker's entries with seq <= through.
func deleteOutbox(tx *bbolt.Tx, worker string, through uint64) error {
	prefix := outboxPrefix(worker)
	c := tx.Bucket(bktOutbox).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if binary.BigEndian.Uint64(k[len(prefix):]) > through {
			return nil
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// repoForEpoch reads a repo for a fenced write: it must exist with the expected epoch
// and, if expectOwner is not nil, the expected owner.
func repoForEpoch(tx *bbolt.Tx, id string, expectOwner *string, expectEpoch int64) (store.Repo, error) {
	var r store.Repo
	ok, err := getJSON(tx.Bucket(bktRepos), []byte(id), &r)
	if err != nil {
		return r, err
	}
	if !ok {
		return r, fmt.Errorf("repo %s does not exist: %w", id, store.ErrConflict)
	}
	if r.OwnerEpoch != expectEpoch || (expectOwner != nil && r.Owner != *expectOwner) {
		want := "*"
		if expectOwner != nil {
			want = *expectOwner
		}
		return r, fmt.Errorf("repo %s is owner %q epoch %d, want %q epoch %d: %w",
			id, r.Owner, r.OwnerEpoch, want, expectEpoch, store.ErrConflict)
	}
	return r, nil
}

// writeRepo replaces old (nil: absent) with nu (nil: delete), keeping the owner index,
// the needs-decision index and the per-state counters exact. Every repo write goes
// through here.
func writeRepo(tx *bbolt.Tx, old, nu *store.Repo) error {
	counts := tx.Bucket(bktCounts)
	if old != nil {
		if old.Owner != "" {
			if err := tx.Bucket(bktByOwner).Delete(ownerKey(old.Owner, old.RingPos(), old.ID)); err != nil {
				return err
			}
		}
		if old.NeedsDecision() {
			if err := needBucket(tx, old.Need()).Delete([]byte(old.ID)); err != nil {
				return err
			}
		}
		if err := addCount(counts, old.State, -1); err != nil {
			return err
		}
	}
	if nu == nil {
		return tx.Bucket(bktRepos).Delete([]byte(old.ID))
	}
	if err := indexRepo(tx, nu); err != nil {
		return err
	}
	if err := addCount(counts, nu.State, 1); err != nil {
		return err
	}
	return putJSON(tx.Bucket(bktRepos), []byte(nu.ID), nu)
}

// indexRepo adds r to the owner and needs-decision indexes it belongs in.
func indexRepo(tx *bbolt.Tx, r *store.Repo) error {
	if r.Owner != "" {
		if err := tx.Bucket(bktByOwner).Put(ownerKey(r.Owner, r.RingPos(), r.ID), []byte{}); err != nil {
			return err
		}
	}
	if r.NeedsDecision() {
		return needBucket(tx, r.Need()).Put([]byte(r.ID), []byte{})
	}
	return nil
}

func addCount(b *bbolt.Bucket, state store.RepoState, d int64) error {
	key := []byte(state)
	var n int64
	if raw := b.Get(key); raw != nil {
		n = int64(binary.BigEndian.Uint64(raw))
	}
	if n += d; n <= 0 {
		return b.Delete(key)
	}
	return b.Put(key, binary.BigEndian.AppendUint64(nil, uint64(n)))
}

// ---- workers ----

func (s *Store) ClaimSlot(ctx context.Context, w store.Worker, maxSlots int) (store.Worker, error) {
	if err := validID("worker", w.ID); err != nil {
		return store.Worker{}, err
	}
	if w.State == "" {
		w.State = store.WorkerJoining
	}
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		workers, meta := tx.Bucket(bktWorkers), tx.Bucket(bktMeta)
		if workers.Get([]byte(w.ID)) != nil {
			return fmt.Errorf("bolt: claim slot: worker %s already exists: %w", w.ID, store.ErrConflict)
		}
		bits := bytes.Clone(meta.Get(keySlots)) // clone: values from Get live in the read-only mmap
		slot := -1
		for i := 0; i < maxSlots; i++ {
			if i/8 >= len(bits) || bits[i/8]&(1<<(i%8)) == 0 {
				slot = i
				break
			}
		}
		if slot < 0 {
			return fmt.Errorf("bolt: claim slot for %s: all %d slots taken: %w", w.ID, maxSlots, store.ErrNoSlot)
		}
		for len(bits) <= slot/8 {
			bits = append(bits, 0)
		}
		bits[slot/8] |= 1 << (slot % 8)
		if err := meta.Put(keySlots, bits); err != nil {
			return err
		}
		w.Slot, w.Beats = slot, 1
		return putJSON(workers, []byte(w.ID), w)
	})
	if err != nil {
		return store.Worker{}, err
	}
	return w, nil
}

func (s *Store) Heartbeat(ctx context.Context, id string, hb store.Heartbeat) (store.Worker, error) {
	var w store.Worker
	err := s.updateWorker(ctx, id, func(w2 *store.Worker) {
		w2.HeartbeatAt = hb.At
		w2.Beats++
		w2.DiskUsed, w2.DiskTotal = hb.DiskUsed, hb.DiskTotal
		w2.Fetching, w2.QueueLen = hb.Fetching, hb.QueueLen
		w2.Staleness = hb.Staleness
		w2.AckSeq = max(w2.AckSeq, hb.AckSeq) // a late, reordered heartbeat must not rewind it
		w = *w2
	})
	return w, err
}

func (s *Store) Leave(ctx context.Context, id string) error {
	return s.updateWorker(ctx, id, func(w *store.Worker) { w.State = store.WorkerDraining })
}

// updateWorker applies fn to an existing worker; ErrNotFound if it is gone.
func (s *Store) updateWorker(ctx context.Context, id string, fn func(*store.Worker)) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bktWorkers)
		var w store.Worker
		ok, err := getJSON(b, []byte(id), &w)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("bolt: worker %s: %w", id, store.ErrNotFound)
		}
		fn(&w)
		return putJSON(b, []byte(id), w)
	})
}

func (s *Store) GetWorker(ctx context.Context, id string) (store.Worker, error) {
	var w store.Worker
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		ok, err := getJSON(tx.Bucket(bktWorkers), []byte(id), &w)
		if err == nil && !ok {
			err = fmt.Errorf("bolt: worker %s: %w", id, store.ErrNotFound)
		}
		return err
	})
	return w, err
}

func (s *Store) ListWorkers(ctx context.Context) ([]store.Worker, error) {
	var ws []store.Worker
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bktWorkers).ForEach(func(k, v []byte) error {
			var w store.Worker
			if err := json.Unmarshal(v, &w); err != nil {
				return fmt.Errorf("bolt: decode worker %q: %w", k, err)
			}
			ws = append(ws, w)
			return nil
		})
	})
	return ws, err
}

// ReadOutbox returns the worker's entries after seq after; none (not an error) for an
// unknown worker, since its outbox is simply empty.
func (s *Store) ReadOutbox(ctx context.Context, worker string, after uint64, limit int) ([]store.OutboxEntry, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	if after == ^uint64(0) {
		return nil, nil // nothing can follow, and after+1 below would wrap
	}
	var es []store.OutboxEntry
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		prefix := outboxPrefix(worker)
		c := tx.Bucket(bktOutbox).Cursor()
		for k, v := c.Seek(seqKey(worker, after+1)); k != nil && bytes.HasPrefix(k, prefix) && len(es) < limit; k, v = c.Next() {
			var e store.OutboxEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("bolt: decode outbox %q: %w", k, err)
			}
			es = append(es, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return es, nil
}

// ---- repos ----

func (s *Store) CreateRepo(ctx context.Context, r store.Repo) (store.Repo, bool, error) {
	return s.createRepo(ctx, nil, r)
}

func (s *Store) CreateRepoFenced(ctx context.Context, term int64, r store.Repo) (store.Repo, bool, error) {
	return s.createRepo(ctx, func(tx *bbolt.Tx) error { return checkTerm(tx, term) }, r)
}

// createRepo is CreateRepo after the condition check, if any, holds.
func (s *Store) createRepo(ctx context.Context, check func(*bbolt.Tx) error, r store.Repo) (store.Repo, bool, error) {
	if err := validID("repo", r.ID); err != nil {
		return store.Repo{}, false, err
	}
	if r.State == "" {
		r.State = store.RepoPending
	}
	var existing store.Repo
	created := false
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		if check != nil {
			if err := check(tx); err != nil {
				return fmt.Errorf("bolt: create repo %s: %w", r.ID, err)
			}
		}
		ok, err := getJSON(tx.Bucket(bktRepos), []byte(r.ID), &existing)
		if err != nil || ok {
			return err
		}
		created = true
		return writeRepo(tx, nil, &r)
	})
	switch {
	case err != nil:
		return store.Repo{}, false, err
	case !created:
		return existing, false, nil
	}
	return r, true, nil
}

func (s *Store) GetRepo(ctx context.Context, id string) (store.Repo, error) {
	var r store.Repo
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		r, err = getRepo(tx, id)
		return err
	})
	return r, err
}

func getRepo(tx *bbolt.Tx, id string) (store.Repo, error) {
	var r store.Repo
	ok, err := getJSON(tx.Bucket(bktRepos), []byte(id), &r)
	if err == nil && !ok {
		err = fmt.Errorf("bolt: repo %s: %w", id, store.ErrNotFound)
	}
	return r, err
}

// The cursor of a repo listing is the id of the last repo returned.

func (s *Store) ListRepos(ctx context.Context, cursor string, limit int) ([]store.Repo, string, error) {
	var rs []store.Repo
	var next string
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		next, err = scan(tx.Bucket(bktRepos), nil, cursor, limit, func(_ string, v []byte) error {
			var r store.Repo
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("bolt: decode repo: %w", err)
			}
			rs = append(rs, r)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return rs, next, nil
}

func (s *Store) ListReposByOwner(ctx context.Context, owner string, cursor string, limit int) ([]store.Repo, string, error) {
	return s.ListReposByOwnerRange(ctx, owner, 0, store.MaxPos, cursor, limit)
}

// The cursor of an owner listing is the last repo's ring position (16 hex digits)
// followed by its id: its key in the owner index.

func (s *Store) ListReposByOwnerRange(ctx context.Context, owner string, from, to uint64, cursor string, limit int) ([]store.Repo, string, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	prefix := ownerPrefix(owner)
	start := binary.BigEndian.AppendUint64(bytes.Clone(prefix), from)
	if cursor != "" {
		pos, id, err := store.ParsePosCursor(cursor)
		if err != nil {
			return nil, "", fmt.Errorf("bolt: %w", err)
		}
		start = ownerKey(owner, pos, id)
	}
	var rs []store.Repo
	var next string
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bktByOwner).Cursor()
		k, _ := c.Seek(start)
		if cursor != "" && bytes.Equal(k, start) {
			k, _ = c.Next()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(k) >= len(prefix)+8; k, _ = c.Next() {
			pos := binary.BigEndian.Uint64(k[len(prefix):])
			if pos > to {
				break
			}
			if len(rs) == limit {
				next = store.PosCursor(rs[len(rs)-1].RingPos(), rs[len(rs)-1].ID)
				break
			}
			r, err := getRepo(tx, string(k[len(prefix)+8:]))
			if err != nil {
				return fmt.Errorf("bolt: owner index of %s: %w", owner, err)
			}
			rs = append(rs, r)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return rs, next, nil
}

func (s *Store) ListReposNeedingDecision(ctx context.Context, need store.Need, cursor string, limit int) ([]store.Repo, string, error) {
	var rs []store.Repo
	var next string
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		next, err = scan(needBucket(tx, need), nil, cursor, limit, func(id string, _ []byte) error {
			r, err := getRepo(tx, id)
			if err != nil {
				return fmt.Errorf("bolt: needs-decision index: %w", err)
			}
			rs = append(rs, r)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return rs, next, nil
}

// ListStalest scans every repo (O(n) reads, O(limit) memory): bbolt has no secondary
// index on LastSuccessAt, and one would cost a write on every successful fetch, which is
// the hot path. The status page asks for a handful, a few times a minute.
func (s *Store) ListStalest(ctx context.Context, limit int) ([]store.Repo, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	// h is a max-heap of the limit stalest repos seen so far: its root is the least stale,
	// the one to drop when a staler repo turns up.
	h := &staleHeap{}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bktRepos).ForEach(func(k, v []byte) error {
			var r store.Repo
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("bolt: decode repo %q: %w", k, err)
			}
			if r.State == store.RepoDeleting {
				return nil
			}
			switch {
			case h.Len() < limit:
				heap.Push(h, r)
			case staler(r, (*h)[0]):
				(*h)[0] = r
				heap.Fix(h, 0)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	out := []store.Repo(*h)
	slices.SortFunc(out, func(a, b store.Repo) int {
		if staler(a, b) {
			return -1
		}
		return 1 // ids are unique, so a and b are never equally stale
	})
	return out, nil
}

// staler orders repos for ListStalest: older LastSuccessAt first (the zero time, never
// succeeded, is oldest), ties broken by id so the order is total.
func staler(a, b store.Repo) bool {
	if c := a.LastSuccessAt.Compare(b.LastSuccessAt); c != 0 {
		return c < 0
	}
	return a.ID < b.ID
}

type staleHeap []store.Repo

func (h staleHeap) Len() int           { return len(h) }
func (h staleHeap) Less(i, j int) bool { return staler(h[j], h[i]) } // max-heap
func (h staleHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *staleHeap) Push(x any)        { *h = append(*h, x.(store.Repo)) }
func (h *staleHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}

// scan calls fn for up to limit keys under prefix that sort after prefix+after, passing
// the key without the prefix. It returns the last key passed if more keys follow, else "".
func scan(b *bbolt.Bucket, prefix []byte, after string, limit int, fn func(key string, v []byte) error) (string, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	start := append(bytes.Clone(prefix), after...)
	c := b.Cursor()
	k, v := c.Seek(start)
	if after != "" && bytes.Equal(k, start) {
		k, v = c.Next()
	}
	last := ""
	for n := 0; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if n == limit {
			return last, nil
		}
		last = string(k[len(prefix):])
		if err := fn(last, v); err != nil {
			return "", err
		}
		n++
	}
	return "", nil
}

func (s *Store) RequestDelete(ctx context.Context, id string) error {
	return s.updateRepo(ctx, id, false, markDeleting)
}

func (s *Store) RequestDeleteFenced(ctx context.Context, term int64, id string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if err := checkTerm(tx, term); err != nil {
			return fmt.Errorf("bolt: request delete %s: %w", id, err)
		}
		return updateRepoIn(tx, id, false, markDeleting)
	})
}

func markDeleting(r *store.Repo) error { r.State = store.RepoDeleting; return nil }

func (s *Store) RequestSync(ctx context.Context, id string) error {
	return s.updateRepo(ctx, id, false, func(r *store.Repo) error { r.SyncRequested = true; return nil })
}

func (s *Store) ReportFetch(ctx context.Context, id, owner string, epoch int64, rep store.FetchReport) error {
	return s.updateRepo(ctx, id, true, func(r *store.Repo) error {
		if err := r.CheckFence(owner, epoch); err != nil {
			return err
		}
		r.State, r.Priority = rep.State, rep.Priority
		r.LastFetchAt, r.LastSuccessAt = rep.LastFetchAt, rep.LastSuccessAt
		r.LastChangeAt, r.LastCommitAt = rep.LastChangeAt, rep.LastCommitAt
		r.CloneFailCnt, r.FetchFailCnt = rep.CloneFailCnt, rep.FetchFailCnt
		r.SizeBytes, r.LastError = rep.SizeBytes, rep.LastError
		r.Stats = rep.Stats
		return nil
	})
}

func (s *Store) HandBack(ctx context.Context, id, owner string, epoch int64, reason string) error {
	return s.updateRepo(ctx, id, true, func(r *store.Repo) error {
		if err := r.CheckFence(owner, epoch); err != nil {
			return err
		}
		r.State, r.LastError = store.RepoOverflow, reason
		return nil
	})
}

// updateRepo applies fn to a repo through writeRepo. A missing repo is ErrNotFound
// except under a fence, where the owner no longer holding it is ErrConflict.
func (s *Store) updateRepo(ctx context.Context, id string, fenced bool, fn func(*store.Repo) error) error {
	return s.update(ctx, func(tx *bbolt.Tx) error { return updateRepoIn(tx, id, fenced, fn) })
}

func updateRepoIn(tx *bbolt.Tx, id string, fenced bool, fn func(*store.Repo) error) error {
	old, err := getRepo(tx, id)
	if fenced && errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("bolt: repo %s is gone: %w", id, store.ErrConflict)
	}
	if err != nil {
		return err
	}
	nu := old
	if err := fn(&nu); err != nil {
		return err
	}
	return writeRepo(tx, &old, &nu)
}

func (s *Store) CountRepos(ctx context.Context) (map[store.RepoState]int, error) {
	m := map[store.RepoState]int{}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bktCounts).ForEach(func(k, v []byte) error {
			m[store.RepoState(k)] = int(binary.BigEndian.Uint64(v))
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}
