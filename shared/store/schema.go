package store

import (
	"errors"
	"fmt"
)

// ErrNewerSchema: the store was written by a newer mirrorfleet, whose data this one
// might misread or damage. Every backend refuses to open such a store.
var ErrNewerSchema = errors.New("store schema is newer than this mirrorfleet")

// SchemaError says which schema version a store holds and which this code reads and
// writes. An older store is migrated when opened; a newer one is refused with it.
type SchemaError struct {
	Store     string // "bbolt file /data/fleet.db", "DynamoDB table mf"
	Found     int64
	Supported int64
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("%s holds schema version %d, newer than the %d this mirrorfleet knows: it was written by a newer release. "+
		"Run that release (or newer), or restore a backup taken before the upgrade (docs/operations.md, Upgrades)", e.Store, e.Found, e.Supported)
}

func (e *SchemaError) Unwrap() error { return ErrNewerSchema }
