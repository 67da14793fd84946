package listsync

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
)

// Environment variables read by ConfigFromEnv (the coordinator Lambda's configuration).
// The names are deployenv's, the contract with the CDK stack.
const (
	EnvRepo           = deployenv.ListRepo           // list repository URL; empty: no list sync
	EnvBranch         = deployenv.ListBranch         // branch; empty: the repository's HEAD
	EnvPath           = deployenv.ListPath           // comma-separated files or directories
	EnvInterval       = deployenv.ListInterval       // Go duration, e.g. 5m
	EnvPurgeThreshold = deployenv.ListPurgeThreshold // percent, e.g. 5 or 5%
	EnvDir            = deployenv.ListDir            // where the clone is kept
	EnvMaxBytes       = deployenv.ListMaxBytes       // bytes of the list files, in all
	EnvMaxURLs        = deployenv.ListMaxURLs        // valid URLs in the list
)

// Defaults.
const (
	DefaultPath           = "repos.txt"
	DefaultInterval       = time.Minute
	DefaultPurgeThreshold = 5.0 // percent
	// MinInterval keeps a typo ("5" for 5m) from polling the list server in a loop.
	MinInterval = time.Second
	// DefaultMaxBytes and DefaultMaxURLs bound what one list may make the coordinator
	// read and hold: about 100 bytes a URL, two lists at once (old and new) while
	// diffing, so about 1 GB for a full list of two million.
	DefaultMaxBytes = 256 << 20
	DefaultMaxURLs  = 2_000_000
)

// Config says where the list lives and how it is applied.
type Config struct {
	// Repo is the list repository's URL (http or https); empty disables the list sync.
	Repo string
	// Branch to follow; empty: the repository's HEAD. "main" and "refs/heads/main" are
	// the same.
	Branch string
	// Paths are the list files, or directories whose *.txt files (at any depth) are
	// lists; relative to the repository root, "." being the root. Default repos.txt.
	Paths []string
	// Interval between two fetches of the list repository; ticks in between do nothing.
	Interval time.Duration
	// PurgeThreshold is the percentage of the list's repos one change may remove without
	// an operator's confirmation; 0 holds every removal, 100 none. It is taken as given:
	// start from Defaults (or ConfigFromEnv) for the default of 5.
	PurgeThreshold float64
	// Dir keeps the list repository's clone (a bare mirror); default
	// $TMPDIR/mirrorfleet-list. The local fleet uses <data>/list.
	Dir string
	// MaxBytes bounds the list files' bytes in all, MaxURLs the valid URLs in them; a
	// list over either fails its sync (nothing of it is applied). Zero: the defaults.
	MaxBytes int64
	MaxURLs  int
}

// Defaults returns a Config with every default set and no repository.
func Defaults() Config {
	return Config{Paths: []string{DefaultPath}, Interval: DefaultInterval, PurgeThreshold: DefaultPurgeThreshold,
		Dir: filepath.Join(os.TempDir(), "mirrorfleet-list"), MaxBytes: DefaultMaxBytes, MaxURLs: DefaultMaxURLs}
}

// Enabled reports whether a list repository is configured.
func (c Config) Enabled() bool { return c.Repo != "" }

// withDefaults fills the fields whose zero value is never meant literally.
func (c Config) withDefaults() Config {
	d := Defaults()
	if len(c.Paths) == 0 {
		c.Paths = d.Paths
	}
	if c.Interval == 0 {
		c.Interval = d.Interval
	}
	if c.Dir == "" {
		c.Dir = d.Dir
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = d.MaxBytes
	}
	if c.MaxURLs <= 0 {
		c.MaxURLs = d.MaxURLs
	}
	return c
}

// ConfigFromEnv reads the MIRRORFLEET_LIST_* variables over Defaults and validates
// them. With MIRRORFLEET_LIST_REPO unset the result is not Enabled and the other
// variables are still checked, so a typo is reported rather than ignored.
func ConfigFromEnv() (Config, error) {
	return configFrom(os.Getenv)
}

func configFrom(getenv func(string) string) (Config, error) {
	c := Defaults()
	var errs []error
	c.Repo = strings.TrimSpace(getenv(EnvRepo))
	c.Branch = strings.TrimSpace(getenv(EnvBranch))
	if v := getenv(EnvPath); strings.TrimSpace(v) != "" {
		c.Paths = SplitPaths(v)
	}
	if v := strings.TrimSpace(getenv(EnvInterval)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not a duration (e.g. 5m, 90s)", EnvInterval, v))
		}
		c.Interval = d
	}
	if v := strings.TrimSpace(getenv(EnvPurgeThreshold)); v != "" {
		p, err := ParsePercent(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvPurgeThreshold, err))
		}
		c.PurgeThreshold = p
	}
	if v := strings.TrimSpace(getenv(EnvDir)); v != "" {
		c.Dir = v
	}
	if v := strings.TrimSpace(getenv(EnvMaxBytes)); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q is not a positive number of bytes", EnvMaxBytes, v))
		}
		c.MaxBytes = n
	}
	if v := strings.TrimSpace(getenv(EnvMaxURLs)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q is not a positive number of URLs", EnvMaxURLs, v))
		}
		c.MaxURLs = n
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("list sync configuration: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// SplitPaths splits a comma-separated list of paths, dropping empty items.
func SplitPaths(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ParsePercent reads a purge threshold: a number from 0 to 100, optionally followed by %.
func ParsePercent(v string) (float64, error) {
	s := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "%"))
	p, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(p) || p < 0 || p > 100 {
		return 0, fmt.Errorf("%q is not a percentage from 0 to 100 (e.g. 5 or 12.5%%)", v)
	}
	return p, nil
}

// Validate checks the configuration without contacting anything. The repository URL
// is checked against the URL policy later, by New.
func (c Config) Validate() error {
	var errs []error
	if c.Repo != "" {
		u, err := url.Parse(c.Repo)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("list repository %q is not a URL: %v", c.Repo, err))
		case u.Scheme != "http" && u.Scheme != "https":
			// go-git reaches only http(s) through the policy-checked client; git:// and
			// ssh dial on their own (docs/adr/0006-no-git-protocol.md).
			errs = append(errs, fmt.Errorf("list repository %q: use an https:// (or http://) URL", c.Repo))
		}
	}
	if c.Branch != "" {
		if _, err := branchRef(c.Branch); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range c.Paths {
		if _, err := cleanPath(p); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Interval != 0 && c.Interval < MinInterval {
		errs = append(errs, fmt.Errorf("list interval %s is shorter than %s", c.Interval, MinInterval))
	}
	if math.IsNaN(c.PurgeThreshold) || c.PurgeThreshold < 0 || c.PurgeThreshold > 100 {
		errs = append(errs, fmt.Errorf("purge threshold %v%% is not from 0 to 100", c.PurgeThreshold))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("list sync configuration: %w", err)
	}
	return nil
}

// branchRef turns a configured branch into its full reference name.
func branchRef(b string) (plumbing.ReferenceName, error) {
	name := plumbing.ReferenceName(b)
	if !strings.HasPrefix(b, "refs/") {
		name = plumbing.NewBranchReferenceName(b)
	}
	if err := name.Validate(); err != nil || !name.IsBranch() {
		return "", fmt.Errorf("list branch %q is not a valid branch name", b)
	}
	return name, nil
}

// cleanPath checks a list path: relative, inside the repository, in slash form.
func cleanPath(p string) (string, error) {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("list path %q must be relative to the repository root, with / separators", p)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("list path %q leaves the repository", p)
	}
	return c, nil
}
