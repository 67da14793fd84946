package urlpolicy

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

var (
	strict  = Default()
	withSSH = Policy{AllowSSH: true}
	private = Policy{AllowPrivateHosts: true}
	lenient = Policy{AllowSSH: true, AllowPrivateHosts: true}
)

type normCase struct {
	in     string
	want   string // normalized output when accepted
	reason Reason // refusal reason when refused
}

func runNormalize(t *testing.T, p Policy, cases []normCase) {
	t.Helper()
	for _, c := range cases {
		got, err := p.Normalize(c.in)
		if c.reason == "" {
			if err != nil || got != c.want {
				t.Errorf("%+v.Normalize(%q) = %q, %v; want %q", p, c.in, got, err, c.want)
			}
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%+v.Normalize(%q) = %q, %v; want refusal %q", p, c.in, got, err, c.reason)
			continue
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%+v.Normalize(%q): error %v does not wrap ErrRefused", p, c.in, err)
		}
		if pe.Reason != c.reason || got != "" {
			t.Errorf("%+v.Normalize(%q) = %q, reason %q (%v); want reason %q", p, c.in, got, pe.Reason, err, c.reason)
		}
	}
}

func TestNormalizeAccepted(t *testing.T) {
	runNormalize(t, strict, []normCase{
		{in: "HTTPS://Example.COM:443/a/b.git/", want: "https://example.com/a/b"},
		{in: "https://github.com/a/b.git", want: "https://github.com/a/b"},
		{in: "https://GitHub.com/a/b/", want: "https://github.com/a/b"},
		{in: "https://github.com:443/a/b", want: "https://github.com/a/b"},
		{in: "  https://github.com/a/b  \n", want: "https://github.com/a/b"},
		{in: "http://example.com:80/a", want: "http://example.com/a"},
		{in: "https://example.com:0443/a", want: "https://example.com/a"},
		{in: "https://example.com:/a", want: "https://example.com/a"},
		{in: "https://example.com:8443/a", want: "https://example.com:8443/a"},
		{in: "http://example.com:443/a", want: "http://example.com:443/a"},
		{in: "https://example.com./a", want: "https://example.com/a"},
		{in: "https://github.com//Owner///Repo//", want: "https://github.com/Owner/Repo"},
		{in: "https://github.com/a/./b", want: "https://github.com/a/b"},
		{in: "https://github.com/a/b.git.git", want: "https://github.com/a/b"},
		{in: "https://github.com/a/b.GIT", want: "https://github.com/a/b.GIT"},
		{in: "https://github.com/a.git/b", want: "https://github.com/a.git/b"},
		{in: "https://github.com/a/b%2egit", want: "https://github.com/a/b"},
		{in: "https://h.example/a%7e%3a%41/%c3%A4", want: "https://h.example/a~:A/%C3%A4"},
		{in: "https://h.example/b%21c%40%2B%3D", want: "https://h.example/b!c@+="},
		{in: "https://h.example/b%5B%25%20", want: "https://h.example/b%5B%25%20"},
		{in: "https://h.example/ä", want: "https://h.example/%C3%A4"},
		{in: "https://dev.azure.com/org/My%20Project/_git/repo", want: "https://dev.azure.com/org/My%20Project/_git/repo"},
		{in: "http://8.8.8.8/x", want: "http://8.8.8.8/x"},
		{in: "http://[2001:4860:0:0::8888]:8080/x", want: "http://[2001:4860::8888]:8080/x"},
		{in: "http://[::ffff:8.8.8.8]/x", want: "http://8.8.8.8/x"},
		{in: "https://xn--bcher-kva.example/a", want: "https://xn--bcher-kva.example/a"},
		{in: "https://0x7f.example.com/a", want: "https://0x7f.example.com/a"},
	})
}

func TestNormalizeRefused(t *testing.T) {
	long := "https://example.com/" + strings.Repeat("a", MaxURLLength)
	runNormalize(t, strict, []normCase{
		// local paths and file://
		{in: "file:///etc/passwd", reason: ReasonLocalPath},
		{in: "FILE://localhost/etc/passwd", reason: ReasonLocalPath},
		{in: "file:/etc/passwd", reason: ReasonLocalPath},
		{in: "/etc", reason: ReasonLocalPath},
		{in: "./x", reason: ReasonLocalPath},
		{in: "../x", reason: ReasonLocalPath},
		{in: "~/x", reason: ReasonLocalPath},
		{in: `C:\x`, reason: ReasonLocalPath},
		{in: "c:/x", reason: ReasonLocalPath},
		{in: `\\server\share`, reason: ReasonLocalPath},
		{in: "//server/share", reason: ReasonLocalPath},
		{in: "github.com/a/b", reason: ReasonLocalPath},
		{in: "repo", reason: ReasonLocalPath},
		// a repository with no name: its mirror path would be empty
		{in: "https://h.example/.git", reason: ReasonMalformed},
		{in: "https://h.example/a/.git.git", reason: ReasonMalformed},
		{in: "https://h.example/a/.git/", reason: ReasonMalformed},
		{in: "https://h.example/a/%2Egit", reason: ReasonMalformed},
		{in: "https://github.com/a/.git", reason: ReasonMalformed},
		// schemes
		{in: "ftp://example.com/a", reason: ReasonScheme},
		{in: "ssh://git@github.com/a/b", reason: ReasonScheme},
		{in: "git+ssh://git@github.com/a/b", reason: ReasonScheme},
		{in: "git@github.com:a/b.git", reason: ReasonScheme},
		{in: "git://example.org/a.git", reason: ReasonScheme},
		{in: "GIT://example.com:9418/a", reason: ReasonScheme},
		{in: "github.com:a/b", reason: ReasonScheme},
		{in: "ext::sh -c touch% /tmp/pwned", reason: ReasonScheme},
		{in: "fd::17", reason: ReasonScheme},
		{in: "javascript://example.com/%0aalert(1)", reason: ReasonScheme},
		// credentials
		{in: "https://user:pw@host.example/x.git", reason: ReasonCredentials},
		{in: "https://user@host.example/x.git", reason: ReasonCredentials},
		{in: "https://ghp_token@github.com/a/b", reason: ReasonCredentials},
		{in: "https://@github.com/a/b", reason: ReasonCredentials},
		// private hosts
		{in: "http://127.0.0.1/x", reason: ReasonPrivateHost},
		{in: "http://127.0.0.1:8080/x", reason: ReasonPrivateHost},
		{in: "http://localhost/x", reason: ReasonPrivateHost},
		{in: "http://LOCALHOST./x", reason: ReasonPrivateHost},
		{in: "http://foo.localhost/x", reason: ReasonPrivateHost},
		{in: "http://[::1]/x", reason: ReasonPrivateHost},
		{in: "http://[0:0:0:0:0:0:0:1]/x", reason: ReasonPrivateHost},
		{in: "http://[::ffff:127.0.0.1]/x", reason: ReasonPrivateHost},
		{in: "http://[::ffff:7f00:1]/x", reason: ReasonPrivateHost},
		{in: "http://[::127.0.0.1]/x", reason: ReasonPrivateHost},
		{in: "http://[64:ff9b::10.0.0.1]/x", reason: ReasonPrivateHost},
		{in: "http://[2002:a00:1::]/x", reason: ReasonPrivateHost},
		{in: "http://10.0.0.1/x", reason: ReasonPrivateHost},
		{in: "http://172.16.5.4/x", reason: ReasonPrivateHost},
		{in: "http://192.168.1.1/x", reason: ReasonPrivateHost},
		{in: "http://100.64.0.1/x", reason: ReasonPrivateHost},
		{in: "http://169.254.1.1/x", reason: ReasonPrivateHost},
		{in: "http://0.0.0.0/x", reason: ReasonPrivateHost},
		{in: "http://[::]/x", reason: ReasonPrivateHost},
		{in: "http://224.0.0.1/x", reason: ReasonPrivateHost},
		{in: "http://255.255.255.255/x", reason: ReasonPrivateHost},
		{in: "http://[fc00::1]/x", reason: ReasonPrivateHost},
		{in: "http://[fd12:3456::1]/x", reason: ReasonPrivateHost},
		{in: "http://[fe80::1]/x", reason: ReasonPrivateHost},
		{in: "http://[ff02::1]/x", reason: ReasonPrivateHost},
		{in: "http://gitlab/x", reason: ReasonPrivateHost},
		{in: "http://printer.local/x", reason: ReasonPrivateHost},
		{in: "http://git.corp.internal/x", reason: ReasonPrivateHost},
		// metadata
		{in: "http://169.254.169.254/latest", reason: ReasonMetadataHost},
		{in: "http://169.254.170.2/v2/credentials", reason: ReasonMetadataHost},
		{in: "http://[fd00:ec2::254]/latest", reason: ReasonMetadataHost},
		{in: "http://[::ffff:169.254.169.254]/latest", reason: ReasonMetadataHost},
		{in: "http://[64:ff9b::a9fe:a9fe]/latest", reason: ReasonMetadataHost},
		{in: "http://100.100.100.200/latest", reason: ReasonMetadataHost},
		{in: "http://metadata.google.internal/computeMetadata", reason: ReasonMetadataHost},
		{in: "http://METADATA.google.internal./computeMetadata", reason: ReasonMetadataHost},
		{in: "http://metadata/computeMetadata", reason: ReasonMetadataHost},
		// numeric hosts in non-canonical forms
		{in: "http://2130706433/x", reason: ReasonMalformed},
		{in: "http://0x7f.1/x", reason: ReasonMalformed},
		{in: "http://0x7f000001/x", reason: ReasonMalformed},
		{in: "http://0177.0.0.1/x", reason: ReasonMalformed},
		{in: "http://127.1/x", reason: ReasonMalformed},
		{in: "http://127.000.000.001/x", reason: ReasonMalformed},
		{in: "http://1.2.3.4.5/x", reason: ReasonMalformed},
		{in: "http://example.0x10/x", reason: ReasonMalformed},
		{in: "http://[127.0.0.1]/x", reason: ReasonMalformed},
		{in: "http://[fe80::1%25eth0]/x", reason: ReasonMalformed},
		{in: "http://127.0.0.%31/x", reason: ReasonMalformed},
		// malformed otherwise
		{in: "", reason: ReasonMalformed},
		{in: "   ", reason: ReasonMalformed},
		{in: long, reason: ReasonMalformed},
		{in: "https://github.com", reason: ReasonMalformed},
		{in: "https://github.com/", reason: ReasonMalformed},
		{in: "https://github.com//", reason: ReasonMalformed},
		{in: "https:///a/b", reason: ReasonMalformed},
		{in: "https://github.com/a/../b", reason: ReasonMalformed},
		{in: "https://github.com/..", reason: ReasonMalformed},
		{in: "https://github.com/a/%2e%2E/b", reason: ReasonMalformed},
		{in: "https://github.com/a/...git", reason: ReasonMalformed},
		{in: "https://github.com/a%2fb", reason: ReasonMalformed},
		{in: "https://github.com/a%5cb", reason: ReasonMalformed},
		{in: "https://github.com/a%00", reason: ReasonMalformed},
		{in: "https://github.com/a%zz", reason: ReasonMalformed},
		{in: "https://github.com/a/b?x=1", reason: ReasonMalformed},
		{in: "https://github.com/a/b?", reason: ReasonMalformed},
		{in: "https://github.com/a/b#frag", reason: ReasonMalformed},
		{in: "https://github.com/a/b#", reason: ReasonMalformed},
		{in: "https://git hub.com/a", reason: ReasonMalformed},
		{in: "https://github.com/a\tb", reason: ReasonMalformed},
		{in: "https://github.com/a\nb", reason: ReasonMalformed},
		{in: "https://github.com/a\u200bb", reason: ReasonMalformed},
		{in: "https://github.com/a\u202eb", reason: ReasonMalformed},
		{in: "https://github.com/a\xffb", reason: ReasonMalformed},
		{in: `https://github.com\@evil.example/a`, reason: ReasonMalformed},
		{in: "https://github.com/a{b}", reason: ReasonMalformed},
		{in: "https://gïthub.com/a", reason: ReasonMalformed},
		{in: "https://-oProxyCommand=x/a", reason: ReasonMalformed},
		{in: "https://a..b/a", reason: ReasonMalformed},
		{in: "https://example.com:0/a", reason: ReasonMalformed},
		{in: "https://example.com:65536/a", reason: ReasonMalformed},
		{in: "https://example.com:+443/a", reason: ReasonMalformed},
		{in: "https://example.com:a/a", reason: ReasonMalformed},
		{in: "https:github.com/a", reason: ReasonMalformed},
		{in: "1http://example.com/a", reason: ReasonMalformed},
	})
}

// The upstream is the URL as given, canonical but for the ".git" at its end, which it
// keeps: a forge that does not guess a missing ".git" serves only that path.
func TestUpstreamKeepsGit(t *testing.T) {
	for in, want := range map[string][2]string{
		"https://h.example/a/alpha.git":      {"https://h.example/a/alpha.git", "https://h.example/a/alpha"},
		"HTTPS://H.example:443/a/alpha.git/": {"https://h.example/a/alpha.git", "https://h.example/a/alpha"},
		"https://h.example/a/alpha":          {"https://h.example/a/alpha", "https://h.example/a/alpha"},
		"https://h.example/a/b.git.git":      {"https://h.example/a/b.git.git", "https://h.example/a/b"},
		"https://h.example//a/./Alpha.git":   {"https://h.example/a/Alpha.git", "https://h.example/a/Alpha"},
	} {
		up, err := strict.Upstream(in)
		norm, _ := strict.Normalize(in)
		if err != nil || up != want[0] || norm != want[1] {
			t.Errorf("%q: upstream %q (%v), normalized %q; want %q and %q", in, up, err, norm, want[0], want[1])
		}
	}
	for _, bad := range []string{"https://h.example/.git", "file:///x.git", "https://user:pw@h.example/a.git"} {
		if up, err := strict.Upstream(bad); err == nil {
			t.Errorf("Upstream(%q) = %q, want the refusal Normalize gives", bad, up)
		}
	}
}

// Words are refused as no URL, a URL with a space as a URL with a bad character.
func TestNotAURLSaysSo(t *testing.T) {
	for in, want := range map[string]string{
		"not a url":              "is not an http(s) URL",
		"my repo":                "is not an http(s) URL",
		"https://github.com/a b": "contains the whitespace",
	} {
		_, err := strict.Normalize(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

func TestSSH(t *testing.T) {
	runNormalize(t, withSSH, []normCase{
		{in: "ssh://git@github.com/a/b", want: "ssh://git@github.com/a/b"},
		{in: "git@github.com:a/b.git", want: "ssh://git@github.com/a/b"},
		{in: "git@github.com:/a/b.git/", want: "ssh://git@github.com/a/b"},
		{in: "ssh://git@GitHub.com:22/a/b.git", want: "ssh://git@github.com/a/b"},
		{in: "git+ssh://git@github.com/a/b", want: "ssh://git@github.com/a/b"},
		{in: "ssh://github.com/a/b", want: "ssh://github.com/a/b"},
		{in: "github.com:a/b", want: "ssh://github.com/a/b"},
		{in: "ssh://git@example.com:2222/~/repo", want: "ssh://git@example.com:2222/~/repo"},
		{in: "git@example.com:~user/repo.git", want: "ssh://git@example.com/~user/repo"},
		// scp paths are literal; '%' must survive git's decoding of ssh:// URLs.
		{in: "git@example.com:a%41/b", want: "ssh://git@example.com/a%2541/b"},
		{in: "ssh://git@[2001:db8::1]/a", want: "ssh://git@[2001:db8::1]/a"},
		{in: "https://github.com/a/b", want: "https://github.com/a/b"},

		{in: "ssh://git:pw@github.com/a/b", reason: ReasonCredentials},
		{in: "git:pw@github.com:a/b", reason: ReasonCredentials},
		{in: "ssh://-oProxyCommand=touch@github.com/a", reason: ReasonMalformed},
		{in: "-oProxyCommand=x@github.com:a", reason: ReasonMalformed},
		{in: "ssh://git@-oProxyCommand=x/a", reason: ReasonMalformed},
		{in: "ssh://git@127.0.0.1/a", reason: ReasonPrivateHost},
		{in: "git@localhost:a", reason: ReasonPrivateHost},
		{in: "git@169.254.169.254:a", reason: ReasonMetadataHost},
		{in: "git@[::1]:a", reason: ReasonMalformed},
		{in: "git@github.com:", reason: ReasonMalformed},
		{in: "git@github.com:../a", reason: ReasonMalformed},
		{in: "ext::ssh -oProxyCommand=x", reason: ReasonScheme},
		{in: "ext::x", reason: ReasonScheme},
		{in: "http:/example.com/a", reason: ReasonMalformed},
	})
}

func TestAllowPrivateHosts(t *testing.T) {
	runNormalize(t, private, []normCase{
		{in: "http://127.0.0.1/x", want: "http://127.0.0.1/x"},
		{in: "http://localhost:8080/x.git", want: "http://localhost:8080/x"},
		{in: "http://[::1]/x", want: "http://[::1]/x"},
		{in: "http://[::ffff:127.0.0.1]/x", want: "http://127.0.0.1/x"},
		{in: "http://10.0.0.1/x", want: "http://10.0.0.1/x"},
		{in: "https://gitlab/x", want: "https://gitlab/x"},
		{in: "https://git.corp.internal/x", want: "https://git.corp.internal/x"},

		{in: "http://169.254.169.254/latest", reason: ReasonMetadataHost},
		{in: "http://[::ffff:169.254.169.254]/latest", reason: ReasonMetadataHost},
		{in: "http://[::a9fe:a9fe]/latest", reason: ReasonMetadataHost},
		{in: "http://[2002:a9fe:a9fe::1]/latest", reason: ReasonMetadataHost},
		{in: "http://[fd00:ec2::254]/latest", reason: ReasonMetadataHost},
		{in: "http://100.100.100.200/latest", reason: ReasonMetadataHost},
		{in: "http://metadata.google.internal/x", reason: ReasonMetadataHost},
		{in: "http://metadata/x", reason: ReasonMetadataHost},
		// AllowPrivateHosts does not make numeric guessing acceptable.
		{in: "http://2130706433/x", reason: ReasonMalformed},
		// nor does it relax anything else.
		{in: "ssh://git@127.0.0.1/a", reason: ReasonScheme},
		{in: "file:///etc/passwd", reason: ReasonLocalPath},
	})
}

// The same repository written differently must normalize to one string.
func TestSameRepo(t *testing.T) {
	variants := []string{
		"https://github.com/a/b.git",
		"https://GitHub.com/a/b/",
		"https://github.com:443/a/b",
		"HTTPS://GITHUB.COM/a/b.git/",
		"https://github.com./a//b",
		"https://github.com/%61/b",
	}
	for _, v := range variants {
		got, err := strict.Normalize(v)
		if err != nil || got != "https://github.com/a/b" {
			t.Errorf("Normalize(%q) = %q, %v", v, got, err)
		}
	}
	// Path case is significant upstream.
	a, _ := strict.Normalize("https://github.com/a/b")
	b, _ := strict.Normalize("https://github.com/A/B")
	if a == b {
		t.Errorf("path case was folded: %q", a)
	}
}

func TestErrorMessages(t *testing.T) {
	cases := []struct {
		p    Policy
		in   string
		want string
	}{
		{strict, "file:///etc/passwd", `url "file:///etc/passwd": scheme "file" is not allowed (allowed: https, http)`},
		{strict, "ftp://example.com/a", `url "ftp://example.com/a": scheme "ftp" is not allowed (allowed: https, http)`},
		{withSSH, "ftp://example.com/a", `url "ftp://example.com/a": scheme "ftp" is not allowed (allowed: https, http, ssh)`},
		{strict, "http://127.0.0.1/x", `url "http://127.0.0.1/x": 127.0.0.1 is a loopback address`},
		{strict, "http://169.254.169.254/latest", `url "http://169.254.169.254/latest": 169.254.169.254 is a cloud metadata endpoint`},
		// Credentials are never echoed back.
		{strict, "https://user:hunter2@host.example/x", `url "https://***@host.example/x": credentials`},
		{strict, "https://ghp_secret@github.com/a", `url "https://***@github.com/a": credentials`},
		{withSSH, "ssh://git:hunter2@github.com/a", `url "ssh://***@github.com/a": passwords are not allowed`},
		{withSSH, "git:hunter2@github.com:a", `url "***@github.com:a": passwords are not allowed`},
	}
	for _, c := range cases {
		_, err := c.p.Normalize(c.in)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Normalize(%q) error = %v; want prefix %s", c.in, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "ghp_secret")) {
			t.Errorf("Normalize(%q) error leaks a credential: %v", c.in, err)
		}
	}
	// Huge inputs are truncated in messages.
	_, err := strict.Normalize("ftp://" + strings.Repeat("x", 1500))
	if err == nil || len(err.Error()) > 400 {
		t.Errorf("long input: error is %d bytes", len(err.Error()))
	}
}

func TestCheckIP(t *testing.T) {
	cases := []struct {
		addr            string
		strict, private Reason // "" means allowed
	}{
		{"8.8.8.8", "", ""},
		{"2606:4700:4700::1111", "", ""},
		{"127.0.0.1", ReasonPrivateHost, ""},
		{"127.255.255.254", ReasonPrivateHost, ""},
		{"::1", ReasonPrivateHost, ""},
		{"::ffff:127.0.0.1", ReasonPrivateHost, ""},
		{"10.1.2.3", ReasonPrivateHost, ""},
		{"172.31.255.255", ReasonPrivateHost, ""},
		{"172.32.0.1", "", ""},
		{"192.168.0.1", ReasonPrivateHost, ""},
		{"100.64.0.1", ReasonPrivateHost, ""},
		{"100.127.255.255", ReasonPrivateHost, ""},
		{"100.128.0.1", "", ""},
		{"169.254.0.1", ReasonPrivateHost, ""},
		{"fe80::1%eth0", ReasonPrivateHost, ""},
		{"fc00::1", ReasonPrivateHost, ""},
		{"0.0.0.0", ReasonPrivateHost, ""},
		{"::", ReasonPrivateHost, ""},
		{"239.1.1.1", ReasonPrivateHost, ""},
		{"ff05::1", ReasonPrivateHost, ""},
		{"169.254.169.254", ReasonMetadataHost, ReasonMetadataHost},
		{"::ffff:169.254.169.254", ReasonMetadataHost, ReasonMetadataHost},
		{"fd00:ec2::254", ReasonMetadataHost, ReasonMetadataHost},
		{"100.100.100.200", ReasonMetadataHost, ReasonMetadataHost},
		{"64:ff9b::a9fe:a9fe", ReasonMetadataHost, ReasonMetadataHost},
		{"64:ff9b::808:808", "", ""},
	}
	for _, c := range cases {
		a := netip.MustParseAddr(c.addr)
		for _, pc := range []struct {
			p    Policy
			want Reason
		}{{strict, c.strict}, {private, c.private}} {
			err := pc.p.CheckIP(a)
			if got := reasonOf(err); got != pc.want {
				t.Errorf("%+v.CheckIP(%s) = %v; want reason %q", pc.p, c.addr, err, pc.want)
			}
		}
	}
	if err := strict.CheckIP(netip.Addr{}); reasonOf(err) != ReasonMalformed {
		t.Errorf("CheckIP(zero) = %v", err)
	}
}

func TestCheckHost(t *testing.T) {
	cases := []struct {
		host string
		want Reason
	}{
		{"github.com", ""},
		{"GitHub.com.", ""},
		{"8.8.8.8", ""},
		{"[2001:4860::8888]", ""},
		{"2001:4860::8888", ""},
		{"localhost", ReasonPrivateHost},
		{"[::1]", ReasonPrivateHost},
		{"::1", ReasonPrivateHost},
		{"metadata.google.internal", ReasonMetadataHost},
		{"2130706433", ReasonMalformed},
		{"", ReasonMalformed},
		{"exa_mple.com", ""},
		{"a b", ReasonMalformed},
	}
	for _, c := range cases {
		if got := reasonOf(strict.CheckHost(c.host)); got != c.want {
			t.Errorf("CheckHost(%q) = %q; want %q", c.host, got, c.want)
		}
	}
}

func TestRedirectPolicy(t *testing.T) {
	req := func(s string) *http.Request {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Request{URL: u}
	}
	from := []*http.Request{req("https://github.com/a/b")}
	cases := []struct {
		to   string
		via  []*http.Request
		want Reason
	}{
		{"https://codeload.github.com/a/b?token=x", from, ""},
		{"http://example.com/a", []*http.Request{req("http://example.com/")}, ""},
		{"http://github.com/a/b", from, ReasonScheme},
		{"file:///etc/passwd", from, ReasonScheme},
		{"https://user:pw@github.com/a", from, ReasonCredentials},
		{"https://127.0.0.1/a", from, ReasonPrivateHost},
		{"https://[::1]:8443/a", from, ReasonPrivateHost},
		{"http://169.254.169.254/latest", []*http.Request{req("http://example.com/")}, ReasonMetadataHost},
		{"https://2130706433/", from, ReasonMalformed},
		{"https://github.com/a", make([]*http.Request, MaxRedirects+1), ReasonRedirect},
	}
	for _, c := range cases {
		err := strict.checkRedirect(req(c.to), c.via)
		if got := reasonOf(err); got != c.want {
			t.Errorf("redirect to %s: %v; want %q", c.to, err, c.want)
		}
	}
}

func reasonOf(err error) Reason {
	if err == nil {
		return ""
	}
	var pe *Error
	if !errors.As(err, &pe) || !errors.Is(err, ErrRefused) {
		return "not-a-policy-error"
	}
	return pe.Reason
}

// TestAllowedSchemesAreAccepted: the schemes a refusal names as allowed are exactly the
// ones accepted, so "allowed: ..." never lists one that is refused next (git:// was).
func TestAllowedSchemesAreAccepted(t *testing.T) {
	for _, p := range []Policy{{}, {AllowSSH: true}} {
		_, err := p.Normalize("ftp://example.org/a")
		msg := err.Error()
		i := strings.Index(msg, "allowed: ")
		if i < 0 {
			t.Fatalf("%+v: ftp refusal %q names no allowed schemes", p, msg)
		}
		list, _, _ := strings.Cut(msg[i+len("allowed: "):], ")")
		for _, sch := range strings.Split(list, ", ") {
			u := sch + "://example.org/a"
			if _, err := p.Normalize(u); err != nil {
				t.Errorf("%+v: %q is named as allowed, yet %s is refused: %v", p, sch, u, err)
			}
		}
		if _, err := p.Normalize("git://example.org/a"); err == nil || !strings.Contains(err.Error(), "https://") {
			t.Errorf("%+v: git:// gets %v, want a refusal pointing to https", p, err)
		}
	}
}
