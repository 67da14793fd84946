package mirror

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// Every sync that moves refs says which, with their old and new ids: a clone creates
// them all; later syncs report pushes, force-pushes, new and deleted tags and branches.
func TestSyncReportsRefMoves(t *testing.T) {
	s := newGitServer(t)
	u := buildBasic(t, s, "x/moves")
	m := newTestMirrorer(t, Config{})
	tg := u.target("moves")

	res := mustSync(t, m, tg)
	if got, want := len(res.Refs), strings.Count(u.refs(t), "\n")+1; got != want {
		t.Fatalf("clone reported %d refs, upstream has %d:\n%v", got, want, res.Refs)
	}
	for _, r := range res.Refs {
		if r.Old != fetch.ZeroHash || r.New == fetch.ZeroHash {
			t.Fatalf("clone: %+v, want a created ref", r)
		}
	}

	oldMain := u.git(t, "rev-parse", "refs/heads/main")
	oldTag := u.git(t, "rev-parse", "refs/tags/v0.1")
	u.commit(t, "new on main", map[string][]byte{"d.txt": []byte("d\n")})
	u.git(t, "tag", "-d", "v0.1")
	u.git(t, "tag", "v2")
	newMain := u.git(t, "rev-parse", "refs/heads/main")

	res = mustSync(t, m, tg)
	want := []fetch.RefUpdate{
		{Name: "refs/heads/main", Old: oldMain, New: newMain},
		{Name: "refs/tags/v0.1", Old: oldTag, New: fetch.ZeroHash},
		{Name: "refs/tags/v2", Old: fetch.ZeroHash, New: newMain},
	}
	if fmt.Sprint(res.Refs) != fmt.Sprint(want) {
		t.Fatalf("refs moved:\n got %v\nwant %v", res.Refs, want)
	}

	// A branch deletion alone (no pack fetched) is reported too.
	oldFeature := u.git(t, "rev-parse", "refs/heads/feature")
	u.git(t, "branch", "-D", "feature")
	res = mustSync(t, m, tg)
	if want := []fetch.RefUpdate{{Name: "refs/heads/feature", Old: oldFeature, New: fetch.ZeroHash}}; fmt.Sprint(res.Refs) != fmt.Sprint(want) {
		t.Fatalf("deletion: got %v, want %v", res.Refs, want)
	}
	if res := mustSync(t, m, tg); len(res.Refs) != 0 || res.Changed {
		t.Fatalf("no-change poll reported %+v", res)
	}
}
