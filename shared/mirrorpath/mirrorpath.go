// Package mirrorpath maps a repo's normalized URL to its mirror's path under the mirrors
// root. The path is also the repo's clone path on the fleet's git listener, so it is
// shared by the fetcher, the server and the API, and the store derives the repo id from
// it (one path, one repo).
package mirrorpath

import (
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// Limits on a mirror path: NAME_MAX is 255 bytes, and lock and temp files add a suffix
// to a mirror's name; PATH_MAX is 4096 including the mirrors root.
const (
	MaxComponent = 240
	MaxLen       = 3072
)

// escapeByte starts an escape in a path component: "=" followed by two upper-case hex
// digits. It is not "%" so that the path can be pasted into a URL as it is: no client,
// proxy or server decodes "=" (a sub-delimiter), so the clone URL's path and the
// directory name are the same bytes at every layer.
const escapeByte = '='

// Rel maps a normalized repo URL to the mirror's path relative to the mirrors root:
//
//	https://github.com/owner/repo        -> github.com/owner/repo.git
//	https://example.com:8443/a/b         -> example.com:8443/a/b.git
//	http://example.com/a/b               -> http+example.com/a/b.git
//	https://[2001:db8::1]:8443/a         -> [2001:db8::1]:8443/a.git
//	https://example.com/we%20ird/.x      -> example.com/we=20ird/=2Ex.git
//
// The mapping is injective on the URLs urlpolicy.Policy.Normalize returns (two such
// URLs that differ have different paths), because every part is written so it can be
// read back:
//   - the first component is the URL's authority: "http+" for http (a plain name is
//     https), the host (lower case; "+" and ":" are not legal in a host name, and an
//     IPv6 address keeps its brackets), ":port" unless it is the scheme's default;
//   - each path segment is percent-decoded, then its bytes outside [A-Za-z0-9-_.~+]
//     are escaped as "=XX", as are a leading "." (no hidden names, so nothing clashes
//     with .locks, .tmp or .trash) and the "." of a ".git" ending any segment but the
//     last (one mirror never nests inside another's directory);
//   - the last segment loses one trailing ".git" and always gets ".git" back, so
//     ".../x" and ".../x.git" are one mirror (they are one repository on every forge;
//     Normalize already drops the suffix).
//
// Decoding first and escaping with one rule makes the path independent of how the URL
// spells a byte; Normalize canonicalises escapes the same way (a byte git servers
// decode anyway is written literally), so distinct normalized URLs never decode alike.
//
// The URL has already passed the URL policy, but this is the last line before the
// file system, so it is strict on its own: only http and https, no userinfo, query or
// fragment, no empty, "." or ".." segments, no NUL, components of at most MaxComponent
// bytes and a path of at most MaxLen. Errors are fetch.KindPolicy.
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
	if u.User != nil {
		return "", policyErr("URL has user information")
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", policyErr("URL has a query or fragment")
	}
	hostDir, err := authority(scheme, u)
	if err != nil {
		return "", err
	}

	// Split the escaped path, then decode per segment: "%2F" stays inside its segment
	// instead of becoming a directory separator.
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
		if last && len(s) > len(".git") {
			s = strings.TrimSuffix(s, ".git") // "%2Egit" spelled escaped is still ".git"
		}
		e := escapeSegment(s)
		if !last && strings.HasSuffix(e, ".git") {
			e = e[:len(e)-len(".git")] + "=2Egit"
		}
		if last {
			e += ".git"
		}
		if len(e) > MaxComponent {
			return "", policyErr("URL path segment %d is too long for a file name (%d bytes escaped, limit %d)", i+1, len(e), MaxComponent)
		}
		out = append(out, e)
	}
	rel := filepath.Join(out...)
	if len(rel) > MaxLen {
		return "", policyErr("URL is too long for a mirror path (%d bytes escaped, limit %d)", len(rel), MaxLen)
	}
	if !filepath.IsLocal(rel) {
		return "", policyErr("URL maps outside the mirror root")
	}
	return rel, nil
}

// authority is the first path component: [http+]host[:port].
func authority(scheme string, u *url.URL) (string, error) {
	host := strings.ToLower(u.Hostname())
	if err := checkHost(host); err != nil {
		return "", err
	}
	var b strings.Builder
	if scheme != "https" {
		b.WriteString(scheme + "+")
	}
	if strings.Contains(host, ":") { // IPv6 literal
		b.WriteString("[" + host + "]")
	} else {
		b.WriteString(host)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", policyErr("bad port %q", p)
		}
		if !(scheme == "https" && n == 443) && !(scheme == "http" && n == 80) {
			b.WriteString(":" + strconv.Itoa(n))
		}
	}
	if b.Len() > MaxComponent {
		return "", policyErr("host name too long")
	}
	return b.String(), nil
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
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '~' || c == '+' || (c == '.' && i > 0)
		if ok {
			b.WriteByte(c)
		} else {
			b.WriteByte(escapeByte)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

func policyErr(format string, args ...any) error {
	return fetch.Errorf(fetch.KindPolicy, format, args...)
}
