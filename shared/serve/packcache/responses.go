package packcache

import (
	"fmt"
	"os"
	"time"
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

// Claim makes the caller the one to fill key's entry: write the response through the
// Fill, then Commit or Abort it. ErrBusy means another request fills it: Wait, then
// Open.
func (c Config) Claim(key string) (*Fill, error) {
	c = c.withDefaults()
	l, err := c.lockEntry(key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.tmpDir(), 0o755); err != nil {
		l.unlock()
		return nil, fmt.Errorf("pack cache: %w", err)
	}
	tmp, err := os.CreateTemp(c.tmpDir(), key[:16]+"-*.resp")
	if err != nil {
		l.unlock()
		return nil, fmt.Errorf("pack cache: %w", err)
	}
	return &Fill{c: c, key: key, lock: l, tmp: tmp}, nil
}

// Fill writes one entry. Its Write never fails: past the entry size limit, or on a
// disk error, it stops keeping what it is given and the entry is not cached.
type Fill struct {
	c    Config
	key  string
	lock *flock
	tmp  *os.File
	n    int64
	over bool // past maxEntry
	err  error
}

func (f *Fill) Write(p []byte) (int, error) {
	if f.err != nil || f.over {
		return len(p), nil
	}
	if f.n+int64(len(p)) > f.c.maxEntry() {
		f.over = true
		return len(p), nil
	}
	n, err := f.tmp.Write(p)
	f.n += int64(n)
	f.err = err
	return len(p), nil
}

// Commit puts the entry in place and returns its size; false if it was not kept (too
// big: later requests for it then generate without waiting).
func (f *Fill) Commit() (int64, bool) {
	defer f.release()
	switch {
	case f.over:
		f.c.markUncacheable(f.key)
		return 0, false
	case f.err != nil:
		return 0, false
	}
	if err := f.tmp.Sync(); err != nil {
		return 0, false
	}
	if err := os.Rename(f.tmp.Name(), f.c.entry(f.key, ".pack")); err != nil {
		return 0, false
	}
	evict(f.c, time.Now())
	return f.n, true
}

// Abort drops what was written (the response failed or was cut).
func (f *Fill) Abort() { f.release() }

func (f *Fill) release() {
	f.tmp.Close()
	os.Remove(f.tmp.Name()) // a no-op once renamed into place
	f.lock.unlock()
}
