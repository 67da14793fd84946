package mirrorpath

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

func TestRel(t *testing.T) {
	ok := []struct{ url, want string }{
		{"https://github.com/owner/repo", "github.com/owner/repo.git"},
		{"https://example.com/a/b.git", "example.com/a/b.git"},
		{"https://example.com/a/b/", "example.com/a/b.git"},
		{"https://Example.COM/Org/Repo", "example.com/Org/Repo.git"},
		{"https://example.com:8443/a/b", "example.com:8443/a/b.git"},
		{"https://example.com:443/a/b", "example.com/a/b.git"},
		{"http://example.com/a/b", "http+example.com/a/b.git"},
		{"http://example.com:80/a/b", "http+example.com/a/b.git"},
		{"http://example.com:443/a/b", "http+example.com:443/a/b.git"},
		{"https://example.com:80/a/b", "example.com:80/a/b.git"},
		{"https://h_8443/a", "h_8443/a.git"},
		{"http://127.0.0.1:39999/x/basic", "http+127.0.0.1:39999/x/basic.git"},
		{"https://[::1]:8443/a", "[::1]:8443/a.git"},
		{"https://example.com/group/sub/deep/repo", "example.com/group/sub/deep/repo.git"},
		{"https://git.sr.ht/~user/repo", "git.sr.ht/~user/repo.git"},
		{"https://example.com/gtk+/c++", "example.com/gtk+/c++.git"},
		// escaped, never interpreted by the file system, and never with "%"
		{"https://example.com/a/.hidden", "example.com/a/=2Ehidden.git"},
		{"https://example.com/a%2Fb/c", "example.com/a=2Fb/c.git"},
		{"https://example.com/a%5C..%5Cb/c", "example.com/a=5C..=5Cb/c.git"},
		{"https://example.com/we%20ird/r%25", "example.com/we=20ird/r=25.git"},
		{"https://example.com/b!c", "example.com/b=21c.git"},
		{"https://example.com/b=20", "example.com/b=3D20.git"},
		{"https://example.com/%C3%A9t%C3%A9/r", "example.com/=C3=A9t=C3=A9/r.git"},
		// a mirror never nests inside another one's directory
		{"https://example.com/a.git/b", "example.com/a=2Egit/b.git"},
		{"https://example.com/a.git.git", "example.com/a.git.git"},
		{"https://example.com/a/.git", "example.com/a/=2Egit.git"},
	}
	for _, c := range ok {
		got, err := Rel(c.url)
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if got != filepath.FromSlash(c.want) {
			t.Errorf("%s -> %s, want %s", c.url, got, c.want)
		}
	}

	bad := []string{
		"",
		"example.com/a/b",
		"file:///etc/passwd",
		"ssh://git@example.com/a/b",
		"git://example.com/a/b",
		"https:///a/b",
		"https://example.com",
		"https://example.com/",
		"https://example.com/a/../b",
		"https://example.com/a/%2e%2e/b",
		"https://example.com/..",
		"https://example.com/a/./b",
		"https://example.com//etc/passwd",
		"https://example.com/a//b",
		"https://example.com/a%00b/c",
		"https://example.com/a\x00b",
		"https://example.com/a/b?x=1",
		"https://example.com/a/b#frag",
		"https://user@example.com/a/b",
		"https://.hidden/a",
		"https://-x/a",
		"https://ex%2Fample.com/a",
		"https://example.com:0/a",
		"https://example.com:99999/a",
		"https://[fe80::1%25eth0]/a",
		"https://example.com/" + strings.Repeat("a", MaxComponent),
		"https://example.com/" + strings.Repeat("%C3%A9", 100),
		"https://example.com/" + strings.Repeat("abcdefgh/", 400) + "x",
	}
	for _, u := range bad {
		got, err := Rel(u)
		if err == nil {
			t.Errorf("%q accepted as %q", u, got)
			continue
		}
		if fetch.KindOf(err) != fetch.KindPolicy {
			t.Errorf("%q: kind %s, want refused_by_policy", u, fetch.KindOf(err))
		}
	}
}

// The collisions the old mapping had: each pair is two repositories (different
// normalized URLs) that must get two directories.
func TestRelTwinsApart(t *testing.T) {
	pairs := [][2]string{
		{"http://h.example/a", "https://h.example/a"},
		{"https://h.example:8443/a", "https://h_8443.example/a"},
		{"https://h.example/b!c", "https://h.example/b%2521c"},
		{"https://h.example/b%20c", "https://h.example/b=20c"},
		{"https://h.example/a.git/b", "https://h.example/a%252Egit/b"},
		{"http://h.example:443/a", "https://h.example/a"},
		{"https://h.example:80/a", "http://h.example/a"},
	}
	p := urlpolicy.Policy{AllowPrivateHosts: true}
	for _, pr := range pairs {
		a, errA := p.Normalize(pr[0])
		b, errB := p.Normalize(pr[1])
		if errA != nil || errB != nil || a == b {
			t.Fatalf("%q, %q normalize to %q, %q (%v, %v): not a pair of repositories", pr[0], pr[1], a, b, errA, errB)
		}
		ra, errA := Rel(a)
		rb, errB := Rel(b)
		if errA != nil || errB != nil {
			t.Fatalf("%q: %v; %q: %v", a, errA, b, errB)
		}
		if ra == rb {
			t.Errorf("%q and %q share the mirror path %q", a, b, ra)
		}
	}
	// One repository spelled two ways is one record, hence one path.
	for _, same := range [][2]string{
		{"https://h.example/b!c", "https://h.example/b%21c"},
		{"https://h.example/x", "https://h.example/x.git"},
	} {
		a, _ := p.Normalize(same[0])
		b, _ := p.Normalize(same[1])
		if a != b {
			t.Errorf("%q and %q normalize apart: %q, %q", same[0], same[1], a, b)
		}
	}
}

// pieces are the parts the random URLs are made of: each is a way two spellings have
// collided, or an edge of the escaping.
var (
	schemes = []string{"http", "https", "HTTPS"}
	hosts   = []string{"h.example", "H.Example", "h.example.", "h_8443.example", "h.example:8443", "h.example:443",
		"h.example:80", "h.example:0443", "[2001:db8::1]", "[2001:db8::1]:8443", "203.0.113.7", "203.0.113.7:8080"}
	pieces = []string{"a", "B", ".", "..", ".git", "git", "x.git", "%2E", "%2e", "!", "%21", "%2521", "=", "%3D", "=21",
		"=2E", "%20", "+", "%2B", "~", "%7E", ":", "%3A", "@", "%40", "é", "%C3%A9", "%c3%a9", "%25", "%", "%2F", ";",
		"'", "(", "*", "[", "%5B", "_", "-"}
)

func randomURL(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString(schemes[r.IntN(len(schemes))] + "://" + hosts[r.IntN(len(hosts))])
	for range 1 + r.IntN(3) {
		b.WriteByte('/')
		for range 1 + r.IntN(3) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
	}
	if r.IntN(4) == 0 {
		b.WriteByte('/')
	}
	return b.String()
}

// TestRelInjective: distinct normalized URLs never share a mirror path, over many
// URLs built from the pieces above (a fixed seed, so a failure reproduces).
func TestRelInjective(t *testing.T) {
	p := urlpolicy.Policy{AllowPrivateHosts: true}
	r := rand.New(rand.NewPCG(11, 12))
	owner := map[string]string{} // mirror path -> normalized URL
	n := 200000
	if testing.Short() {
		n = 20000
	}
	mapped := 0
	for range n {
		norm, err := p.Normalize(randomURL(r))
		if err != nil {
			continue
		}
		rel, err := Rel(norm)
		if err != nil {
			continue
		}
		mapped++
		checkSafe(t, norm, rel)
		if prev, ok := owner[rel]; ok && prev != norm {
			t.Fatalf("%q and %q share the mirror path %q", prev, norm, rel)
		}
		owner[rel] = norm
	}
	if len(owner) < n/20 {
		t.Fatalf("only %d distinct mirror paths from %d URLs (%d mapped): the generator is too narrow", len(owner), n, mapped)
	}
	t.Logf("%d URLs, %d mapped, %d distinct normalized URLs and paths", n, mapped, len(owner))
}

// FuzzRel: no two distinct normalized URLs get one path; every path is safe.
func FuzzRel(f *testing.F) {
	f.Add("http://h.example/a", "https://h.example/a")
	f.Add("https://h.example:8443/a", "https://h_8443.example/a")
	f.Add("https://h.example/b!c", "https://h.example/b%21c")
	f.Add("https://h.example/b%20c", "https://h.example/b=20c")
	f.Add("https://h.example/a.git/b", "https://h.example/a%2Egit/b")
	f.Add("https://h.example/x", "https://h.example/x.git")
	p := urlpolicy.Policy{AllowPrivateHosts: true}
	f.Fuzz(func(t *testing.T, a, b string) {
		na, errA := p.Normalize(a)
		nb, errB := p.Normalize(b)
		if errA != nil || errB != nil {
			return
		}
		ra, errA := Rel(na)
		rb, errB := Rel(nb)
		if errA == nil {
			checkSafe(t, na, ra)
		}
		if errB == nil {
			checkSafe(t, nb, rb)
		}
		if errA == nil && errB == nil && na != nb && ra == rb {
			t.Fatalf("%q and %q share the mirror path %q", na, nb, ra)
		}
	})
}

// checkSafe: under the root, no hidden component, no nesting, nothing a URL decodes.
func checkSafe(t *testing.T, norm, rel string) {
	t.Helper()
	if !filepath.IsLocal(rel) || strings.ContainsAny(rel, "%?#\\ \x00") {
		t.Fatalf("%q -> %q: not a plain local path", norm, rel)
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for i, c := range parts {
		if c == "" || c[0] == '.' || len(c) > MaxComponent {
			t.Fatalf("%q -> %q: bad component %q", norm, rel, c)
		}
		// (the host is never a mirror: a mirror has a path under it)
		if last := i == len(parts)-1; i > 0 && last != strings.HasSuffix(c, ".git") {
			t.Fatalf("%q -> %q: .git where a mirror could nest, or missing at the end", norm, rel)
		}
	}
}
