package fleet_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/events"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
)

// stream is an open GET /v1/events, read by a goroutine into a channel.
type stream struct {
	resp *http.Response
	msgs chan events.Message
}

func openStream(t *testing.T, f *running, lastID string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+f.Addr()+"/v1/events", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("GET /v1/events: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	s := &stream{resp: resp, msgs: make(chan events.Message, 100)}
	go func() {
		defer close(s.msgs)
		_ = events.ReadStream(resp.Body, 1<<20, func(m events.Message) error { s.msgs <- m; return nil })
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return s
}

// next returns the next message, failing after within.
func (s *stream) next(t *testing.T, within time.Duration) events.Message {
	t.Helper()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			t.Fatal("event stream ended")
		}
		return m
	case <-time.After(within):
		t.Fatalf("no event within %v", within)
	}
	return events.Message{}
}

// nextUpdate returns the next mirror.updated event of repo id, skipping others.
func (s *stream) nextUpdate(t *testing.T, id string, within time.Duration) (uint64, events.Event) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		m := s.next(t, time.Until(deadline))
		if m.Event != events.Type {
			t.Fatalf("event %q (data %s), want %s", m.Event, m.Data, events.Type)
		}
		var ev events.Event
		if err := json.Unmarshal([]byte(m.Data), &ev); err != nil {
			t.Fatalf("data %q: %v", m.Data, err)
		}
		n, err := strconv.ParseUint(m.ID, 10, 64)
		if err != nil {
			t.Fatalf("id %q: %v", m.ID, err)
		}
		if ev.RepoID == id {
			return n, ev
		}
	}
}

func syncRepo(t *testing.T, f *running, id string) {
	t.Helper()
	accepted(t, f, http.MethodPost, "/v1/repos/"+id+"/sync")
}

// A push upstream, then a sync: the stream carries the ref's old and new ids; a
// branch deletion and a tag push too; a client that reconnects with Last-Event-ID gets
// what it missed; a client that stops reading holds up neither fetches nor the others.
func TestEventsStream(t *testing.T) {
	logs := dumpOnFailure(t)
	srv := gittest.NewServer(t)
	hooks := make(chan events.Event, 10)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get(events.HeaderSignature) != events.Sign("hook-secret", body) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev events.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		ev.ID, _ = strconv.ParseUint(r.Header.Get(events.HeaderEventID), 10, 64)
		hooks <- ev
	}))
	defer rcv.Close()
	f := startWith(t, logs, func(c *fleet.Config) {
		c.Data, c.Warmup = t.TempDir(), coordinator.NoWarmup
		c.MinInterval = time.Hour // only the syncs below fetch
		c.Events = fleet.EventsConfig{Heartbeat: 100 * time.Millisecond, NotifyURLs: []string{rcv.URL + "/in"}, NotifySecret: "hook-secret"}
	})
	waitRing(t, f, 3)
	up := srv.NewRepo(t, "ev/one")
	up.Commit(t, "init", map[string][]byte{"a": []byte("1\n")})
	up.Branch(t, "dev", "")
	ups := addUpstreams(t, f, []*gittest.Repo{up})
	id := onlyID(ups)

	// A slow client: subscribes, then never reads. Its socket buffers fill up and the
	// server cuts it; nothing else waits for it.
	slow := slowClient(t, f)
	defer slow.Close()

	s := openStream(t, f, "")
	// The first clone is an event: every ref created.
	_, ev := s.nextUpdate(t, id, 20*time.Second)
	if len(ev.Refs) != 2 || ev.Refs[0].Old != fetch.ZeroHash || ev.URL != up.URL() {
		t.Fatalf("clone event %+v", ev)
	}
	waitMirrored(t, f, ups, 10*time.Second)

	old := up.Head(t)
	up.Commit(t, "second", map[string][]byte{"a": []byte("2\n")})
	syncRepo(t, f, id)
	first, ev := s.nextUpdate(t, id, 20*time.Second)
	if want := fmt.Sprint([]events.Ref{{Name: "refs/heads/main", Old: old, New: up.Head(t)}}); fmt.Sprint(ev.Refs) != want {
		t.Fatalf("push event refs %v, want %s", ev.Refs, want)
	}
	if ev.At.IsZero() || ev.Truncated {
		t.Fatalf("push event %+v", ev)
	}

	dev := up.Out(t, "rev-parse", "refs/heads/dev")
	up.DeleteBranch(t, "dev")
	up.Tag(t, "v2", "")
	syncRepo(t, f, id)
	second, ev := s.nextUpdate(t, id, 20*time.Second)
	want := fmt.Sprint([]events.Ref{{Name: "refs/heads/dev", Old: dev, New: fetch.ZeroHash}, {Name: "refs/tags/v2", Old: fetch.ZeroHash, New: up.Head(t)}})
	if fmt.Sprint(ev.Refs) != want || second <= first {
		t.Fatalf("delete+tag event %d (after %d) refs %v, want %s", second, first, ev.Refs, want)
	}

	// Resume: a client that saw the push gets the deletion and the tag again.
	r := openStream(t, f, strconv.FormatUint(first, 10))
	if n, ev := r.nextUpdate(t, id, 5*time.Second); n != second || fmt.Sprint(ev.Refs) != want {
		t.Fatalf("resumed at %d: %+v, want id %d", n, ev, second)
	}
	// A resume from an id this fleet never handed out is told it missed events.
	m := openStream(t, f, "1")
	if msg := m.next(t, 5*time.Second); msg.Event != "missed" || msg.ID != "" {
		t.Fatalf("resume from 1: %+v, want a missed notice without id", msg)
	}

	// The webhook receiver got the same events, signed, under the same ids.
	got := map[uint64]events.Event{}
	for len(got) < 3 {
		select {
		case ev := <-hooks:
			got[ev.ID] = ev
		case <-time.After(20 * time.Second):
			t.Fatalf("webhooks received %v", got)
		}
	}
	if fmt.Sprint(got[second].Refs) != want || got[first].RepoID != id {
		t.Fatalf("webhooks received %v", got)
	}

	// The slow client held up nothing: the fetches and the other streams went on.
	if n := f.Events.Counts().Published; n < 3 {
		t.Fatalf("%d events published", n)
	}

	// Open streams do not hold up a shutdown: they end with it.
	if err := f.stop(); err != nil {
		t.Fatalf("Stop with streams open: %v", err)
	}
	for range s.msgs {
	}
}

// slowClient opens a stream and never reads it.
func slowClient(t *testing.T, f *running) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(c, "GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 200 OK\r\n" {
		t.Fatalf("slow client: %q %v", line, err)
	}
	_ = io.Discard
	return c
}
