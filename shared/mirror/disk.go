package mirror

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Disk reports how full the mirror file system is, for the worker's disk guard. With a
// Quota (EFS reports exabytes free, so a quota is what bounds it there) the used figure is
// the size of the tree under Path, re-measured at most every Refresh — or, with Statfs,
// the file system's own used bytes, which costs one call and no walk: on a file system
// that holds only the mirrors (EFS, whose statfs reports its metered size) they are the
// same figure, and walking a million mirrors over NFS from every worker is not free.
type Disk struct {
	Path    string
	Quota   int64         // bytes; 0 = use the file system's own size
	Statfs  bool          // with a Quota: used = the file system's used bytes, no walk
	Refresh time.Duration // how often a walked quota's usage is re-measured; default 5 min
	Now     func() time.Time

	mu       sync.Mutex
	used     int64
	measured time.Time
}

// Usage returns the bytes used and the total.
func (d *Disk) Usage(ctx context.Context) (int64, int64, error) {
	if d.Quota <= 0 || d.Statfs {
		var st unix.Statfs_t
		if err := unix.Statfs(d.Path, &st); err != nil {
			return 0, 0, fmt.Errorf("statfs %s: %w", d.Path, err)
		}
		total := int64(st.Blocks) * st.Bsize
		used := total - int64(st.Bavail)*st.Bsize
		if d.Quota > 0 {
			return used, d.Quota, nil
		}
		return used, total, nil
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
