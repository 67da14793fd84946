package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// rawLayout reads the layout key of a closed store file.
func rawLayout(t *testing.T, path string) uint64 {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v uint64
	_ = db.View(func(tx *bbolt.Tx) error {
		if raw := tx.Bucket(bktMeta).Get(keyLayout); len(raw) == 8 {
			v = binary.BigEndian.Uint64(raw)
		}
		return nil
	})
	return v
}

// writeRaw makes a store file by hand, as an older or newer release would have left it.
func writeRaw(t *testing.T, path string, fn func(tx *bbolt.Tx) error) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSchemaVersion(t *testing.T) {
	dir := t.TempDir()

	// A new file gets the schema version on first open.
	fresh := filepath.Join(dir, "fresh.db")
	s, err := Open(fresh)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if v := rawLayout(t, fresh); v != layout {
		t.Errorf("a new store file has schema version %d, want %d", v, layout)
	}

	// An older file (layout 1: no version key, the old index buckets) is migrated.
	old := filepath.Join(dir, "old.db")
	r := store.Repo{ID: store.RepoID("https://example.org/a"), URL: "https://example.org/a", State: store.RepoOK, Owner: "w1", OwnerEpoch: 1}
	writeRaw(t, old, func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bktMeta, bktRepos, oldByOwner, oldNeeds} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		raw, _ := json.Marshal(r)
		return tx.Bucket(bktRepos).Put([]byte(r.ID), raw)
	})
	s, err = Open(old)
	if err != nil {
		t.Fatalf("opening an older store: %v", err)
	}
	owned, _, err := s.ListReposByOwner(t.Context(), "w1", "", 10)
	if err != nil || len(owned) != 1 || owned[0].ID != r.ID {
		t.Errorf("after the migration the owner index holds %v (%v), want the repo", owned, err)
	}
	s.Close()
	if v := rawLayout(t, old); v != layout {
		t.Errorf("a migrated store has schema version %d, want %d", v, layout)
	}

	// A layout-2 file (before the stalest index) gets the index.
	two := filepath.Join(dir, "two.db")
	writeRaw(t, two, func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bktMeta, bktRepos} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		raw, _ := json.Marshal(r)
		if err := tx.Bucket(bktRepos).Put([]byte(r.ID), raw); err != nil {
			return err
		}
		return tx.Bucket(bktMeta).Put(keyLayout, binary.BigEndian.AppendUint64(nil, 2))
	})
	s, err = Open(two)
	if err != nil {
		t.Fatalf("opening a layout-2 store: %v", err)
	}
	stale, err := s.ListStalest(t.Context(), 10)
	if err != nil || len(stale) != 1 || stale[0].ID != r.ID {
		t.Errorf("after the migration ListStalest = %v (%v), want the repo", stale, err)
	}
	s.Close()

	// A layout-3 file kept the ring's body in the meta bucket: it moves to its own, and
	// the ring reads the same.
	three := filepath.Join(dir, "three.db")
	body := ringBody{Members: []store.Member{{ID: "w1", Slot: 0}, {ID: "w2", Slot: 1}},
		Tokens: []store.Token{{Pos: 10, Member: "w1"}, {Pos: 20, Member: "w2"}}}
	writeRaw(t, three, func(tx *bbolt.Tx) error {
		meta, err := tx.CreateBucket(bktMeta)
		if err != nil {
			return err
		}
		h := ringHead{Ring: store.Ring{Version: 5, Hash: "xxh3"}, Body: 5}
		if err := putJSON(meta, keyRing, h); err != nil {
			return err
		}
		if err := putJSON(meta, keyRingBody, body); err != nil {
			return err
		}
		return meta.Put(keyLayout, binary.BigEndian.AppendUint64(nil, 3))
	})
	s, err = Open(three)
	if err != nil {
		t.Fatalf("opening a layout-3 store: %v", err)
	}
	got, err := s.GetRing(t.Context())
	if err != nil || got.Version != 5 || !slices.Equal(got.Members, body.Members) || !slices.Equal(got.Tokens, body.Tokens) {
		t.Errorf("after the migration GetRing = %+v (%v), want version 5 with %+v", got, err, body)
	}
	s.Close()
	db, err := bbolt.Open(three, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket(bktMeta).Get(keyRingBody) != nil {
			t.Error("the ring's body is still in the meta bucket after the migration")
		}
		if tx.Bucket(bktRing).Get(keyRingBody) == nil {
			t.Error("the ring's body is not in its own bucket after the migration")
		}
		return nil
	})
	db.Close()
	if v := rawLayout(t, three); v != layout {
		t.Errorf("a migrated layout-3 store has schema version %d, want %d", v, layout)
	}

	// A newer file is refused, saying what to do, and left as it was.
	newer := filepath.Join(dir, "newer.db")
	writeRaw(t, newer, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket(bktMeta)
		if err != nil {
			return err
		}
		return b.Put(keyLayout, binary.BigEndian.AppendUint64(nil, layout+7))
	})
	_, err = Open(newer)
	var se *store.SchemaError
	if !errors.Is(err, store.ErrNewerSchema) || !errors.As(err, &se) || se.Found != layout+7 || se.Supported != layout {
		t.Fatalf("opening a newer store: %v; want a SchemaError %d > %d", err, layout+7, layout)
	}
	if !strings.Contains(err.Error(), "newer release") || !strings.Contains(err.Error(), newer) {
		t.Errorf("the refusal does not say what happened: %v", err)
	}
	if v := rawLayout(t, newer); v != layout+7 {
		t.Errorf("the refused store's version became %d", v)
	}
}
