package httpguard_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/hostile"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
)

func TestLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST:8080": true, "a.localhost": true, "localhost.": true,
		"127.0.0.1": true, "127.9.9.9:1": true, "[::1]:8080": true, "::1": true, "[::ffff:127.0.0.1]": true,
		"evil.example": false, "localhost.evil.example": false, "10.0.0.1": false, "": false, "0.0.0.0": false,
		"[::]": false, "127.0.0.1.evil.example": false,
	} {
		if got := httpguard.Loopback(host); got != want {
			t.Errorf("Loopback(%q) = %v", host, got)
		}
	}
}

// serve runs h behind the guards on 127.0.0.1 and returns its address.
func serve(t *testing.T, h http.Handler, l httpguard.Limits, allow ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpguard.Server(httpguard.Hosts(httpguard.Deadlines(h, l), allow), l)
	go srv.Serve(httpguard.Listener(ln, l.MaxConns))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func get(t *testing.T, addr, host string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestHostsRefusesOtherNames(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	addr := serve(t, ok, httpguard.Limits{}, "mirrors.example.org")
	_, port, _ := net.SplitHostPort(addr)
	for host, want := range map[string]int{
		addr: 200, "localhost:" + port: 200, "[::1]:" + port: 200, "mirrors.example.org": 200, "MIRRORS.example.org:" + port: 200,
		"attacker.example": 403, "attacker.example:" + port: 403, "127.0.0.1.attacker.example": 403,
	} {
		if got := get(t, addr, host); got != want {
			t.Errorf("Host %q: %d, want %d", host, got, want)
		}
	}
}

// TestDeadlinesCutSilentBodies: connections announcing a body they never send are
// answered 408 and closed within the body deadline; slowloris headers are cut at the
// header timeout; huge headers get 431; the server answers normally throughout.
func TestDeadlinesCutSilentBodies(t *testing.T) {
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			http.Error(w, "too slow", http.StatusRequestTimeout)
			return
		}
		io.WriteString(w, "ok")
	})
	l := httpguard.Limits{ReadHeaderTimeout: time.Second, BodyTimeout: time.Second, MaxConns: 2000}
	addr := serve(t, read, l)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// One of them, by hand: the 408 is what the client gets.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("silent body: %v %v", resp, err)
	}
	c.Close()

	const n = 300
	closed, err := hostile.SilentBody(ctx, addr, "/", "", n)
	if err != nil || closed != n {
		t.Fatalf("silent bodies: %d of %d closed by the server (%v)", closed, n, err)
	}
	closed, err = hostile.Slowloris(ctx, addr, n, 100*time.Millisecond)
	if err != nil || closed != n {
		t.Fatalf("slowloris: %d of %d closed by the server (%v)", closed, n, err)
	}
	status, err := hostile.HugeHeader(ctx, "http://"+addr+"/", 1<<20)
	if err != nil || status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("1 MiB header: status %d (%v), want 431", status, err)
	}
	if got := get(t, addr, addr); got != 200 {
		t.Fatalf("after the attacks: %d", got)
	}
}

// TestListenerCapsConnections: past MaxConns, a connection waits to be accepted until
// another closes.
func TestListenerCapsConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := httpguard.Listener(ln, 2)
	defer l.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted while two were open")
	case <-time.After(200 * time.Millisecond):
	}
	first.Close()
	third := <-accepted
	second.Close()
	third.Close()
}
