package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/events"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
)

// EventStream is what GET /v1/events reads: events.Hub is one.
type EventStream interface {
	Subscribe(lastID uint64, resume bool) (*events.Subscription, events.Resume)
}

// Event stream defaults (Config.EventStreams, EventStreamsPerClient, EventHeartbeat,
// EventWriteTimeout).
const (
	DefaultEventStreams          = 64
	DefaultEventStreamsPerClient = 4
	DefaultEventHeartbeat        = 15 * time.Second
	DefaultEventWriteTimeout     = 10 * time.Second
)

// StreamSendBuffer is the kernel's send buffer of a stream's connection. Left to the
// kernel it grows to megabytes, which a client that never reads fills for minutes
// while the writes go through; this small (the kernel doubles it: two segments of
// loopback's, so a reader behind a local proxy is not slowed), the writes block within
// a few hundred kilobytes and the write deadline cuts the stream.
const StreamSendBuffer = 64 << 10

// streamEvents is GET /v1/events: Server-Sent Events, one mirror.updated event per
// sync that moved refs.
//
// The stream outlives the per-route deadlines (httpguard.Deadlines): it clears the read
// deadline (the request has no body) and gives each write its own deadline, so a live
// stream lasts as long as the client reads it and a client that stops reading is cut
// after EventWriteTimeout. A subscriber more than a buffer behind is dropped by the hub;
// nothing else waits on a stream.
func (s *server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Events == nil {
		return &Error{Status: http.StatusNotFound, Code: "no_event_stream",
			Message: "this deployment serves no event stream (on AWS the events go to EventBridge; see docs/events.md)"}
	}
	if err := s.streamAuth(r); err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mirrorfleet events"`)
		return err
	}
	lastID, resume, err := lastEventID(r)
	if err != nil {
		return err
	}
	release, why := s.streams.Acquire(r.Context(), httpguard.ClientAddr(r, s.cfg.TrustedProxies), "", 0)
	if err := refused(w, why, 30,
		&Error{Code: "too_many_streams", Message: fmt.Sprintf("%d event streams from your address are open already; close one or retry later", s.cfg.EventStreamsPerClient)},
		&Error{Code: "too_many_streams", Message: fmt.Sprintf("%d event streams are open already; retry later", s.cfg.EventStreams)}); err != nil {
		return err
	}
	defer release()
	if tc, ok := httpguard.Conn(r.Context()).(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(StreamSendBuffer)
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // no body to wait for; the server notices a closed connection
	sub, res := s.cfg.Events.Subscribe(lastID, resume)
	defer sub.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: pass events on as they come
	w.WriteHeader(http.StatusOK)

	var b strings.Builder
	b.WriteString(": mirrorfleet events\n\n")
	if res.Missed {
		// No id: the client's Last-Event-ID stays where it was until a real event.
		m := map[string]any{"last_event_id": lastID}
		if len(res.Events) > 0 {
			m["first_event_id"] = res.Events[0].ID
		}
		data, _ := json.Marshal(m)
		fmt.Fprintf(&b, "event: missed\ndata: %s\n\n", data)
	}
	for _, ev := range res.Events {
		writeEvent(&b, ev)
	}
	send := func() bool {
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.EventWriteTimeout))
		_, err := io.WriteString(w, b.String())
		b.Reset()
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			s.log.Debug("event stream closed", "err", err)
			return false
		}
		return true
	}
	if !send() {
		return nil
	}
	beat := time.NewTicker(s.cfg.EventHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case ev, ok := <-sub.C():
			if !ok {
				if sub.Lagged() {
					// Too slow: say so (if the write still goes through) and end; the
					// client resumes with its Last-Event-ID.
					b.WriteString("event: lagged\ndata: {}\n\n")
					send()
				}
				return nil
			}
			writeEvent(&b, ev)
			// Send what else is queued in one write.
			for more := true; more; {
				select {
				case ev, ok := <-sub.C():
					if !ok {
						more = false
						break
					}
					writeEvent(&b, ev)
				default:
					more = false
				}
			}
		case <-beat.C:
			b.WriteString(": keep-alive\n\n")
		}
		if !send() {
			return nil
		}
	}
}

// refused turns a limiter's refusal into an error with Retry-After: its client's share
// full is 429 (byClient), the whole pool 503 (byServer); nil when admitted.
func refused(w http.ResponseWriter, why httpguard.Refusal, retryAfter int, byClient, byServer *Error) error {
	var e *Error
	switch why {
	case httpguard.Admitted:
		return nil
	case httpguard.ClientBusy:
		e = byClient
		e.Status = http.StatusTooManyRequests
	default:
		e = byServer
		e.Status = http.StatusServiceUnavailable
	}
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	return e
}

// streamAuth checks the stream's token when Config.EventsToken is set: the events token
// as a bearer token or ?access_token=, or the API token as a bearer token. Without it,
// the stream has the /v1 reads' access (checked by wrap).
func (s *server) streamAuth(r *http.Request) error {
	if s.cfg.EventsToken == "" {
		return nil
	}
	want := sha256.Sum256([]byte(s.cfg.EventsToken))
	match := func(got string) bool {
		sum := sha256.Sum256([]byte(got))
		return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
	}
	if q, err := parseQuery(r); err == nil && q.Get("access_token") != "" {
		if match(q.Get("access_token")) {
			return nil
		}
		return &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Field: "access_token", Message: "invalid access_token"}
	}
	if scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") && match(strings.TrimSpace(got)) {
		return nil
	}
	if r.Header.Get("Authorization") != "" && s.auth(r) == nil {
		return nil // the API token
	}
	return &Error{Status: http.StatusUnauthorized, Code: "unauthorized",
		Message: "the event stream needs its token: Authorization: Bearer <token>, or ?access_token=<token> from a browser's EventSource"}
}

func writeEvent(b *strings.Builder, ev events.Event) {
	data, _ := json.Marshal(ev) // plain strings and a time: cannot fail
	fmt.Fprintf(b, "event: %s\nid: %d\ndata: %s\n\n", events.Type, ev.ID, data)
}

// lastEventID reads the id to resume after: the Last-Event-ID header (what
// EventSource sends on reconnecting), else ?last_event_id=.
func lastEventID(r *http.Request) (uint64, bool, error) {
	v, field := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if v == "" {
		v, field = r.URL.Query().Get("last_event_id"), "last_event_id"
	}
	if v == "" {
		return 0, false, nil
	}
	id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, false, &Error{Status: http.StatusBadRequest, Code: "invalid_parameter", Field: field,
			Message: fmt.Sprintf("%s %q: want an event id (a decimal number)", field, truncate(v, 40))}
	}
	return id, true, nil
}
