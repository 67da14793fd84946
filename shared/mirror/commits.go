package mirror

import (
	"container/heap"
	"errors"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"

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

// newCommits lists the commits reachable from the refs after a fetch and not from the
// refs before it, newest first, as `git rev-list after ^before` does: one walk in
// committer-time order from both sets of tips, where a commit reached from the old
// tips is known and marks its parents known too, and the walk ends when only known
// commits are left. It stops early at fetch.MaxNewCommits listed or maxWalk read.
func newCommits(s storer.EncodedObjectStorer, before, after refMap) ([]fetch.Commit, error) {
	oldTips, err := tipCommits(s, before)
	if err != nil {
		return nil, err
	}
	newTips, err := tipCommits(s, after)
	if err != nil {
		return nil, err
	}
	w := walk{s: s, marks: map[plumbing.Hash]uint8{}}
	for _, c := range oldTips {
		w.push(c, known)
	}
	for _, c := range newTips {
		w.push(c, fresh)
	}
	var out []fetch.Commit
	for w.fresh > 0 && len(out) < fetch.MaxNewCommits && w.read < maxWalk {
		c, mark := w.pop()
		if mark&known == 0 {
			out = append(out, commitOf(c))
		}
		if err := w.parents(c, mark); err != nil {
			return out, err
		}
	}
	return out, nil
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
	w := walk{s: s, marks: map[plumbing.Hash]uint8{}}
	for _, c := range tips {
		w.push(c, fresh)
	}
	since = now.Add(-window)
	for len(w.queue) > 0 {
		if len(out) == fetch.MaxHistoryCommits || w.read >= maxWalk {
			return out, out[len(out)-1].Committer, false, nil
		}
		c, _ := w.pop()
		if !c.Committer.When.After(since) {
			return out, since, false, nil
		}
		out = append(out, commitOf(c))
		if err := w.parents(c, fresh); err != nil {
			return out, since, false, err
		}
	}
	if len(out) == 0 {
		return nil, since, false, nil // an empty repo
	}
	return out, out[len(out)-1].Committer, true, nil
}

// Marks of a commit in a walk.
const (
	fresh  uint8 = 1 << iota // reached from a tip being listed
	known                    // reached from a tip the mirror had
	walked                   // taken from the queue
)

// walk is a time-ordered walk over commits: newest committer time first, each commit
// once (a mark reaching a commit already queued joins it).
type walk struct {
	s     storer.EncodedObjectStorer
	queue commitQueue
	marks map[plumbing.Hash]uint8
	fresh int // queued commits marked fresh only: the walk is done when none is left
	read  int // commits read from storage
}

// push queues c with mark, or adds mark to it if it is queued or walked already.
func (w *walk) push(c *object.Commit, mark uint8) {
	if w.mark(c.Hash, mark) {
		heap.Push(&w.queue, c)
	}
}

// mark adds mark to the commit h and reports whether it is new to the walk (to queue).
func (w *walk) mark(h plumbing.Hash, mark uint8) bool {
	old, seen := w.marks[h]
	if old&mark == mark {
		return false
	}
	w.marks[h] = old | mark
	if old&walked == 0 {
		if seen && old == fresh {
			w.fresh--
		}
		if (old|mark)&^walked == fresh {
			w.fresh++
		}
	}
	return !seen
}

// pop takes the newest queued commit and its marks.
func (w *walk) pop() (*object.Commit, uint8) {
	c := heap.Pop(&w.queue).(*object.Commit)
	mark := w.marks[c.Hash]
	if mark == fresh {
		w.fresh--
	}
	w.marks[c.Hash] = mark | walked
	return c, mark
}

// parents queues c's parents with mark. A parent missing from a shallow or partial
// upstream ends that line of the walk.
func (w *walk) parents(c *object.Commit, mark uint8) error {
	for _, h := range c.ParentHashes {
		if _, seen := w.marks[h]; seen {
			w.mark(h, mark)
			continue
		}
		p, err := object.GetCommit(w.s, h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		w.read++
		w.push(p, mark)
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

// HistoryOf and NewCommitsOf read from the mirror at dir what Sync reports of commits,
// with the same code: the history a first clone lists at now, and the commits new since
// the refs in before (name → hash, as the mirror had them). They exist so the cost of
// the walks can be measured on real repositories (bench/freshness); they only read.
func HistoryOf(dir string, now time.Time) ([]fetch.Commit, error) {
	sto, refs, err := openRefs(dir)
	if err != nil {
		return nil, err
	}
	defer sto.Close()
	out, _, _, err := history(sto, refs, now, fetch.HistoryWindow)
	return out, err
}

// NewCommitsOf: see HistoryOf.
func NewCommitsOf(dir string, before map[string]string) ([]fetch.Commit, error) {
	sto, refs, err := openRefs(dir)
	if err != nil {
		return nil, err
	}
	defer sto.Close()
	old := refMap{}
	for name, h := range before {
		old[plumbing.ReferenceName(name)] = plumbing.NewHash(h)
	}
	return newCommits(sto, old, refs)
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
