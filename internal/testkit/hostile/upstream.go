// Package hostile holds git upstreams and API clients that behave as an attacker (or a
// badly broken server or client) would, on 127.0.0.1, for the hardening tests and the
// hostile benchmark (bench/hostile). Each attack does one thing; the tests check that
// the fleet refuses it with a classified error, in bounded memory, without blocking
// anything else.
package hostile

import (
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Attack names a hostile upstream repository: its path on the Upstream.
type Attack string

// The upstream attacks. Each is a repository at Upstream.RepoURL(attack).
const (
	// EndlessRefs answers info/refs with refs that never end.
	EndlessRefs Attack = "endless-refs"
	// EndlessPack sends an honest pack header (100,000 objects) and then small,
	// incompressible blobs until the client hangs up: only a byte cap stops it.
	EndlessPack Attack = "endless-pack"
	// Trickle sends its ref advertisement, and then more refs, one byte at a time.
	Trickle Attack = "trickle"
	// LyingCount is a pack whose header claims 2^31-1 objects (inside side-band).
	LyingCount Attack = "lying-count"
	// LyingCountRaw is the same header without side-band framing.
	LyingCountRaw Attack = "lying-count-raw"
	// LyingSize is a pack whose one object declares 2^40 bytes and holds a few.
	LyingSize Attack = "lying-size"
	// Bomb is a blob of zeros that declares (truthfully) 4 GiB and compresses about
	// a thousand to one: a few megabytes of pack.
	Bomb Attack = "bomb"
	// DeltaBomb is a small base and a delta that builds 64 GiB from it by copying.
	DeltaBomb Attack = "delta-bomb"
	// RedirectLoop redirects every request to itself.
	RedirectLoop Attack = "redirect-loop"
	// RateLimited answers every request 429 Too Many Requests with Retry-After.
	RateLimited Attack = "rate-limited"
)

// Attacks lists the upstream attacks.
var Attacks = []Attack{EndlessRefs, EndlessPack, Trickle, LyingCount, LyingCountRaw, LyingSize, Bomb, DeltaBomb,
	RedirectLoop, RateLimited}

// Upstream serves the attacks over HTTP on 127.0.0.1.
type Upstream struct {
	// URL is the server's base URL: repositories are at URL/<attack>.
	URL string
	// TrickleEvery is the pause between two bytes of Trickle (default 50 ms).
	TrickleEvery time.Duration
	// RetryAfter is what RateLimited sends (default 120 s).
	RetryAfter time.Duration

	srv   *http.Server
	ln    net.Listener
	mu    sync.Mutex
	count map[string]*atomic.Int64
	ctx   context.Context
	stop  context.CancelFunc
}

// hash is the one commit every hostile ref points to; nothing ever serves it.
const hash = "1234567890abcdef1234567890abcdef12345678"

// Start serves the attacks on a port of 127.0.0.1 chosen by the system.
func Start() (*Upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	u := &Upstream{URL: "http://" + ln.Addr().String(), TrickleEvery: 50 * time.Millisecond, RetryAfter: 120 * time.Second,
		ln: ln, count: map[string]*atomic.Int64{}, ctx: ctx, stop: stop}
	u.srv = &http.Server{Handler: http.HandlerFunc(u.serve), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go u.srv.Serve(ln)
	return u, nil
}

// Close stops the server and every response in progress.
func (u *Upstream) Close() {
	u.stop()
	u.srv.Close()
}

// RepoURL is the repository URL of an attack.
func (u *Upstream) RepoURL(a Attack) string { return u.URL + "/" + string(a) }

// Requests is how many requests an attack's repository has answered.
func (u *Upstream) Requests(a Attack) int64 { return u.counter(string(a)).Load() }

func (u *Upstream) counter(name string) *atomic.Int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	c, ok := u.count[name]
	if !ok {
		c = new(atomic.Int64)
		u.count[name] = c
	}
	return c
}

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	// Several repos may share an attack: <attack>.<anything> behaves as <attack>.
	a := Attack(strings.SplitN(name, ".", 2)[0])
	u.counter(string(a)).Add(1)
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	switch a {
	case RedirectLoop:
		hop, _ := strconv.Atoi(r.URL.Query().Get("hop"))
		q := r.URL.Query()
		q.Set("hop", strconv.Itoa(hop+1))
		http.Redirect(w, r, r.URL.Path+"?"+q.Encode(), http.StatusFound)
		return
	case RateLimited:
		w.Header().Set("Retry-After", strconv.Itoa(int(u.RetryAfter/time.Second)))
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	}
	switch rest {
	case "info/refs":
		u.refs(w, r, a)
	case "git-upload-pack":
		u.pack(w, r, a)
	default:
		http.NotFound(w, r)
	}
}

const caps = "multi_ack_detailed side-band-64k ofs-delta no-progress symref=HEAD:refs/heads/main agent=hostile/1"

func (u *Upstream) refs(w http.ResponseWriter, r *http.Request, a Attack) {
	w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
	adv := pkt("# service=git-upload-pack\n") + flush
	first := hash + " HEAD\x00" + caps + "\n"
	if a == LyingCountRaw {
		first = hash + " HEAD\x00" + strings.Replace(caps, "side-band-64k ", "", 1) + "\n"
	}
	adv += pkt(first) + pkt(hash+" refs/heads/main\n")
	switch a {
	case EndlessRefs:
		_, _ = io.WriteString(w, adv)
		buf := make([]byte, 0, 64<<10)
		for i := 0; r.Context().Err() == nil; i++ {
			buf = append(buf, pkt(fmt.Sprintf("%s refs/heads/b%09d\n", hash, i))...)
			if len(buf) > 60<<10 {
				if _, err := w.Write(buf); err != nil {
					return
				}
				buf = buf[:0]
			}
		}
	case Trickle:
		flusher, _ := w.(http.Flusher)
		for i := 0; ; i++ {
			for j := range len(adv) {
				if _, err := io.WriteString(w, adv[j:j+1]); err != nil {
					return
				}
				if flusher != nil {
					flusher.Flush()
				}
				select {
				case <-r.Context().Done():
					return
				case <-time.After(u.TrickleEvery):
				}
			}
			adv = pkt(fmt.Sprintf("%s refs/heads/t%09d\n", hash, i))
		}
	default:
		_, _ = io.WriteString(w, adv+flush)
	}
}

func (u *Upstream) pack(w http.ResponseWriter, r *http.Request, a Attack) {
	w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
	_, _ = io.WriteString(w, pkt("NAK\n"))
	out := io.Writer(sideband{w})
	if a == LyingCountRaw {
		out = w
	}
	switch a {
	case LyingCount, LyingCountRaw:
		_, _ = out.Write(packHeader(1<<31 - 1))
		_, _ = out.Write(objectHeader(objBlob, 5))
		_, _ = out.Write(deflate([]byte("hello"), zlib.BestSpeed))
	case LyingSize:
		_, _ = out.Write(packHeader(1))
		_, _ = out.Write(objectHeader(objBlob, 1<<40))
		_, _ = out.Write(deflate([]byte("not a terabyte"), zlib.BestSpeed))
	case Bomb:
		_, _ = out.Write(packHeader(1))
		_, _ = out.Write(objectHeader(objBlob, 4<<30))
		zw, _ := zlib.NewWriterLevel(out, zlib.BestCompression)
		zero := make([]byte, 1<<20)
		for range 4 << 10 {
			if _, err := zw.Write(zero); err != nil || r.Context().Err() != nil {
				return
			}
		}
		zw.Close()
	case DeltaBomb:
		base := make([]byte, 1<<20)
		baseObj := append(objectHeader(objBlob, uint64(len(base))), deflate(base, zlib.BestCompression)...)
		_, _ = out.Write(packHeader(2))
		_, _ = out.Write(baseObj)
		// Copy the whole base 65,536 times: 64 GiB from a delta of ~300 KiB.
		delta := append(leb128(uint64(len(base))), leb128(64<<30)...)
		for range 1 << 16 {
			delta = append(delta, 0x80|0x40, 0x10) // copy, size 0x100000 at offset 0
		}
		_, _ = out.Write(objectHeader(objOfsDelta, uint64(len(delta))))
		_, _ = out.Write(ofsOffset(uint64(len(baseObj)))) // the base is the entry just before
		_, _ = out.Write(deflate(delta, zlib.BestSpeed))
	case EndlessPack:
		_, _ = out.Write(packHeader(100_000))
		rng := rand.New(rand.NewChaCha8([32]byte{1}))
		blob := make([]byte, 4<<10)
		for r.Context().Err() == nil {
			for i := 0; i < len(blob); i += 8 {
				v := rng.Uint64()
				for j := range 8 {
					blob[i+j] = byte(v >> (8 * j))
				}
			}
			obj := append(objectHeader(objBlob, uint64(len(blob))), stored(blob)...)
			if _, err := out.Write(obj); err != nil {
				return
			}
		}
	default:
		http.Error(w, "no pack here", http.StatusNotFound)
	}
}
