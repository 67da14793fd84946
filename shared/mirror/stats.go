package mirror

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// refMap is name -> hash for the hash refs under refs/.
type refMap map[plumbing.ReferenceName]plumbing.Hash

func (a refMap) equal(b refMap) bool {
	if len(a) != len(b) {
		return false
	}
	for n, h := range a {
		if bh, ok := b[n]; !ok || bh != h {
			return false
		}
	}
	return true
}

// moves lists the refs that differ from a (before) to b (after), sorted by name.
func (a refMap) moves(b refMap) []fetch.RefUpdate {
	var out []fetch.RefUpdate
	for n, h := range a {
		if bh, ok := b[n]; !ok {
			out = append(out, fetch.RefUpdate{Name: n.String(), Old: h.String(), New: fetch.ZeroHash})
		} else if bh != h {
			out = append(out, fetch.RefUpdate{Name: n.String(), Old: h.String(), New: bh.String()})
		}
	}
	for n, h := range b {
		if _, ok := a[n]; !ok {
			out = append(out, fetch.RefUpdate{Name: n.String(), Old: fetch.ZeroHash, New: h.String()})
		}
	}
	slices.SortFunc(out, func(x, y fetch.RefUpdate) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// localRefs reads the mirror's refs (loose and packed) and its HEAD.
func localRefs(s storer.ReferenceStorer) (refMap, *plumbing.Reference, error) {
	iter, err := s.IterReferences()
	if err != nil {
		return nil, nil, err
	}
	defer iter.Close()
	refs := refMap{}
	var head *plumbing.Reference
	err = iter.ForEach(func(r *plumbing.Reference) error {
		switch {
		case r.Name() == plumbing.HEAD:
			head = r
		case r.Type() == plumbing.HashReference && strings.HasPrefix(r.Name().String(), "refs/"):
			refs[r.Name()] = r.Hash()
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if head == nil {
		// IterReferences may skip a HEAD whose target is missing (empty repo).
		if h, err := s.Reference(plumbing.HEAD); err == nil {
			head = h
		}
	}
	return refs, head, nil
}

// remoteRefs splits a go-git ls-remote answer into the refs/ hash refs and HEAD.
func remoteRefs(list []*plumbing.Reference) (refMap, *plumbing.Reference) {
	refs := refMap{}
	var head *plumbing.Reference
	for _, r := range list {
		switch {
		case r.Name() == plumbing.HEAD:
			head = r
		case r.Type() == plumbing.HashReference && strings.HasPrefix(r.Name().String(), "refs/"):
			refs[r.Name()] = r.Hash()
		}
	}
	return refs, head
}

// refsDigest names a set of refs and a HEAD, so that a poll can tell the upstream's
// refs from the mirror's without either file or advertisement kept: 128 bits of
// SHA-256 over the refs' names and ids in name order, then HEAD's target or id.
// (Ref names hold no space or newline.)
func refsDigest(refs refMap, head *plumbing.Reference) string {
	h := sha256.New()
	for _, n := range slices.Sorted(maps.Keys(refs)) {
		fmt.Fprintf(h, "%s %s\n", n, refs[n])
	}
	switch {
	case head == nil:
		io.WriteString(h, "HEAD\n")
	case head.Type() == plumbing.SymbolicReference:
		fmt.Fprintf(h, "HEAD ref: %s\n", head.Target())
	default:
		fmt.Fprintf(h, "HEAD %s\n", head.Hash())
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// syncedDigest is the digest a sync reports for a mirror left with refs and head:
// the upstream's advertisement (want, wantHead) when the mirror matches it — its refs,
// and HEAD unless the upstream advertised none, which the mirror then keeps — so the
// next poll of an unchanged upstream matches; else the mirror's own.
func syncedDigest(refs refMap, head *plumbing.Reference, want refMap, wantHead *plumbing.Reference) string {
	if refs.equal(want) && (wantHead == nil || sameHead(wantHead, head)) {
		return refsDigest(want, wantHead)
	}
	return refsDigest(refs, head)
}

func sameHead(a, b *plumbing.Reference) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Type() != b.Type() {
		return false
	}
	if a.Type() == plumbing.SymbolicReference {
		return a.Target() == b.Target()
	}
	return a.Hash() == b.Hash()
}

// maxPeel bounds tag-of-tag chains.
const maxPeel = 16

// lastCommitAt is the newest committer time over the commits the refs point to,
// annotated tags peeled; refs to trees or blobs are skipped. A ref whose object is
// missing is an error (the mirror is corrupt).
func lastCommitAt(s storer.EncodedObjectStorer, refs refMap) (time.Time, error) {
	tips, err := tipCommits(s, refs)
	if err != nil {
		return time.Time{}, err
	}
	var newest time.Time
	for _, c := range tips {
		if c.Committer.When.After(newest) {
			newest = c.Committer.When
		}
	}
	if newest.IsZero() {
		return newest, nil
	}
	return newest.UTC(), nil
}

// dirSize is the apparent size of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}
