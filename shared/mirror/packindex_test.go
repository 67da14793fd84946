package mirror

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
)

// A first mirror's pack index, built from the pack on disk, is byte for byte the one
// `git index-pack` writes for the same pack, on a history full of deltas (many
// versions of the same files, which upload-pack sends as delta chains) and tags.
func TestFirstMirrorIndexMatchesGit(t *testing.T) {
	s := newGitServer(t)
	u := s.newRepo(t, "x/deltas.git")
	text := strings.Repeat("the same line of text, again and again\n", 200)
	for i := range 40 {
		u.commit(t, fmt.Sprintf("c%d", i), map[string][]byte{
			"a.txt":                      []byte(text + fmt.Sprintf("change %d\n", i)),
			fmt.Sprintf("d/%d.txt", i%7): []byte(fmt.Sprintf("%s%d\n", text[:2000], i)),
			"bin":                        gittest.RandomBytes(t, 300),
		})
		if i%10 == 0 {
			u.git(t, "tag", "-a", "-m", "tag", fmt.Sprintf("v%d", i))
		}
	}
	m := newTestMirrorer(t, Config{})
	tg := u.target("deltas")
	if res := mustSync(t, m, tg); !res.Cloned {
		t.Fatal("not cloned")
	}
	dir := mirrorDir(t, m, tg)
	packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "pack-*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	ours, err := os.ReadFile(strings.TrimSuffix(packs[0], ".pack") + ".idx")
	if err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(t.TempDir(), "git.idx")
	gittest.Run(t, s.Home, "", nil, "index-pack", "-o", theirs, packs[0])
	want, err := os.ReadFile(theirs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, want) {
		t.Fatalf("index differs from git index-pack's (%d bytes, git's %d)", len(ours), len(want))
	}
	if v := gittest.Run(t, s.Home, "", nil, "verify-pack", "-v", packs[0]); !strings.Contains(v, "chain length = 1") {
		t.Fatalf("the pack has no deltas to resolve:\n%s", v)
	}
	fsck(t, "", dir)
	assertMirrored(t, m, u, tg)
	if tmps, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "tmp_*")); len(tmps) > 0 {
		t.Fatalf("temp files left: %v", tmps)
	}
}
