package serve

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
)

// hop is a proxy in front of the front, as CloudFront and a load balancer are: it
// appends the address it got each request from to X-Forwarded-For, streams responses
// as they come, and dials its origin from the loopback address from. With idle > 0 it
// cuts a response when none of it arrives for idle, the first byte included, as
// CloudFront's origin response timeout does; maxGap is the longest silence it saw.
type hop struct {
	srv    *httptest.Server
	mu     sync.Mutex
	maxGap time.Duration
}

func newHop(t *testing.T, origin, from string, idle time.Duration) *hop {
	t.Helper()
	u, err := url.Parse(origin)
	if err != nil {
		t.Fatal(err)
	}
	h := &hop{}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.Transport = &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil || idle <= 0 {
				return c, err
			}
			return &idleConn{Conn: c, idle: idle, hop: h, last: time.Now()}, nil
		},
	}
	h.srv = httptest.NewServer(rp)
	t.Cleanup(h.srv.Close)
	return h
}

// idleConn fails a read that waits longer than idle for the origin's next bytes.
type idleConn struct {
	net.Conn
	idle time.Duration
	hop  *hop
	last time.Time
}

func (c *idleConn) Read(p []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	n, err := c.Conn.Read(p)
	if n > 0 || err != nil {
		now := time.Now()
		c.hop.mu.Lock()
		c.hop.maxGap = max(c.hop.maxGap, now.Sub(c.last))
		c.hop.mu.Unlock()
		c.last = now
	}
	return n, err
}

// The per-client limit sees the real client through CloudFront and a load balancer:
// each appends the address it got the request from to X-Forwarded-For, and the front,
// trusting the load balancer's network and CloudFront's origin-facing ranges, takes the
// nearest address that is neither. Here the viewer is 127.0.0.3 (and claims
// 203.0.113.9), CloudFront's edge 127.0.0.2, the load balancer 127.0.0.1.
func TestClientAddressThroughCloudFrontAndLoadBalancer(t *testing.T) {
	seen := make(chan string, 2)
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} // the VPC
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- httpguard.ClientAddr(r, trusted)
		seen <- r.Header.Get("X-Forwarded-For")
	}))
	defer origin.Close()
	lb := newHop(t, origin.URL, "127.0.0.1", 0)
	cdn := newHop(t, lb.srv.URL, "127.0.0.2", 0)

	get := func(via, from string) (client, xff string) {
		t.Helper()
		c := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext}}
		req, _ := http.NewRequest(http.MethodGet, via+"/git/example.com/a.git/info/refs", nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return <-seen, <-seen
	}
	if client, xff := get(cdn.srv.URL, "127.0.0.3"); client != "127.0.0.2" || xff != "203.0.113.9, 127.0.0.3, 127.0.0.2" {
		t.Errorf("trusting the load balancer alone: client %s (X-Forwarded-For %s), want CloudFront's edge, every viewer behind it as one", client, xff)
	}
	trusted = append(trusted, netip.MustParsePrefix("127.0.0.2/32")) // CloudFront's origin-facing ranges
	if client, _ := get(cdn.srv.URL, "127.0.0.3"); client != "127.0.0.3" {
		t.Errorf("through CloudFront: client %s, want the viewer 127.0.0.3", client)
	}
	// A network the operator admits to the load balancer directly: its own address, its
	// claim ignored.
	if client, _ := get(lb.srv.URL, "127.0.0.4"); client != "127.0.0.4" {
		t.Errorf("direct: client %s, want 127.0.0.4", client)
	}
}

// A clone slower than CloudFront's origin read timeout still works: while pack-objects
// is quiet, upload-pack sends a keep-alive every uploadpack.keepAlive (git's default, 5
// s, which the front leaves as it is), so the proxy never waits that long for a byte.
// Here pack generation takes 12 s through a proxy that cuts a response silent for 8 s;
// with keep-alives off the same clone is cut. The stack's read timeout is 60 s
// (infra: TestClonesThroughCloudFront checks it against git's interval).
func TestCloneThroughSlowProxies(t *testing.T) {
	const idle, generation = 8 * time.Second, 12 * time.Second
	slow := filepath.Join(t.TempDir(), "slow-pack-objects")
	if err := os.WriteFile(slow, fmt.Appendf(nil, "#!/bin/sh\nsleep %d\nexec \"$@\"\n", int(generation.Seconds())), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.Hook = []string{slow} })
	for _, c := range []struct {
		name      string
		keepAlive string // the mirror's uploadpack.keepAlive; "" is git's default
		ok        bool
	}{{"keep-alives", "", true}, {"no keep-alives", "0", false}} {
		rel := "example.com/slow-" + strings.ReplaceAll(c.name, " ", "-") + ".git"
		up := e.repo(rel)
		if c.keepAlive != "" {
			e.git("", "--git-dir="+up.Served(), "config", "uploadpack.keepAlive", c.keepAlive)
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			lb := newHop(t, e.srv.URL, "127.0.0.1", 0)
			cdn := newHop(t, lb.srv.URL, "127.0.0.2", idle)
			start := time.Now()
			out, err := e.gitErr(t.TempDir(), "clone", "--quiet", cdn.srv.URL+Prefix+rel, "clone")
			took := time.Since(start)
			cdn.mu.Lock()
			gap := cdn.maxGap
			cdn.mu.Unlock()
			t.Logf("clone took %v; the longest silence the proxy saw: %v", took.Round(time.Millisecond), gap.Round(time.Millisecond))
			if c.ok && (err != nil || took < generation) {
				t.Errorf("clone through a proxy with an %v read timeout: %v after %v\n%s", idle, err, took, out)
			}
			if !c.ok && err == nil {
				t.Errorf("with keep-alives off the clone went through in %v: the proxy does not cut a silent origin, the test shows nothing", took)
			}
		})
	}
}
