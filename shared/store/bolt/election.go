package bolt

import (
	"context"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

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

func (s *Store) GetSweep(ctx context.Context) (store.Sweep, error) {
	var l store.Sweep
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		_, err := getJSON(tx.Bucket(bktMeta), keySweep, &l)
		return err
	})
	return l, err
}
