// Package pagecache evicts files from the kernel's page cache and says how much of a
// file is in it (Linux: posix_fadvise and mincore). Tests and benchmarks use it to tell
// which files a step read: evict, run the step, look at what became resident.
package pagecache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Evict writes back and drops the cached pages of the file at path (fsync, then
// POSIX_FADV_DONTNEED). Pages another process keeps mapped may stay.
func Evict(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("fadvise %s: %w", path, err)
	}
	return nil
}

// Resident is how many bytes of the file at path are in the page cache (whole pages,
// the last one counted as far as the file goes) and the file's size. Mapping the file
// to ask mincore reads nothing from it.
func Resident(path string) (resident, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size = fi.Size()
	if size == 0 {
		return 0, 0, nil
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, size, fmt.Errorf("mmap %s: %w", path, err)
	}
	defer unix.Munmap(b)
	page := int64(os.Getpagesize())
	vec := make([]byte, (size+page-1)/page)
	// x/sys/unix has no mincore wrapper.
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, size, fmt.Errorf("mincore %s: %w", path, errno)
	}
	for i, v := range vec {
		if v&1 == 0 {
			continue
		}
		resident += min(page, size-int64(i)*page)
	}
	return resident, size, nil
}

// File is one file's page-cache residency, its path relative to the tree's root.
type File struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Resident int64  `json:"resident"`
}

// EvictTree evicts every regular file under dir.
func EvictTree(dir string) error {
	return walk(dir, func(p string) error { return Evict(p) })
}

// ResidentTree is the residency of every regular file under dir, by path.
func ResidentTree(dir string) ([]File, error) {
	var out []File
	err := walk(dir, func(p string) error {
		r, s, err := Resident(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, File{Path: filepath.ToSlash(rel), Size: s, Resident: r})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

// walk calls f for every regular file under dir; files that vanish meanwhile (git
// renaming its temp files) are skipped.
func walk(dir string, f func(string) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if err := f(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
}

// Check says whether this file system lets Evict drop a file's pages: it writes a file
// under dir, evicts it and looks. An error says why eviction cannot be relied on
// there (tmpfs, for one, keeps everything in memory).
func Check(dir string) error {
	f, err := os.CreateTemp(dir, "pagecache-check-")
	if err != nil {
		return err
	}
	p := f.Name()
	defer os.Remove(p)
	_, err = f.Write(make([]byte, 256<<10))
	f.Close()
	if err != nil {
		return err
	}
	if err := Evict(p); err != nil {
		return err
	}
	r, _, err := Resident(p)
	if err != nil {
		return err
	}
	if r != 0 {
		return fmt.Errorf("%d bytes of a file under %s stayed in the page cache after eviction (tmpfs or a file system that ignores POSIX_FADV_DONTNEED)", r, dir)
	}
	return nil
}
