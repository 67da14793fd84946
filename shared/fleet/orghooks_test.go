package fleet_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// TestOrganizationHookCoversReposOfOtherWorkers: an organization-level GitHub push
// webhook for org/a, sent to the running fleet, fetches org/a and makes org/b, which
// another in-process worker owns, count as hooked there (its poll step stretched),
// while other/c on that same worker is not. A repo-level hook of team/a alone leaves
// team/b, on another worker, unstretched: one repo's hook does not cover its
// organization. Polls are an hour apart, so no poll changes what the hooks said.
func TestOrganizationHookCoversReposOfOtherWorkers(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	logs := dumpOnFailure(t)
	f := startWith(t, logs, func(c *fleet.Config) {
		c.Data, c.Warmup, c.Workers = t.TempDir(), -1, 3
		c.MinInterval = time.Hour
		c.WebhookSecret = hookSecret
	})
	waitRing(t, f, 3)

	// Pick the names so that the ring puts each organization's two repos on different
	// workers, and other/c with org/b: the repos' URLs hold the git server's port, so
	// fixed names would land anywhere.
	sr, err := f.Store.GetRing(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rg, err := ring.FromStore(sr)
	if err != nil {
		t.Fatal(err)
	}
	policy := urlpolicy.Policy{AllowPrivateHosts: true}
	ownerOf := func(name string) string {
		norm, err := policy.Normalize(srv.URL + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := rg.Owner(store.RingHash(store.RingKey(norm, 0)))
		if !ok {
			t.Fatal("empty ring")
		}
		return o
	}
	pick := func(base string, want func(owner string) bool) string {
		for i := range 100 {
			name := base
			if i > 0 {
				name = fmt.Sprintf("%s%d", base, i)
			}
			if want(ownerOf(name)) {
				return name
			}
		}
		t.Fatalf("no name %s… the ring puts where wanted", base)
		return ""
	}
	other := func(o string) func(string) bool { return func(x string) bool { return x != o } }
	same := func(o string) func(string) bool { return func(x string) bool { return x == o } }
	names := map[string]string{"org/a": "org/a", "team/a": "team/a"}
	names["org/b"] = pick("org/b", other(ownerOf("org/a")))
	names["other/c"] = pick("other/c", same(ownerOf(names["org/b"])))
	names["team/b"] = pick("team/b", other(ownerOf("team/a")))

	var list []*gittest.Repo
	byName := map[string]*gittest.Repo{}
	roleOf := map[*gittest.Repo]string{}
	for _, role := range []string{"org/a", "org/b", "other/c", "team/a", "team/b"} {
		up := srv.NewRepo(t, names[role])
		up.Commit(t, "init", map[string][]byte{"a": []byte(role)})
		list = append(list, up)
		byName[role], roleOf[up] = up, role
	}
	ups := addUpstreams(t, f, list)
	waitMirrored(t, f, ups, 60*time.Second)
	id := map[string]string{}
	for i, up := range ups {
		id[roleOf[up]] = i
	}
	repos := allRepos(t, f.Store)
	if a, b, c := repos[id["org/a"]].Owner, repos[id["org/b"]].Owner, repos[id["other/c"]].Owner; a == "" || a == b || b != c {
		t.Fatalf("owners: org/a %q, org/b %q, other/c %q; want org/a apart from org/b and other/c\n%s", a, b, c, dumpStore(t, f.Store))
	}
	if a, b := repos[id["team/a"]].Owner, repos[id["team/b"]].Owner; a == "" || a == b {
		t.Fatalf("owners: team/a %q, team/b %q; want different workers\n%s", a, b, dumpStore(t, f.Store))
	}
	stretch := func(role string) float64 {
		t.Helper()
		s, ok := f.PollStretch(id[role])
		if !ok {
			t.Fatalf("%s: no in-process worker holds it", role)
		}
		return s
	}
	for role := range id {
		if s := stretch(role); s != 1 {
			t.Fatalf("before any hook: %s stretch %v, want 1", role, s)
		}
	}
	// hook pushes to role's upstream, sends its signed webhook with extra headers and
	// waits until the mirror has the push.
	hook := func(role, delivery string, extra http.Header) {
		t.Helper()
		up := byName[role]
		up.Commit(t, "pushed", map[string][]byte{"a": []byte(role + " pushed")})
		if code, body := githubPushWith(t, f.Addr(), up.URL()+".git", delivery, hookSecret, extra); code != http.StatusAccepted || !strings.Contains(body, `"accepted"`) {
			t.Fatalf("hook of %s: %d %s", role, code, body)
		}
		waitMirrored(t, f, upstreams{id[role]: up}, 20*time.Second)
	}

	t.Run("organization-level", func(t *testing.T) {
		hook("org/a", "d-org", http.Header{"X-GitHub-Hook-Installation-Target-Type": {"organization"}})
		if s := stretch("org/a"); s <= 1 {
			t.Errorf("org/a after its own hook: stretch %v, want > 1", s)
		}
		if s := stretch("org/b"); s <= 1 {
			t.Errorf("org/b, on another worker, after its organization's hook: stretch %v, want > 1", s)
		}
		// The repo's API record shows it, from its worker.
		var got api.Repo
		getJSON(t, f, "/v1/repos/"+id["org/b"], &got)
		if got.PollStretch == nil || *got.PollStretch <= 1 {
			t.Errorf("GET org/b: poll_stretch %v, want > 1", got.PollStretch)
		}
		if s := stretch("other/c"); s != 1 {
			t.Errorf("other/c, on org/b's worker: stretch %v, want 1", s)
		}
		if s := stretch("team/b"); s != 1 {
			t.Errorf("team/b: stretch %v, want 1", s)
		}
	})

	t.Run("repo-level", func(t *testing.T) {
		hook("team/a", "d-team", http.Header{"X-GitHub-Hook-Installation-Target-Type": {"repository"}})
		if s := stretch("team/a"); s <= 1 {
			t.Errorf("team/a after its own hook: stretch %v, want > 1", s)
		}
		if s := stretch("team/b"); s != 1 {
			t.Errorf("team/b after a repo-level hook of team/a alone: stretch %v, want 1", s)
		}
	})
}
