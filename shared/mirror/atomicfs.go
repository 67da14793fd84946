package mirror

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
)

// atomicFS is the file system go-git's storage writes a mirror through, so that a
// reader of the mirror (git upload-pack serving a clone) never sees a torn state.
//
// go-git v5 writes some files in place (storage/filesystem/dotgit, v5.19.3): a loose
// ref or HEAD is opened, truncated and rewritten (setRefRwfs), config and shallow are
// created over the old file, and a new pack's .idx is written at its final name before
// the .pack is renamed into place; nothing is fsynced. Here:
//
//   - every file go-git opens for writing outside objects/ (HEAD, refs/*, config,
//     shallow) is written to "<name>.lock" - git's own lock-file protocol, which git
//     readers skip - then fsynced and renamed over the name;
//   - a pack's .idx goes to a temp file that is renamed in only once its .pack is in
//     place, so an .idx never names an incomplete pack;
//   - every rename go-git makes itself (pack, loose object, packed-refs from their temp
//     files) fsyncs the file first and the directory after.
//
// packed-refs is left to go-git: it locks the file and renames a complete temp file over
// it. Writers are serialised by the mirror lock, so a stale "<name>.lock" is a crashed
// writer's and is replaced. With noSync the fsyncs are skipped (a clone in a temp dir:
// nothing reads it, and the whole tree is synced before it is renamed into place).
type atomicFS struct {
	billy.Filesystem // osfs at root: reads, directories, go-git's temp files
	root             string
	noSync           bool

	mu      sync.Mutex
	pending map[string]string // OS path of a pack not yet in place -> its finished temp .idx
}

func newAtomicFS(root string, noSync bool) *atomicFS {
	return &atomicFS{Filesystem: osfs.New(root), root: root, noSync: noSync, pending: map[string]string{}}
}

// Capabilities are those of the OS file system (go-git asks before opening files
// read-write).
func (fs *atomicFS) Capabilities() billy.Capability { return billy.Capabilities(fs.Filesystem) }

// osPath maps a go-git name to the OS path under root; names are relative and clean.
func (fs *atomicFS) osPath(name string) (string, error) {
	p := filepath.FromSlash(path.Clean(strings.TrimPrefix(filepath.ToSlash(name), "/")))
	if !filepath.IsLocal(p) {
		return "", fmt.Errorf("mirror file system: %q is outside the repository", name)
	}
	return filepath.Join(fs.root, p), nil
}

func (fs *atomicFS) Open(name string) (billy.File, error) {
	return fs.OpenFile(name, os.O_RDONLY, 0)
}

func (fs *atomicFS) Create(name string) (billy.File, error) {
	return fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// OpenFile replaces writes as the type comment says; appends pass through, and reads
// of a finished pack or index (named by its hash: it never changes) go through whole
// blocks (blockread.go). go-git reads other files while they grow (a fetch's temp
// pack), so those are read as they are.
func (fs *atomicFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	writes := flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC) != 0
	clean := path.Clean(filepath.ToSlash(name))
	isPack := strings.HasPrefix(clean, "objects/pack/pack-")
	isIdx := isPack && strings.HasSuffix(clean, ".idx")
	if !writes && isPack {
		f, err := fs.Filesystem.OpenFile(name, flag, perm)
		if err != nil {
			return nil, err
		}
		return newBlockFile(f), nil
	}
	if !writes {
		return fs.Filesystem.OpenFile(name, flag, perm)
	}
	if flag&os.O_APPEND != 0 || clean == "packed-refs" || (strings.HasPrefix(clean, "objects/") && !isIdx) {
		return fs.Filesystem.OpenFile(name, flag, perm)
	}
	target, err := fs.osPath(name)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return nil, err
	}
	f := &atomicFile{fs: fs, name: name, target: target, dirty: flag&os.O_TRUNC != 0}
	if isIdx {
		f.tmp, err = os.CreateTemp(filepath.Dir(target), "tmp_idx_")
		f.publish = f.publishIdx
	} else {
		f.tmp, err = createLock(target + ".lock")
		f.publish = f.rename
	}
	if err != nil {
		return nil, err
	}
	if flag&os.O_TRUNC == 0 {
		// go-git reads the old content to check it (CheckAndSetReference).
		if f.orig, err = os.Open(target); err != nil && !errors.Is(err, os.ErrNotExist) {
			f.discard()
			return nil, err
		}
	}
	return f, nil
}

// createLock creates a lock file exclusively; one left by a crashed writer (we hold
// the mirror lock, so nobody else is writing) is replaced.
func createLock(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		if err := os.Remove(p); err != nil {
			return nil, err
		}
		f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	}
	return f, err
}

// Rename fsyncs from, renames it, and fsyncs the directory; a pack's waiting .idx
// follows its pack.
func (fs *atomicFS) Rename(from, to string) error {
	src, err := fs.osPath(from)
	if err != nil {
		return err
	}
	dst, err := fs.osPath(to)
	if err != nil {
		return err
	}
	if err := fs.syncFile(src); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.Rename(src, dst); err != nil {
		return err
	}
	if strings.HasSuffix(dst, ".pack") {
		fs.mu.Lock()
		idx, ok := fs.pending[dst]
		delete(fs.pending, dst)
		fs.mu.Unlock()
		if ok {
			if err := fs.placeIdx(idx, strings.TrimSuffix(dst, ".pack")+".idx"); err != nil {
				return err
			}
		}
	}
	return fs.syncDir(filepath.Dir(dst))
}

// Chmod is what go-git uses to make packs read-only (0444, as git does).
func (fs *atomicFS) Chmod(name string, mode os.FileMode) error {
	p, err := fs.osPath(name)
	if err != nil {
		return err
	}
	err = os.Chmod(p, mode)
	if errors.Is(err, os.ErrNotExist) && strings.HasSuffix(p, ".idx") {
		return nil // waiting for its pack; placeIdx sets the mode
	}
	return err
}

func (fs *atomicFS) placeIdx(tmp, idx string) error {
	if err := os.Chmod(tmp, 0o444); err != nil {
		return err
	}
	return os.Rename(tmp, idx)
}

func (fs *atomicFS) syncFile(p string) error {
	if fs.noSync {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func (fs *atomicFS) syncDir(dir string) error {
	if fs.noSync {
		return nil
	}
	return syncDir(dir)
}

// syncDir makes a directory's entries durable (a rename in it). File systems that
// cannot sync a directory (EINVAL) persist renames on their own, as NFS does.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return err
	}
	return nil
}

// atomicFile is a file go-git writes: writes go to tmp (buffered: go-git writes an .idx
// a few bytes at a time, and EFS meters every write at 32 KiB at least), reads come
// from the current content (orig); Close publishes tmp if anything was written.
type atomicFile struct {
	fs      *atomicFS
	name    string
	target  string
	tmp     *os.File
	w       *bufio.Writer // over tmp; flushed before anything else touches tmp
	orig    *os.File      // nil: no current content
	dirty   bool          // written or truncated: publish on Close
	failed  bool          // a write failed: never publish
	publish func() error
}

func (f *atomicFile) Name() string { return f.name }

func (f *atomicFile) Write(p []byte) (int, error) {
	f.dirty = true
	if f.w == nil {
		f.w = bufio.NewWriterSize(f.tmp, 1<<16)
	}
	n, err := f.w.Write(p)
	if err != nil {
		f.failed = true
	}
	return n, err
}

// flush writes out what Write buffered.
func (f *atomicFile) flush() error {
	if f.w == nil {
		return nil
	}
	if err := f.w.Flush(); err != nil {
		f.failed = true
		return err
	}
	return nil
}

func (f *atomicFile) Read(p []byte) (int, error) {
	if f.orig == nil {
		return 0, io.EOF
	}
	return f.orig.Read(p)
}

func (f *atomicFile) ReadAt(p []byte, off int64) (int, error) {
	if f.orig == nil {
		return 0, io.EOF
	}
	return f.orig.ReadAt(p, off)
}

// Seek moves both sides: go-git seeks to 0 after reading, before it truncates and
// writes.
func (f *atomicFile) Seek(off int64, whence int) (int64, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	if f.orig != nil {
		if _, err := f.orig.Seek(off, whence); err != nil {
			return 0, err
		}
	}
	return f.tmp.Seek(off, whence)
}

func (f *atomicFile) Truncate(size int64) error {
	f.dirty = true
	if err := f.flush(); err != nil {
		return err
	}
	if err := f.tmp.Truncate(size); err != nil {
		f.failed = true
		return err
	}
	return nil
}

// Lock and Unlock: the mirror lock serialises writers, and the lock file excludes git.
func (f *atomicFile) Lock() error   { return nil }
func (f *atomicFile) Unlock() error { return nil }

func (f *atomicFile) Close() error {
	if f.orig != nil {
		_ = f.orig.Close()
	}
	_ = f.flush() // a failure marks it failed
	if f.failed || !f.dirty {
		f.discard()
		return nil
	}
	if !f.fs.noSync {
		if err := f.tmp.Sync(); err != nil {
			f.discard()
			return err
		}
	}
	if err := f.tmp.Close(); err != nil {
		_ = os.Remove(f.tmp.Name())
		return err
	}
	if err := f.publish(); err != nil {
		_ = os.Remove(f.tmp.Name())
		return err
	}
	return nil
}

func (f *atomicFile) discard() {
	_ = f.tmp.Close()
	_ = os.Remove(f.tmp.Name())
}

// rename publishes a ref, HEAD or config.
func (f *atomicFile) rename() error {
	if err := os.Chmod(f.tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(f.tmp.Name(), f.target); err != nil {
		return err
	}
	return f.fs.syncDir(filepath.Dir(f.target))
}

// publishIdx places the .idx now if its pack is in place, else when the pack's rename
// comes (go-git writes the .idx first).
func (f *atomicFile) publishIdx() error {
	pack := strings.TrimSuffix(f.target, ".idx") + ".pack"
	if _, err := os.Lstat(pack); err == nil {
		if err := f.fs.placeIdx(f.tmp.Name(), f.target); err != nil {
			return err
		}
		return f.fs.syncDir(filepath.Dir(f.target))
	}
	f.fs.mu.Lock()
	f.fs.pending[pack] = f.tmp.Name()
	f.fs.mu.Unlock()
	return nil
}
