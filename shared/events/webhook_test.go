package events

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// receiver is a webhook receiver that checks the signature and fails the first
// failFirst tries of each event with a 500.
type receiver struct {
	t         *testing.T
	secret    string
	failFirst int
	mu        sync.Mutex
	tries     map[string]int
	got       []Event
	gate      chan struct{} // when set, each request waits for a token
	delivered chan struct{}
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rv.gate != nil {
		<-rv.gate
	}
	body, _ := io.ReadAll(r.Body)
	if r.Header.Get(HeaderSignature) != Sign(rv.secret, body) || r.Header.Get(HeaderEvent) != Type || r.Header.Get("Content-Type") != "application/json" {
		rv.t.Errorf("bad request: headers %v", r.Header)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		rv.t.Errorf("body %s: %v", body, err)
	}
	id := r.Header.Get(HeaderEventID)
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if rv.tries == nil {
		rv.tries = map[string]int{}
	}
	rv.tries[id]++
	if rv.tries[id] <= rv.failFirst {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	ev.ID, _ = strconv.ParseUint(id, 10, 64)
	rv.got = append(rv.got, ev)
	w.WriteHeader(http.StatusNoContent)
	rv.delivered <- struct{}{}
}

func startWebhooks(t *testing.T, cfg WebhookConfig) *Webhooks {
	t.Helper()
	cfg.Policy = urlpolicy.Policy{}
	w, err := NewWebhooks(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func TestWebhooksSignAndRetry(t *testing.T) {
	rv := &receiver{t: t, secret: "s3", failFirst: 2, delivered: make(chan struct{}, 10)}
	srv := httptest.NewServer(rv)
	defer srv.Close()
	var c metrics.Tally
	hub := NewHub(Config{FirstID: 7})
	w := startWebhooks(t, WebhookConfig{URLs: []string{srv.URL + "/hook"}, Secret: "s3", Backoff: time.Millisecond, Metrics: &c})
	hub.cfg.Sinks = []Sink{w}
	hub.Publish("0123456789abcdef", "https://example.com/a.git", moved(2))
	hub.Publish("0123456789abcdef", "https://example.com/a.git", moved(1))
	for range 2 {
		select {
		case <-rv.delivered:
		case <-time.After(10 * time.Second):
			t.Fatal("not delivered")
		}
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if len(rv.got) != 2 || rv.got[0].ID != 7 || rv.got[1].ID != 8 || len(rv.got[0].Refs) != 2 || rv.tries["7"] != 3 {
		t.Fatalf("received %+v after tries %v", rv.got, rv.tries)
	}
	waitFor(t, func() bool { return c.Total("EventsDelivered/webhook") == 2 })
	if c.Total("EventsRetried/webhook") != 4 || c.Total("EventsDropped/webhook") != 0 {
		t.Fatalf("retried %v, dropped %v", c.Total("EventsRetried/webhook"), c.Total("EventsDropped/webhook"))
	}
}

func TestWebhookQueueOverflowIsCounted(t *testing.T) {
	rv := &receiver{t: t, secret: "s", gate: make(chan struct{}), delivered: make(chan struct{}, 100)}
	srv := httptest.NewServer(rv)
	defer srv.Close()
	defer close(rv.gate)
	var c metrics.Tally
	w := startWebhooks(t, WebhookConfig{URLs: []string{srv.URL}, Secret: "s", Queue: 3, Metrics: &c})
	hub := NewHub(Config{FirstID: 1, Sinks: []Sink{w}})
	// The receiver holds the first POST: one event in flight, three queued, the rest
	// dropped at once — and Publish returned every time.
	hub.Publish("r", "u", moved(1))
	deadline := time.Now().Add(10 * time.Second)
	for len(w.targets[0].q) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first event was not taken")
		}
		time.Sleep(time.Millisecond)
	}
	for range 9 {
		hub.Publish("r", "u", moved(1))
	}
	if got := c.Total("EventsDropped/webhook"); got != 6 {
		t.Fatalf("%v dropped, want 6", got)
	}
	for range 4 {
		rv.gate <- struct{}{}
		<-rv.delivered
	}
	waitFor(t, func() bool { return c.Total("EventsDelivered/webhook") == 4 })
	if got := c.Total("EventsDropped/webhook"); got != 6 {
		t.Fatalf("%v dropped, want 6", got)
	}
}

func TestWebhookGivesUpOnARefusal(t *testing.T) {
	var tries int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tries++
		mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
	}))
	defer srv.Close()
	var c metrics.Tally
	w := startWebhooks(t, WebhookConfig{URLs: []string{srv.URL}, Backoff: time.Millisecond, Metrics: &c})
	w.Offer(Event{ID: 1})
	waitFor(t, func() bool { return c.Total("EventsDropped/webhook") == 1 })
	mu.Lock()
	defer mu.Unlock()
	if tries != 1 || c.Total("EventsRetried/webhook") != 0 {
		t.Fatalf("%d tries, %v retries", tries, c.Total("EventsRetried/webhook"))
	}
}

func TestCheckNotifyURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://hooks.example.com/mirror": true,
		"http://10.0.0.5:9000/in?t=x":      true, // the operator's network
		"http://127.0.0.1:8081/":           true,
		"ftp://example.com/":               false,
		"https://user:pw@example.com/":     false,
		"http://169.254.169.254/latest":    false, // cloud metadata, never
		"https:///path":                    false,
		"example.com/hook":                 false,
	} {
		if err := CheckNotifyURL(urlpolicy.Policy{}, raw); (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", raw, err, ok)
		}
	}
}

func TestBackoff(t *testing.T) {
	for _, c := range []struct {
		attempt int
		r       float64
		want    time.Duration
	}{
		{1, 0, 500 * time.Millisecond},
		{1, 0.999999999, time.Second - time.Nanosecond},
		{2, 0, time.Second},
		{4, 0.5, 6 * time.Second},
		{30, 0, 30 * time.Second},
	} {
		if got := Backoff(time.Second, time.Minute, c.attempt, c.r); got.Round(time.Millisecond) != c.want.Round(time.Millisecond) {
			t.Errorf("attempt %d r %v: %v, want %v", c.attempt, c.r, got, c.want)
		}
	}
}

// waitFor waits, at most 10 s, until cond holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
