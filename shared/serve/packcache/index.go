package packcache

import (
	"container/list"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// blockSize is what one file costs at least against the byte bound, and the unit its
// size is rounded up to: a lock file has no bytes but takes an inode and a block, and
// a disk fills by blocks, not by apparent bytes.
const blockSize = 4096

func cost(size int64) int64 {
	return max(blockSize, (size+blockSize-1)/blockSize*blockSize)
}

// Index is the cache's files as the server keeps them in memory, so that a new entry
// evicts what it must without walking the cache directory: it is built by one walk
// when the server starts and kept up to date on every insert, use and removal. The
// server's own fills update it directly; the hooks, separate processes, name the key
// they worked on in their reports (Note), and the index looks at that key's few files
// again. The server is the only process that evicts; one cache directory belongs to
// one server.
//
// Both bounds count every file: complete entries, lock and marker files and partly
// written ones (a fill in progress takes room as a finished entry does), each at
// least a block.
type Index struct {
	c       Config
	readDir func(string) ([]fs.DirEntry, error) // the start-up walk's only way to list a directory
	now     func() time.Time

	mu       sync.Mutex
	entries  *list.List // complete entries, most recently used first
	small    *list.List // lock and marker files, most recently made first
	byPath   map[string]*list.Element
	partials map[string]string // tmp file -> the key it fills
	partCost map[string]int64  // tmp file -> its cost when last looked at
	bytes    int64             // entries and small files; partials are added per pass
	files    int
}

type indexed struct {
	path string
	cost int64
	used time.Time
}

// OpenIndex walks the cache directory once and returns its index, the bounds already
// applied. Partly written files found then are leftovers of a server that stopped
// (a fill dies with its request) and are removed.
func OpenIndex(c Config) (*Index, error) {
	return newIndex(c, os.ReadDir, time.Now)
}

func newIndex(c Config, readDir func(string) ([]fs.DirEntry, error), now func() time.Time) (*Index, error) {
	x := &Index{c: c.withDefaults(), readDir: readDir, now: now, entries: list.New(), small: list.New(),
		byPath: map[string]*list.Element{}, partials: map[string]string{}, partCost: map[string]int64{}}
	top, err := readDir(x.c.Dir)
	if err != nil {
		return nil, err
	}
	var found []indexed
	for _, d := range top {
		p := filepath.Join(x.c.Dir, d.Name())
		if !d.IsDir() {
			if d.Name() == "evict.lock" { // the walk-per-insert eviction's lock, no longer used
				os.Remove(p)
			}
			continue
		}
		files, err := readDir(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			fp := filepath.Join(p, f.Name())
			if d.Name() == "tmp" {
				os.Remove(fp)
				continue
			}
			if f.IsDir() {
				continue
			}
			fi, err := f.Info()
			if err != nil {
				continue
			}
			found = append(found, indexed{fp, cost(fi.Size()), fi.ModTime()})
		}
	}
	// Oldest first, so that each one pushed to the front leaves the lists in order.
	sortByUse(found)
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range found {
		x.putLocked(e)
	}
	x.evictLocked()
	return x, nil
}

func sortByUse(es []indexed) {
	slices.SortFunc(es, func(a, b indexed) int { return a.used.Compare(b.used) })
}

func isEntry(p string) bool { return strings.HasSuffix(p, ".pack") }

// putLocked indexes a file (or updates its cost and use) as the most recent of its kind.
func (x *Index) putLocked(e indexed) {
	if el, ok := x.byPath[e.path]; ok {
		old := el.Value.(indexed)
		x.bytes += e.cost - old.cost
		el.Value = e
		if isEntry(e.path) {
			x.entries.MoveToFront(el)
		} else {
			x.small.MoveToFront(el)
		}
		return
	}
	l := x.small
	if isEntry(e.path) {
		l = x.entries
	}
	x.byPath[e.path] = l.PushFront(e)
	x.bytes += e.cost
	x.files++
}

func (x *Index) dropLocked(p string) {
	el, ok := x.byPath[p]
	if !ok {
		return
	}
	e := el.Value.(indexed)
	if isEntry(p) {
		x.entries.Remove(el)
	} else {
		x.small.Remove(el)
	}
	delete(x.byPath, p)
	x.bytes -= e.cost
	x.files--
}

// look indexes the file at p as it is now: present (with its size), or gone.
func (x *Index) lookLocked(p string, used bool) {
	fi, err := os.Stat(p)
	if err != nil {
		x.dropLocked(p)
		return
	}
	e := indexed{path: p, cost: cost(fi.Size()), used: fi.ModTime()}
	if el, ok := x.byPath[p]; ok && !used {
		e.used = el.Value.(indexed).used
	}
	if used {
		e.used = x.now()
	}
	x.putLocked(e)
}

// Key indexes key's files as they are now (its entry, lock and marker) and evicts
// what the bounds ask; used marks the entry as just used.
func (x *Index) Key(key string, used bool) {
	if x == nil || len(key) < 2 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.lookLocked(x.c.entry(key, ".lock"), false)
	x.lookLocked(x.c.entry(key, ".nocache"), false)
	x.lookLocked(x.c.entry(key, ".pack"), used)
	x.evictLocked()
}

// Filling records tmp, a file being written for key, and evicts for it: it counts
// against both bounds until Filled.
func (x *Index) Filling(key, tmp string) {
	if x == nil || tmp == "" {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.partials[tmp] = key
	x.lookLocked(x.c.entry(key, ".lock"), false)
	x.evictLocked()
}

// Filled forgets the partly written tmp of key and indexes key's files as they are
// now: the entry, if tmp was renamed into place.
func (x *Index) Filled(key, tmp string) {
	if x == nil {
		return
	}
	x.mu.Lock()
	delete(x.partials, tmp)
	delete(x.partCost, tmp)
	x.mu.Unlock()
	x.Key(key, true)
}

// Note takes a hook's report into the index.
func (x *Index) Note(rep Report) {
	switch {
	case x == nil || rep.Key == "":
	case rep.Result == Filling:
		x.Filling(rep.Key, rep.Tmp)
	case rep.Tmp != "":
		x.Filled(rep.Key, rep.Tmp)
	default:
		x.Key(rep.Key, rep.Result == Hit || rep.Result == Waited)
	}
}

// Counts returns the files and bytes the index counts now (partials as last looked at).
func (x *Index) Counts() (files int, bytes int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	files, bytes = x.files+len(x.partials), x.bytes
	for _, c := range x.partCost {
		bytes += c
	}
	return files, bytes
}

// evictLocked applies the TTL and the bounds: expired entries and idle locks and
// markers go, then, while over a bound, idle locks and markers (for the file bound)
// and the least recently used entries. Partly written files are looked at (a few
// stats: one per fill in progress) and removed when their fill is dead; a live one
// stays and counts. Nothing here lists a directory.
func (x *Index) evictLocked() {
	now := x.now()
	files, bytes := x.files, x.bytes
	for tmp, key := range x.partials {
		fi, err := os.Stat(tmp)
		switch {
		case err != nil: // renamed or removed by its fill
			delete(x.partials, tmp)
			delete(x.partCost, tmp)
			continue
		case !held(x.c.entry(key, ".lock")): // its fill died (a killed request)
			os.Remove(tmp)
			delete(x.partials, tmp)
			delete(x.partCost, tmp)
			continue
		}
		x.partCost[tmp] = cost(fi.Size())
		files++
		bytes += x.partCost[tmp]
	}
	for el := x.entries.Back(); el != nil; {
		e := el.Value.(indexed)
		prev := el.Prev()
		if now.Sub(e.used) <= x.c.TTL {
			break
		}
		os.Remove(e.path)
		x.dropLocked(e.path)
		files, bytes = files-1, bytes-e.cost
		el = prev
	}
	removeSmall := func(e indexed) bool {
		if strings.HasSuffix(e.path, ".lock") {
			if !removeIdleLock(e.path) {
				return false
			}
		} else if err := os.Remove(e.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false
		}
		x.dropLocked(e.path)
		files, bytes = files-1, bytes-e.cost
		return true
	}
	for el := x.small.Back(); el != nil; {
		e := el.Value.(indexed)
		prev := el.Prev()
		if files <= x.c.MaxEntries && now.Sub(e.used) <= x.c.TTL {
			break
		}
		removeSmall(e)
		el = prev
	}
	for el := x.entries.Back(); el != nil && (files > x.c.MaxEntries || bytes > x.c.MaxBytes); {
		e := el.Value.(indexed)
		prev := el.Prev()
		// A reader holding the file open keeps reading it: removal frees the space
		// once the last reader is done.
		if err := os.Remove(e.path); err == nil || errors.Is(err, fs.ErrNotExist) {
			x.dropLocked(e.path)
			files, bytes = files-1, bytes-e.cost
		}
		el = prev
	}
}

// held reports whether someone holds the lock file at p; a missing file is not held.
// It never creates the file.
func held(p string) bool {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	return false
}
