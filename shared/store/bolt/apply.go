package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

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
	case store.PutSweep:
		if err := checkVersion(tx, keySweep, m.ExpectVersion); err != nil {
			return err
		}
		m.Sweep.Version = m.ExpectVersion + 1
		return putJSON(tx.Bucket(bktMeta), keySweep, m.Sweep)
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
		return putWorker(tx, w)
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
		nu := old.Assigned(m)
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
		return putWorker(tx, w)
	case store.TrimOutbox:
		w, err := worker(tx, m.Worker)
		if err != nil {
			return err
		}
		if err := deleteOutbox(tx, w.ID, m.Through, m.Max); err != nil {
			return err
		}
		w.TrimmedTo = max(w.TrimmedTo, m.Through)
		return putWorker(tx, w)
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
	if err := deleteOutbox(tx, w.ID, ^uint64(0), 0); err != nil {
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
	if err := tx.Bucket(bktSignals).Delete([]byte(w.ID)); err != nil {
		return err
	}
	b, err := changeWorkers(tx)
	if err != nil {
		return err
	}
	return b.Delete([]byte(w.ID))
}

// deleteOutbox drops the worker's entries with seq <= through, the oldest first, at
// most most of them (0: all).
func deleteOutbox(tx *bbolt.Tx, worker string, through, most uint64) error {
	prefix := outboxPrefix(worker)
	c := tx.Bucket(bktOutbox).Cursor()
	n := uint64(0)
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if binary.BigEndian.Uint64(k[len(prefix):]) > through || (most > 0 && n >= most) {
			return nil
		}
		n++
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
		if err := tx.Bucket(bktStalest).Delete(staleKey(old)); err != nil {
			return err
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

// indexRepo adds r to the owner, needs-decision and stalest indexes it belongs in.
func indexRepo(tx *bbolt.Tx, r *store.Repo) error {
	if r.State != store.RepoDeleting {
		if err := tx.Bucket(bktStalest).Put(staleKey(r), []byte{}); err != nil {
			return err
		}
	}
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
