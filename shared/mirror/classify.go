package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// PolicyRefusal is what a URL-policy dialer's error may implement so that Sync
// reports refused_by_policy. Errors wrapping urlpolicy.ErrRefused (what
// urlpolicy.Policy.Dialer and its HTTPClient's redirect check return) are recognised
// too, and so is a *fetch.Error of any kind: classify keeps a *fetch.Error it finds
// anywhere in the chain, also through net/http's *url.Error and *net.OpError and
// go-git's plumbing.UnexpectedError wrappers.
type PolicyRefusal interface {
	RefusedByPolicy() bool
}

// localError marks a failure reading or writing the existing mirror (as opposed to
// the network): classify reports it as corrupt unless it is a plain resource problem
// (disk full, permissions, I/O error), which is "other".
type localError struct {
	op  string
	err error
}

func (e *localError) Error() string { return "local mirror: " + e.op + ": " + e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

func local(op string, err error) error {
	if err == nil {
		return nil
	}
	return &localError{op: op, err: err}
}

// maxRetryAfter caps an upstream's Retry-After hint.
const maxRetryAfter = 24 * time.Hour

// classify turns any error from a sync step into a *fetch.Error. nil stays nil.
func classify(err error) error {
	return classifyAt(err, time.Now())
}

func classifyAt(err error, now time.Time) error {
	if err == nil {
		return nil
	}
	mk := func(k fetch.Kind) error { return &fetch.Error{Kind: k, Err: err} }

	// A classification made closer to the cause wins (e.g. a policy dialer's).
	var fe *fetch.Error
	if asErr(err, &fe) {
		if fe == err {
			return err
		}
		return &fetch.Error{Kind: fe.Kind, RetryAfter: fe.RetryAfter, Err: err}
	}
	if isErr(err, urlpolicy.ErrRefused) || anyErr(err, func(e error) bool {
		p, ok := e.(PolicyRefusal)
		return ok && p.RefusedByPolicy()
	}) {
		return mk(fetch.KindPolicy)
	}

	var le *localError
	if asErr(err, &le) {
		if isResourceErr(err) {
			return mk(fetch.KindOther)
		}
		return mk(fetch.KindCorrupt)
	}

	var he *githttp.Err
	if asErr(err, &he) && he.Response != nil {
		switch code := he.Response.StatusCode; {
		case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
			return &fetch.Error{
				Kind:       fetch.KindRateLimited,
				RetryAfter: parseRetryAfter(he.Response.Header.Get("Retry-After"), now),
				Err:        err,
			}
		case code == http.StatusNotFound || code == http.StatusGone:
			return mk(fetch.KindNotFound)
		case code == http.StatusUnauthorized || code == http.StatusForbidden ||
			code == http.StatusProxyAuthRequired:
			return mk(fetch.KindAuth)
		case code == http.StatusRequestTimeout || code == http.StatusGatewayTimeout:
			return mk(fetch.KindTimeout)
		case code >= 500:
			return mk(fetch.KindNetwork)
		default:
			return mk(fetch.KindOther)
		}
	}

	switch {
	case isErr(err, transport.ErrRepositoryNotFound):
		return mk(fetch.KindNotFound)
	case isErr(err, transport.ErrAuthenticationRequired), isErr(err, transport.ErrAuthorizationFailed):
		return mk(fetch.KindAuth)
	case isErr(err, context.DeadlineExceeded), isErr(err, os.ErrDeadlineExceeded),
		isErr(err, syscall.ETIMEDOUT), anyErr(err, func(e error) bool {
			ne, ok := e.(net.Error)
			return ok && ne.Timeout()
		}):
		return mk(fetch.KindTimeout)
	case isErr(err, context.Canceled):
		// The caller cancelled: not the upstream's fault. errors.Is(err,
		// context.Canceled) still holds on the result.
		return mk(fetch.KindOther)
	case isNetworkErr(err):
		return mk(fetch.KindNetwork)
	case isErr(err, git.ErrRepositoryNotExists), isErr(err, git.ErrRepositoryIncomplete),
		isErr(err, plumbing.ErrObjectNotFound), isErr(err, plumbing.ErrInvalidType),
		isErr(err, packfile.ErrInvalidObject), isErr(err, packfile.ErrZLib),
		isErr(err, packfile.ErrBadSignature), isErr(err, packfile.ErrUnsupportedVersion),
		isErr(err, packfile.ErrMalformedPackFile), isErr(err, packfile.ErrReferenceDeltaNotFound),
		isErr(err, packfile.ErrInvalidDelta), isErr(err, packfile.ErrDeltaCmd),
		isErr(err, idxfile.ErrMalformedIdxFile), isErr(err, idxfile.ErrUnsupportedVersion),
		isErr(err, objfile.ErrHeader), isErr(err, dotgit.ErrPackedRefsBadFormat),
		isErr(err, dotgit.ErrPackedRefsDuplicatedRef), isErr(err, dotgit.ErrEmptyRefFile),
		isErr(err, dotgit.ErrIdxNotFound), isErr(err, dotgit.ErrPackfileNotFound):
		return mk(fetch.KindCorrupt)
	}
	return mk(fetch.KindOther)
}

func isNetworkErr(err error) bool {
	for _, target := range []error{
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EHOSTUNREACH,
		syscall.ENETUNREACH, syscall.ENETDOWN, syscall.EPIPE, io.ErrUnexpectedEOF, net.ErrClosed,
	} {
		if isErr(err, target) {
			return true
		}
	}
	return anyErr(err, func(e error) bool {
		switch e.(type) {
		case *net.OpError, *net.DNSError, *net.AddrError:
			return true
		}
		_, ok := e.(net.Error)
		return ok
	}) || strings.Contains(err.Error(), "connection reset by peer")
}

func isResourceErr(err error) bool {
	for _, target := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EACCES,
		syscall.EPERM, syscall.EROFS, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM} {
		if isErr(err, target) {
			return true
		}
	}
	return false
}

// parseRetryAfter reads a Retry-After value: delay-seconds or an HTTP-date.
// Unparsable or negative values give 0; values are capped at maxRetryAfter.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	} else {
		return 0
	}
	switch {
	case d < 0:
		return 0
	case d > maxRetryAfter:
		return maxRetryAfter
	}
	return d
}

// go-git wraps transport errors in plumbing.UnexpectedError / PermanentError, which
// have no Unwrap method, so errors.Is/As stop there. walkErr looks through them too.
func walkErr(err error, visit func(error) bool) bool {
	for depth := 0; err != nil && depth < 64; depth++ {
		if visit(err) {
			return true
		}
		switch e := err.(type) {
		case *plumbing.UnexpectedError:
			err = e.Err
		case *plumbing.PermanentError:
			err = e.Err
		case interface{ Unwrap() []error }:
			for _, sub := range e.Unwrap() {
				if walkErr(sub, visit) {
					return true
				}
			}
			return false
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		default:
			return false
		}
	}
	return false
}

func anyErr(err error, pred func(error) bool) bool { return walkErr(err, pred) }

func isErr(err, target error) bool {
	return walkErr(err, func(e error) bool {
		if e == target {
			return true
		}
		if x, ok := e.(interface{ Is(error) bool }); ok && x.Is(target) {
			return true
		}
		return false
	})
}

func asErr[T error](err error, target *T) bool {
	return walkErr(err, func(e error) bool {
		if t, ok := e.(T); ok {
			*target = t
			return true
		}
		return false
	})
}

// stepErr classifies err from a network step that ran under stepCtx: a step that hit
// its own deadline is a timeout whatever error go-git made of it (often an io error
// from the cancelled body).
func stepErr(stepCtx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	// errors.Is, not isErr: the result must match context.Canceled for callers, and
	// go-git's UnexpectedError (no Unwrap) can hide it from errors.Is.
	if errors.Is(stepCtx.Err(), context.Canceled) && !errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w (%w)", context.Canceled, err)
	}
	c := classify(fmt.Errorf("%s: %w", what, err))
	if errors.Is(stepCtx.Err(), context.DeadlineExceeded) {
		switch fetch.KindOf(c) {
		case fetch.KindNetwork, fetch.KindOther:
			// What a cut transfer looks like: an io or net error, not the deadline.
			return &fetch.Error{Kind: fetch.KindTimeout, Err: fmt.Errorf("%s: %w (%w)", what, context.DeadlineExceeded, err)}
		}
	}
	return c
}
