package bolt

import (
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Verify opens the store file at path read-only and checks every page (bbolt's
// Tx.Check) and that it holds a mirrorfleet store: a backup just written, or a file about
// to be restored, is whole. It fails with ErrLocked if a running store holds the file.
// It neither migrates nor writes the file.
func Verify(path string) error {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: LockTimeout})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			err = fmt.Errorf("%w: %w", ErrLocked, err)
		}
		return fmt.Errorf("bolt: verify %s: %w", path, err)
	}
	defer db.Close()
	return db.View(func(tx *bbolt.Tx) error {
		var first error
		for err := range tx.Check() { // drained whole: the checker stops once it is
			if first == nil {
				first = fmt.Errorf("bolt: verify %s: %w", path, err)
			}
		}
		if first != nil {
			return first
		}
		if tx.Bucket(bktRepos) == nil || tx.Bucket(bktMeta) == nil {
			return fmt.Errorf("bolt: verify %s: not a mirrorfleet store (no repos or meta bucket)", path)
		}
		return nil
	})
}
