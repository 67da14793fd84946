package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

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
		return putWorker(tx, w)
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
		w2.Checks = slices.Clone(hb.Checks[:min(len(hb.Checks), store.MaxChecks)])
		w2.FetchRate = hb.FetchRate
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
		return putWorker(tx, w)
	})
}

// putWorker writes a worker record. Every change to the workers bucket goes through it
// or deleteWorker; those that change the membership (a new record, its state, slot,
// registration or recorded silence) move the bucket's sequence: WorkersVersion.
// Heartbeats and outbox heads and trims do not.
func putWorker(tx *bbolt.Tx, w store.Worker) error {
	b := tx.Bucket(bktWorkers)
	var old store.Worker
	ok, err := getJSON(b, []byte(w.ID), &old)
	if err != nil {
		return err
	}
	if !ok || store.MembershipChanged(old, w) {
		if b, err = changeWorkers(tx); err != nil {
			return err
		}
	}
	return putJSON(b, []byte(w.ID), w)
}

// changeWorkers returns the workers bucket for a write, its sequence moved.
func changeWorkers(tx *bbolt.Tx) (*bbolt.Bucket, error) {
	b := tx.Bucket(bktWorkers)
	return b, b.SetSequence(b.Sequence() + 1)
}

// WorkersVersion is the workers bucket's sequence, which membership changes move
// (putWorker, deleteWorker).
func (s *Store) WorkersVersion(ctx context.Context) (uint64, error) {
	var v uint64
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		v = tx.Bucket(bktWorkers).Sequence()
		return nil
	})
	return v, err
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
		// Entries a bounded trim left below the trim point are not read.
		var w store.Worker
		if ok, err := getJSON(tx.Bucket(bktWorkers), []byte(worker), &w); err != nil {
			return err
		} else if ok && w.TrimmedTo > after {
			after = w.TrimmedTo
		}
		if after == ^uint64(0) {
			return nil
		}
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
