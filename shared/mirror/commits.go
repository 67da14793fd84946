package mirror

import (
	"container/heap"
	"errors"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// maxWalk bounds the commits either walk reads, listed or not: a fetch costs at most
// this many commit reads however deep the history or odd the push.
const maxWalk = 4 * fetch.MaxNewCommits

// tipCommits reads the commits the refs point to, annotated tags peeled; refs to trees
// or blobs are skipped. A ref whose object is missing is an error (the mirror is
// corrupt).
func tipCommits(s storer.EncodedObjectStorer, refs refMap) ([]*object.Commit, error) {
	var out []*object.Commit
	seen := make(map[plumbing.Hash]struct{}, len(refs))
	for _, h := range refs {
		for range maxPeel {
			if _, ok := seen[h]; ok {
				break
			}
			seen[h] = struct{}{}
			o, err := s.EncodedObject(plumbing.AnyObject, h)
			if err != nil {
				return nil, err
			}
			if o.Type() == plumbing.TagObject {
				t, err := object.DecodeTag(s, o)
				if err != nil {
					return nil, err
				}
				h = t.Target
				continue
			}
			if o.Type() == plumbing.CommitObject {
				c, err := object.DecodeCommit(s, o)
				if err != nil {
					return nil, err
				}
				out = append(out, c)
			}
			break
		}
	}
	return out, nil
}

// commitOf is when c says it was made.
func commitOf(c *object.Commit) fetch.Commit {
	return fetch.Commit{Author: c.Author.When.UTC(), Committer: c.Committer.When.UTC()}
}

// newCommits lists the commits a fetch brought, newest first: a walk in committer-time
// order from the refs that moved (before → after) that stops at any commit the mirror
// had before the fetch (had), so it reads only what is new however old the commit a new
// branch starts from. It stops early at fetch.MaxNewCommits listed or maxWalk read.
func newCommits(s storer.EncodedObjectStorer, had func(plumbing.Hash) (bool, error), before, after refMap) ([]fetch.Commit, error) {
	moved := refMap{}
	for name, h := range after {
		if before[name] == h {
			continue
		}
		if ok, err := had(h); err != nil || ok {
			if err != nil {
				return nil, err
			}
			continue // moved to an object the mirror had: nothing new under it
		}
		moved[name] = h
	}
	tips, err := tipCommits(s, moved)
	if err != nil {
		return nil, err
	}
	w := walk{s: s, seen: map[plumbing.Hash]struct{}{}, skip: had}
	for _, c := range tips {
		if ok, err := had(c.Hash); err != nil || ok {
			if err != nil {
				return nil, err
			}
			continue // an annotated tag of a commit the mirror had
		}
		w.push(c)
	}
	var out []fetch.Commit
	for len(w.queue) > 0 && len(out) < fetch.MaxNewCommits && w.read < maxWalk {
		c := w.pop()
		out = append(out, commitOf(c))
		if err := w.parents(c); err != nil {
			return out, err
		}
	}
	return out, nil
}

// hadBefore tells whether the mirror had an object before a fetch: whether it is in one
// of the packs the mirror had then (go-git stores what a fetch brings as a new pack;
// mirrors hold no loose objects). The packs' indexes are read on first use.
type hadBefore struct {
	dot   *dotgit.DotGit
	packs []plumbing.Hash
	idx   []*idxfile.MemoryIndex
}

// packsOf notes the packs of the mirror at dir, before a fetch.
func packsOf(dir string) (*hadBefore, error) {
	dot := dotgit.New(newAtomicFS(dir, true)) // reads only, in whole blocks
	packs, err := dot.ObjectPacks()
	if err != nil {
		return nil, err
	}
	return &hadBefore{dot: dot, packs: packs}, nil
}

func (h *hadBefore) has(x plumbing.Hash) (bool, error) {
	if h.idx == nil {
		h.idx = []*idxfile.MemoryIndex{}
		for _, p := range h.packs {
			f, err := h.dot.ObjectPackIdx(p)
			if err != nil {
				return false, err
			}
			idx := idxfile.NewMemoryIndex()
			err = idxfile.NewDecoder(f).Decode(idx)
			f.Close()
			if err != nil {
				return false, err
			}
			h.idx = append(h.idx, idx)
		}
	}
	for _, idx := range h.idx {
		if ok, err := idx.Contains(x); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// history lists the newest commits of the whole history, newest first, back to
// window before now, at most fetch.MaxHistoryCommits of them (and maxWalk read). since
// is where the listing begins: window before now, or the oldest commit listed when the
// walk stopped at its bound, or the first commit when it reached the repo's start
// (root is then true).
func history(s storer.EncodedObjectStorer, refs refMap, now time.Time, window time.Duration) (out []fetch.Commit, since time.Time, root bool, err error) {
	tips, err := tipCommits(s, refs)
	if err != nil {
		return nil, time.Time{}, false, err
	}
	w := walk{s: s, seen: map[plumbing.Hash]struct{}{}}
	for _, c := range tips {
		w.push(c)
	}
	since = now.Add(-window)
	for len(w.queue) > 0 {
		if len(out) == fetch.MaxHistoryCommits || w.read >= maxWalk {
			return out, out[len(out)-1].Committer, false, nil
		}
		c := w.pop()
		if !c.Committer.When.After(since) {
			return out, since, false, nil
		}
		out = append(out, commitOf(c))
		if err := w.parents(c); err != nil {
			return out, since, false, err
		}
	}
	if len(out) == 0 {
		return nil, since, false, nil // an empty repo
	}
	return out, out[len(out)-1].Committer, true, nil
}

// walk is a time-ordered walk over commits: newest committer time first, each commit
// once, never into a commit skip says to leave out.
type walk struct {
	s     storer.EncodedObjectStorer
	queue commitQueue
	seen  map[plumbing.Hash]struct{}
	skip  func(plumbing.Hash) (bool, error) // nil: walk everything
	read  int                               // commits read from storage
}

func (w *walk) push(c *object.Commit) {
	if _, ok := w.seen[c.Hash]; ok {
		return
	}
	w.seen[c.Hash] = struct{}{}
	heap.Push(&w.queue, c)
}

func (w *walk) pop() *object.Commit { return heap.Pop(&w.queue).(*object.Commit) }

// parents queues c's parents. A parent missing from a shallow or partial upstream ends
// that line of the walk.
func (w *walk) parents(c *object.Commit) error {
	for _, h := range c.ParentHashes {
		if _, ok := w.seen[h]; ok {
			continue
		}
		if w.skip != nil {
			skip, err := w.skip(h)
			if err != nil {
				return err
			}
			if skip {
				w.seen[h] = struct{}{}
				continue
			}
		}
		p, err := object.GetCommit(w.s, h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		w.read++
		w.push(p)
	}
	return nil
}

// commitQueue is a max-heap of commits by committer time.
type commitQueue []*object.Commit

func (q commitQueue) Len() int           { return len(q) }
func (q commitQueue) Less(i, j int) bool { return q[i].Committer.When.After(q[j].Committer.When) }
func (q commitQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *commitQueue) Push(x any)        { *q = append(*q, x.(*object.Commit)) }
func (q *commitQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return c
}

// HistoryOf, Packs and NewCommitsOf read from the mirror at dir what Sync reports of
// commits, with the same code: the history a first clone lists at now; the packs the
// mirror has (note them before a fetch); and after the fetch the commits it brought,
// given the refs (name → hash) and packs the mirror had before. They exist so the cost
// of the walks can be measured on real repositories (bench/freshness); they only read.
func HistoryOf(dir string, now time.Time) ([]fetch.Commit, error) {
	sto, refs, err := openRefs(dir)
	if err != nil {
		return nil, err
	}
	defer sto.Close()
	out, _, _, err := history(sto, refs, now, fetch.HistoryWindow)
	return out, err
}

// Packs: see HistoryOf.
func Packs(dir string) ([]string, error) {
	h, err := packsOf(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range h.packs {
		out = append(out, p.String())
	}
	return out, nil
}

// NewCommitsOf: see HistoryOf.
func NewCommitsOf(dir string, before map[string]string, packs []string) ([]fetch.Commit, error) {
	sto, refs, err := openRefs(dir)
	if err != nil {
		return nil, err
	}
	defer sto.Close()
	old := refMap{}
	for name, h := range before {
		old[plumbing.ReferenceName(name)] = plumbing.NewHash(h)
	}
	had := &hadBefore{dot: dotgit.New(newAtomicFS(dir, true))}
	for _, p := range packs {
		had.packs = append(had.packs, plumbing.NewHash(p))
	}
	return newCommits(sto, had.has, old, refs)
}

func openRefs(dir string) (*filesystem.Storage, refMap, error) {
	sto := filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRU(DefaultObjectCacheBytes), filesystem.Options{})
	refs, _, err := localRefs(sto)
	if err != nil {
		sto.Close()
		return nil, nil, err
	}
	return sto, refs, nil
}
