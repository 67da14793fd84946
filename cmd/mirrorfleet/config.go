package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Where the CLI finds its fleet, first match wins (docs/operations.md, "Configure it"):
//
//	API URL: --api, $MIRRORFLEET_URL ($MIRRORFLEET_API, its older name), `url` in the
//	         config file, http://127.0.0.1:8080
//	token:   --token, $MIRRORFLEET_TOKEN, `token` or `token_file` in the config file,
//	         <--data>/token (default ./.mirrorfleet/token)
//	SigV4:   --aws, $MIRRORFLEET_AWS, `aws` in the config file, off: sign the requests
//	         with AWS credentials (the stack's API takes IAM auth) instead of the token
//
// The config file is $MIRRORFLEET_CONFIG, else $XDG_CONFIG_HOME/mirrorfleet/config
// (~/.config/mirrorfleet/config): `key = value` lines, # comments.
const defaultAPI = "http://127.0.0.1:8080"

// clientConfig is the config file's settings.
type clientConfig struct {
	path      string
	url       string
	token     string
	tokenFile string
	aws       *bool // nil: not set
}

// configPath is the config file to read ("" when there is no home to find one in).
func configPath(getenv func(string) string) string {
	if p := getenv("MIRRORFLEET_CONFIG"); p != "" {
		return p
	}
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "mirrorfleet", "config")
}

// loadConfig reads the config file at path; a missing file is an empty config, unless
// it was named explicitly ($MIRRORFLEET_CONFIG). The file is TOML, the same file
// `mirrorfleet run --config` reads (its keys for run are left alone here); the older
// form of unquoted `key = value` lines is still read.
func loadConfig(path string, explicit bool) (clientConfig, error) {
	c := clientConfig{path: path}
	if path == "" {
		return c, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !explicit {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("config file: %w", err)
	}
	m := map[string]any{}
	if _, terr := toml.Decode(string(b), &m); terr != nil {
		if c, err = loadLegacyConfig(path, b); err != nil {
			return c, err
		}
	} else {
		run := newRunFlags(io.Discard).fs
		for k, v := range m {
			s, isString := v.(string)
			switch {
			case k == "url" || k == "token" || k == "token_file":
				if !isString {
					return c, fmt.Errorf("config file %s: %s must be a string", path, k)
				}
				c.set(path, k, s)
			case k == "aws":
				b, isBool := v.(bool)
				if !isBool {
					return c, fmt.Errorf("config file %s: aws must be true or false", path)
				}
				c.aws = &b
			case run.Lookup(k) != nil:
			default:
				return c, fmt.Errorf("config file %s: unknown key %q (want url, token, token_file, aws or one of run's flags)", path, k)
			}
		}
	}
	if c.token != "" {
		if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
			return c, fmt.Errorf("config file %s holds the API token and other users can read it (mode %04o): chmod 600 it", path, st.Mode().Perm())
		}
	}
	return c, nil
}

// set takes one of the client's keys.
func (c *clientConfig) set(path, k, v string) {
	switch k {
	case "url":
		c.url = v
	case "token":
		c.token = v
	case "token_file":
		if !filepath.IsAbs(v) {
			v = filepath.Join(filepath.Dir(path), v)
		}
		c.tokenFile = v
	}
}

// loadLegacyConfig reads the older form: `key = value` lines, # comments.
func loadLegacyConfig(path string, b []byte) (clientConfig, error) {
	c := clientConfig{path: path}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok:
			return c, fmt.Errorf("%s:%d: want `key = value`, got %q", path, n, line)
		case k == "url" || k == "token" || k == "token_file":
			c.set(path, k, v)
		case k == "aws":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return c, fmt.Errorf("%s:%d: aws must be true or false, not %q", path, n, v)
			}
			c.aws = &b
		default:
			return c, fmt.Errorf("%s:%d: unknown key %q (want url, token, token_file or aws)", path, n, k)
		}
	}
	return c, sc.Err()
}

// target is where the client commands send their requests, and how they authenticate.
type target struct {
	api   string
	token string
	aws   bool // sign with SigV4 (signWithAWS) instead of the token
}

// targetFlags are the common flags that name a target; empty (nil for aws): not given.
type targetFlags struct {
	api, token, data string
	aws              *bool
}

// resolve picks the API URL, the token and whether to sign with AWS credentials from
// the flags, the environment and the config file, in the order above.
func resolve(f targetFlags, getenv func(string) string) (target, error) {
	cpath := configPath(getenv)
	cfg, err := loadConfig(cpath, getenv("MIRRORFLEET_CONFIG") != "")
	if err != nil {
		return target{}, err
	}
	t := target{
		api:   firstOf(f.api, getenv("MIRRORFLEET_URL"), getenv("MIRRORFLEET_API"), cfg.url, defaultAPI),
		token: firstOf(f.token, getenv("MIRRORFLEET_TOKEN"), cfg.token),
	}
	switch v := getenv("MIRRORFLEET_AWS"); {
	case f.aws != nil:
		t.aws = *f.aws
	case v != "":
		if t.aws, err = strconv.ParseBool(v); err != nil {
			return target{}, usageError{fmt.Sprintf("$MIRRORFLEET_AWS=%q: want true or false", v)}
		}
	case cfg.aws != nil:
		t.aws = *cfg.aws
	}
	if t.token == "" && cfg.tokenFile != "" {
		b, err := os.ReadFile(cfg.tokenFile)
		if err != nil {
			return target{}, fmt.Errorf("token_file in %s: %w", cpath, err)
		}
		t.token = strings.TrimSpace(string(b))
	}
	if t.token == "" {
		if b, err := os.ReadFile(filepath.Join(f.data, "token")); err == nil {
			t.token = strings.TrimSpace(string(b))
		}
	}
	t.api = strings.TrimRight(t.api, "/")
	return t, nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
