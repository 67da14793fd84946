package packcache

import (
	"bytes"
	"io"
	"os"
	"sync"
)

// spool is a pack on its way from pack-objects into a cache file and out to
// upload-pack at once. pack-objects writes into the file at disk speed and the
// streamer follows the file, so a slow client never slows a generation that other
// clients wait for. Past max bytes the rest of the pack is not cached: it is handed
// to the streamer directly (and pack-objects then goes at the client's pace).
type spool struct {
	f   *os.File
	max int64
	ch  chan []byte // chunks past the spill point; closed at the end

	mu    sync.Mutex
	cond  *sync.Cond
	n     int64 // bytes in the file that belong to the pack
	spill int64 // file size from which on the chunks go through ch; -1: none
	done  bool
	err   error // reading pack-objects' output
}

func newSpool(f *os.File, max int64) *spool {
	s := &spool{f: f, max: max, ch: make(chan []byte, 4), spill: -1}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// fill copies r (pack-objects' standard output) into the spool until EOF.
func (s *spool) fill(r io.Reader) {
	buf := make([]byte, 256<<10)
	for {
		k, err := r.Read(buf)
		if k > 0 {
			s.mu.Lock()
			spilled := s.spill >= 0
			s.mu.Unlock()
			if !spilled && s.n+int64(k) <= s.max {
				if _, werr := s.f.Write(buf[:k]); werr == nil {
					s.mu.Lock()
					s.n += int64(k)
					s.cond.Broadcast()
					s.mu.Unlock()
					continue
				}
				// The cache disk is full: the bytes not accounted for in n are ignored.
			}
			if !spilled {
				s.mu.Lock()
				s.spill = s.n
				s.cond.Broadcast()
				s.mu.Unlock()
			}
			s.ch <- bytes.Clone(buf[:k])
		}
		if err != nil {
			s.mu.Lock()
			if err != io.EOF {
				s.err = err
			}
			s.done = true
			s.cond.Broadcast()
			s.mu.Unlock()
			close(s.ch)
			return
		}
	}
}

// drain writes the pack to w as it arrives and returns the bytes written. On a write
// error it returns at once; the caller then waits for or discards the rest.
func (s *spool) drain(w io.Writer) (int64, error) {
	buf := make([]byte, 256<<10)
	var off int64
	for {
		s.mu.Lock()
		for off == s.n && !s.done && s.spill < 0 {
			s.cond.Wait()
		}
		n, spill, done := s.n, s.spill, s.done
		s.mu.Unlock()
		switch {
		case off < n && (spill < 0 || off < spill):
			k, err := s.f.ReadAt(buf[:min(int64(len(buf)), n-off)], off)
			if k > 0 {
				if _, werr := w.Write(buf[:k]); werr != nil {
					return off, werr
				}
				off += int64(k)
			}
			if err != nil && err != io.EOF {
				return off, err
			}
		case spill >= 0:
			for chunk := range s.ch {
				if _, werr := w.Write(chunk); werr != nil {
					return off, werr
				}
				off += int64(len(chunk))
			}
			return off, nil
		case done:
			return off, nil
		}
	}
}

// wait lets the generation finish into the file without anyone streaming it.
func (s *spool) wait() {
	s.mu.Lock()
	for !s.done && s.spill < 0 {
		s.cond.Wait()
	}
	s.mu.Unlock()
	s.discard()
}

// waitEnd returns once the pack is complete in the file or spills; it reports whether
// it spilled.
func (s *spool) waitEnd() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.done && s.spill < 0 {
		s.cond.Wait()
	}
	return s.spill >= 0
}

// waitDone returns once pack-objects' output has been read to its end.
func (s *spool) waitDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.done {
		s.cond.Wait()
	}
}

// discard reads and drops whatever still comes through the channel.
func (s *spool) discard() {
	for range s.ch {
	}
}

func (s *spool) spilled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spill >= 0
}

func (s *spool) size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}
