// Package mirrorpath maps a repo's normalized URL to its mirror's path under the mirrors
// root. The path is also the repo's clone path on the fleet's git listener, so it is
// shared by the fetcher, the server and the API.
package mirrorpath

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// Rel maps a normalized repo URL to the mirror's path relative to the mirrors root:
//
//	https://example.com/a/b      -> example.com/a/b.git
//	https://example.com:8443/a/b -> example.com_8443/a/b.git
//	https://example.com/a/b.git  -> example.com/a/b.git (one trailing .git is dropped first)
//
// The URL has already passed the URL policy, but this is the last line before the
// file system, so it is strict on its own: only http and https, no userinfo-only
// tricks, no query or fragment, no empty, "." or ".." segments, no NUL. Anything a
// file system could read specially is percent-escaped per segment, so the mapping
// stays injective and can never leave Root:
//   - bytes outside [A-Za-z0-9._~+-] (so "/" inside a segment, "\", ":", "%", ...)
//   - a leading "." (no hidden names, so nothing can clash with .tmp / .trash)
//   - a non-final segment ending in ".git" (so one mirror never nests inside another)
func Rel(rawURL string) (string, error) {
	if strings.IndexByte(rawURL, 0) >= 0 {
		return "", policyErr("URL contains NUL")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", policyErr("unparsable URL: %v", err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", policyErr("scheme %q is not mirrored (http and https only)", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return "", policyErr("URL has no host")
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", policyErr("URL has a query or fragment")
	}

	host := strings.ToLower(u.Hostname())
	if err := checkHost(host); err != nil {
		return "", err
	}
	hostDir := host
	if strings.Contains(host, ":") { // IPv6 literal
		hostDir = "[" + host + "]"
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", policyErr("bad port %q", p)
		}
		if !(scheme == "https" && n == 443) && !(scheme == "http" && n == 80) {
			hostDir += "_" + strconv.Itoa(n)
		}
	}

	// Split the escaped path, then unescape per segment: "%2F" stays inside its
	// segment instead of becoming a directory separator.
	p := u.EscapedPath()
	p = strings.TrimPrefix(p, "/")
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return "", policyErr("URL has no repository path")
	}
	raw := strings.Split(p, "/")
	out := make([]string, 0, len(raw)+1)
	out = append(out, hostDir)
	for i, r := range raw {
		s, err := url.PathUnescape(r)
		if err != nil {
			return "", policyErr("bad escape in URL path: %v", err)
		}
		switch {
		case s == "":
			return "", policyErr("URL path has an empty segment")
		case s == "." || s == "..":
			return "", policyErr("URL path has a %q segment", s)
		case strings.IndexByte(s, 0) >= 0:
			return "", policyErr("URL path contains NUL")
		}
		last := i == len(raw)-1
		if last {
			// "%2Egit" spelled escaped is still ".git"
			s = strings.TrimSuffix(s, ".git")
			if s == "" {
				return "", policyErr("URL has no repository name")
			}
		}
		e := escapeSegment(s)
		if !last && strings.HasSuffix(e, ".git") {
			e = e[:len(e)-4] + "%2Egit"
		}
		if last {
			e += ".git"
		}
		out = append(out, e)
	}
	rel := filepath.Join(out...)
	if !filepath.IsLocal(rel) {
		return "", policyErr("URL maps outside the mirror root")
	}
	return rel, nil
}

func checkHost(h string) error {
	if h == "" || h[0] == '.' || h[0] == '-' {
		return policyErr("bad host %q", h)
	}
	ipv6 := strings.Contains(h, ":")
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
		case c == ':' && ipv6:
		default:
			return policyErr("bad host %q", h)
		}
	}
	return nil
}

func escapeSegment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '~' || c == '+' || c == '-' || (c == '.' && i > 0)
		if ok {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func policyErr(format string, args ...any) error {
	return fetch.Errorf(fetch.KindPolicy, format, args...)
}
