package gitcmd

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
// older than MinVersion. The error says what to install. The Git it returns counts
// nothing until its Metrics is set.
func Find(ctx context.Context) (Git, error) {
	path, err := Locate(os.Getenv)
	if err != nil {
		return Git{}, err
	}
	g := Git{Path: path}
	out, err := g.Output(ctx, Cmd{Args: []string{"version"}, Timeout: VersionTimeout})
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
	g.Version = v
	return g, nil
}

// Locate is the git binary Find checks, without running it: $MIRRORFLEET_GIT (read
// with getenv), else git on PATH. The error says what to install.
func Locate(getenv func(string) string) (string, error) {
	name := getenv(EnvGit)
	from := EnvGit
	if name == "" {
		name, from = "git", "PATH"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("git not found (looked for %q on %s): mirrorfleet serves and maintains mirrors with git %s or newer; install it (Debian/Ubuntu: apt install git) or set %s: %w",
			name, from, MinVersion, EnvGit, err)
	}
	return path, nil
}

// VersionTimeout bounds `git version`, which answers at once unless the binary (or the
// file system it is on) is broken.
const VersionTimeout = 10 * time.Second

// CheckRuns runs `git version`: whether git still runs (the health check).
func (g Git) CheckRuns(ctx context.Context) error {
	return g.Run(ctx, Cmd{Args: []string{"version"}, Timeout: VersionTimeout})
}

// ErrTooOld: the git found is older than MinVersion.
var ErrTooOld = errors.New("git too old")
