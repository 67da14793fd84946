package packcache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// keyVersion changes when what a key covers changes, so old entries are never used.
const keyVersion = "mirrorfleet-pack-cache-1"

// Key identifies one pack: the same key always stands for the same pack bytes.
//
// It covers the repository (its path and a fingerprint of its refs and packs, so that
// a fetch or a repack starts new entries: --include-tag adds tags the refs point at
// now), the pack-objects arguments (--progress aside, which changes only what goes
// to standard error; a --shallow-file by its content, as its path is a temporary
// name), and the standard input upload-pack wrote (the wants, "--not" and the haves).
func Key(repo string, args []string, stdin []byte) (string, error) {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s\n", len(s), s) }
	field(keyVersion)
	field(repo)
	if err := fingerprint(h, repo); err != nil {
		return "", err
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--progress":
			continue
		case a == "--shallow-file" && i+1 < len(args) && args[i+1] == "":
			// upload-pack's "no shallow file" for a shallow request: the shallow
			// commits come on stdin, which the key covers.
			i++
			field(a)
			field("")
			continue
		case a == "--shallow-file" && i+1 < len(args):
			i++
			sum, err := fileSum(args[i])
			if err != nil {
				return "", fmt.Errorf("shallow file: %w", err)
			}
			field(a)
			field(sum)
			continue
		}
		field(a)
	}
	field(string(stdin))
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fingerprint writes what changes when the repository's refs or packs change: HEAD,
// packed-refs and every loose ref by name, size and modification time, and the names
// of the packs. A mirror's refs are packed after every fetch, so this is a few stats.
func fingerprint(h hash.Hash, repo string) error {
	head, err := os.ReadFile(filepath.Join(repo, "HEAD"))
	if err != nil {
		return fmt.Errorf("repository %s: %w", repo, err)
	}
	fmt.Fprintf(h, "HEAD %q\n", head)
	stat := func(name string, fi fs.FileInfo) {
		fmt.Fprintf(h, "%s %d %d\n", name, fi.Size(), fi.ModTime().UnixNano())
	}
	if fi, err := os.Stat(filepath.Join(repo, "packed-refs")); err == nil {
		stat("packed-refs", fi)
	}
	refs := filepath.Join(repo, "refs")
	err = filepath.WalkDir(refs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(refs, p)
			stat("refs/"+filepath.ToSlash(rel), fi)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("repository %s: refs: %w", repo, err)
	}
	packs, err := filepath.Glob(filepath.Join(repo, "objects", "pack", "*.pack"))
	if err != nil {
		return err
	}
	for _, p := range slices.Sorted(slices.Values(packs)) {
		fmt.Fprintf(h, "pack %s\n", filepath.Base(p))
	}
	return nil
}
