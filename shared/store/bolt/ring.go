package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"go.etcd.io/bbolt"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// The ring is kept in two records: the head (version, warm-up, batch, scans: small, and
// read every tick) and the body (members and tokens: 2.7 MB of JSON at 1,000 members),
// rewritten only when the members or tokens change. The body decoded last is kept in
// memory: the file is this process's alone (Open locks it), so it cannot change behind
// our back.

type ringHead struct {
	store.Ring
	Body int64 `json:"body"` // the ring version whose members and tokens the body holds
}

type ringBody struct {
	Members []store.Member `json:"members"`
	Tokens  []store.Token  `json:"tokens"`
}

type bodyCache struct {
	mu      sync.Mutex
	version int64 // 0: nothing cached
	body    ringBody
}

func (c *bodyCache) get(version int64) (ringBody, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version == 0 || c.version != version {
		return ringBody{}, false
	}
	return c.body, true
}

func (c *bodyCache) set(version int64, b ringBody) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version, c.body = version, b
}

func readHead(tx *bbolt.Tx) (ringHead, error) {
	var h ringHead
	_, err := getJSON(tx.Bucket(bktMeta), keyRing, &h)
	return h, err
}

// loadBody returns the members and tokens of head, from the cache or the file. The cached
// slices are shared: callers copy before handing them out.
func (s *Store) loadBody(tx *bbolt.Tx, h ringHead) (ringBody, error) {
	if h.Body == 0 {
		return ringBody{}, nil
	}
	if b, ok := s.cache.get(h.Body); ok {
		return b, nil
	}
	var b ringBody
	if _, err := getJSON(tx.Bucket(bktRing), keyRingBody, &b); err != nil {
		return ringBody{}, err
	}
	s.cache.set(h.Body, b)
	return b, nil
}

func (s *Store) GetRingHead(ctx context.Context) (store.Ring, error) {
	var h ringHead
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		h, err = readHead(tx)
		return err
	})
	h.Members, h.Tokens = nil, nil
	return h.Ring, err
}

func (s *Store) GetRing(ctx context.Context) (store.Ring, error) {
	var r store.Ring
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		h, err := readHead(tx)
		if err != nil {
			return err
		}
		b, err := s.loadBody(tx, h)
		if err != nil {
			return err
		}
		r = h.Ring
		r.Members, r.Tokens = slices.Clone(b.Members), slices.Clone(b.Tokens)
		return nil
	})
	return r, err
}

// putRing writes m's ring as version m.ExpectVersion+1; the body only if it changed.
func (s *Store) putRing(tx *bbolt.Tx, m store.PutRing) error {
	if err := checkVersion(tx, keyRing, m.ExpectVersion); err != nil {
		return err
	}
	old, err := readHead(tx)
	if err != nil {
		return err
	}
	cur, err := s.loadBody(tx, old)
	if err != nil {
		return err
	}
	h := ringHead{Ring: m.Ring, Body: old.Body}
	h.Version = m.ExpectVersion + 1
	h.Members, h.Tokens = nil, nil
	h.Scans = slices.Clone(m.Ring.Scans)
	if old.Body == 0 || !slices.Equal(cur.Members, m.Ring.Members) || !slices.Equal(cur.Tokens, m.Ring.Tokens) {
		b := ringBody{Members: slices.Clone(m.Ring.Members), Tokens: slices.Clone(m.Ring.Tokens)}
		if err := putJSON(tx.Bucket(bktRing), keyRingBody, b); err != nil {
			return err
		}
		h.Body = h.Version
		tx.OnCommit(func() { s.cache.set(h.Body, b) })
	}
	return putJSON(tx.Bucket(bktMeta), keyRing, h)
}

// upgrade brings a file written by an older layout up to this one: layout 1 kept the
// owner index by id, one needs-decision bucket and the ring in one record; up to layout
// 3 the ring's body was a record of the meta bucket.
func upgrade(tx *bbolt.Tx) error {
	meta := tx.Bucket(bktMeta)
	v := uint64(0)
	if raw := meta.Get(keyLayout); len(raw) == 8 {
		v = binary.BigEndian.Uint64(raw)
	}
	if v > layout {
		return &store.SchemaError{Store: "bbolt file " + tx.DB().Path(), Found: int64(v), Supported: layout}
	}
	if v == layout {
		return nil
	}
	if v < 2 {
		for _, name := range [][]byte{oldByOwner, oldNeeds} {
			if tx.Bucket(name) != nil {
				if err := tx.DeleteBucket(name); err != nil {
					return fmt.Errorf("upgrade: drop %s: %w", name, err)
				}
			}
		}
		var whole store.Ring
		if ok, err := getJSON(meta, keyRing, &whole); err != nil {
			return err
		} else if ok && whole.Version > 0 {
			h := ringHead{Ring: whole, Body: whole.Version}
			h.Members, h.Tokens = nil, nil
			if err := putJSON(tx.Bucket(bktRing), keyRingBody, ringBody{Members: whole.Members, Tokens: whole.Tokens}); err != nil {
				return err
			}
			if err := putJSON(meta, keyRing, h); err != nil {
				return err
			}
		}
	}
	if v < 3 {
		// Every index of the current layout is rebuilt from the records (2: by owner and
		// ring position, needs decision; 3: stalest). Putting an entry again is harmless.
		err := tx.Bucket(bktRepos).ForEach(func(k, v []byte) error {
			var r store.Repo
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("upgrade: decode repo %q: %w", k, err)
			}
			return indexRepo(tx, &r)
		})
		if err != nil {
			return err
		}
	}
	// 4: the ring's body moves to its own bucket.
	if body := meta.Get(keyRingBody); body != nil {
		if err := tx.Bucket(bktRing).Put(keyRingBody, bytes.Clone(body)); err != nil {
			return fmt.Errorf("upgrade: move the ring's body: %w", err)
		}
		if err := meta.Delete(keyRingBody); err != nil {
			return fmt.Errorf("upgrade: move the ring's body: %w", err)
		}
	}
	return meta.Put(keyLayout, binary.BigEndian.AppendUint64(nil, layout))
}
