package mirror

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"math/bits"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Disk reports how full the mirror file system is, for the worker's disk guard.
//
// Without a Quota the figures are the file system's own (statfs): the guard keeps a
// local disk from filling. With a Quota the used figure is the size of the tree under
// Path, re-measured at most every Refresh — or, with Statfs, the file system's own used
// bytes, which costs one call and no walk: on a file system that holds only the mirrors
// they are the same figure, and walking a million mirrors over NFS from every worker is
// not free.
//
// Elastic is a file system that grows with what it holds (EFS: statfs reports exabytes
// free, and every byte stored is billed as it is stored): it has no room to guard, so
// without a Quota the total is 0, which bounds nothing; the used bytes are statfs's. A
// fleet-wide bound there is a budget, which an alarm on the file system's size watches,
// not a reason to stop fetching.
type Disk struct {
	Path    string
	Quota   int64         // bytes; 0 = use the file system's own size (none when Elastic)
	Statfs  bool          // with a Quota: used = the file system's used bytes, no walk
	Elastic bool          // the file system has no size of its own (EFS)
	Refresh time.Duration // how often a walked quota's usage is re-measured; default 5 min
	Now     func() time.Time
	// StatFS reads the file system's size and used bytes; nil: statfs(2) on Path.
	StatFS func(path string) (size, used int64, err error)

	mu       sync.Mutex
	used     int64
	measured time.Time
}

// Usage returns the bytes used and the total; a total of 0 bounds nothing.
func (d *Disk) Usage(ctx context.Context) (int64, int64, error) {
	if d.Quota <= 0 || d.Statfs || d.Elastic {
		stat := d.StatFS
		if stat == nil {
			stat = statfs
		}
		size, used, err := stat(d.Path)
		if err != nil {
			return 0, 0, err
		}
		switch {
		case d.Quota > 0:
			return used, d.Quota, nil
		case d.Elastic:
			return used, 0, nil
		}
		return used, size, nil
	}
	now := time.Now
	if d.Now != nil {
		now = d.Now
	}
	refresh := d.Refresh
	if refresh <= 0 {
		refresh = 5 * time.Minute
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.measured.IsZero() || now().Sub(d.measured) >= refresh {
		var used int64
		err := filepath.WalkDir(d.Path, func(_ string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil // a mirror renamed away mid-walk is not an error
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if info, ierr := e.Info(); ierr == nil && !e.IsDir() {
				used += info.Size()
			}
			return nil
		})
		if err != nil {
			return 0, 0, fmt.Errorf("measure %s: %w", d.Path, err)
		}
		d.used, d.measured = used, now()
	}
	return d.used, d.Quota, nil
}

// statfs is the file system's size and used bytes (what is not available to an
// unprivileged writer counts as used). EFS reports a size near 2^63 bytes: the products
// saturate rather than wrap.
func statfs(path string) (size, used int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	bsize := uint64(st.Bsize)
	return saturate(st.Blocks, bsize), saturate(st.Blocks-min(st.Bavail, st.Blocks), bsize), nil
}

func saturate(n, size uint64) int64 {
	hi, lo := bits.Mul64(n, size)
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}
