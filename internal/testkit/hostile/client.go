package hostile

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The client attacks, against an HTTP server at a host:port. Each returns what the
// server did; the caller decides what it should have done.

// Slowloris opens n connections that send a request line and then one header byte
// every `every`, never finishing the headers. It returns how many of them the server
// had closed when ctx ended or all were closed.
func Slowloris(ctx context.Context, addr string, n int, every time.Duration) (closed int, err error) {
	return holdConns(ctx, addr, n, func(ctx context.Context, c net.Conn) error {
		if _, err := io.WriteString(c, "GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n"); err != nil {
			return err
		}
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(every):
			}
			if _, err := fmt.Fprintf(c, "X-%d: y\r\n", i); err != nil {
				return err
			}
		}
	})
}

// SilentBody opens n connections that send complete headers of a write to path,
// announcing a 1 MB body, and never send more than its first byte. With a token the
// request is authorized, so the server reads the body (and must give up on it); it
// returns how many the server had closed when ctx ended or all were closed.
func SilentBody(ctx context.Context, addr, path, token string, n int) (closed int, err error) {
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	return holdConns(ctx, addr, n, func(ctx context.Context, c net.Conn) error {
		_, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{", path, auth)
		if err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	})
}

// holdConns dials n connections, runs talk on each (in its own goroutine) and counts
// the connections the server closes: a read that ends with EOF or a reset.
func holdConns(ctx context.Context, addr string, n int, talk func(context.Context, net.Conn) error) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var d net.Dialer
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return 0, fmt.Errorf("dial %s after %d connections: %w", addr, len(conns), err)
		}
		conns = append(conns, c)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		closed int
	)
	for _, c := range conns {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_ = talk(ctx, c)
		}()
		go func() {
			defer wg.Done()
			// Whatever the server answers (a 408, say), then its close.
			_, err := io.Copy(io.Discard, c)
			if ctx.Err() == nil || err == nil {
				mu.Lock()
				closed++
				if closed == n {
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	<-ctx.Done()
	for _, c := range conns {
		c.SetDeadline(time.Now()) // unblock the talkers and readers still going
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return closed, nil
}

// HugeHeader sends one GET to url with a header of size bytes and returns the status
// (0 if the server cut the connection without one).
func HugeHeader(ctx context.Context, url string, size int) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Huge", strings.Repeat("a", size))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// BadJSON are request bodies for POST /v1/repos that a strict decoder must refuse.
var BadJSON = map[string]string{
	"invalid UTF-8":        "{\"url\":\"https://example.com/a\xff\"}",
	"duplicate key":        `{"url":"https://example.com/a","url":"https://example.com/b"}`,
	"wrong case":           `{"URL":"https://example.com/a"}`,
	"duplicate in urls":    `{"urls":["https://example.com/a"],"urls":["https://example.com/b"]}`,
	"deep nesting":         strings.Repeat("[", 100000) + strings.Repeat("]", 100000),
	"NUL in key":           "{\"url\\u0000\":\"https://example.com/a\"}",
	"lone surrogate":       `{"url":"https://example.com/\ud800"}`,
	"huge number":          `{"url":1` + strings.Repeat("0", 100000) + `}`,
	"many unknown fields":  `{` + strings.Repeat(`"x":1,`, 50000) + `"url":"https://example.com/a"}`,
	"trailing second body": `{"url":"https://example.com/a"}{"url":"https://example.com/b"}`,
}

// Post sends body to url with a bearer token and returns the status and the response.
func Post(ctx context.Context, url, token, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), nil
}

// AddFlood posts bulk adds of `per` URLs each, `requests` times, from `clients`
// goroutines at once, every URL distinct, and counts the responses by status.
func AddFlood(ctx context.Context, url, token string, clients, requests, per int) (map[int]int, error) {
	var (
		mu     sync.Mutex
		counts = map[int]int{}
		next   = make(chan int)
		wg     sync.WaitGroup
		first  error
	)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var b bytes.Buffer
				b.WriteString(`{"urls":[`)
				for j := range per {
					if j > 0 {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, `"https://flood.example/org%d/repo%d"`, i, j)
				}
				b.WriteString(`]}`)
				status, _, err := Post(ctx, url, token, b.String())
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				counts[status]++
				mu.Unlock()
			}
		}()
	}
	for i := range requests {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return counts, first
}
