package mirror

import (
	"bufio"
	"compress/zlib"
	"errors"
	"io"
	"sync"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// Pack object types (gitformat-pack).
const (
	objCommit   = 1
	objTree     = 2
	objBlob     = 3
	objTag      = 4
	objOfsDelta = 6
	objRefDelta = 7
)

// packWalker follows the objects of a pack as it streams in, on its own goroutine, and
// refuses one whose declared size (or, for a delta, whose result's declared size) is
// over the limit. It inflates every object to find where the next one starts; the
// inflated bytes are discarded.
//
// feed hands it one chunk and returns only once the walker has judged every byte of
// it (the walker asks for more input only when it has used all it was given), so the
// Read that carries an oversized object's header never reaches go-git. That matters:
// a whole "bomb" pack fits in one chunk, and go-git starts resolving it, sizing
// buffers from the declared sizes, as soon as its last byte is in.
type packWalker struct {
	in   chan []byte   // chunks for the walker
	ack  chan struct{} // the walker has used up every chunk it was given
	stop chan struct{} // the body is gone
	done chan struct{} // the walker has returned
	once sync.Once
	err  *fetch.Error // set before done is closed

	cur     []byte // walker side: the rest of the current chunk
	pending bool   // walker side: a chunk was taken and not yet acknowledged
}

func startPackWalker(count uint32, maxObject int64) *packWalker {
	w := &packWalker{in: make(chan []byte), ack: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.err = walkObjects(bufio.NewReaderSize(w, 64<<10), count, maxObject)
	}()
	return w
}

// Read is the walker's input: it acknowledges the chunks used up, then waits for the
// next.
func (w *packWalker) Read(p []byte) (int, error) {
	for len(w.cur) == 0 {
		if w.pending {
			w.pending = false
			select {
			case w.ack <- struct{}{}:
			case <-w.stop:
				return 0, io.EOF
			}
		}
		select {
		case w.cur = <-w.in:
			w.pending = true
		case <-w.stop:
			return 0, io.EOF
		}
	}
	n := copy(p, w.cur)
	w.cur = w.cur[n:]
	return n, nil
}

// feed hands pack bytes (after the 12-byte header) to the walker and waits until it
// has judged them. After the walker has walked every object, feed does nothing: the
// trailer and whatever follows are go-git's business.
func (w *packWalker) feed(b []byte) *fetch.Error {
	select {
	case w.in <- b:
	case <-w.done:
		return w.err
	}
	select {
	case <-w.ack:
		return nil
	case <-w.done:
		return w.err
	}
}

// close ends the walker (the body was closed or cut) and waits for it.
func (w *packWalker) close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

// walkObjects reads count object entries from r.
func walkObjects(r *bufio.Reader, count uint32, maxObject int64) *fetch.Error {
	var zr io.ReadCloser
	for i := range count {
		typ, size, err := objectHeader(r)
		if err != nil {
			return malformedObject(i, err)
		}
		if maxObject >= 0 && size > maxObject {
			return limitErr("pack object %d declares %d bytes, over the limit of %d (MaxObjectBytes)", i, size, maxObject)
		}
		switch typ {
		case objCommit, objTree, objBlob, objTag:
		case objOfsDelta:
			if _, err := varint(r); err != nil {
				return malformedObject(i, err)
			}
		case objRefDelta:
			if _, err := r.Discard(20); err != nil {
				return malformedObject(i, err)
			}
		default:
			return malformed("pack object %d has type %d", i, typ)
		}
		if zr == nil {
			zr, err = zlib.NewReader(r)
		} else {
			err = zr.(zlib.Resetter).Reset(r, nil)
		}
		if err != nil {
			return malformedObject(i, err)
		}
		in := bufio.NewReaderSize(zr, 4<<10)
		if typ == objOfsDelta || typ == objRefDelta {
			if _, err := leb128(in); err != nil { // the base's size
				return malformedObject(i, err)
			}
			target, err := leb128(in)
			if err != nil {
				return malformedObject(i, err)
			}
			if maxObject >= 0 && target > uint64(maxObject) {
				return limitErr("pack object %d is a delta whose result declares %d bytes, over the limit of %d (MaxObjectBytes)", i, target, maxObject)
			}
		}
		if _, err := io.Copy(io.Discard, in); err != nil {
			return malformedObject(i, err)
		}
	}
	return nil
}

func malformedObject(i uint32, err error) *fetch.Error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return malformed("pack object %d: %v", i, err)
}

var errVarint = errors.New("size does not fit 63 bits")

// objectHeader reads an entry's type and inflated size.
func objectHeader(r io.ByteReader) (typ byte, size int64, err error) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, 0, err
	}
	typ = c >> 4 & 7
	u := uint64(c & 15)
	for shift := uint(4); c&0x80 != 0; shift += 7 {
		if c, err = r.ReadByte(); err != nil {
			return 0, 0, err
		}
		if shift > 56 {
			return 0, 0, errVarint
		}
		u |= uint64(c&0x7f) << shift
	}
	if u > 1<<63-1 {
		return 0, 0, errVarint
	}
	return typ, int64(u), nil
}

// varint skips an OFS_DELTA base offset.
func varint(r io.ByteReader) (uint64, error) {
	var u uint64
	for i := 0; ; i++ {
		c, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		if i > 9 {
			return 0, errVarint
		}
		u = u<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return u, nil
		}
		u++
	}
}

// leb128 reads a delta's size field.
func leb128(r io.ByteReader) (uint64, error) {
	var u uint64
	for shift := uint(0); ; shift += 7 {
		c, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		if shift > 63 {
			return 0, errVarint
		}
		u |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return u, nil
		}
	}
}
