// Package urlpolicy decides which user-supplied repository URLs may be handed
// to git, normalizes them so one upstream repository maps to one mirror, and
// re-checks addresses at connect time so DNS rebinding cannot undo the checks.
//
// Normalized URLs have exactly one of these forms, which git reads the same
// way we do:
//
//	https://host[:port]/path   (also http)
//	ssh://[user@]host[:port]/path
//
// git:// is refused with a pointer to https: go-git's git:// transport dials on its
// own, past the dialer's connect-time check, and the protocol is unencrypted
// (docs/adr/0006-no-git-protocol.md).
package urlpolicy

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxURLLength bounds both the input and the normalized URL.
const MaxURLLength = 2048

// Policy holds the rule options. The zero value is the strict default:
// https and http only, public hosts only.
type Policy struct {
	// AllowSSH admits ssh:// and scp-like user@host:path URLs.
	AllowSSH bool
	// AllowPrivateHosts admits loopback, private, link-local, CGNAT, ...
	// hosts (for self-hosted setups). Metadata endpoints stay refused.
	AllowPrivateHosts bool
	// CaseInsensitiveHosts are hosts, besides CaseInsensitiveByDefault, whose
	// repository paths are case-insensitive (a forge that finds Org/Repo at
	// org/repo): a repo there has one identity whatever the case it is named in.
	CaseInsensitiveHosts []string
}

// CaseInsensitiveByDefault are the hosts known to find a repository whatever the
// case of its path.
var CaseInsensitiveByDefault = []string{"github.com", "gitlab.com"}

// PathCaseInsensitive reports whether host (a URL's host, with or without a port)
// finds repositories whatever the case of their paths.
func (p Policy) PathCaseInsensitive(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, list := range [][]string{CaseInsensitiveByDefault, p.CaseInsensitiveHosts} {
		for _, h := range list {
			if strings.EqualFold(h, host) {
				return true
			}
		}
	}
	return false
}

// Default returns the strict policy (the zero value), spelled out for callers.
func Default() Policy { return Policy{} }

var defaultPorts = map[string]string{"https": "443", "http": "80", "git": "9418", "ssh": "22"}

func (p Policy) allowedSchemes() string {
	if p.AllowSSH {
		return "https, http, ssh"
	}
	return "https, http"
}

// Normalize checks raw against the policy and returns its canonical form, so
// the same repository added twice is recognized as one. Every refusal is an
// *Error wrapping ErrRefused.
func (p Policy) Normalize(raw string) (string, error) {
	out, e := p.normalize(raw, false)
	if e != nil {
		return "", e.withInput("url", raw)
	}
	return out, nil
}

// Upstream is the URL to fetch raw from: Normalize's checks and canonical form, but
// with the ".git" the user wrote at the end of the path kept. A forge that does not
// guess a missing ".git" (as git http-backend and GitHub do) serves only the path it
// was given, so the fetch asks for that; the repo's identity and mirror path stay
// Normalize's (Normalize of Upstream is Normalize of raw).
func (p Policy) Upstream(raw string) (string, error) {
	out, e := p.normalize(raw, true)
	if e != nil {
		return "", e.withInput("url", raw)
	}
	return out, nil
}

// CheckHost applies the host rules to a URL host: a name, a dotted-quad IPv4
// address, or an IPv6 address with or without brackets. Names are judged by
// name only; Dialer checks what they resolve to.
func (p Policy) CheckHost(host string) error {
	h, bracketed := host, false
	if len(h) >= 2 && h[0] == '[' && h[len(h)-1] == ']' {
		h, bracketed = h[1:len(h)-1], true
	}
	if _, _, e := p.canonHost(h, bracketed); e != nil {
		return e.withInput("host", host)
	}
	return nil
}

// CheckIP applies the address rules: private ranges unless AllowPrivateHosts,
// metadata endpoints always.
func (p Policy) CheckIP(a netip.Addr) error {
	if e := p.checkIP(a); e != nil {
		return e.withInput("address", a.String())
	}
	return nil
}

func (p Policy) normalize(raw string, keepGit bool) (string, *Error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", refuse(ReasonMalformed, "is empty")
	}
	if len(s) > MaxURLLength {
		return "", refuse(ReasonMalformed, "is %d bytes long; the limit is %d", len(s), MaxURLLength)
	}
	if e := p.checkLocal(s); e != nil {
		return "", e
	}
	// git's transport::address runs git-remote-<transport>; ext:: runs
	// arbitrary commands. Checked early so it is named for what it is.
	if i := strings.Index(s, "::"); i > 0 && validScheme(s[:i]) {
		return "", refuse(ReasonScheme, "uses git's remote-helper syntax %q, which is not allowed (allowed: %s)", s[:i+2], p.allowedSchemes())
	}
	if !utf8.ValidString(s) {
		return "", refuse(ReasonMalformed, "is not valid UTF-8")
	}
	// Words with no scheme ("not a url") are no URL at all: say that, not which
	// character is wrong.
	if !strings.Contains(s, "://") && strings.ContainsFunc(s, unicode.IsSpace) {
		return "", refuse(ReasonMalformed, "is not an http(s) URL; use a full URL such as https://host/owner/repo")
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return "", refuse(ReasonMalformed, "contains the whitespace, control or invisible character %U; percent-encode it or remove it", r)
		}
	}
	// Parsers disagree on '\' (WHATWG reads it as '/', Go and git do not).
	if strings.Contains(s, `\`) {
		return "", refuse(ReasonMalformed, `contains a backslash, which URL parsers interpret differently`)
	}
	var out string
	var e *Error
	if i := strings.Index(s, "://"); i >= 0 {
		out, e = p.normalizeURL(s[:i], s[i+3:], keepGit)
	} else {
		out, e = p.normalizeSCP(s, keepGit)
	}
	if e != nil {
		return "", e
	}
	return verify(out)
}

// checkLocal refuses what git would read as a local path, before anything
// else so the user hears the real problem.
func (p Policy) checkLocal(s string) *Error {
	const msg = "is a local path; only remote repositories can be mirrored (use a URL such as https://host/owner/repo)"
	switch s[0] {
	case '/', '\\', '.', '~':
		return refuse(ReasonLocalPath, msg)
	}
	// Windows drive: C:\x, C:/x, C:x.
	if len(s) >= 2 && s[1] == ':' && isLetter(s[0]) {
		return refuse(ReasonLocalPath, msg)
	}
	if len(s) >= 5 && strings.EqualFold(s[:5], "file:") {
		return refuse(ReasonLocalPath, "scheme \"file\" is not allowed (allowed: %s): it refers to local files", p.allowedSchemes())
	}
	return nil
}

// normalizeURL handles scheme://authority/path.
func (p Policy) normalizeURL(scheme, rest string, keepGit bool) (string, *Error) {
	if !validScheme(scheme) {
		return "", refuse(ReasonMalformed, "has an invalid scheme %q", scheme)
	}
	sch := strings.ToLower(scheme)
	switch sch {
	case "git+ssh", "ssh+git": // aliases git accepts
		sch = "ssh"
	}
	switch {
	case sch == "https" || sch == "http":
	case sch == "git":
		return "", refuse(ReasonScheme, "uses the git:// protocol, which is not supported (its connections cannot be checked against the URL policy, and it is unencrypted; allowed: %s); use the repository's https:// URL", p.allowedSchemes())
	case sch == "ssh" && p.AllowSSH:
	default:
		return "", refuse(ReasonScheme, "scheme %q is not allowed (allowed: %s)", sch, p.allowedSchemes())
	}

	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	path, extra := tail, ""
	if i := strings.IndexAny(tail, "?#"); i >= 0 {
		path, extra = tail[:i], tail[i:]
	}

	user := ""
	hostport := authority
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo := authority[:at]
		hostport = authority[at+1:]
		if sch != "ssh" {
			return "", refuse(ReasonCredentials, "credentials (user:password@ or token@) are not allowed in %s URLs: they would be stored and shown with the mirror; configure access separately", sch)
		}
		if strings.Contains(userinfo, ":") {
			return "", refuse(ReasonCredentials, "passwords are not allowed in ssh URLs; use key-based authentication")
		}
		if e := checkUser(userinfo); e != nil {
			return "", e
		}
		user = userinfo
	}

	host, port, bracketed, e := splitHostPort(hostport)
	if e != nil {
		return "", e
	}
	if strings.Contains(host, "%") {
		return "", refuse(ReasonMalformed, "percent-encoding is not allowed in the host")
	}
	canon, isV6, e := p.canonHost(host, bracketed)
	if e != nil {
		return "", e
	}
	if extra != "" {
		if extra[0] == '?' {
			return "", refuse(ReasonMalformed, "has a query string; git repository URLs have none")
		}
		return "", refuse(ReasonMalformed, "has a fragment (#...); git repository URLs have none")
	}
	np, e := normalizePath(path, keepGit)
	if e != nil {
		return "", e
	}
	if port == defaultPorts[sch] {
		port = ""
	}
	return build(sch, user, canon, isV6, port, np), nil
}

// normalizeSCP handles git's scp-like syntax [user@]host:path, the only
// remaining form git reads as remote.
func (p Policy) normalizeSCP(s string, keepGit bool) (string, *Error) {
	colon := strings.IndexByte(s, ':')
	slash := strings.IndexByte(s, '/')
	if colon < 0 || slash >= 0 && slash < colon {
		return "", refuse(ReasonLocalPath, "has no scheme, so git would treat it as a local path; use a full URL such as https://host/owner/repo")
	}
	authority, path := s[:colon], s[colon+1:]
	if strings.Contains(authority, "[") {
		return "", refuse(ReasonMalformed, "IPv6 addresses are not supported in scp-like syntax; use ssh://user@[address]/path")
	}
	if strings.HasPrefix(path, ":") { // "host::x" that is not transport::address
		return "", refuse(ReasonMalformed, "has an empty path after %q", authority+":")
	}
	// "user:password@host:path" splits at the password's colon, leaving
	// "password@host" at the start of the path.
	first := path
	if i := strings.IndexByte(path, '/'); i >= 0 {
		first = path[:i]
	}
	if strings.Contains(first, "@") {
		return "", refuse(ReasonCredentials, "passwords are not allowed in ssh URLs; use key-based authentication")
	}
	// "file:" was refused by checkLocal.
	switch strings.ToLower(authority) {
	case "http", "https", "git", "ssh", "git+ssh", "ssh+git", "ftp", "ftps", "rsync":
		return "", refuse(ReasonMalformed, "is missing \"//\" after %q", authority+":")
	}
	if !p.AllowSSH {
		return "", refuse(ReasonScheme, "uses scp-like ssh syntax (user@host:path), and ssh is not allowed (allowed: %s)", p.allowedSchemes())
	}
	user, host := "", authority
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		user, host = authority[:at], authority[at+1:]
		if e := checkUser(user); e != nil {
			return "", e
		}
	}
	if strings.ContainsAny(host, "]%") {
		return "", refuse(ReasonMalformed, "host %q is not a plain host name", host)
	}
	canon, isV6, e := p.canonHost(host, false)
	if e != nil {
		return "", e
	}
	// scp paths are literal (git does not percent-decode them) and relative
	// to the login directory, which git hosts treat like the ssh:// path.
	np, e := normalizePath("/"+escapeLiteral(path), keepGit)
	if e != nil {
		return "", e
	}
	return build("ssh", user, canon, isV6, "", np), nil
}

func build(sch, user, host string, isV6 bool, port, path string) string {
	var b strings.Builder
	b.WriteString(sch)
	b.WriteString("://")
	if user != "" {
		b.WriteString(user)
		b.WriteByte('@')
	}
	if isV6 {
		b.WriteString("[" + host + "]")
	} else {
		b.WriteString(host)
	}
	if port != "" {
		b.WriteString(":" + port)
	}
	b.WriteString(path)
	return b.String()
}

// verify cross-checks the result with net/url, so a disagreement between our
// parser and Go's is refused instead of producing an ambiguous URL.
func verify(out string) (string, *Error) {
	if len(out) > MaxURLLength {
		return "", refuse(ReasonMalformed, "is longer than %d bytes once normalized", MaxURLLength)
	}
	u, err := url.Parse(out)
	if err != nil || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" || u.String() != out {
		return "", refuse(ReasonMalformed, "cannot be written unambiguously")
	}
	if _, pw := u.User.Password(); pw {
		return "", refuse(ReasonMalformed, "cannot be written unambiguously")
	}
	return out, nil
}

func splitHostPort(hp string) (host, port string, bracketed bool, e *Error) {
	if strings.HasPrefix(hp, "[") {
		i := strings.IndexByte(hp, ']')
		if i < 0 {
			return "", "", false, refuse(ReasonMalformed, "has an unclosed '[' in the host")
		}
		rest := hp[i+1:]
		host = hp[1:i]
		bracketed = true
		if rest != "" {
			if rest[0] != ':' {
				return "", "", false, refuse(ReasonMalformed, "has unexpected characters after the IPv6 address")
			}
			port = rest[1:]
		}
	} else {
		host = hp
		if i := strings.LastIndexByte(hp, ':'); i >= 0 {
			host, port = hp[:i], hp[i+1:]
		}
		if strings.ContainsAny(host, "[]:") {
			return "", "", false, refuse(ReasonMalformed, "host %q is not valid; IPv6 addresses must be in brackets", host)
		}
	}
	if port == "" {
		return host, "", bracketed, nil
	}
	n, err := strconv.Atoi(port)
	if err != nil || len(port) > 5 || n < 1 || n > 65535 || strings.Trim(port, "0123456789") != "" {
		return "", "", false, refuse(ReasonMalformed, "port %q is not a number between 1 and 65535", port)
	}
	return host, strconv.Itoa(n), bracketed, nil
}

// checkUser restricts ssh user names to a conservative set; a leading '-'
// would be read by ssh as an option (CVE-2017-1000117).
func checkUser(u string) *Error {
	if u == "" || len(u) > 64 || u[0] == '-' {
		return refuse(ReasonMalformed, "ssh user name %q is not valid", u)
	}
	for i := 0; i < len(u); i++ {
		c := u[i]
		if !(isLetter(c) || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return refuse(ReasonMalformed, "ssh user name %q is not valid; use letters, digits, '.', '_' and '-'", u)
		}
	}
	return nil
}

func validScheme(s string) bool {
	if s == "" || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(isLetter(c) || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// normalizePath takes a percent-encoded path and returns its canonical form:
// empty and "." segments dropped, ".." refused, escapes of every character
// allowed literally in a path segment decoded (unreserved ones as RFC 3986
// 6.2.2 says; sub-delimiters, ":" and "@" too, which RFC 3986 would keep
// distinct, because git servers decode them) and other escapes upper-cased,
// trailing ".git" removed (kept with keepGit, for Upstream: checked all the same, the
// path must name a repository without it). Case is preserved: paths are
// case-sensitive upstream. Every byte thus has one spelling, which mirrorpath.Rel
// relies on.
func normalizePath(p string, keepGit bool) (string, *Error) {
	var segs []string
	for _, seg := range strings.Split(p, "/") {
		if seg == "" {
			continue
		}
		c, e := normalizeSegment(seg)
		if e != nil {
			return "", e
		}
		switch c {
		case ".":
			continue
		case "..":
			return "", refuse(ReasonMalformed, "path contains a \"..\" segment; refusing to guess which repository is meant")
		}
		segs = append(segs, c)
	}
	if len(segs) == 0 {
		return "", refuse(ReasonMalformed, "has no repository path")
	}
	last := segs[len(segs)-1]
	for len(last) > len(".git") && strings.HasSuffix(last, ".git") {
		last = strings.TrimSuffix(last, ".git")
	}
	switch last {
	case ".", "..":
		return "", refuse(ReasonMalformed, "path ends in a \".\" or \"..\" segment once \".git\" is removed")
	case ".git":
		// "/.git", "/a/.git.git": the repository would have no name (its mirror
		// path drops one ".git" suffix), so it could never be mirrored.
		return "", refuse(ReasonMalformed, "path ends in a segment that is only \".git\" (once \".git\" suffixes are removed), which names no repository")
	}
	if !keepGit {
		segs[len(segs)-1] = last
	}
	return "/" + strings.Join(segs, "/"), nil
}

func normalizeSegment(seg string) (string, *Error) {
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c == '%':
			if i+2 >= len(seg) || !isHex(seg[i+1]) || !isHex(seg[i+2]) {
				return "", refuse(ReasonMalformed, "path has an invalid percent-encoding")
			}
			v := unhex(seg[i+1])<<4 | unhex(seg[i+2])
			i += 2
			switch {
			case isPathChar(v):
				// Git servers decode the path before they look the repository up, so
				// "%21" and "!" name one repository: write it one way, or two
				// records would mirror it into two directories.
				b.WriteByte(v)
			case v == '/' || v == '\\':
				return "", refuse(ReasonMalformed, "path contains an encoded slash or backslash (%%2F, %%5C)")
			case v < 0x20 || v == 0x7f:
				return "", refuse(ReasonMalformed, "path contains an encoded control character")
			default:
				writeEscaped(&b, v)
			}
		case isPathChar(c):
			b.WriteByte(c)
		case c >= 0x80:
			// Raw non-ASCII, as pasted from a browser: encode it.
			writeEscaped(&b, c)
		default:
			return "", refuse(ReasonMalformed, "path contains the character %q, which must be percent-encoded", string(c))
		}
	}
	return b.String(), nil
}

// escapeLiteral percent-encodes a literal (scp-style) path so that, as part of
// an ssh:// URL which git percent-decodes, it names the same path.
func escapeLiteral(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '/' || isPathChar(c) {
			b.WriteByte(c)
		} else {
			writeEscaped(&b, c)
		}
	}
	return b.String()
}

func writeEscaped(b *strings.Builder, c byte) {
	const hexDigits = "0123456789ABCDEF"
	b.WriteByte('%')
	b.WriteByte(hexDigits[c>>4])
	b.WriteByte(hexDigits[c&15])
}

// isPathChar: RFC 3986 pchar minus '%' (unreserved, sub-delims, ':', '@').
func isPathChar(c byte) bool {
	return isUnreserved(c) || strings.IndexByte("!$&'()*+,;=:@", c) >= 0
}

func isUnreserved(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
