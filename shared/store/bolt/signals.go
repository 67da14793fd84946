package bolt

import (
	"context"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// signalRecord is a worker's stored signals (bktSignals), each set sorted.
type signalRecord struct {
	Hook      []string `json:"hook,omitempty"`
	OwnerHook []string `json:"owner_hook,omitempty"`
	Sync      []string `json:"sync,omitempty"`
}

func checkSignals(op, worker string, sig store.Signals) error {
	if err := validID("worker", worker); err != nil {
		return err
	}
	if n := sig.Len(); n > store.MaxSignalIDs {
		return fmt.Errorf("bolt: %s: %d ids, more than %d", op, n, store.MaxSignalIDs)
	}
	return nil
}

// AddSignals adds the ids to the worker's sets, without condition.
func (s *Store) AddSignals(ctx context.Context, worker string, sig store.Signals) error {
	if err := checkSignals("add signals", worker, sig); err != nil || sig.Empty() {
		return err
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bktSignals)
		var rec signalRecord
		if _, err := getJSON(b, []byte(worker), &rec); err != nil {
			return err
		}
		rec.Hook = union(rec.Hook, sig.Hook)
		rec.OwnerHook = union(rec.OwnerHook, sig.OwnerHook)
		rec.Sync = union(rec.Sync, sig.Sync)
		return putJSON(b, []byte(worker), rec)
	})
}

// GetSignals reads the worker's sets.
func (s *Store) GetSignals(ctx context.Context, worker string) (store.Signals, error) {
	if err := validID("worker", worker); err != nil {
		return store.Signals{}, err
	}
	var rec signalRecord
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		_, err := getJSON(tx.Bucket(bktSignals), []byte(worker), &rec)
		return err
	})
	return store.Signals{Hook: rec.Hook, OwnerHook: rec.OwnerHook, Sync: rec.Sync}, err
}

// RemoveSignals takes the ids out of the worker's sets; a record left empty is dropped.
func (s *Store) RemoveSignals(ctx context.Context, worker string, sig store.Signals) error {
	if err := checkSignals("remove signals", worker, sig); err != nil || sig.Empty() {
		return err
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bktSignals)
		var rec signalRecord
		if ok, err := getJSON(b, []byte(worker), &rec); err != nil || !ok {
			return err
		}
		rec.Hook = slices.DeleteFunc(rec.Hook, func(id string) bool { return slices.Contains(sig.Hook, id) })
		rec.OwnerHook = slices.DeleteFunc(rec.OwnerHook, func(id string) bool { return slices.Contains(sig.OwnerHook, id) })
		rec.Sync = slices.DeleteFunc(rec.Sync, func(id string) bool { return slices.Contains(sig.Sync, id) })
		if len(rec.Hook) == 0 && len(rec.OwnerHook) == 0 && len(rec.Sync) == 0 {
			return b.Delete([]byte(worker))
		}
		return putJSON(b, []byte(worker), rec)
	})
}

// union is the sorted set of a's and b's ids.
func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
