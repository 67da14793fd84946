package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
)

// Where the CLI finds its fleet, first match wins (README, "Use the CLI from anywhere"):
//
//	API URL: --api, $MIRRORFLEET_URL ($MIRRORFLEET_API, its older name), `url` in the
//	         config file, http://127.0.0.1:8080
//	token:   --token, $MIRRORFLEET_TOKEN, `token` or `token_file` in the config file,
//	         <--data>/token (default ./.mirrorfleet/token)
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
			case run.Lookup(k) != nil:
			default:
				return c, fmt.Errorf("config file %s: unknown key %q (want url, token, token_file or one of run's flags)", path, k)
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
		default:
			return c, fmt.Errorf("%s:%d: unknown key %q (want url, token or token_file)", path, n, k)
		}
	}
	return c, sc.Err()
}

// resolve picks the API URL and token from the flags (empty: not given), the
// environment and the config file, in the order above.
func resolve(apiFlag, tokenFlag, dataFlag string, getenv func(string) string) (api, token string, err error) {
	cpath := configPath(getenv)
	cfg, err := loadConfig(cpath, getenv("MIRRORFLEET_CONFIG") != "")
	if err != nil {
		return "", "", err
	}
	api = firstOf(apiFlag, getenv("MIRRORFLEET_URL"), getenv("MIRRORFLEET_API"), cfg.url, defaultAPI)
	token = firstOf(tokenFlag, getenv("MIRRORFLEET_TOKEN"), cfg.token)
	if token == "" && cfg.tokenFile != "" {
		b, err := os.ReadFile(cfg.tokenFile)
		if err != nil {
			return "", "", fmt.Errorf("token_file in %s: %w", cpath, err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		if b, err := os.ReadFile(filepath.Join(dataFlag, "token")); err == nil {
			token = strings.TrimSpace(string(b))
		}
	}
	return strings.TrimRight(api, "/"), token, nil
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
