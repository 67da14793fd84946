package packcache

import (
	"fmt"
	"io"
	"os"
)

// Whole responses. The server also caches a clone's whole upload-pack response (the
// pack with its sideband framing and progress), beside the packs and under the same
// bounds, and answers the same request from that file without running git: no
// upload-pack, no hook, one copy from disk to the socket. Requests with haves (fetches)
// differ from client to client and stay with the pack cache.

// ResponseKey is the key of a whole response: the repository (its refs and packs, as
// Key), the Git-Protocol header and the request (what the client asks for, not who
// it is: the caller leaves out the client's agent).
func ResponseKey(repo, protocol string, body []byte) (string, error) {
	return Key(repo, []string{"upload-pack-response", protocol}, body)
}

// Claim makes the caller the one to fill key's entry: generate it through the
// Fill's Run (or Abort it). ErrBusy means another request fills it: Wait, then Open.
func (c Config) Claim(key string) (*Fill, error) {
	c = c.withDefaults()
	l, err := c.lockEntry(key)
	if err != nil {
		return nil, err
	}
	return c.newFill(key, l, ".resp")
}

// newFill makes the Fill of key, whose lock l the caller holds; it releases l on error.
func (c Config) newFill(key string, l *flock, ext string) (*Fill, error) {
	if err := os.MkdirAll(c.tmpDir(), 0o755); err != nil {
		l.unlock()
		return nil, fmt.Errorf("pack cache: %w", err)
	}
	tmp, err := os.CreateTemp(c.tmpDir(), key[:16]+"-*"+ext)
	if err != nil {
		l.unlock()
		return nil, fmt.Errorf("pack cache: %w", err)
	}
	c.Index.Filling(key, tmp.Name())
	return &Fill{c: c, key: key, lock: l, tmp: tmp}, nil
}

// Fill generates one entry, holding its lock while the generator runs.
type Fill struct {
	c        Config
	key      string
	lock     *flock
	unlocked bool
	tmp      *os.File
	closed   bool
}

// Result is what a Fill's Run did.
type Result struct {
	Sent     int64 // bytes written to the client
	Cached   int64 // bytes of the entry put in place; 0: none
	WriteErr error // writing to the client
	GenErr   error // the generator's (done's) error, or reading its output
}

// Run generates the entry from r, the generator's output, into a file as fast as r
// gives it, while w is sent the same bytes from that file at its own pace. At r's end
// done is called (the generator's exit); if all went well the entry is renamed into
// place and the lock released at once, while w may still be reading: the clients
// waiting for the entry never wait for another client's pace. Past the entry bound
// the entry is given up at once (the lock released, later requests generate without
// waiting) and the rest goes from r to w directly, at w's pace; if w then fails, stop
// is called to end the generator. A failed w does not stop a generation going into
// the cache at disk speed.
func (f *Fill) Run(r io.Reader, w io.Writer, done func() error, stop func()) Result {
	defer f.close()
	sp := newSpool(f.tmp, f.c.maxEntry())
	go sp.fill(r)
	finished := make(chan Result, 1)
	go func() {
		if sp.waitEnd() { // spilled: too big to cache
			f.c.markUncacheable(f.key)
			f.unlock()
		}
		sp.waitDone()
		var res Result
		res.GenErr = done()
		if res.GenErr == nil {
			res.GenErr = sp.err
		}
		if res.GenErr == nil && !sp.spilled() {
			res.Cached = f.commit(sp.size())
		}
		f.unlock()
		finished <- res
	}()
	sent, werr := sp.drain(w)
	if werr != nil {
		if sp.spilled() {
			stop()
			sp.discard()
		} else if sp.wait(); sp.spilled() {
			stop()
		}
	}
	res := <-finished
	res.Sent, res.WriteErr = sent, werr
	return res
}

// commit puts the tmp file of n bytes in place as the entry; it returns n, or 0 if it
// could not.
func (f *Fill) commit(n int64) int64 {
	if err := f.tmp.Sync(); err != nil {
		return 0
	}
	if err := os.Rename(f.tmp.Name(), f.c.entry(f.key, ".pack")); err != nil {
		return 0
	}
	f.c.Index.Filled(f.key, f.tmp.Name())
	return n
}

// Abort gives the entry up without generating it; a no-op after Run.
func (f *Fill) Abort() { f.close() }

func (f *Fill) unlock() {
	if !f.unlocked {
		f.unlocked = true
		f.lock.unlock()
	}
}

func (f *Fill) close() {
	if !f.closed {
		f.closed = true
		f.tmp.Close()
		os.Remove(f.tmp.Name()) // a no-op once renamed into place
		f.c.Index.Filled(f.key, f.tmp.Name())
	}
	f.unlock()
}
