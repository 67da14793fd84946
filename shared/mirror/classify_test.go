package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// httpErr builds the error go-git's http transport returns for an unexpected status.
func httpErr(code int, retryAfter string) error {
	h := http.Header{}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	req, _ := http.NewRequest(http.MethodGet, "https://example.com/a/b/info/refs", nil)
	return plumbing.NewUnexpectedError(&githttp.Err{
		Response: &http.Response{StatusCode: code, Header: h, Request: req},
	})
}

func dialErr(err error) error {
	return &url.Error{Op: "Get", URL: "https://example.com/a/b/info/refs",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: err}}
}

func TestClassify(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name  string
		err   error
		kind  fetch.Kind
		retry time.Duration
	}{
		{"not found sentinel", fmt.Errorf("list: %w", transport.ErrRepositoryNotFound), fetch.KindNotFound, 0},
		{"http 404", httpErr(404, ""), fetch.KindNotFound, 0},
		{"http 410", httpErr(410, ""), fetch.KindNotFound, 0},
		{"authentication required", fmt.Errorf("%w: ", transport.ErrAuthenticationRequired), fetch.KindAuth, 0},
		{"authorization failed", transport.ErrAuthorizationFailed, fetch.KindAuth, 0},
		{"http 401", httpErr(401, ""), fetch.KindAuth, 0},
		{"http 403", httpErr(403, ""), fetch.KindAuth, 0},
		{"http 429 seconds", httpErr(429, "7"), fetch.KindRateLimited, 7 * time.Second},
		{"http 429 no header", httpErr(429, ""), fetch.KindRateLimited, 0},
		{"http 503 date", httpErr(503, now.Add(2*time.Minute).Format(http.TimeFormat)), fetch.KindRateLimited, 2 * time.Minute},
		{"http 503 past date", httpErr(503, now.Add(-time.Minute).Format(http.TimeFormat)), fetch.KindRateLimited, 0},
		{"http 429 garbage", httpErr(429, "soon"), fetch.KindRateLimited, 0},
		{"http 429 huge", httpErr(429, "999999999"), fetch.KindRateLimited, maxRetryAfter},
		{"http 429 wrapped", fmt.Errorf("sync: %w", fmt.Errorf("fetch: %w", httpErr(429, "3"))), fetch.KindRateLimited, 3 * time.Second},
		{"http 504", httpErr(504, ""), fetch.KindTimeout, 0},
		{"http 502", httpErr(502, ""), fetch.KindNetwork, 0},
		{"http 400", httpErr(400, ""), fetch.KindOther, 0},
		{"deadline", fmt.Errorf("fetch: %w", context.DeadlineExceeded), fetch.KindTimeout, 0},
		{"os deadline", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, fetch.KindTimeout, 0},
		{"ETIMEDOUT", dialErr(syscall.ETIMEDOUT), fetch.KindTimeout, 0},
		{"cancelled", fmt.Errorf("fetch: %w", context.Canceled), fetch.KindOther, 0},
		{"connection refused", dialErr(syscall.ECONNREFUSED), fetch.KindNetwork, 0},
		{"refused inside go-git's wrapper", plumbing.NewUnexpectedError(dialErr(syscall.ECONNREFUSED)), fetch.KindNetwork, 0},
		{"reset", plumbing.NewUnexpectedError(syscall.ECONNRESET), fetch.KindNetwork, 0},
		{"dns", &url.Error{Op: "Get", URL: "x", Err: &net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}}, fetch.KindNetwork, 0},
		{"unexpected EOF", fmt.Errorf("fetch: %w", io.ErrUnexpectedEOF), fetch.KindNetwork, 0},
		{"policy dialer (interface)", plumbing.NewUnexpectedError(dialErr(refusal{"10.0.0.1:443"})), fetch.KindPolicy, 0},
		{"policy dialer (fetch.Error)", dialErr(fetch.Errorf(fetch.KindPolicy, "private address")), fetch.KindPolicy, 0},
		{"urlpolicy dialer", plumbing.NewUnexpectedError(dialErr(fmt.Errorf("connection to %q: %w", "10.0.0.1:443", urlpolicy.ErrRefused))), fetch.KindPolicy, 0},
		{"policy beats network", dialErr(fmt.Errorf("%w; %w", refusal{"x"}, syscall.ECONNREFUSED)), fetch.KindPolicy, 0},
		{"already classified", &fetch.Error{Kind: fetch.KindBusy, Err: errors.New("locked")}, fetch.KindBusy, 0},
		{"classified deeper keeps retry", fmt.Errorf("x: %w", &fetch.Error{Kind: fetch.KindRateLimited, RetryAfter: 5 * time.Second, Err: errors.New("y")}), fetch.KindRateLimited, 5 * time.Second},
		{"local open", local("open", git.ErrRepositoryNotExists), fetch.KindCorrupt, 0},
		{"local read", local("read commits", plumbing.ErrObjectNotFound), fetch.KindCorrupt, 0},
		{"local bad pack", local("read commits", packfile.ErrBadSignature), fetch.KindCorrupt, 0},
		{"local disk full", local("set HEAD", &os.PathError{Op: "write", Path: "HEAD", Err: syscall.ENOSPC}), fetch.KindOther, 0},
		{"repo missing", git.ErrRepositoryNotExists, fetch.KindCorrupt, 0},
		{"object missing", fmt.Errorf("x: %w", plumbing.ErrObjectNotFound), fetch.KindCorrupt, 0},
		{"bad pack", packfile.ErrZLib, fetch.KindCorrupt, 0},
		{"unknown", errors.New("boom"), fetch.KindOther, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := classifyAt(c.err, now)
			var fe *fetch.Error
			if !errors.As(got, &fe) {
				t.Fatalf("not a *fetch.Error: %T %v", got, got)
			}
			if fe.Kind != c.kind || fe.RetryAfter != c.retry {
				t.Fatalf("classify(%v) = %s retry %v, want %s retry %v", c.err, fe.Kind, fe.RetryAfter, c.kind, c.retry)
			}
			if fe.Err == nil {
				t.Fatal("classified error lost its cause")
			}
		})
	}
	if classify(nil) != nil {
		t.Fatal("classify(nil) != nil")
	}
	if err := classify(fmt.Errorf("x: %w", context.Canceled)); !errors.Is(err, context.Canceled) {
		t.Fatal("a cancelled sync must still match context.Canceled")
	}
}

func TestStepErrDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	// go-git often reports a cut transfer as an io error, not as the deadline.
	err := stepErr(ctx, "fetch", io.ErrUnexpectedEOF)
	if fetch.KindOf(err) != fetch.KindTimeout || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stepErr = %v (%s)", err, fetch.KindOf(err))
	}
	// A classification from the dialer wins over the deadline.
	err = stepErr(ctx, "list", dialErr(refusal{"x"}))
	if fetch.KindOf(err) != fetch.KindPolicy {
		t.Fatalf("stepErr with a policy refusal = %s", fetch.KindOf(err))
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":     0,
		"0":    0,
		"-3":   0,
		" 12 ": 12 * time.Second,
		"x":    0,
		now.Add(30 * time.Second).Format(http.TimeFormat):       30 * time.Second,
		now.Add(-30 * time.Second).Format(http.TimeFormat):      0,
		now.Add(48 * time.Hour).Format(http.TimeFormat):         maxRetryAfter,
		now.Add(30 * time.Second).Format(time.RFC850):           30 * time.Second,
		now.Add(30 * time.Second).Format(time.ANSIC):            30 * time.Second,
		now.Add(30*time.Second).Format(time.RFC1123Z) + "garbl": 0,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}
