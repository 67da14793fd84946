package mirror

import (
	"errors"
	"io"
	"sync"

	"github.com/go-git/go-billy/v5"
)

// readBlock is the size the mirror's files are read in. EFS meters every read at
// 32 KiB at least, and go-git reads pack indexes a few bytes at a time and packs in
// pieces of 4 KiB: each would be billed as a block (bench/storecost counts the reads).
// Reading whole blocks and keeping a few costs no more per read and makes a few reads
// of many.
const (
	readBlock  = 32 << 10
	readBlocks = 8 // blocks kept per open file (256 KiB)
)

// readerAtSeeker is what blockReader reads from.
type readerAtSeeker interface {
	io.ReaderAt
	io.Seeker
}

// blockReader reads r in aligned blocks of readBlock bytes and keeps the last
// readBlocks of them: Read, ReadAt and Seek as on r. r must be a finished file, one
// that does not change while it is read (a pack or index named by its hash; not a
// temp pack go-git reads while it writes it).
type blockReader struct {
	r      readerAtSeeker
	keep   int // blocks kept
	mu     sync.Mutex
	pos    int64
	blocks []block // most recently used last
}

type block struct {
	off int64
	b   []byte // short at the end of the file
}

func newBlockReader(r readerAtSeeker, keep int) *blockReader {
	return &blockReader{r: r, keep: max(keep, 1)}
}

func (br *blockReader) Read(p []byte) (int, error) {
	br.mu.Lock()
	defer br.mu.Unlock()
	n, err := br.readAt(p, br.pos)
	br.pos += int64(n)
	if n > 0 && errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

func (br *blockReader) ReadAt(p []byte, off int64) (int, error) {
	br.mu.Lock()
	defer br.mu.Unlock()
	return br.readAt(p, off)
}

func (br *blockReader) readAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	n := 0
	for n < len(p) {
		cur := off + int64(n)
		start := cur - cur%readBlock
		b, err := br.block(start)
		if err != nil {
			return n, err
		}
		i := int(cur - start)
		if i >= len(b) {
			return n, io.EOF
		}
		n += copy(p[n:], b[i:])
		if len(b) < readBlock && n < len(p) {
			return n, io.EOF // the last block, and p goes past it
		}
	}
	return n, nil
}

// block is the block at off, from the ones kept or read now.
func (br *blockReader) block(off int64) ([]byte, error) {
	for i, b := range br.blocks {
		if b.off == off {
			br.blocks = append(append(br.blocks[:i:i], br.blocks[i+1:]...), b)
			return b.b, nil
		}
	}
	buf := make([]byte, readBlock)
	n, err := br.r.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(br.blocks) >= br.keep {
		br.blocks = br.blocks[1:]
	}
	br.blocks = append(br.blocks, block{off: off, b: buf[:n]})
	return buf[:n], nil
}

func (br *blockReader) Seek(offset int64, whence int) (int64, error) {
	br.mu.Lock()
	defer br.mu.Unlock()
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += br.pos
	case io.SeekEnd:
		end, err := br.r.Seek(0, io.SeekEnd)
		if err != nil {
			return br.pos, err
		}
		offset += end
	default:
		return br.pos, errors.New("bad whence")
	}
	if offset < 0 {
		return br.pos, errors.New("negative position")
	}
	br.pos = offset
	return offset, nil
}

// blockFile is a billy.File opened for reading, read through a blockReader.
type blockFile struct {
	billy.File
	br *blockReader
}

func newBlockFile(f billy.File) *blockFile {
	return &blockFile{File: f, br: newBlockReader(f, readBlocks)}
}

func (f *blockFile) Read(p []byte) (int, error)                   { return f.br.Read(p) }
func (f *blockFile) ReadAt(p []byte, off int64) (int, error)      { return f.br.ReadAt(p, off) }
func (f *blockFile) Seek(offset int64, whence int) (int64, error) { return f.br.Seek(offset, whence) }
