package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/events"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
)

// streamServer serves the API with a hub behind the per-route deadlines the fleet
// puts in front of it, set short.
func streamServer(t *testing.T, hub *events.Hub, opts ...envOpt) *httptest.Server {
	t.Helper()
	e := newEnv(t, append([]envOpt{func(c *Config) {
		c.Events = hub
		c.EventHeartbeat = 50 * time.Millisecond
		c.EventWriteTimeout = 300 * time.Millisecond
	}}, opts...)...)
	srv := httptest.NewUnstartedServer(httpguard.Deadlines(e.h, httpguard.Limits{BodyTimeout: 100 * time.Millisecond, ResponseTimeout: 200 * time.Millisecond}))
	srv.Config.ConnContext = httpguard.ConnContext // as httpguard.Server sets it
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

type sseClient struct {
	msgs   chan events.Message
	cancel context.CancelFunc
}

func dialEvents(t *testing.T, srv *httptest.Server, query string, header http.Header) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/events"+query, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := srv.Client().Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET /v1/events: %v %v", resp, err)
	}
	c := &sseClient{msgs: make(chan events.Message, 1<<14), cancel: cancel}
	go func() {
		defer close(c.msgs)
		defer resp.Body.Close()
		_ = events.ReadStream(resp.Body, 1<<20, func(m events.Message) error { c.msgs <- m; return nil })
	}()
	t.Cleanup(cancel)
	return c
}

func (c *sseClient) next(t *testing.T) events.Message {
	t.Helper()
	select {
	case m, ok := <-c.msgs:
		if !ok {
			t.Fatal("stream ended")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return events.Message{}
}

func refs(n int) []fetch.RefUpdate {
	out := make([]fetch.RefUpdate, n)
	for i := range out {
		out[i] = fetch.RefUpdate{Name: fmt.Sprintf("refs/heads/branch-with-a-long-name-%04d", i), Old: fetch.ZeroHash, New: strings.Repeat("ab", 20)}
	}
	return out
}

// A stream lives past the route's body and response deadlines, and sends each event
// as event/id/data with the data on one line.
func TestEventStreamOutlivesRouteDeadlines(t *testing.T) {
	hub := events.NewHub(events.Config{FirstID: 41})
	srv := streamServer(t, hub)
	c := dialEvents(t, srv, "", nil)
	time.Sleep(500 * time.Millisecond) // past both deadlines
	ev, _ := hub.Publish("0123456789abcdef", "https://example.com/a.git", refs(2))
	m := c.next(t)
	if m.Event != events.Type || m.ID != "41" || strings.Contains(m.Data, "\n") {
		t.Fatalf("message %+v", m)
	}
	var got events.Event
	if err := json.Unmarshal([]byte(m.Data), &got); err != nil || got.RepoID != ev.RepoID || len(got.Refs) != 2 || !got.At.Equal(ev.At) {
		t.Fatalf("data %s: %+v %v", m.Data, got, err)
	}
}

// A client that stops reading is cut (its write times out, or the hub drops it for
// lagging) while another client gets every event, in order, and publishing never
// waits.
func TestSlowEventClientHoldsNothing(t *testing.T) {
	// A buffer for all: the fast client may lag while the burst lasts; the slow one is
	// cut by its write deadline.
	hub := events.NewHub(events.Config{FirstID: 1, SubscriberBuffer: 1024})
	// Long enough for a reading client on a loaded machine; the slow one is cut after it.
	srv := streamServer(t, hub, func(c *Config) { c.EventWriteTimeout = 3 * time.Second })
	slow, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	_ = slow.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(slow, "GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	fast := dialEvents(t, srv, "", nil)
	for hub.Subscribers() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	const n = 400 // ~25 KB each: megabytes the slow client never reads
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			hub.Publish("0123456789abcdef", "https://example.com/a.git", refs(300))
		}
	}()
	for i := range n {
		if m := fast.next(t); m.ID != fmt.Sprint(i+1) {
			t.Fatalf("fast client: message %d is %+v", i, m.ID)
		}
	}
	<-done
	deadline := time.Now().Add(10 * time.Second)
	for hub.Subscribers() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers: the slow client was not cut", hub.Subscribers())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEventStreamRefusals(t *testing.T) {
	hub := events.NewHub(events.Config{FirstID: 1})
	srv := streamServer(t, hub, func(c *Config) { c.EventStreams = 1 })
	get := func(h http.Header, query string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/events"+query, nil)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := get(http.Header{"Last-Event-Id": {"x1"}}, ""); r.StatusCode != http.StatusBadRequest {
		t.Errorf("bad Last-Event-ID: %s", r.Status)
	}
	if r := get(nil, "?last_event_id=-3"); r.StatusCode != http.StatusBadRequest {
		t.Errorf("bad last_event_id: %s", r.Status)
	}
	if r := get(nil, "?since=3"); r.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown parameter: %s", r.Status)
	}
	dialEvents(t, srv, "", nil)
	if r := get(nil, ""); r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Errorf("a stream past the limit: %s, Retry-After %q", r.Status, r.Header.Get("Retry-After"))
	}

	// Reads protected: the stream needs the token like any read.
	locked := streamServer(t, hub, func(c *Config) { c.ReadsNeedAuth = true })
	resp, err := http.Get(locked.URL + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %s", resp.Status)
	}
	dialEvents(t, locked, "", http.Header{"Authorization": {"Bearer " + testToken}})

	// No hub (AWS): 404 that says where the events are.
	e := newEnv(t)
	r := e.do("GET", "/v1/events", nil)
	if r.status != http.StatusNotFound || !strings.Contains(string(r.raw), "no_event_stream") {
		t.Errorf("no hub: %d %s", r.status, r.raw)
	}
}

// A resume from the backlog: the events after the id, or a missed notice first when
// some are gone.
func TestEventStreamResume(t *testing.T) {
	hub := events.NewHub(events.Config{FirstID: 1, Backlog: 3})
	srv := streamServer(t, hub)
	for range 5 {
		hub.Publish("0123456789abcdef", "https://example.com/a.git", refs(1))
	}
	c := dialEvents(t, srv, "", http.Header{"Last-Event-Id": {"3"}})
	if a, b := c.next(t), c.next(t); a.ID != "4" || b.ID != "5" {
		t.Fatalf("resume after 3: %s, %s", a.ID, b.ID)
	}
	c = dialEvents(t, srv, "", nil)
	c2 := dialEvents(t, srv, "?last_event_id=1", nil)
	if m := c2.next(t); m.Event != "missed" || m.ID != "" || m.Data != `{"first_event_id":3,"last_event_id":1}` {
		t.Fatalf("resume after 1: %+v", m)
	}
	if m := c2.next(t); m.ID != "3" {
		t.Fatalf("after the notice: %+v", m)
	}
	hub.Publish("0123456789abcdef", "https://example.com/a.git", refs(1))
	if m := c.next(t); m.ID != "6" {
		t.Fatalf("live: %+v", m)
	}
}

// neverReads opens a stream from the loopback address from (127.0.0.x) with the
// kernel's default buffers, and never reads it.
func neverReads(t *testing.T, srv *httptest.Server, from, query string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /v1/events%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", query)
	return c
}

// TestNonReaderIsDropped: a subscriber that never reads, with the kernel's default
// socket buffers, is cut within its write deadline once a couple of megabytes of events
// are behind it, not minutes later when the kernel's buffers are full; a reader beside
// it gets every event.
func TestNonReaderIsDropped(t *testing.T) {
	hub := events.NewHub(events.Config{FirstID: 1, SubscriberBuffer: 1024})
	srv := streamServer(t, hub, func(c *Config) { c.EventWriteTimeout = time.Second })
	neverReads(t, srv, "127.0.0.2", "")
	fast := dialEvents(t, srv, "", nil)
	for hub.Subscribers() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	const n = 80 // ~25 KB each: 2 MB, which the kernel's buffers would take whole
	for i := range n {
		hub.Publish("0123456789abcdef", "https://example.com/a.git", refs(300))
		if m := fast.next(t); m.ID != fmt.Sprint(i+1) {
			t.Fatalf("the reader: message %d is %+v", i, m.ID)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for hub.Subscribers() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers: the one that never reads holds its stream", hub.Subscribers())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEventStreamsPerClient: 64 streams from one address that never read take that
// address's share only: the others are refused with 429, and a stream from another
// address opens.
func TestEventStreamsPerClient(t *testing.T) {
	hub := events.NewHub(events.Config{FirstID: 1})
	srv := streamServer(t, hub)
	var held []net.Conn
	for range 64 {
		held = append(held, neverReads(t, srv, "127.0.0.2", ""))
	}
	refused := 0
	for _, c := range held {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 32)
		n, _ := io.ReadAtLeast(c, buf, 12)
		if strings.HasPrefix(string(buf[:n]), "HTTP/1.1 429") {
			refused++
		}
	}
	if refused != 64-DefaultEventStreamsPerClient {
		t.Fatalf("%d of 64 streams from one address refused, want %d", refused, 64-DefaultEventStreamsPerClient)
	}
	c := dialEvents(t, srv, "", nil)
	hub.Publish("0123456789abcdef", "https://example.com/a.git", refs(1))
	if m := c.next(t); m.ID != "1" {
		t.Fatalf("another address's stream: %+v", m)
	}
}

// TestEventStreamToken: with EventsToken the stream needs it, as a bearer token or as
// ?access_token= (EventSource's way); the API token in the header works too; the other
// reads are unchanged.
func TestEventStreamToken(t *testing.T) {
	hub := events.NewHub(events.Config{FirstID: 1})
	srv := streamServer(t, hub, func(c *Config) { c.EventsToken = "stream-only" })
	status := func(query string, h http.Header) int {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/events"+query, nil)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 401 && resp.Header.Get("WWW-Authenticate") == "" {
			t.Error("401 without WWW-Authenticate")
		}
		return resp.StatusCode
	}
	for _, c := range []struct {
		query string
		h     http.Header
		want  int
	}{
		{"", nil, 401},
		{"?access_token=wrong", nil, 401},
		{"", http.Header{"Authorization": {"Bearer wrong"}}, 401},
		{"?access_token=stream-only", nil, 200},
		{"?access_token=stream-only&last_event_id=0", nil, 200},
		{"", http.Header{"Authorization": {"Bearer stream-only"}}, 200},
		{"", http.Header{"Authorization": {"Bearer " + testToken}}, 200},
	} {
		if got := status(c.query, c.h); got != c.want {
			t.Errorf("%q %v: %d, want %d", c.query, c.h, got, c.want)
		}
	}
	resp, err := http.Get(srv.URL + "/tunasync.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/tunasync.json with an events token: %s", resp.Status)
	}
}

// TestCORS: with CORSOrigins a page of an allowed origin may read /v1/events and
// /tunasync.json (Access-Control-Allow-Origin, a preflight answered); another origin's
// page gets no such header, so its browser keeps the answer from it; the other routes
// never carry it; without CORSOrigins nothing does.
func TestCORS(t *testing.T) {
	hub := events.NewHub(events.Config{FirstID: 1})
	allowed := "https://status.example.org"
	srv := streamServer(t, hub, func(c *Config) { c.CORSOrigins = []string{allowed} })
	plain := streamServer(t, hub)
	get := func(srv *httptest.Server, method, path, origin string) http.Header {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, nil)
		req.Header.Set("Origin", origin)
		if method == http.MethodOptions {
			req.Header.Set("Access-Control-Request-Method", "GET")
			req.Header.Set("Access-Control-Request-Headers", "last-event-id")
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %s", method, path, resp.Status)
		}
		return resp.Header
	}
	for _, path := range []string{"/v1/events", "/tunasync.json"} {
		if h := get(srv, "GET", path, allowed); h.Get("Access-Control-Allow-Origin") != allowed || !strings.Contains(h.Get("Vary"), "Origin") {
			t.Errorf("%s from %s: %v", path, allowed, h)
		}
		if h := get(srv, "GET", path, "https://evil.example"); h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s from another origin: %v", path, h)
		}
		if h := get(srv, "OPTIONS", path, allowed); h.Get("Access-Control-Allow-Origin") != allowed || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "Last-Event-ID") {
			t.Errorf("preflight of %s: %v", path, h)
		}
		if h := get(plain, "GET", path, allowed); h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s without --cors-origin: %v", path, h)
		}
	}
	if h := get(srv, "GET", "/v1/status", allowed); h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("/v1/status carries CORS: %v", h)
	}
}
