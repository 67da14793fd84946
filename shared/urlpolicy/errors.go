package urlpolicy

import (
	"errors"
	"fmt"
	"strings"
)

// ErrRefused is wrapped by every refusal of this package, so callers can test
// errors.Is(err, ErrRefused) even through net.OpError and url.Error wrappers.
var ErrRefused = errors.New("refused by URL policy")

// Reason is a stable, machine-readable refusal code for API responses.
type Reason string

// Refusal codes. They are part of the API contract: do not rename.
const (
	ReasonMalformed    Reason = "malformed"     // not a well-formed, unambiguous repository URL
	ReasonScheme       Reason = "scheme"        // scheme or transport not allowed
	ReasonCredentials  Reason = "credentials"   // user/password/token embedded in the URL
	ReasonLocalPath    Reason = "local_path"    // local path or file:// URL
	ReasonPrivateHost  Reason = "private_host"  // loopback, private, link-local, ... host
	ReasonMetadataHost Reason = "metadata_host" // cloud metadata endpoint, never allowed
	ReasonRedirect     Reason = "redirect"      // too many HTTP redirects
)

// Error is a refusal. Error() is meant to be shown to API users as is.
type Error struct {
	Reason Reason
	// Input is what was checked (URL, host, address), with credentials
	// redacted and very long values truncated.
	Input string
	// Detail says what is wrong and why, without the input prefix.
	Detail string

	kind string // "url", "host", "address", ...: prefixes Error()
}

func (e *Error) Error() string {
	if e.kind == "" {
		return e.Detail
	}
	return fmt.Sprintf("%s %q: %s", e.kind, e.Input, e.Detail)
}

// Unwrap makes errors.Is(err, ErrRefused) hold for every refusal.
func (e *Error) Unwrap() error { return ErrRefused }

func refuse(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// withInput fills in what the refusal is about; internal checks leave it empty
// because the same rule serves URLs, hosts and dialed addresses.
func (e *Error) withInput(kind, input string) *Error {
	e.kind = kind
	e.Input = display(input)
	return e
}

const maxDisplay = 200

// display redacts credentials and truncates, because errors end up in API
// responses and logs.
func display(s string) string {
	s = redact(strings.TrimSpace(s))
	if len(s) > maxDisplay {
		s = s[:maxDisplay] + "..."
	}
	return s
}

// redact replaces the userinfo of a URL or scp-like address with "***", except
// a plain ssh user name (git@...), which is not a secret. A user name alone is
// redacted for other schemes because tokens are often passed that way.
func redact(s string) string {
	start, sshLike := 0, true
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + 3
		switch strings.ToLower(s[:i]) {
		case "ssh", "git+ssh", "ssh+git":
		default:
			sshLike = false
		}
	}
	end := len(s)
	if j := strings.IndexAny(s[start:], "/?#"); j >= 0 {
		end = start + j
	}
	at := strings.LastIndexByte(s[start:end], '@')
	if at < 0 {
		return s
	}
	userinfo := s[start : start+at]
	if sshLike && !strings.Contains(userinfo, ":") {
		return s
	}
	return s[:start] + "***" + s[start+at:]
}
