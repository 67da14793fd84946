package repos

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

func TestAdd(t *testing.T) {
	st, err := bolt.OpenWith(filepath.Join(t.TempDir(), "s.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, p, now := t.Context(), urlpolicy.Default(), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	res := Add(ctx, st, p, " https://Example.com/a/b.git ", store.SourceAPI, now)
	if res.Err != nil || !res.Created || res.Repo.URL != "https://example.com/a/b" || res.Repo.ID != ID(p, "https://example.com/a/b") ||
		res.Repo.State != store.RepoPending || !res.Repo.CreatedAt.Equal(now) {
		t.Fatalf("first add: %+v", res)
	}
	if again := Add(ctx, st, p, "https://example.com/a/b", store.SourceList, now); again.Err != nil || again.Created || again.Repo.Source != store.SourceAPI {
		t.Fatalf("second add is not idempotent: %+v", again)
	}
	for raw, reason := range map[string]urlpolicy.Reason{"git://example.com/a": urlpolicy.ReasonScheme, "file:///etc/passwd": urlpolicy.ReasonLocalPath, "https://127.0.0.1/a": urlpolicy.ReasonPrivateHost} {
		var re *Error
		if r := Add(ctx, st, p, raw, store.SourceAPI, now); !errors.As(r.Err, &re) || re.Kind != InvalidURL || re.Reason != reason {
			t.Errorf("Add(%s) = %v; want InvalidURL/%s", raw, r.Err, reason)
		}
	}
	if err := st.RequestDelete(ctx, res.Repo.ID); err != nil {
		t.Fatal(err)
	}
	var re *Error
	if r := Add(ctx, st, p, "https://example.com/a/b", store.SourceAPI, now); !errors.As(r.Err, &re) || re.Kind != BeingDeleted {
		t.Errorf("adding a repo being deleted: %v", r.Err)
	}
}

// TestOneIdentityWhateverTheCase: on github.com, gitlab.com and a host configured so,
// Org/Repo and org/repo are one repo (the first spelling added is kept, and its
// mirror path); on other hosts they are two. A repo stored before ids were folded
// keeps its id and is found under its own spelling: adding that spelling again
// creates no second record (which would share its mirror directory).
func TestOneIdentityWhateverTheCase(t *testing.T) {
	st, err := bolt.OpenWith(filepath.Join(t.TempDir(), "s.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, now := t.Context(), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := urlpolicy.Policy{CaseInsensitiveHosts: []string{"git.example.org"}}
	for _, c := range []struct {
		first, second string
		one           bool
	}{
		{"https://github.com/org/repo", "https://github.com/Org/Repo", true},
		{"https://GitLab.com/Group/Sub/Proj.git", "https://gitlab.com/group/sub/proj", true},
		{"https://git.example.org/A/B", "https://git.example.org/a/b", true},
		{"https://codeberg.org/A/B", "https://codeberg.org/a/b", false},
	} {
		a := Add(ctx, st, p, c.first, store.SourceAPI, now)
		b := Add(ctx, st, p, c.second, store.SourceAPI, now)
		if a.Err != nil || b.Err != nil || !a.Created {
			t.Fatalf("%s then %s: %+v, %+v", c.first, c.second, a, b)
		}
		if same := a.Repo.ID == b.Repo.ID && !b.Created; same != c.one {
			t.Errorf("%s and %s one repo: %v, want %v", c.first, c.second, same, c.one)
		}
		if c.one && b.Repo.URL != a.Repo.URL {
			t.Errorf("the second spelling changed the repo's URL to %s", b.Repo.URL)
		}
		found, err := Find(ctx, st, p, strings.ToUpper(c.second[:8])+c.second[8:])
		if c.one && (err != nil || found.ID != a.Repo.ID) {
			t.Errorf("Find of %s in upper case: %+v %v", c.second, found, err)
		}
	}

	// A repo stored under the id of its spelling, as before ids were folded.
	legacyURL := "https://github.com/Legacy/Repo"
	legacy, _, err := st.CreateRepo(ctx, store.Repo{ID: store.RepoID(legacyURL), URL: legacyURL, Source: store.SourceAPI, State: store.RepoPending})
	if err != nil {
		t.Fatal(err)
	}
	again := Add(ctx, st, p, legacyURL, store.SourceAPI, now)
	if again.Err != nil || again.Created || again.Repo.ID != legacy.ID {
		t.Fatalf("adding a stored repo's own spelling: %+v", again)
	}
	if r, err := Find(ctx, st, p, legacyURL); err != nil || r.ID != legacy.ID {
		t.Fatalf("Find of the stored spelling: %+v %v", r, err)
	}
	if ids := IDs(p, legacyURL); len(ids) != 2 || ids[1] != legacy.ID || ids[0] != store.RepoID("https://github.com/legacy/repo") {
		t.Fatalf("IDs of a mixed-case path: %v", ids)
	}
	if ids := IDs(p, "https://github.com/lower/case"); len(ids) != 1 || ids[0] != store.RepoID("https://github.com/lower/case") {
		t.Fatalf("a lower-case path's id changed: %v", ids)
	}
}
