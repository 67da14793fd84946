package urlpolicy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// listen starts a TCP listener on 127.0.0.1 that accepts and closes
// connections, and returns its port.
func listen(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func wantRefused(t *testing.T, err error, reason Reason) {
	t.Helper()
	var pe *Error
	if !errors.Is(err, ErrRefused) || !errors.As(err, &pe) || pe.Reason != reason {
		t.Fatalf("err = %v; want refusal with reason %q", err, reason)
	}
}

func TestDialerLocalhost(t *testing.T) {
	port := listen(t)
	addr := net.JoinHostPort("localhost", port)

	_, err := strict.Dialer(nil)(ctx(t), "tcp", addr)
	wantRefused(t, err, ReasonPrivateHost)

	c, err := private.Dialer(nil)(ctx(t), "tcp", addr)
	if err != nil {
		t.Fatalf("AllowPrivateHosts: dial %s: %v", addr, err)
	}
	c.Close()

	_, err = strict.Dialer(nil)(ctx(t), "tcp", net.JoinHostPort("127.0.0.1", port))
	wantRefused(t, err, ReasonPrivateHost)
	_, err = strict.Dialer(nil)(ctx(t), "udp", net.JoinHostPort("8.8.8.8", "53"))
	wantRefused(t, err, ReasonMalformed)
}

// Control alone judges the resolved address: "localhost" is not checked by
// name here, only the 127.0.0.1 it resolves to at connect time.
func TestControlChecksResolvedAddress(t *testing.T) {
	port := listen(t)
	addr := net.JoinHostPort("localhost", port)

	d := &net.Dialer{Control: strict.Control}
	_, err := d.DialContext(ctx(t), "tcp", addr)
	wantRefused(t, err, ReasonPrivateHost)

	d = &net.Dialer{Control: private.Control}
	c, err := d.DialContext(ctx(t), "tcp", addr)
	if err != nil {
		t.Fatalf("AllowPrivateHosts: %v", err)
	}
	c.Close()
}

// fakeDNS answers every A query with ip, the way a rebinding attacker's
// name server would. It listens on loopback only.
func fakeDNS(t *testing.T, ip netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := dnsAnswer(buf[:n], ip); resp != nil {
				pc.WriteTo(resp, from)
			}
		}
	}()
	server := pc.LocalAddr().String()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", server)
		},
	}
}

func dnsAnswer(q []byte, ip netip.Addr) []byte {
	if len(q) < 12 {
		return nil
	}
	i := 12
	for i < len(q) && q[i] != 0 {
		i += int(q[i]) + 1
	}
	if i+5 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1:])
	resp := append([]byte(nil), q[:i+5]...) // header + question
	resp[2], resp[3] = 0x81, 0x80           // response, RD, RA, NOERROR
	clear(resp[6:12])                       // no answers / authority / additional yet
	if qtype == 1 && ip.Is4() {
		resp[7] = 1
		resp = append(resp, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4) // name ptr, A, IN, TTL 1, len 4
		resp = append(resp, ip.AsSlice()...)
	}
	return resp
}

// A public-looking name that resolves to loopback or a metadata address is
// refused at connect time: this is the DNS-rebinding defence.
func TestDialerRebinding(t *testing.T) {
	port := listen(t)
	const name = "rebind.mirrorfleet-test.example"
	addr := net.JoinHostPort(name, port)

	if err := strict.CheckHost(name); err != nil {
		t.Fatalf("the name itself should pass: %v", err)
	}
	res := fakeDNS(t, netip.MustParseAddr("127.0.0.1"))
	_, err := strict.Dialer(&net.Dialer{Resolver: res})(ctx(t), "tcp", addr)
	wantRefused(t, err, ReasonPrivateHost)
	t.Log(err)

	c, err := private.Dialer(&net.Dialer{Resolver: res})(ctx(t), "tcp", addr)
	if err != nil {
		t.Fatalf("AllowPrivateHosts: %v", err)
	}
	c.Close()

	// Metadata stays refused even with AllowPrivateHosts; Control refuses
	// before connect(2), so nothing is sent to 169.254.169.254.
	res = fakeDNS(t, netip.MustParseAddr("169.254.169.254"))
	_, err = private.Dialer(&net.Dialer{Resolver: res})(ctx(t), "tcp", net.JoinHostPort(name, "80"))
	wantRefused(t, err, ReasonMetadataHost)
	t.Log(err)
}

// The base dialer's own Control still runs after the policy's.
func TestDialerChainsBaseControl(t *testing.T) {
	port := listen(t)
	var called atomic.Int32
	base := &net.Dialer{Control: func(_, _ string, _ syscall.RawConn) error {
		called.Add(1)
		return nil
	}}
	c, err := private.Dialer(base)(ctx(t), "tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if n := called.Load(); n != 1 {
		t.Fatalf("base Control called %d times", n)
	}
	_, err = strict.Dialer(base)(ctx(t), "tcp", net.JoinHostPort("127.0.0.1", port))
	wantRefused(t, err, ReasonPrivateHost)
	if called.Load() != 1 {
		t.Fatalf("base Control ran for a refused address")
	}
}

func TestHTTPClient(t *testing.T) {
	var hops atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int
		switch {
		case r.URL.Path == "/ok":
			io.WriteString(w, "ok")
		case r.URL.Path == "/metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/hop/"):
			hops.Add(1)
			fmt.Sscanf(r.URL.Path, "/hop/%d", &n)
			if n == 0 {
				io.WriteString(w, "done")
				return
			}
			http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
		}
	}))
	defer srv.Close()

	// Default policy: the test server is on loopback, so the dial is refused.
	_, err := strict.HTTPClient(5 * time.Second).Get(srv.URL + "/ok")
	wantRefused(t, err, ReasonPrivateHost)

	c := private.HTTPClient(5 * time.Second)
	if tr := c.Transport.(*http.Transport); tr.Proxy != nil {
		t.Fatal("proxy must be disabled")
	}
	get := func(path string) (string, error) {
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get("/ok"); err != nil || body != "ok" {
		t.Fatalf("GET /ok = %q, %v", body, err)
	}
	if body, err := get(fmt.Sprintf("/hop/%d", MaxRedirects)); err != nil || body != "done" {
		t.Fatalf("%d redirects: %q, %v", MaxRedirects, body, err)
	}
	hops.Store(0)
	_, err = get(fmt.Sprintf("/hop/%d", MaxRedirects+1))
	wantRefused(t, err, ReasonRedirect)
	if n := hops.Load(); n != MaxRedirects+1 {
		t.Fatalf("made %d requests; want %d", n, MaxRedirects+1)
	}
	_, err = get("/metadata")
	wantRefused(t, err, ReasonMetadataHost)
	t.Log(err)
}
