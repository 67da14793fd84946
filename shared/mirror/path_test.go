package mirror

import (
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

func TestPathStaysUnderRoot(t *testing.T) {
	m := &Mirrorer{root: "/srv/mirrors"}
	p, err := m.Path(fetch.Target{URL: "https://example.com/a/b"})
	if err != nil || p != "/srv/mirrors/example.com/a/b.git" {
		t.Fatalf("Path = %q, %v", p, err)
	}
	if m.Exists(fetch.Target{URL: "https://example.com/../../etc"}) {
		t.Fatal("Exists of an escaping URL")
	}
}
