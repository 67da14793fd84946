package urlpolicy

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/mirrorpath"
)

var fuzzSeeds = []string{
	"https://github.com/a/b.git",
	"https://GitHub.com/a/b/",
	"https://github.com:443/a/b",
	"HTTPS://Example.COM:443/a/b.git/",
	"git://example.org/a.git",
	"http://example.com:8080//a/./b//c.git.git",
	"https://h.example/a%7e%3a%41/%c3%A4/ä",
	"https://h.example/a%2e%2E/b",
	"https://h.example/a/...git",
	"https://h.example/a/%2e.git",
	"https://h.example/a/.git",
	"https://h.example/a/b%25.git",
	"https://example.com./a",
	"https://xn--bcher-kva.example/a",
	"file:///etc/passwd",
	"/etc",
	"./x",
	`C:\x`,
	`\\server\share`,
	"~/repo",
	"github.com/a/b",
	"https://user:pw@host/x.git",
	"https://token@github.com/a",
	"http://169.254.169.254/latest",
	"http://[fd00:ec2::254]/latest",
	"http://[64:ff9b::a9fe:a9fe]/x",
	"http://metadata.google.internal./x",
	"http://127.0.0.1/x",
	"http://localhost/x",
	"http://a.localhost/x",
	"http://[::1]/x",
	"http://[::ffff:127.0.0.1]/x",
	"http://[::ffff:8.8.8.8]:80/x",
	"http://[fe80::1%25eth0]/x",
	"http://10.0.0.1/x",
	"http://2130706433/x",
	"http://0x7f.1/x",
	"http://0177.0.0.1/x",
	"http://127.1/x",
	"http://127.0.0.%31/x",
	"http://8.8.8.8/x",
	"http://[2001:db8::1]:8080/x",
	"ssh://git@github.com/a/b",
	"ssh://git@github.com:22/a/b.git",
	"git+ssh://git@github.com/a/b",
	"git@github.com:a/b.git",
	"git@github.com:/a/b%41",
	"git:pw@github.com:a/b",
	"github.com:a/b",
	"git@[::1]:a",
	"ssh://-oProxyCommand=x/a",
	"ssh://git@host/~user/repo",
	"ext::sh -c touch% /tmp/pwned",
	"fd::17",
	"https:github.com/a",
	"https://github.com/a?b#c",
	"https://github.com/a#",
	"https://github.com\\@evil.example/a",
	"https://example.com:0443/a",
	"https://example.com:65536/a",
	"https://a..b/a",
	"https://gïthub.com/a",
	"https://github.com/a\u202eb",
	"  https://github.com/a  ",
	"",
}

// FuzzNormalize checks the properties callers rely on: no panics, refusals
// are typed, and accepted URLs are canonical, safe and stable.
func FuzzNormalize(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	policies := []Policy{strict, withSSH, private, lenient}
	f.Fuzz(func(t *testing.T, raw string) {
		outs := make([]string, len(policies))
		for i, p := range policies {
			out, err := p.Normalize(raw)
			if err != nil {
				var pe *Error
				if !errors.As(err, &pe) || !errors.Is(err, ErrRefused) || pe.Reason == "" || err.Error() == "" {
					t.Fatalf("%+v: untyped refusal for %q: %#v", p, raw, err)
				}
				continue
			}
			checkNormalized(t, p, raw, out)
			outs[i] = out
			// The URL fetched is the one given, ".git" and all, and names the same repo.
			up, err := p.Upstream(raw)
			if err != nil {
				t.Fatalf("%+v: %q normalizes to %q but has no upstream: %v", p, raw, out, err)
			}
			if back, err := p.Normalize(up); err != nil || back != out {
				t.Fatalf("%+v: upstream %q of %q normalizes to %q (%v), want %q", p, up, raw, back, err, out)
			}
		}
		// Options only admit more: a policy accepting raw is never
		// stricter than another, and all that accept agree on the result.
		for i := range policies {
			for j := range policies {
				pi, pj := policies[i], policies[j]
				looser := (pj.AllowSSH || !pi.AllowSSH) && (pj.AllowPrivateHosts || !pi.AllowPrivateHosts)
				if outs[i] != "" && looser && outs[j] != outs[i] {
					t.Fatalf("%q: %+v gives %q but looser %+v gives %q", raw, pi, outs[i], pj, outs[j])
				}
				if outs[i] != "" && outs[j] != "" && outs[i] != outs[j] {
					t.Fatalf("%q: %+v gives %q, %+v gives %q", raw, pi, outs[i], pj, outs[j])
				}
			}
		}
	})
}

func checkNormalized(t *testing.T, p Policy, raw, out string) {
	t.Helper()
	again, err := p.Normalize(out)
	if err != nil || again != out {
		t.Fatalf("%+v: not idempotent: %q -> %q -> %q, %v", p, raw, out, again, err)
	}
	if len(out) > MaxURLLength {
		t.Fatalf("%+v: %q -> %d bytes", p, raw, len(out))
	}
	u, err := url.Parse(out)
	if err != nil {
		t.Fatalf("%+v: %q -> %q does not parse: %v", p, raw, out, err)
	}
	if u.String() != out {
		t.Fatalf("%+v: %q -> %q re-serializes as %q", p, raw, out, u.String())
	}
	switch u.Scheme {
	case "https", "http", "git":
		if u.User != nil {
			t.Fatalf("%+v: %q -> %q has userinfo", p, raw, out)
		}
	case "ssh":
		if !p.AllowSSH {
			t.Fatalf("%+v: %q -> %q: ssh not allowed", p, raw, out)
		}
		if _, has := u.User.Password(); has {
			t.Fatalf("%+v: %q -> %q has a password", p, raw, out)
		}
	default:
		t.Fatalf("%+v: %q -> %q: scheme %q", p, raw, out, u.Scheme)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(out, "?# \\") {
		t.Fatalf("%+v: %q -> %q has a query, fragment, space or backslash", p, raw, out)
	}
	if err := p.CheckHost(u.Hostname()); err != nil {
		t.Fatalf("%+v: %q -> %q: host refused: %v", p, raw, out, err)
	}
	if u.Host != strings.ToLower(u.Host) {
		t.Fatalf("%+v: %q -> %q: host not lower-case", p, raw, out)
	}
	if port := u.Port(); port != "" && port == defaultPorts[u.Scheme] {
		t.Fatalf("%+v: %q -> %q keeps the default port", p, raw, out)
	}
	path := u.EscapedPath()
	if path == "" || path == "/" || strings.HasSuffix(path, "/") || strings.Contains(path, "//") {
		t.Fatalf("%+v: %q -> %q: path %q not clean", p, raw, out, path)
	}
	for _, seg := range strings.Split(u.Path, "/")[1:] {
		if seg == "." || seg == ".." || seg == "" {
			t.Fatalf("%+v: %q -> %q: bad segment %q", p, raw, out, seg)
		}
	}
	if last := path[strings.LastIndexByte(path, '/')+1:]; strings.HasSuffix(last, ".git") {
		t.Fatalf("%+v: %q -> %q keeps .git", p, raw, out)
	}
	// Whatever is accepted can be mirrored: it has a mirror path.
	if u.Scheme == "https" || u.Scheme == "http" {
		if _, err := mirrorpath.Rel(out); err != nil {
			t.Fatalf("%+v: %q -> %q is accepted but has no mirror path: %v", p, raw, out, err)
		}
	}
}
