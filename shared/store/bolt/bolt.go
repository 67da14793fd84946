// Package bolt implements the store (storetest.Store) on a local bbolt file, for single-host fleets and
// tests. Every write is one bbolt read-write transaction; bbolt serialises those, so each
// conditional write is checked and applied atomically. The files follow the DynamoDB
// store's: election.go, apply.go, workers.go, repos.go, ring.go.
package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
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
	bktStalest    = []byte("repos_stalest")      // staleKey(repo) -> "" for repos not being deleted (layout 3)
	bktSignals    = []byte("signals")            // worker id -> signalRecord (ADR 21; an older file gets it at Open)
	// The ring's members and tokens (keyRingBody), apart from the meta singletons: bbolt
	// rewrites a whole leaf at every write to any key in it, and the singletons are
	// written at every tick, so beside them the body was copied each time (layout 4).
	bktRing = []byte("ring")

	keyElection = []byte("election")
	keyRing     = []byte("ring")      // ringHead: the ring without its members and tokens
	keyRingBody = []byte("ring_body") // ringBody (in bktRing): the members and tokens, rewritten only when they change
	keyListSync = []byte("list_sync")
	keySweep    = []byte("sweep")
	keySlots    = []byte("slots")  // bitmap: bit i of byte i/8 set = slot i taken
	keyLayout   = []byte("layout") // layout version (8 bytes BE); older files are upgraded by Open

	// Index buckets of layout 1, replaced by the ones above.
	oldByOwner = []byte("repos_by_owner")
	oldNeeds   = []byte("repos_needing_decision")
)

// layout is the version of the file layout (the store's schema version) this code
// writes. Open writes it into a new file, upgrades an older file, and refuses a newer
// one with a *store.SchemaError.
// 3 added the stalest index; 4 moved the ring's body out of the meta bucket.
const layout = 4

// SchemaVersion is the schema version of the file once opened: always this code's.
func (s *Store) SchemaVersion() int64 { return layout }

// Store is the store backed by one bbolt file. It is safe for concurrent use.
type Store struct {
	db    *bbolt.DB
	cache bodyCache
}

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
	// A file cut short would make bbolt read past its end (SIGBUS): say so instead.
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		if err := checkFile(path); err != nil {
			return nil, fmt.Errorf("bolt: open %s: %w", path, err)
		}
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: LockTimeout, NoSync: o.NoSync, NoFreelistSync: o.NoSync})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("bolt: open %s: %w (gave up after %s): %w", path, ErrLocked, LockTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bktMeta, bktWorkers, bktOutbox, bktRepos, bktByOwner, bktNeedAction, bktNeedOwner, bktCounts, bktStalest, bktSignals, bktRing} {
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

// Backup writes a consistent copy of the whole file to w, from one read transaction
// (bbolt's Tx.WriteTo): writers go on meanwhile, and the copy is the store as of the
// moment the transaction began. Open the copy as a store to restore it.
//
// The copy is spooled to a temporary file beside the store first, and only then sent to
// w: a read transaction held open blocks a write that has to grow bbolt's memory map, so
// it lasts as long as a local disk copy, never as long as a slow reader of w. The spool
// costs one store's size of disk while it lasts.
func (s *Store) Backup(ctx context.Context, w io.Writer) (int64, error) {
	spool, err := os.CreateTemp(filepath.Dir(s.db.Path()), "."+filepath.Base(s.db.Path())+".backup-*")
	if err != nil {
		return 0, fmt.Errorf("bolt: backup: %w", err)
	}
	defer func() {
		spool.Close()
		os.Remove(spool.Name())
	}()
	var total int64
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		total, err = tx.WriteTo(spool)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("bolt: backup: %w", err)
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("bolt: backup: %w", err)
	}
	n, err := io.Copy(w, io.LimitReader(spool, total))
	if err != nil {
		return n, fmt.Errorf("bolt: backup: %w", err)
	}
	return n, nil
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

// Encoding helpers.

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

// staleKey orders the stalest index as store.CompareStaleness orders repos: never
// succeeded first (by when added), then by last success, then by id.
func staleKey(r *store.Repo) []byte {
	key, t := []byte{1}, r.LastSuccessAt
	if t.IsZero() {
		key, t = []byte{0}, r.CreatedAt
	}
	key = binary.BigEndian.AppendUint64(key, staleNanos(t))
	return append(key, r.ID...)
}

// staleNanos is t as sortable bytes: nanoseconds since 1970 with the sign bit flipped,
// clamped to what int64 holds (a zero CreatedAt is year 1).
func staleNanos(t time.Time) uint64 {
	lo, hi := time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)
	if t.Before(lo) {
		t = lo
	} else if t.After(hi) {
		t = hi
	}
	return uint64(t.UnixNano()) ^ (1 << 63)
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
