package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// How the caller's *http.Client reaches go-git.
//
// go-git v5 picks the transport for a fetch, clone or ls-remote from one process-wide
// table, client.Protocols, keyed by URL scheme; no option struct takes a transport
// (upstream PR go-git/go-git#379 was closed unmerged). Installing a transport built
// from one Mirrorer's client there would leak that client into every other go-git
// user in the process, tests included.
//
// So New installs, once per process, a dispatcher for "http" and "https" that keeps
// whatever transport was there before as its fallback. Each Mirrorer passes a
// routeAuth as the AuthMethod of its go-git calls; the dispatcher recognises it and
// opens the session on that Mirrorer's own transport (githttp.NewClient of its own
// client). Calls that do not carry a routeAuth go to the fallback, unchanged.
//
// It fails closed: routeAuth deliberately does not implement githttp.AuthMethod, so
// if someone replaces the dispatcher later, go-git's own http transport rejects the
// call with ErrInvalidAuthMethod instead of fetching through a client that bypasses
// the URL policy; Sync also checks that the dispatcher is still installed.

var installOnce sync.Once

type dispatcher struct {
	fallback transport.Transport
}

func installDispatcher() {
	installOnce.Do(func() {
		for _, scheme := range []string{"http", "https"} {
			prev := client.Protocols[scheme]
			if _, ok := prev.(*dispatcher); ok {
				continue
			}
			client.InstallProtocol(scheme, &dispatcher{fallback: prev})
		}
	})
}

func dispatcherInstalled(scheme string) bool {
	_, ok := client.Protocols[scheme].(*dispatcher)
	return ok
}

var errNoFallback = errors.New("no go-git transport installed for this scheme")

func (d *dispatcher) NewUploadPackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.UploadPackSession, error) {
	if r, ok := auth.(*routeAuth); ok {
		return r.t.NewUploadPackSession(ep, nil)
	}
	if d.fallback == nil {
		return nil, errNoFallback
	}
	return d.fallback.NewUploadPackSession(ep, auth)
}

func (d *dispatcher) NewReceivePackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.ReceivePackSession, error) {
	if r, ok := auth.(*routeAuth); ok {
		return r.t.NewReceivePackSession(ep, nil)
	}
	if d.fallback == nil {
		return nil, errNoFallback
	}
	return d.fallback.NewReceivePackSession(ep, auth)
}

// routeAuth tags a go-git call with the transport of the Mirrorer that made it. It
// carries no credentials (credentials, if any, come from the URL's userinfo or from
// the caller's RoundTripper).
type routeAuth struct {
	t transport.Transport
}

func (*routeAuth) Name() string   { return "mirrorfleet-route" }
func (*routeAuth) String() string { return "mirrorfleet-route" }

// newGoGitTransport wraps the caller's client: the RoundTripper (and so its dialer and
// its policy) is kept, a counting layer is added on top.
func newGoGitTransport(c *http.Client) (transport.Transport, *http.Client) {
	if c == nil {
		c = &http.Client{}
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc := &http.Client{
		Transport:     &countingTransport{base: base},
		CheckRedirect: c.CheckRedirect,
		Jar:           c.Jar,
		Timeout:       c.Timeout,
	}
	return githttp.NewClientWithOptions(hc, &githttp.ClientOptions{
		RedirectPolicy: githttp.FollowInitialRedirects, // git's default
	}), hc
}

// syncState is what the transport knows of one Sync: the limits in force, the response
// body bytes received, and the first limit the upstream ran into (go-git may wrap or
// flatten the error a guard returns; Sync reports this one instead).
type syncState struct {
	lim syncLimits
	n   atomic.Int64

	mu      sync.Mutex
	refusal *fetch.Error
}

type stateKey struct{}

func withSyncState(ctx context.Context, lim syncLimits) (context.Context, *syncState) {
	s := &syncState{lim: lim}
	return context.WithValue(ctx, stateKey{}, s), s
}

func (s *syncState) refuse(fe *fetch.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refusal == nil {
		s.refusal = fe
	}
}

func (s *syncState) refused() *fetch.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusal
}

// maxErrorBody bounds what go-git buffers from an error response (githttp.NewErr
// reads the whole body into memory).
const maxErrorBody = 64 << 10

// countingTransport enforces a sync's limits on its requests (go-git keeps the caller's
// context values on its requests): it counts body bytes, truncates error bodies, puts
// a guard on ref advertisements and upload-pack responses (guard.go), and cuts a
// request whose transfer falls below the minimum rate.
type countingTransport struct {
	base http.RoundTripper
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	st, _ := req.Context().Value(stateKey{}).(*syncState)
	var watch *rateWatch
	release := func() {}
	if st != nil && st.lim.minRate > 0 {
		ctx, cancel := context.WithCancelCause(req.Context())
		req = req.WithContext(ctx)
		release = func() { cancel(nil) }
		watch = startRateWatch(st.lim.minRate, st.lim.window, func() {
			st.refuse(&fetch.Error{Kind: fetch.KindTimeout, Err: fmt.Errorf("%w: less than %.0f bytes in %s (limit MinRate %d B/s)",
				errTooSlow, float64(st.lim.minRate)*st.lim.window.Seconds(), st.lim.window, st.lim.minRate)})
			cancel(errTooSlow)
		})
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		watch.stop()
		release()
		return resp, err
	}
	b := &guardedBody{rc: resp.Body, st: st, watch: watch, release: release, left: -1}
	if resp.StatusCode >= 300 {
		b.left = maxErrorBody
	} else if st != nil {
		switch {
		case req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/info/refs"):
			g := &refAdvGuard{maxBytes: st.lim.maxRefBytes, maxRefs: st.lim.maxRefs}
			b.check = g.check
		case req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/git-upload-pack"):
			g := &packGuard{lim: st.lim, onHeader: packHeaderHook(req.Context(), watch)}
			b.check, b.done, b.ended = g.check, g.close, g.ended
		}
	}
	resp.Body = b
	return resp, nil
}

// packHeaderHook passes a pack's declared object count to the sync's
// fetch.PackObjectsFunc, if any (the worker's memory admission). The transfer waits
// meanwhile, which is not slowness: the rate watch is held.
func packHeaderHook(ctx context.Context, watch *rateWatch) func(int64) *fetch.Error {
	fn := fetch.PackObjectsOf(ctx)
	if fn == nil {
		return nil
	}
	return func(objects int64) *fetch.Error {
		watch.hold(true)
		defer watch.hold(false)
		if err := fn(ctx, objects); err != nil {
			var fe *fetch.Error
			if errors.As(err, &fe) {
				return fe
			}
			return &fetch.Error{Kind: fetch.KindTimeout, Err: fmt.Errorf("waiting for memory for %d objects: %w", objects, err)}
		}
		return nil
	}
}

// guardedBody counts what is read from rc and runs check (if any) on it. The first
// refusal is recorded on the sync and returned by every later Read.
type guardedBody struct {
	rc    io.ReadCloser
	st    *syncState
	watch *rateWatch
	left  int64 // bytes still allowed; <0: unlimited
	check func([]byte) *fetch.Error
	done  func() // releases what check holds, once
	once  sync.Once
	// ended reports that the stream go-git reads is over (the side-band's flush):
	// go-git may keep the body open while it indexes the pack, which is not slowness.
	ended   func() bool
	release func() // cancels the request's own context
	err     error
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.left == 0 {
		return 0, io.EOF
	}
	if b.left > 0 && int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	if b.st != nil {
		b.st.n.Add(int64(n))
	}
	b.watch.add(n)
	if n > 0 && b.check != nil {
		if fe := b.check(p[:n]); fe != nil {
			b.err = fe
			b.st.refuse(fe)
			b.stopGuard()
			return 0, fe
		}
	}
	if err == io.EOF || b.ended != nil && b.ended() {
		b.watch.stop()
	}
	return n, err
}

func (b *guardedBody) Close() error {
	b.watch.stop()
	b.stopGuard()
	err := b.rc.Close()
	if b.release != nil {
		b.release()
	}
	return err
}

func (b *guardedBody) stopGuard() {
	if b.done != nil {
		b.once.Do(b.done)
	}
}

// rateWatch checks every window that at least minRate × window bytes arrived in it,
// and calls slow (once) when not.
type rateWatch struct {
	min     int64
	window  time.Duration
	got     atomic.Int64
	stopped atomic.Bool
	held    atomic.Bool // the reader waits on purpose: windows are not judged
	skip    atomic.Bool // the window a hold ended in is not judged either
	timer   *time.Timer
	slow    func()
}

func startRateWatch(minRate int64, window time.Duration, slow func()) *rateWatch {
	w := &rateWatch{min: minRate, window: window, slow: slow}
	w.timer = time.AfterFunc(window, w.tick)
	return w
}

func (w *rateWatch) tick() {
	if w.stopped.Load() {
		return
	}
	if got := w.got.Swap(0); !w.held.Load() && !w.skip.Swap(false) && tooSlow(got, w.min, w.window) {
		w.stopped.Store(true)
		w.slow()
		return
	}
	w.timer.Reset(w.window)
}

// tooSlow reports whether got bytes in window is under minRate bytes per second.
func tooSlow(got, minRate int64, window time.Duration) bool {
	return float64(got) < float64(minRate)*window.Seconds()
}

func (w *rateWatch) add(n int) {
	if w != nil {
		w.got.Add(int64(n))
	}
}

// hold stops judging windows while on (the reader is held up on purpose).
func (w *rateWatch) hold(on bool) {
	if w != nil {
		w.held.Store(on)
		if !on {
			w.skip.Store(true)
		}
	}
}

func (w *rateWatch) stop() {
	if w != nil && !w.stopped.Swap(true) {
		w.timer.Stop()
	}
}
