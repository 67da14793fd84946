package mirror

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
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

// byteCounter sums response body bytes of all requests made under one context.
type byteCounter struct{ n atomic.Int64 }

type counterKey struct{}

func withByteCounter(ctx context.Context) (context.Context, *byteCounter) {
	c := &byteCounter{}
	return context.WithValue(ctx, counterKey{}, c), c
}

// maxErrorBody bounds what go-git buffers from an error response (githttp.NewErr
// reads the whole body into memory).
const maxErrorBody = 64 << 10

// countingTransport counts body bytes into the request context's byteCounter (go-git
// keeps the caller's context values on its requests) and truncates error bodies.
type countingTransport struct {
	base http.RoundTripper
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	c, _ := req.Context().Value(counterKey{}).(*byteCounter)
	var limit int64 = -1
	if resp.StatusCode >= 300 {
		limit = maxErrorBody
	}
	if c != nil || limit >= 0 {
		resp.Body = &countingBody{rc: resp.Body, c: c, left: limit}
	}
	return resp, nil
}

type countingBody struct {
	rc   io.ReadCloser
	c    *byteCounter
	left int64 // <0: unlimited
}

func (b *countingBody) Read(p []byte) (int, error) {
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
	if b.c != nil {
		b.c.n.Add(int64(n))
	}
	return n, err
}

func (b *countingBody) Close() error { return b.rc.Close() }
