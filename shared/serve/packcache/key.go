package packcache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// keyVersion changes when what a key covers changes, so old entries are never used.
const keyVersion = "mirrorfleet-pack-cache-2"

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

// fingerprint writes what the packs served from the repository depend on, by content:
// HEAD, packed-refs and every loose ref (name and content), the reftable's table list,
// config, shallow and objects/info/alternates, and the names of the packs (a pack's
// name is its checksum). Not sizes and modification times: a ref rewritten within one
// timestamp step to a value of the same length must not keep its old entries.
// A mirror's refs are packed after every fetch, so this is a few small reads.
func fingerprint(h hash.Hash, repo string) error {
	head, err := os.ReadFile(filepath.Join(repo, "HEAD"))
	if err != nil {
		return fmt.Errorf("repository %s: %w", repo, err)
	}
	fmt.Fprintf(h, "HEAD %q\n", head)
	content := func(name, p string) error {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(h, "%s none\n", name)
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		c := sha256.New()
		if _, err := io.Copy(c, f); err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %x\n", name, c.Sum(nil))
		return nil
	}
	for _, name := range []string{"packed-refs", "config", "shallow", "reftable/tables.list", "objects/info/alternates"} {
		if err := content(name, filepath.Join(repo, filepath.FromSlash(name))); err != nil {
			return fmt.Errorf("repository %s: %w", repo, err)
		}
	}
	refs := filepath.Join(repo, "refs")
	err = filepath.WalkDir(refs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(refs, p)
			return content("refs/"+filepath.ToSlash(rel), p)
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
