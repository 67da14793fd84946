package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/events"
)

// EventStream is what GET /v1/events reads: events.Hub is one.
type EventStream interface {
	Subscribe(lastID uint64, resume bool) (*events.Subscription, events.Resume)
}

// Event stream defaults (Config.EventStreams, EventHeartbeat, EventWriteTimeout).
const (
	DefaultEventStreams      = 64
	DefaultEventHeartbeat    = 15 * time.Second
	DefaultEventWriteTimeout = 10 * time.Second
)

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
	lastID, resume, err := lastEventID(r)
	if err != nil {
		return err
	}
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		w.Header().Set("Retry-After", "30")
		return &Error{Status: http.StatusServiceUnavailable, Code: "too_many_streams",
			Message: fmt.Sprintf("%d event streams are open already; retry later", cap(s.streams))}
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
