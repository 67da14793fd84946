package urlpolicy

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// MaxRedirects is how many HTTP redirects HTTPClient follows.
const MaxRedirects = 5

// Control is a net.Dialer.Control function that refuses to connect to an
// address the policy forbids. It runs on the resolved IP right before
// connect(2), so a name that passed the URL check but later resolves to a
// private or metadata address (DNS rebinding) is still refused, and no packet
// is sent to it.
func (p Policy) Control(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return refuse(ReasonMalformed, "network %q is not allowed; only TCP connections are made", network).withInput("connection to", address)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return refuse(ReasonMalformed, "not an IP address and port").withInput("connection to", address)
	}
	if e := p.checkIP(ap.Addr()); e != nil {
		return e.withInput("connection to", address)
	}
	return nil
}

// Dialer returns a DialContext function (for http.Transport and the like)
// based on a copy of base (nil means a zero net.Dialer). It checks the host
// name with CheckHost, then every resolved address with Control; a refusal
// is an error wrapping ErrRefused (inside a *net.OpError).
func (p Policy) Dialer(base *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := new(net.Dialer)
	if base != nil {
		*d = *base
	}
	// Go ignores Control when ControlContext is set, so chain into the latter.
	prev, prevCtx := d.Control, d.ControlContext
	d.Control = nil
	d.ControlContext = func(ctx context.Context, network, address string, c syscall.RawConn) error {
		if err := p.Control(network, address, c); err != nil {
			return err
		}
		if prevCtx != nil {
			return prevCtx(ctx, network, address, c)
		}
		if prev != nil {
			return prev(network, address, c)
		}
		return nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		opErr := func(err error) error { return &net.OpError{Op: "dial", Net: network, Err: err} }
		switch network {
		case "tcp", "tcp4", "tcp6":
		default:
			return nil, opErr(refuse(ReasonMalformed, "network %q is not allowed; only TCP connections are made", network).withInput("connection to", addr))
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, opErr(err)
		}
		// Refuse early by name (clearer message, no DNS query for
		// localhost or metadata names); Control still checks the IPs.
		if _, _, e := p.canonHost(host, false); e != nil {
			return nil, opErr(e.withInput("connection to", addr))
		}
		return d.DialContext(ctx, network, addr)
	}
}

// HTTPClient returns a client whose connections go through Dialer, with
// proxies disabled (a proxy would connect on our behalf, out of the dialer's
// sight), bounded timeouts, and at most MaxRedirects redirects, each re-checked
// against the policy. timeout bounds whole requests; 0 means no overall limit
// (long clones), the per-phase timeouts still apply.
func (p Policy) HTTPClient(timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            p.Dialer(&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}),
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  60 * time.Second,
		ExpectContinueTimeout:  time.Second,
		IdleConnTimeout:        90 * time.Second,
		MaxIdleConns:           100,
		MaxResponseHeaderBytes: 1 << 20,
	}
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: p.checkRedirect}
}

// checkRedirect re-applies the policy to a redirect target. Queries are
// allowed here (servers redirect to signed URLs); schemes are limited to
// http(s), and https must not be downgraded to http.
func (p Policy) checkRedirect(req *http.Request, via []*http.Request) error {
	u := req.URL
	if len(via) > MaxRedirects {
		return refuse(ReasonRedirect, "stopped after %d redirects", MaxRedirects).withInput("redirect to", u.String())
	}
	var prev *url.URL
	if len(via) > 0 {
		prev = via[len(via)-1].URL
	}
	if e := p.redirectTarget(u, prev); e != nil {
		return e.withInput("redirect to", u.String())
	}
	return nil
}

func (p Policy) redirectTarget(u, prev *url.URL) *Error {
	switch u.Scheme {
	case "https":
	case "http":
		if prev != nil && prev.Scheme == "https" {
			return refuse(ReasonScheme, "redirect from https to http is not allowed: it would downgrade to an unencrypted connection")
		}
	default:
		return refuse(ReasonScheme, "redirect to scheme %q is not allowed (allowed: https, http)", u.Scheme)
	}
	if u.User != nil {
		return refuse(ReasonCredentials, "redirect target contains credentials")
	}
	_, _, e := p.canonHost(u.Hostname(), len(u.Host) > 0 && u.Host[0] == '[')
	return e
}
