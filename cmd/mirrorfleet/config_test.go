package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveOrder: flags, then the environment, then the config file, then the
// defaults, for the API URL and the token alike.
func TestResolveOrder(t *testing.T) {
	home := t.TempDir()
	cfgDir := filepath.Join(home, ".config", "mirrorfleet")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "tok"), []byte("from-token-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "token"), []byte("from-data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeCfg := func(body string) {
		if err := os.WriteFile(filepath.Join(cfgDir, "config"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	envOf := func(kv ...string) func(string) string {
		m := map[string]string{"HOME": home}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	check := func(what, apiFlag, tokFlag string, env func(string) string, wantAPI, wantTok string) {
		t.Helper()
		a, tok, err := resolve(apiFlag, tokFlag, data, env)
		if err != nil || a != wantAPI || tok != wantTok {
			t.Errorf("%s: %q %q %v, want %q %q", what, a, tok, err, wantAPI, wantTok)
		}
	}

	check("nothing set", "", "", envOf(), defaultAPI, "from-data")
	writeCfg("# mine\nurl = http://cfg.example:1/\ntoken_file = tok\n")
	check("config file", "", "", envOf(), "http://cfg.example:1", "from-token-file")
	check("environment over config", "", "", envOf("MIRRORFLEET_URL", "http://env:2", "MIRRORFLEET_TOKEN", "env-tok"), "http://env:2", "env-tok")
	check("older variable", "", "", envOf("MIRRORFLEET_API", "http://old:3"), "http://old:3", "from-token-file")
	check("flags over all", "http://flag:4", "flag-tok", envOf("MIRRORFLEET_URL", "http://env:2"), "http://flag:4", "flag-tok")
	writeCfg("token = inline\n")
	check("inline token", "", "", envOf(), defaultAPI, "inline")
	check("XDG_CONFIG_HOME", "", "", envOf("XDG_CONFIG_HOME", t.TempDir()), defaultAPI, "from-data")

	writeCfg("url http://x\n")
	if _, _, err := resolve("", "", data, envOf()); err == nil || !strings.Contains(err.Error(), "config:1") {
		t.Errorf("a malformed line: %v", err)
	}
	writeCfg("uri = http://x\n")
	if _, _, err := resolve("", "", data, envOf()); err == nil || !strings.Contains(err.Error(), `unknown key "uri"`) {
		t.Errorf("an unknown key: %v", err)
	}
	if _, _, err := resolve("", "", data, envOf("MIRRORFLEET_CONFIG", filepath.Join(home, "absent"))); err == nil {
		t.Error("a named config file that does not exist is not an error")
	}
}
