package mirrorpath

import (
	"path/filepath"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

func TestRel(t *testing.T) {
	ok := []struct{ url, want string }{
		{"https://example.com/a/b", "example.com/a/b.git"},
		{"https://example.com/a/b.git", "example.com/a/b.git"},
		{"https://example.com/a/b/", "example.com/a/b.git"},
		{"https://Example.COM/Org/Repo", "example.com/Org/Repo.git"},
		{"https://example.com:8443/a/b", "example.com_8443/a/b.git"},
		{"https://example.com:443/a/b", "example.com/a/b.git"},
		{"http://example.com:80/a/b", "example.com/a/b.git"},
		{"http://127.0.0.1:39999/x/basic", "127.0.0.1_39999/x/basic.git"},
		{"https://[::1]:8443/a", "[::1]_8443/a.git"},
		{"https://example.com/group/sub/deep/repo", "example.com/group/sub/deep/repo.git"},
		// escaped, never interpreted by the file system
		{"https://example.com/a/.hidden", "example.com/a/%2Ehidden.git"},
		{"https://example.com/a%2Fb/c", "example.com/a%2Fb/c.git"},
		{"https://example.com/a%5C..%5Cb/c", "example.com/a%5C..%5Cb/c.git"},
		{"https://example.com/we%20ird/r%25", "example.com/we%20ird/r%25.git"},
		{"https://example.com/%C3%A9t%C3%A9/r", "example.com/%C3%A9t%C3%A9/r.git"},
		// a mirror never nests inside another one's directory
		{"https://example.com/a.git/b", "example.com/a%2Egit/b.git"},
		{"https://example.com/a.git.git", "example.com/a.git.git"},
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
		"https://example.com/.git",
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
		"https://.hidden/a",
		"https://-x/a",
		"https://ex%2Fample.com/a",
		"https://example.com:0/a",
		"https://example.com:99999/a",
		"https://[fe80::1%25eth0]/a",
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
