package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// Every flag of run's is under one heading of -h and the example file, once.
func TestEveryRunFlagHasAGroup(t *testing.T) {
	fs := newRunFlags(io.Discard).fs
	in := map[string]string{}
	for _, g := range runGroups() {
		for _, n := range g.names {
			if prev, dup := in[n]; dup {
				t.Errorf("--%s is under %q and %q", n, prev, g.title)
			}
			in[n] = g.title
			if fs.Lookup(n) == nil {
				t.Errorf("group %q names --%s, which run does not have", g.title, n)
			}
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := in[f.Name]; !ok {
			t.Errorf("--%s is under no heading of run -h: add it to runGroups", f.Name)
		}
	})
}

func writeFile(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func envFunc(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// The command line wins over the environment, which wins over the file, which wins
// over the defaults; arrays and tables are repeated flags.
func TestRunSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "fleet.toml", `
listen = "127.0.0.1:9001"
workers = 5
host-rate = 1.5
fetchers = 4
grace = "3m"
allow-private-hosts = true
token = "from-file"
notify-url = ["https://a.example/hook", "https://b.example/hook"]
webhook-secret-for = { "github.com" = "s1", "gitlab.example" = "s2" }
url = "http://elsewhere:1"   # the CLI's key: run leaves it alone
`, 0o600)
	r := newRunFlags(io.Discard)
	cfg, err := r.parse([]string{"--config", path, "--listen", "127.0.0.1:9002"},
		envFunc("MIRRORFLEET_WORKERS", "7", "MIRRORFLEET_TOKEN", "from-env"))
	if err != nil {
		t.Fatal(err)
	}
	d := newRunFlags(io.Discard)
	def, err := d.parse(nil, envFunc())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"listen: the flag", cfg.Listen, "127.0.0.1:9002"},
		{"workers: the environment", cfg.Workers, 7},
		{"token: the environment", cfg.Token, "from-env"},
		{"host-rate: the file", cfg.HostRate, 1.5},
		{"fetchers: the file", cfg.Fetchers, 4},
		{"grace: the file", cfg.Grace, 3 * time.Minute},
		{"allow-private-hosts: the file", cfg.AllowPrivateHosts, true},
		{"notify-url: the file's array", len(cfg.Events.NotifyURLs), 2},
		{"webhook-secret-for: the file's table", cfg.WebhookSecretFor["gitlab.example"], "s2"},
		{"heartbeat: the default", cfg.Heartbeat, def.Heartbeat},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}

	// $MIRRORFLEET_CONFIG names the file when --config does not.
	cfg, err = newRunFlags(io.Discard).parse(nil, envFunc("MIRRORFLEET_CONFIG", path))
	if err != nil || cfg.Listen != "127.0.0.1:9001" || cfg.Token != "from-file" {
		t.Errorf("$MIRRORFLEET_CONFIG: listen %q token %q, %v", cfg.Listen, cfg.Token, err)
	}
}

func TestRunSettingsRefused(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, body string
		mode       os.FileMode
		want       string
	}{
		{"readable-secret", "token = \"x\"\n", 0o644, "chmod 600"},
		{"group-secret", "[webhook-secret-for]\n\"github.com\" = \"x\"\n", 0o640, "webhook-secret-for"},
		{"underscore", "host_rate = 1\n", 0o600, "did you mean host-rate?"},
		{"unknown", "fetchrs = 1\n", 0o600, `unknown key "fetchrs"`},
		{"not-toml", "url = http://x\n", 0o600, "not valid TOML"},
		{"array-for-one", "workers = [1, 2]\n", 0o600, "workers: takes one value"},
		{"bad-value", "workers = \"many\"\n", 0o600, "workers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, dir, c.name+".toml", c.body, c.mode)
			_, err := newRunFlags(io.Discard).parse([]string{"--config", p}, envFunc())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
	// No secret: a file anyone may read is fine.
	p := writeFile(t, dir, "open.toml", "workers = 2\n", 0o644)
	if cfg, err := newRunFlags(io.Discard).parse([]string{"--config", p}, envFunc()); err != nil || cfg.Workers != 2 {
		t.Fatalf("a readable file without secrets: %v", err)
	}
	// A named file that is not there is an error, not an empty config.
	if _, err := newRunFlags(io.Discard).parse([]string{"--config", filepath.Join(dir, "absent.toml")}, envFunc()); err == nil {
		t.Fatal("a missing --config file was accepted")
	}
}

// `config example` names every key of run's, and the file it prints, with every key
// uncommented, is one run accepts.
func TestConfigExample(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"config", "example"}, &out, io.Discard); code != 0 {
		t.Fatalf("config example: exit %d", code)
	}
	key := regexp.MustCompile(`(?m)^# ([a-z_-]+) = (.*)$`)
	body := key.ReplaceAllString(out.String(), "$1 = $2")
	body = strings.Replace(body, `list-repo = ""`, `list-repo = "https://example.org/list.git"`, 1)
	m := map[string]any{}
	if _, err := toml.Decode(body, &m); err != nil {
		t.Fatalf("the example uncommented is not TOML: %v\n%s", err, body)
	}
	fs := newRunFlags(io.Discard).fs
	var missing []string
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := m[f.Name]; !ok && f.Name != "config" {
			missing = append(missing, f.Name)
		}
	})
	if len(missing) > 0 {
		t.Errorf("the example lacks %v", missing)
	}
	p := writeFile(t, t.TempDir(), "example.toml", body, 0o600)
	cfg, err := newRunFlags(io.Discard).parse([]string{"--config", p}, envFunc())
	if err != nil {
		t.Fatalf("run refuses its own example: %v", err)
	}
	if cfg.Workers != fleetDefaults(t).Workers || cfg.Serve.MaxPerClient == 0 {
		t.Errorf("the example's values are not the defaults: workers %d", cfg.Workers)
	}
}

func fleetDefaults(t *testing.T) (cfg struct{ Workers int }) {
	t.Helper()
	c, err := newRunFlags(io.Discard).parse(nil, envFunc())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workers = c.Workers
	return cfg
}

// run -h lists the flags under headings, the most used first, with two dashes.
func TestRunHelpIsGrouped(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"run", "-h"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("run -h: exit %d", code)
	}
	h := stderr.String()
	if strings.Contains(h, "Usage of run") {
		t.Error("run -h is Go's default usage")
	}
	var at []int
	for _, g := range runGroups() {
		i := strings.Index(h, "\n"+g.title+":\n")
		if i < 0 {
			t.Fatalf("no heading %q in\n%s", g.title, h)
		}
		at = append(at, i)
	}
	if !slices.IsSorted(at) {
		t.Errorf("headings out of order: %v", at)
	}
	if i := strings.Index(h, "  --data "); i < 0 || i > at[1] {
		t.Errorf("--data is not under the first heading")
	}
	if strings.Contains(h, "\nOther:\n") {
		t.Error("some flags have no heading")
	}
}
