// Package gitbin finds the git binary that serving (upload-pack) and mirror maintenance
// (repack, commit-graph, fsck) run, and checks at start-up that it is new enough, so a
// missing or old git is one clear message instead of a failure on the first clone.
package gitbin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// EnvGit names a git binary to use instead of the one on PATH.
const EnvGit = "MIRRORFLEET_GIT"

// MinVersion is the oldest git with everything used: multi-pack-index bitmaps for
// geometric repacks (2.34); protocol v2, packObjectsHook and commit-graph chains are older.
var MinVersion = Version{2, 34, 0}

// Version is a git release number.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor < w.Minor
	}
	return v.Patch < w.Patch
}

// Git is a checked git binary.
type Git struct {
	Path    string
	Version Version
}

var versionRE = regexp.MustCompile(`^git version (\d+)\.(\d+)(?:\.(\d+))?`)

// ParseVersion reads the output of `git version`.
func ParseVersion(out string) (Version, error) {
	m := versionRE.FindStringSubmatch(strings.TrimSpace(out))
	if m == nil {
		return Version{}, fmt.Errorf("unrecognised `git version` output %q", strings.TrimSpace(out))
	}
	var v Version
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	if m[3] != "" {
		v.Patch, _ = strconv.Atoi(m[3])
	}
	return v, nil
}

// Find locates git ($MIRRORFLEET_GIT, else PATH), runs `git version` and refuses a git
// older than MinVersion. The error says what to install.
func Find(ctx context.Context) (Git, error) {
	name := os.Getenv(EnvGit)
	from := EnvGit
	if name == "" {
		name, from = "git", "PATH"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return Git{}, fmt.Errorf("git not found (looked for %q on %s): mirrorfleet serves and maintains mirrors with git %s or newer; install it (Debian/Ubuntu: apt install git) or set %s: %w",
			name, from, MinVersion, EnvGit, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "version")
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		return Git{}, fmt.Errorf("running %s version: %w", path, err)
	}
	v, err := ParseVersion(string(out))
	if err != nil {
		return Git{}, fmt.Errorf("%s: %w", path, err)
	}
	if v.Less(MinVersion) {
		return Git{}, fmt.Errorf("%s is git %s; mirrorfleet needs git %s or newer for serving and maintenance: %w",
			path, v, MinVersion, ErrTooOld)
	}
	return Git{Path: path, Version: v}, nil
}

// ErrTooOld: the git found is older than MinVersion.
var ErrTooOld = errors.New("git too old")
