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
		tg, err := resolve(targetFlags{api: apiFlag, token: tokFlag, data: data}, env)
		if err != nil || tg.api != wantAPI || tg.token != wantTok || tg.aws {
			t.Errorf("%s: %+v %v, want %q %q, unsigned", what, tg, err, wantAPI, wantTok)
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
	if _, err := resolve(targetFlags{data: data}, envOf()); err == nil || !strings.Contains(err.Error(), "config:1") {
		t.Errorf("a malformed line: %v", err)
	}
	writeCfg("uri = http://x\n")
	if _, err := resolve(targetFlags{data: data}, envOf()); err == nil || !strings.Contains(err.Error(), `unknown key "uri"`) {
		t.Errorf("an unknown key: %v", err)
	}
	if _, err := resolve(targetFlags{data: data}, envOf("MIRRORFLEET_CONFIG", filepath.Join(home, "absent"))); err == nil {
		t.Error("a named config file that does not exist is not an error")
	}
}

// TestResolveAWS: whether to sign with AWS credentials comes from --aws, then
// $MIRRORFLEET_AWS, then the config file's aws (TOML or the older lines); off by default.
func TestResolveAWS(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	on, off := true, false
	check := func(what, file string, flag *bool, envAWS string, want bool) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"MIRRORFLEET_CONFIG": cfg, "MIRRORFLEET_AWS": envAWS}
		tg, err := resolve(targetFlags{data: dir, aws: flag}, func(k string) string { return env[k] })
		if err != nil || tg.aws != want {
			t.Errorf("%s: aws %v (%v), want %v", what, tg.aws, err, want)
		}
	}
	check("nothing set", "", nil, "", false)
	check("config file", "aws = true\n", nil, "", true)
	check("older config form", "url = http://x\naws = true\n", nil, "", true)
	check("environment over config", "aws = true\n", nil, "false", false)
	check("environment", "", nil, "1", true)
	check("flag over all", "aws = true\n", &off, "true", false)
	check("flag", "", &on, "", true)

	env := map[string]string{"MIRRORFLEET_CONFIG": cfg}
	for file, want := range map[string]string{"aws = \"yes\"\n": "aws must be true or false", "aws maybe\n": "config:1"} {
		if err := os.WriteFile(cfg, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := resolve(targetFlags{data: dir}, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %q: %v, want %q", file, err, want)
		}
	}
	env["MIRRORFLEET_AWS"] = "sure"
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(targetFlags{data: dir}, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "MIRRORFLEET_AWS") {
		t.Errorf("MIRRORFLEET_AWS=sure: %v", err)
	}
}
