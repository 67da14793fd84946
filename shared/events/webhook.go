package events

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// Headers of an outgoing webhook.
const (
	HeaderSignature = "X-Mirrorfleet-Signature" // sha256=<hex HMAC-SHA256(secret, body)>
	HeaderEventID   = "X-Mirrorfleet-Event-Id"  // the event's id: the same on every retry, for dedupe
	HeaderEvent     = "X-Mirrorfleet-Event"     // the event type, mirror.updated
)

// Webhook defaults (WebhookConfig's zero fields).
const (
	DefaultWebhookQueue    = 1024    // events waiting per URL
	DefaultWebhookRefs     = 100_000 // refs of the events waiting per URL (an event may list 1000)
	DefaultWebhookAttempts = 10      // tries of one event: 4 to 9 minutes of waits with the back-off below
	DefaultWebhookBackoff  = time.Second
	DefaultWebhookMaxWait  = 5 * time.Minute
	DefaultWebhookTimeout  = 10 * time.Second
)

// WebhookConfig configures the outgoing webhooks.
type WebhookConfig struct {
	URLs   []string
	Secret string // signs every body; empty: no signature header
	// Policy checks the URLs and the addresses they resolve to. Private addresses are
	// allowed (a receiver is usually on the operator's network); cloud metadata
	// endpoints never.
	Policy    urlpolicy.Policy
	Queue     int           // events waiting per URL; past it an event is dropped
	QueueRefs int           // refs of the events waiting per URL; past it too
	Attempts  int           // tries per event, then it is dropped
	Backoff   time.Duration // wait after the first failure; doubles, with jitter
	MaxWait   time.Duration // longest wait between two tries (a Retry-After included)
	Timeout   time.Duration // one POST
	Client    *http.Client  // default: the policy's client, no redirects followed
	Metrics   Recorder
	Log       *slog.Logger
}

// CheckNotifyURL checks a webhook URL: http or https, a host the policy allows (with
// private addresses allowed), no user or password in it.
func CheckNotifyURL(p urlpolicy.Policy, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("notify URL %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("notify URL %q: want http or https", raw)
	}
	if u.User != nil {
		return fmt.Errorf("notify URL %q: no user or password in the URL (sign with --notify-secret)", u.Redacted())
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("notify URL %q: no host", raw)
	}
	p.AllowPrivateHosts = true
	if err := p.CheckHost(u.Hostname()); err != nil {
		return fmt.Errorf("notify URL %q: %w", raw, err)
	}
	return nil
}

// Webhooks POSTs every event it is offered to each URL, from a bounded queue per URL,
// trying again with exponential back-off and jitter. Offer never blocks.
type Webhooks struct {
	cfg     WebhookConfig
	targets []*hookTarget
}

type hookTarget struct {
	url  string
	q    chan Event
	refs atomic.Int64 // refs of the events queued or being delivered
}

// NewWebhooks checks the URLs and returns the sink; Run delivers.
func NewWebhooks(cfg WebhookConfig) (*Webhooks, error) {
	for _, u := range cfg.URLs {
		if err := CheckNotifyURL(cfg.Policy, u); err != nil {
			return nil, err
		}
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultWebhookQueue
	}
	if cfg.QueueRefs <= 0 {
		cfg.QueueRefs = DefaultWebhookRefs
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultWebhookAttempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultWebhookBackoff
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultWebhookMaxWait
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultWebhookTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Client == nil {
		p := cfg.Policy
		p.AllowPrivateHosts = true
		cfg.Client = p.HTTPClient(cfg.Timeout)
		cfg.Client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	w := &Webhooks{cfg: cfg}
	for _, u := range cfg.URLs {
		w.targets = append(w.targets, &hookTarget{url: u, q: make(chan Event, cfg.Queue)})
	}
	return w, nil
}

// Offer queues ev for every URL; a full queue drops it (counted).
func (w *Webhooks) Offer(ev Event) {
	dropped := 0
	n := int64(len(ev.Refs))
	for _, t := range w.targets {
		if t.refs.Add(n) > int64(w.cfg.QueueRefs) {
			t.refs.Add(-n)
			dropped++
			w.cfg.Log.Warn("webhook queue full (refs): event dropped", "url", redactURL(t.url), "event_id", ev.ID)
			continue
		}
		select {
		case t.q <- ev:
		default:
			t.refs.Add(-n)
			dropped++
			w.cfg.Log.Warn("webhook queue full: event dropped", "url", redactURL(t.url), "event_id", ev.ID)
		}
	}
	w.record(metrics.EventsDropped, dropped)
}

// Run delivers until ctx ends (what is still queued then is not sent).
func (w *Webhooks) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, t := range w.targets {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case ev := <-t.q:
					w.deliver(ctx, t.url, ev)
					t.refs.Add(-int64(len(ev.Refs)))
				}
			}
		})
	}
	wg.Wait()
}

func (w *Webhooks) record(name string, n int) {
	if w.cfg.Metrics != nil {
		_ = w.cfg.Metrics.Record(metrics.EventDelivery(metrics.SinkWebhook, name, n)...)
	}
}

// deliver tries ev at u until it lands, a try says it never will (a 4xx other than 408
// and 429), or the attempts are spent.
func (w *Webhooks) deliver(ctx context.Context, u string, ev Event) {
	body, err := json.Marshal(ev)
	if err != nil {
		w.record(metrics.EventsDropped, 1)
		return
	}
	for attempt := 1; ; attempt++ {
		retry, wait, err := w.post(ctx, u, ev, body)
		if err == nil {
			w.record(metrics.EventsDelivered, 1)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if !retry || attempt >= w.cfg.Attempts {
			w.record(metrics.EventsDropped, 1)
			w.cfg.Log.Warn("webhook: event dropped", "url", redactURL(u), "event_id", ev.ID, "attempts", attempt, "err", err)
			return
		}
		w.record(metrics.EventsRetried, 1)
		wait = max(wait, Backoff(w.cfg.Backoff, w.cfg.MaxWait, attempt, rand.Float64()))
		w.cfg.Log.Debug("webhook: retrying", "url", redactURL(u), "event_id", ev.ID, "attempt", attempt, "in", wait, "err", err)
		t := time.NewTimer(min(wait, w.cfg.MaxWait))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// post makes one try. retry says whether another may succeed; wait is the receiver's
// Retry-After, if it sent one.
func (w *Webhooks) post(ctx context.Context, u string, ev Event, body []byte) (retry bool, wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "mirrorfleet-webhook")
	req.Header.Set(HeaderEvent, Type)
	req.Header.Set(HeaderEventID, strconv.FormatUint(ev.ID, 10))
	if w.cfg.Secret != "" {
		req.Header.Set(HeaderSignature, Sign(w.cfg.Secret, body))
	}
	resp, err := w.cfg.Client.Do(req)
	if err != nil {
		var pe *urlpolicy.Error
		return !errors.As(err, &pe), 0, err // the policy will refuse it again
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return false, 0, nil
	case c == http.StatusTooManyRequests || c == http.StatusServiceUnavailable || c == http.StatusRequestTimeout || c >= 500:
		if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		return true, wait, fmt.Errorf("receiver answered %s", resp.Status)
	default:
		return false, 0, fmt.Errorf("receiver answered %s", resp.Status)
	}
}

// Sign is the signature header's value: sha256=<hex HMAC-SHA256(secret, body)>.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Backoff is the wait after the attempt-th failed try: base doubled per attempt, at
// most maxWait, with "equal jitter" (half fixed, half random by r in [0,1)) so the
// receivers of a fleet that went down together are not all tried again at once.
func Backoff(base, maxWait time.Duration, attempt int, r float64) time.Duration {
	d := base
	for i := 1; i < attempt && d < maxWait; i++ {
		d *= 2
	}
	d = min(d, maxWait)
	return d/2 + time.Duration(r*float64(d/2))
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.RawQuery = "" // a token in the query is a secret
	return u.Redacted()
}
