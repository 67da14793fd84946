package mirror

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// heldLocks guards lock paths inside this process. flock(2) already excludes other
// open file descriptions on a local file system, but on NFS (EFS) Linux emulates
// flock with POSIX record locks, which are per process: two goroutines of one worker
// would both "get" the lock there. This map makes in-process exclusion explicit and
// independent of the file system.
var heldLocks sync.Map // absolute lock path -> struct{}

var errLocked = errors.New("lock is held")

// fileLock is an exclusive, non-blocking flock on a lock file.
type fileLock struct {
	path string
	f    *os.File
}

// tryLock takes an exclusive lock on path without blocking; errLocked when another
// holder (this process or another) has it. The lock file is created if missing and
// its parent directories too.
//
// Lock files may be removed by their holder (Trash does). To make that safe, after
// flock succeeds the file at path must still be the inode we locked; if it was
// unlinked or replaced in between we retry on the new file.
func tryLock(path string) (*fileLock, error) {
	if _, loaded := heldLocks.LoadOrStore(path, struct{}{}); loaded {
		return nil, errLocked
	}
	for attempt := 0; attempt < 5; attempt++ {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			if errors.Is(err, os.ErrNotExist) { // a parent removed under us: retry
				continue
			}
			heldLocks.Delete(path)
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) { // parent removed under us: retry
				continue
			}
			heldLocks.Delete(path)
			return nil, err
		}
		fd := int(f.Fd())
		if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close()
			heldLocks.Delete(path)
			if errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN) {
				return nil, errLocked
			}
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		var a, b syscall.Stat_t
		if err := syscall.Fstat(fd, &a); err != nil {
			_ = f.Close()
			heldLocks.Delete(path)
			return nil, err
		}
		if err := syscall.Stat(path, &b); err != nil || a.Ino != b.Ino || a.Dev != b.Dev {
			_ = f.Close() // locked a file that is no longer at path; try the new one
			continue
		}
		return &fileLock{path: path, f: f}, nil
	}
	heldLocks.Delete(path)
	return nil, errLocked
}

// unlock releases the lock; with remove it first unlinks the lock file (safe because
// lockers verify the inode, see tryLock).
func (l *fileLock) unlock(remove bool) {
	if l == nil {
		return
	}
	if remove {
		_ = os.Remove(l.path)
	}
	// Unlock explicitly: a child process being started at this moment (git for
	// maintenance, say) holds a copy of the descriptor until it execs, and a flock
	// lives until its last descriptor closes, so Close alone could leave the lock held
	// and make the next tryLock report busy.
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	heldLocks.Delete(l.path)
}

func busyErr(what string) error {
	return &fetch.Error{Kind: fetch.KindBusy, Err: fmt.Errorf("%s is locked by another sync", what)}
}
