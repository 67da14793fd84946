package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Verify opens the store file at path read-only and checks every page (bbolt's
// Tx.Check) and that it holds a mirrorfleet store: a backup just written, or a file about
// to be restored, is whole. It fails with ErrLocked if a running store holds the file.
// It neither migrates nor writes the file.
//
// bbolt maps the file and trusts its meta page: a file cut short (a copy interrupted, a
// full disk) would make it read past the file's end, which kills the process with
// SIGBUS (the check runs in bbolt's own goroutine: nothing here could recover it). So
// the file's size is checked against its meta pages first (checkFile).
func Verify(path string) error {
	if err := checkFile(path); err != nil {
		return fmt.Errorf("bolt: verify %s: %w", path, err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: LockTimeout})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			err = fmt.Errorf("%w: %w", ErrLocked, err)
		}
		return fmt.Errorf("bolt: verify %s: %w", path, err)
	}
	defer db.Close()
	return db.View(func(tx *bbolt.Tx) error {
		var first error
		for err := range tx.Check() { // drained whole: the checker stops once it is
			if first == nil {
				first = fmt.Errorf("bolt: verify %s: %w", path, err)
			}
		}
		if first != nil {
			return first
		}
		if tx.Bucket(bktRepos) == nil || tx.Bucket(bktMeta) == nil {
			return fmt.Errorf("bolt: verify %s: not a mirrorfleet store (no repos or meta bucket)", path)
		}
		return nil
	})
}

// bbolt's file format: a page starts with a 16-byte header; pages 0 and 1 hold the meta
// (magic, version, page size, flags, root bucket, freelist page, high-water page id,
// transaction id, FNV-64a checksum of what precedes it), little-endian on the platforms
// we build for.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	pageHeaderSize = 16
	metaSize       = 56 // up to the checksum
	minPageSize    = 512
	maxPageSize    = 64 << 10
)

// meta is what checkFile reads of a meta page.
type meta struct {
	pageSize uint32
	pgid     uint64 // pages 0 … pgid-1 exist
	txid     uint64
}

// readMeta reads the meta page at off; ok is false when it is not a valid one.
func readMeta(f *os.File, off int64) (meta, bool) {
	buf := make([]byte, pageHeaderSize+metaSize+8) // the checksum last
	if _, err := f.ReadAt(buf, off); err != nil {
		return meta{}, false
	}
	m := buf[pageHeaderSize:]
	le := binary.LittleEndian
	h := fnv.New64a()
	h.Write(m[:metaSize])
	if le.Uint32(m[0:]) != boltMagic || le.Uint32(m[4:]) != boltVersion || le.Uint64(m[metaSize:]) != h.Sum64() {
		return meta{}, false
	}
	out := meta{pageSize: le.Uint32(m[8:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}
	if out.pageSize < minPageSize || out.pageSize > maxPageSize || out.pageSize&(out.pageSize-1) != 0 {
		return meta{}, false
	}
	return out, true
}

// checkFile refuses, with a message that says what is wrong, a file bbolt must not
// map: empty, without a valid meta page, or shorter than the pages its meta page says
// it holds.
func checkFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if size == 0 {
		return errors.New("the file is empty (0 bytes): not a store copy (was the backup interrupted, or the disk full?)")
	}
	m0, ok0 := readMeta(f, 0)
	var m1 meta
	ok1 := false
	for _, ps := range []int64{int64(m0.pageSize), 4096} {
		if ps > 0 {
			if m1, ok1 = readMeta(f, ps); ok1 {
				break
			}
		}
	}
	// bbolt takes the valid meta page with the newer transaction.
	m := m0
	switch {
	case ok0 && ok1 && m1.txid > m0.txid, !ok0 && ok1:
		m = m1
	case !ok0 && !ok1:
		if size < 2*minPageSize {
			return fmt.Errorf("the file is %d bytes, too short to be a store: cut short, or not a store copy", size)
		}
		return errors.New("not a store file: no valid bbolt meta page (damaged, or another kind of file)")
	}
	if need := int64(m.pgid) * int64(m.pageSize); size < need {
		return fmt.Errorf("the file is truncated: it is %d bytes, but its pages reach %d bytes (a copy cut short: take the backup again)", size, need)
	}
	return nil
}
