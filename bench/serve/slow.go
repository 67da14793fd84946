package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/repogen"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// slowRate is the slow client's reading, in bytes a second (issue 23).
const slowRate = 8 << 10

// slow measures a clone (`git clone --mirror`) and a fetch (a v2 fetch of HEAD with a
// have half the history back, as a client that far behind sends it) alone, and
// again while one client makes the identical request through a proxy that reads at
// 8 KiB/s: the slow one starts first, so it is the one whose request generates the
// entry the other waits for. Each run has a fresh front and an empty cache.
func (b *bench) slow(ctx context.Context, runs int) (*results.ServeSlow, error) {
	s := &results.ServeSlow{RateBytesPerSecond: slowRate, Runs: runs}
	commits, err := repogen.GitOutput(ctx, "", "--git-dir="+b.gitDir, "rev-list", "--count", "HEAD")
	if err != nil {
		return nil, err
	}
	n, _ := strconv.Atoi(commits)
	head, err := repogen.GitOutput(ctx, "", "--git-dir="+b.gitDir, "rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	have, err := repogen.GitOutput(ctx, "", "--git-dir="+b.gitDir, "rev-parse", fmt.Sprintf("HEAD~%d", n/2))
	if err != nil {
		return nil, err
	}
	fetchBody := fetchRequest(head, have)

	clone := func(ctx context.Context, url string) (int64, error) {
		d, done, err := b.scratch()
		if err != nil {
			return 0, err
		}
		defer done()
		dst := filepath.Join(d, "c.git")
		if err := b.git(ctx, "", "clone", "--mirror", "--quiet", url, dst); err != nil {
			return 0, err
		}
		size, _, _ := repogen.PackBytes(dst)
		return size, nil
	}
	fetch := func(ctx context.Context, url string) (int64, error) {
		return postFetch(ctx, url, fetchBody, nil)
	}
	s.Clone.What = "git clone --mirror (pack bytes received)"
	if err := b.slowOp(ctx, runs, &s.Clone, clone); err != nil {
		return nil, fmt.Errorf("clone: %w", err)
	}
	s.Fetch.What = fmt.Sprintf("v2 fetch of HEAD with a have %d commits back (response bytes)", n/2)
	if err := b.slowOp(ctx, runs, &s.Fetch, fetch); err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	return s, nil
}

// slowOp measures op alone and beside a slow client doing the same, runs times each.
func (b *bench) slowOp(ctx context.Context, runs int, out *results.ServeSlowOp, op func(context.Context, string) (int64, error)) error {
	for range runs {
		// Alone.
		srv, err := b.start(ctx, true)
		if err != nil {
			return err
		}
		start := time.Now()
		size, err := op(ctx, srv.url)
		out.AloneAll = append(out.AloneAll, time.Since(start).Seconds())
		out.ResponseBytes = size
		srv.stop()
		if err != nil {
			return err
		}
		// Beside a slow client.
		if srv, err = b.start(ctx, true); err != nil {
			return err
		}
		p, err := newThrottle(srv.url, slowRate)
		if err != nil {
			srv.stop()
			return err
		}
		sctx, cancel := context.WithCancel(ctx)
		slowDone := make(chan struct{})
		go func() {
			defer close(slowDone)
			op(sctx, p.url) // cut when the measurement is over
		}()
		time.Sleep(time.Second) // the slow request is the first, under way
		start = time.Now()
		_, err = op(ctx, srv.url)
		out.WithSlowAll = append(out.WithSlowAll, time.Since(start).Seconds())
		out.SlowBytes = p.sent.Load()
		cancel()
		p.close()
		<-slowDone
		srv.stop()
		if err != nil {
			return err
		}
		b.log.Info("slow client", "op", out.What, "alone_s", round(out.AloneAll[len(out.AloneAll)-1]),
			"with_slow_s", round(out.WithSlowAll[len(out.WithSlowAll)-1]), "slow_bytes", out.SlowBytes)
	}
	out.AloneSeconds, out.WithSlowSeconds = results.Median(out.AloneAll), results.Median(out.WithSlowAll)
	out.Ratio = results.Ratio(out.WithSlowSeconds, out.AloneSeconds)
	return nil
}

// fetchRequest is a protocol v2 fetch of want with one have, as git sends it.
func fetchRequest(want, have string) []byte {
	var b bytes.Buffer
	for _, l := range []string{"command=fetch\n", "agent=git/2.39.5\n", "object-format=sha1\n", "|",
		"thin-pack\n", "ofs-delta\n", "want " + want + "\n", "have " + have + "\n", "done\n", ""} {
		switch l {
		case "":
			b.WriteString("0000")
		case "|":
			b.WriteString("0001")
		default:
			fmt.Fprintf(&b, "%04x%s", len(l)+4, l)
		}
	}
	return b.Bytes()
}

// postFetch posts a v2 upload-pack request to the mirror at url and reads the whole
// answer; it returns the bytes read.
func postFetch(ctx context.Context, url string, body []byte, hdr map[string]string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/git-upload-pack", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	req.Header.Set("Git-Protocol", "version=2")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return n, err
}

// throttle is a TCP proxy to a front that passes the front's answers on at rate bytes
// a second, reading them from a small socket buffer: to the front, a client reading
// at that rate.
type throttle struct {
	ln   net.Listener
	url  string
	sent atomic.Int64
	mu   sync.Mutex
	open []net.Conn
}

func newThrottle(target string, rate int) (*throttle, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(target)
	if err != nil {
		ln.Close()
		return nil, err
	}
	host := u.Host
	t := &throttle{ln: ln, url: "http://" + ln.Addr().String() + u.Path}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", host)
			if err != nil {
				c.Close()
				continue
			}
			up.(*net.TCPConn).SetReadBuffer(16 << 10)
			t.mu.Lock()
			t.open = append(t.open, c, up)
			t.mu.Unlock()
			go io.Copy(up, c)
			go func() {
				defer c.Close()
				buf := make([]byte, 1<<10)
				tick := time.Second * time.Duration(len(buf)) / time.Duration(rate)
				next := time.Now()
				for {
					n, err := up.Read(buf)
					if n > 0 {
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
						t.sent.Add(int64(n))
						next = next.Add(tick * time.Duration(n) / time.Duration(len(buf)))
						time.Sleep(time.Until(next))
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return t, nil
}

func (t *throttle) close() {
	t.ln.Close()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.open {
		c.Close()
	}
}
