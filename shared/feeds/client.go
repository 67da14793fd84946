package feeds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MaxBody bounds one answer of a forge's API; a page of 100 projects is a few hundred KB.
const MaxBody = 8 << 20

// ErrAuth: the forge refused the credential (401, or 403 that is not a rate limit). The
// feed stops until it has a new token (Runner.Tokens) or the worker restarts; its repos
// are polled as if it did not exist.
var ErrAuth = errors.New("forge refused the credential")

// RateLimited: the forge asked to be left alone until Until.
type RateLimited struct{ Until time.Time }

func (e *RateLimited) Error() string {
	return fmt.Sprintf("forge rate limit: paused until %s", e.Until.UTC().Format(time.RFC3339))
}

// BadAnswer: the forge answered something this client does not understand.
type BadAnswer struct{ Reason string }

func (e *BadAnswer) Error() string { return "forge answered badly: " + e.Reason }

// sameOrigin reports whether a and b have the same scheme, host and port (a missing
// port is the scheme's default).
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "http") {
			return "80"
		}
		return "443"
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// redirectRefused is CheckRedirect's error for a redirect out of the feed's origin.
type redirectRefused struct{ from, to *url.URL }

func (e *redirectRefused) Error() string {
	return fmt.Sprintf("redirected from %s to %s, another origin: not followed, as the feed's credential goes to its own origin only",
		origin(e.from), origin(e.to))
}

func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// maxRedirects bounds the redirects followed within the origin.
const maxRedirects = 5

// keepHome is the client's redirect policy: a redirect that changes scheme, host or
// port is refused before anything is sent there (Go's own policy would send
// PRIVATE-TOKEN to any host, and Authorization to the same host over plain http);
// one within the origin is followed with the credential.
func keepHome(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if !sameOrigin(req.URL, via[0].URL) {
		return &redirectRefused{from: via[0].URL, to: req.URL}
	}
	return nil
}

// answer is one response, read whole (within MaxBody).
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends req with the source's credential and the conditional header for its URL,
// reads the answer within MaxBody, and turns refusals into ErrAuth or *RateLimited.
func (p *Prober) do(ctx context.Context, req *http.Request) (answer, error) {
	req = req.WithContext(ctx)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "mirrorfleet-feeds")
	if t := p.token; t != "" {
		switch p.src.Kind {
		case GitLab:
			req.Header.Set("PRIVATE-TOKEN", t)
		case Gitea:
			req.Header.Set("Authorization", "token "+t)
		default:
			req.Header.Set("Authorization", "bearer "+t)
		}
	}
	key := req.Method + " " + req.URL.String()
	if req.Method == http.MethodGet {
		if tag, ok := p.etags[key]; ok {
			req.Header.Set("If-None-Match", tag)
		}
	}
	resp, err := p.client.Do(req)
	var refused *redirectRefused
	if errors.As(err, &refused) {
		return answer{}, &BadAnswer{fmt.Sprintf("%s %s: %v", req.Method, req.URL.Redacted(), refused)}
	}
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: reading the answer: %w", req.Method, req.URL.Redacted(), err)
	}
	if len(body) > MaxBody {
		return answer{}, &BadAnswer{fmt.Sprintf("%s: answer over %d bytes", req.URL.Redacted(), MaxBody)}
	}
	a := answer{resp.StatusCode, resp.Header, body}
	p.noteRate(resp.Header)
	if until, ok := p.limited(resp); ok {
		p.pausedUntil = until
		return a, &RateLimited{until}
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return a, fmt.Errorf("%s %s: %d: %w", req.Method, req.URL.Redacted(), resp.StatusCode, ErrAuth)
	case resp.StatusCode == http.StatusNotModified:
		return a, nil
	case resp.StatusCode/100 != 2:
		return a, &BadAnswer{fmt.Sprintf("%s: status %d: %s", req.URL.Redacted(), resp.StatusCode, snippet(body))}
	}
	if tag := resp.Header.Get("ETag"); tag != "" && req.Method == http.MethodGet && len(p.etags) < maxETags {
		p.etags[key] = tag
	}
	return a, nil
}

// maxETags bounds the remembered validators (one per first page of a listing).
const maxETags = 64

// limited reads a rate-limit refusal: 429, or 403/503 with Retry-After or no requests
// left. The pause is Retry-After, else the reset time, else a minute.
func (p *Prober) limited(resp *http.Response) (time.Time, bool) {
	now := p.clock.Now()
	s := resp.StatusCode
	retry := resp.Header.Get("Retry-After")
	remaining := resp.Header.Get("X-RateLimit-Remaining")
	if s != http.StatusTooManyRequests && !((s == http.StatusForbidden || s == http.StatusServiceUnavailable) && (retry != "" || remaining == "0")) {
		return time.Time{}, false
	}
	if secs, err := strconv.Atoi(retry); err == nil && secs >= 0 {
		return now.Add(time.Duration(min(secs, 86400)) * time.Second), true
	}
	if t, err := http.ParseTime(retry); err == nil {
		return t, true
	}
	if reset, ok := resetTime(resp.Header); ok && reset.After(now) {
		return reset, true
	}
	return now.Add(time.Minute), true
}

// noteRate keeps the forge's own account of the budget left, to pace what follows.
func (p *Prober) noteRate(h http.Header) {
	if v, err := strconv.Atoi(h.Get("X-RateLimit-Remaining")); err == nil {
		p.remaining = v
		if reset, ok := resetTime(h); ok {
			p.resetAt = reset
		}
	}
}

// resetTime reads X-RateLimit-Reset, unix seconds as GitHub and GitLab send it.
func resetTime(h http.Header) (time.Time, bool) {
	v, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil || v <= 0 {
		return time.Time{}, false
	}
	return time.Unix(v, 0), true
}

// snippet is the start of a body for an error message.
func snippet(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 200 {
		b = append(b[:200:200], "…"...)
	}
	return string(b)
}
