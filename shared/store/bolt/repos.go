package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/bbolt"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

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

// CreateRepos is CreateRepo for many repos in one transaction: the bulk path of a
// first load (an import, a benchmark's fleet), where a transaction per repo would take
// most of the time. Repos whose id is stored already are left as they are; it returns
// how many were created. One call's repos are held in memory and written in one
// commit, so callers pass them in chunks of thousands, not millions.
func (s *Store) CreateRepos(ctx context.Context, rs []store.Repo) (int, error) {
	for _, r := range rs {
		if err := validID("repo", r.ID); err != nil {
			return 0, err
		}
	}
	// Written in id order (the first of equal ids first), the records and the indexes
	// keyed by id fill their pages in order: a third faster at 1M repos than in any order.
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(rs[a].ID, rs[b].ID) })
	created := 0
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		created = 0 // bbolt does not retry, but a failed transaction counts nothing
		repos := tx.Bucket(bktRepos)
		for _, i := range order {
			r := rs[i]
			if repos.Get([]byte(r.ID)) != nil {
				continue
			}
			if r.State == "" {
				r.State = store.RepoPending
			}
			if err := writeRepo(tx, nil, &r); err != nil {
				return fmt.Errorf("bolt: create repo %s: %w", r.ID, err)
			}
			created++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return created, nil
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

// ListStalest reads the first limit entries of the stalest index (layout 3), then
// their records: O(limit), whatever the number of repos.
func (s *Store) ListStalest(ctx context.Context, limit int) ([]store.Repo, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	// The stalest index is in CompareStaleness order: the first limit entries.
	var out []store.Repo
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		repos := tx.Bucket(bktRepos)
		c := tx.Bucket(bktStalest).Cursor()
		for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
			id := k[9:]
			var r store.Repo
			ok, err := getJSON(repos, id, &r)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("bolt: stalest index names repo %q, which does not exist", id)
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
		return r.ApplyReport(owner, epoch, rep)
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

// SearchRepos reads the repos in id order after cursor in one read transaction and
// keeps those match accepts, until it has limit of them or has read budget repos. A repo
// whose stored bytes maybe rejects is skipped without being decoded (maybe nil: every
// repo is decoded): a search over a large fleet costs a byte scan, not a decode, per
// repo. next is the cursor to go on from (a ListRepos cursor: the last id read), ""
// once the end is reached.
func (s *Store) SearchRepos(ctx context.Context, cursor string, limit, budget int, maybe func(raw []byte) bool, match func(store.Repo) bool) ([]store.Repo, string, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	budget = max(budget, limit)
	var out []store.Repo
	var next string
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bktRepos).Cursor()
		k, v := c.Seek([]byte(cursor))
		if cursor != "" && string(k) == cursor {
			k, v = c.Next()
		}
		for read := 0; k != nil; k, v = c.Next() {
			if len(out) == limit || read == budget {
				next = cursor
				return nil
			}
			read++
			if read%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			cursor = string(k)
			if maybe != nil && !maybe(v) {
				continue
			}
			var r store.Repo
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("bolt: decode repo: %w", err)
			}
			if match(r) {
				out = append(out, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}
