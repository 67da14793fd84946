package mirror

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
)

// countingReader is a bytes.Reader that counts the reads it serves.
type countingReader struct {
	*bytes.Reader
	reads int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.Reader.ReadAt(p, off)
}

// Whatever the mix of reads, positioned reads and seeks, a blockReader returns what the
// file holds, as the file itself would; and go-git's way of reading an index, a few
// bytes at a time, costs one read of the file per block.
func TestBlockReaderReadsAsTheFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 5*readBlock+1234)
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	src := &countingReader{Reader: bytes.NewReader(data)}
	br := newBlockReader(src, readBlocks)
	ref := bytes.NewReader(data)
	for i := range 5000 {
		switch op := rng.IntN(4); op {
		case 0, 1:
			n := rng.IntN(3 * readBlock / 2)
			a, b := make([]byte, n), make([]byte, n)
			na, ea := br.Read(a)
			nb, eb := ref.Read(b)
			if na != nb || !bytes.Equal(a[:na], b[:nb]) || (ea == nil) != (eb == nil) {
				t.Fatalf("step %d: Read(%d) = %d, %v; the file gives %d, %v", i, n, na, ea, nb, eb)
			}
		case 2:
			n, off := rng.IntN(readBlock), rng.Int64N(int64(len(data))+100)
			a, b := make([]byte, n), make([]byte, n)
			na, ea := br.ReadAt(a, off)
			nb, eb := ref.ReadAt(b, off)
			if na != nb || !bytes.Equal(a[:na], b[:nb]) || (ea == nil) != (eb == nil) {
				t.Fatalf("step %d: ReadAt(%d, %d) = %d, %v; the file gives %d, %v", i, n, off, na, ea, nb, eb)
			}
		case 3:
			whence := rng.IntN(3)
			off := rng.Int64N(int64(len(data))) - int64(len(data))/2
			if whence == io.SeekStart {
				off = rng.Int64N(int64(len(data)) + 10)
			}
			pa, ea := br.Seek(off, whence)
			pb, eb := ref.Seek(off, whence)
			if (ea == nil) != (eb == nil) || (ea == nil && pa != pb) {
				t.Fatalf("step %d: Seek(%d, %d) = %d, %v; the file gives %d, %v", i, off, whence, pa, ea, pb, eb)
			}
			if ea != nil { // a refused seek leaves the position: put the file's back
				cur, _ := br.Seek(0, io.SeekCurrent)
				ref.Seek(cur, io.SeekStart)
			}
		}
	}

	src.reads = 0
	seq := newBlockReader(src, readBlocks)
	buf := make([]byte, 4)
	for {
		if _, err := seq.Read(buf); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if want := len(data)/readBlock + 1; src.reads > want+1 {
		t.Fatalf("reading %d bytes 4 at a time read the file %d times, want %d (one a block)", len(data), src.reads, want)
	}
}
