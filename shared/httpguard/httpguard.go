// Package httpguard bounds what a client can make an HTTP server hold, and keeps
// browsers on other sites away from a server on 127.0.0.1:
//
//   - server-wide: headers must arrive within ReadHeaderTimeout and fit MaxHeaderBytes
//     (431 otherwise), idle keep-alive connections close after IdleTimeout, and at most
//     MaxConns connections are open at once (Accept waits for one to close). There is
//     deliberately no server-wide read or write timeout: a git clone served on the same
//     listener may rightly take an hour.
//   - per route (Deadlines): the body must be read within BodyTimeout and the answer
//     written within ResponseTimeout, so a client that announces a body and never sends
//     it holds a connection for seconds, not forever.
//   - per route (Hosts): only a loopback Host header (localhost, 127.0.0.1, [::1]) or
//     one the operator allowed is answered. A page on another site can make a browser
//     send requests to 127.0.0.1 (DNS rebinding: its own name resolves there), but the
//     browser then sends that site's name as Host.
package httpguard

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Limits are a server's bounds; zero fields take DefaultLimits' values.
type Limits struct {
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	MaxConns          int
	BodyTimeout       time.Duration // per route: the request body is read within this
	ResponseTimeout   time.Duration // per route: the answer is written within this
}

// DefaultLimits returns the defaults. A request body is at most 1 MiB (the API's
// limit), which any client sends in well under BodyTimeout; the timeouts are what a
// connection an attacker holds costs, so they are short.
func DefaultLimits() Limits {
	return Limits{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10,
		MaxConns: 1024, BodyTimeout: 10 * time.Second, ResponseTimeout: 2 * time.Minute}
}

// WithDefaults fills the zero fields.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = d.ReadHeaderTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxConns <= 0 {
		l.MaxConns = d.MaxConns
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = d.BodyTimeout
	}
	if l.ResponseTimeout <= 0 {
		l.ResponseTimeout = d.ResponseTimeout
	}
	return l
}

// Server returns a server for h with the server-wide limits. Its handlers reach their
// connection with Conn.
func Server(h http.Handler, l Limits) *http.Server {
	l = l.WithDefaults()
	return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeaderTimeout, IdleTimeout: l.IdleTimeout,
		MaxHeaderBytes: l.MaxHeaderBytes, ConnContext: ConnContext}
}

type connKey struct{}

// ConnContext, as an http.Server's ConnContext, keeps each request's connection in its
// context for Conn.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// Conn is the connection a request came on, unwrapped down to the TCP connection where
// it can be (Listener's wrapper, or anything with a NetConn method, as *tls.Conn has);
// nil when the server has no ConnContext.
func Conn(ctx context.Context) net.Conn {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	for c != nil {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	return c
}

// Deadlines gives each request to h BodyTimeout to be read and ResponseTimeout to be
// answered. A handler that reads past the body deadline gets an error wrapping
// os.ErrDeadlineExceeded and may still answer (408) until the response deadline.
func Deadlines(h http.Handler, l Limits) http.Handler {
	l = l.WithDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(now.Add(l.BodyTimeout))
		_ = rc.SetWriteDeadline(now.Add(max(l.ResponseTimeout, l.BodyTimeout+5*time.Second)))
		h.ServeHTTP(w, r)
	})
}

// Hosts answers only requests whose Host is a loopback name or address, or one of
// allow (host names or addresses, without port; "*" allows any); others get a 403
// host_not_allowed error in the API's JSON form.
func Hosts(h http.Handler, allow []string) http.Handler {
	allowed := map[string]bool{}
	for _, a := range allow {
		allowed[canonHost(a)] = true
	}
	all := allowed["*"]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := canonHost(r.Host)
		if all || Loopback(host) || allowed[host] {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{
			"code": "host_not_allowed",
			"message": "this server answers requests for loopback hosts (localhost, 127.0.0.1, [::1]) only, not " +
				quote(r.Host) + "; start it with --allow-host " + quote(hostOnly(r.Host)) + " to allow that name",
		}})
	})
}

// Loopback reports whether host (no port) is localhost, a name under .localhost, or a
// loopback address.
func Loopback(host string) bool {
	host = canonHost(host)
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// canonHost drops the port, brackets and a trailing dot, and lower-cases.
func canonHost(h string) string {
	h = strings.ToLower(strings.TrimSpace(hostOnly(h)))
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(h, ".")
}

func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return h
}

func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// Listener lets at most max connections be open at once: Accept waits while max are.
func Listener(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, sem: make(chan struct{}, max), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	sem  chan struct{}
	done chan struct{}
	once sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// NetConn is the wrapped connection.
func (c *limitConn) NetConn() net.Conn { return c.Conn }

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
