package serve

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

type oneRepo struct{}

func (oneRepo) ListRepos(context.Context, string, int) ([]store.Repo, string, error) {
	return []store.Repo{{ID: "r1", URL: "https://example.com/a/b.git", LastSuccessAt: time.Unix(1_700_000_000, 0)}}, "", nil
}

// The index's clone URLs come from the configured base, never from the request's
// Host header (a client must not put its host into the URLs others are shown).
func TestIndexIgnoresHost(t *testing.T) {
	for _, base := range []string{"https://git.example.org", ""} {
		e := newEnv(t, func(c *Config) { c.Index, c.BaseURL = oneRepo{}, base })
		status, _, body := e.do("GET", "/git/?format=json", map[string]string{"Host": "evil.example"}, nil)
		if status != 200 || strings.Contains(body, "evil.example") || !strings.Contains(body, `"clone_url":"`+base+`/git/example.com/a/b`) {
			t.Fatalf("base %q: %d %s", base, status, body)
		}
	}
}
