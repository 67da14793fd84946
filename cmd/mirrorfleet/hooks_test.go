package main

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/serve"
)

// TestWebhookSecretNeverInHelp: the secret from the environment is used, and -h does
// not print it.
func TestWebhookSecretNeverInHelp(t *testing.T) {
	t.Setenv("MIRRORFLEET_WEBHOOK_SECRET", "env-secret-value")
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var help bytes.Buffer
	fs.SetOutput(&help)
	var secret string
	var per map[string]string
	hookFlags(fs, &secret, &per)
	if err := fs.Parse([]string{"--webhook-secret-for", "GitLab.example.org=s2"}); err != nil {
		t.Fatal(err)
	}
	secretFromEnv(&secret, "MIRRORFLEET_WEBHOOK_SECRET")
	if secret != "env-secret-value" || per["gitlab.example.org"] != "s2" {
		t.Fatalf("secret %q, per host %v", secret, per)
	}
	fs.PrintDefaults()
	if strings.Contains(help.String(), "env-secret-value") {
		t.Fatalf("-h shows the secret:\n%s", help.String())
	}
	// A flag wins over the environment; a bad per-host value is refused.
	secret = ""
	fs2 := flag.NewFlagSet("run", flag.ContinueOnError)
	fs2.SetOutput(&help)
	hookFlags(fs2, &secret, &per)
	if err := fs2.Parse([]string{"--webhook-secret", "flag-secret"}); err != nil {
		t.Fatal(err)
	}
	secretFromEnv(&secret, "MIRRORFLEET_WEBHOOK_SECRET")
	if secret != "flag-secret" {
		t.Fatalf("secret %q, want the flag's", secret)
	}
	if err := fs2.Parse([]string{"--webhook-secret-for", "https://x=y"}); err == nil {
		t.Error("a per-host secret with a scheme was accepted")
	}
}

// TestSecretsNeverInHelp: `run -h` and `serve -h` print no secret taken from the
// environment (tokens, webhook and notify secrets), whatever the flag.
func TestSecretsNeverInHelp(t *testing.T) {
	env := map[string]string{
		"MIRRORFLEET_TOKEN":          "tok-from-env-1",
		"MIRRORFLEET_WEBHOOK_SECRET": "hook-from-env-2",
		"MIRRORFLEET_NOTIFY_SECRET":  "notify-from-env-3",
		cloud.EnvServeToken:          "serve-from-env-4",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	for _, cmd := range []string{"run", "serve"} {
		var stderr bytes.Buffer
		if code := run([]string{cmd, "-h"}, io.Discard, &stderr); code != 0 || !strings.Contains(stderr.String(), "-serve-token") {
			t.Fatalf("%s -h: exit %d\n%s", cmd, code, stderr.String())
		}
		for k, v := range env {
			if strings.Contains(stderr.String(), v) {
				t.Errorf("%s -h prints $%s's value:\n%s", cmd, k, stderr.String())
			}
		}
	}
}

// The serve token still comes from the environment once the flags are parsed.
func TestServeTokenFromEnv(t *testing.T) {
	t.Setenv(cloud.EnvServeToken, "serve-from-env")
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var c serve.Config
	sf := addServeFlags(fs, &c)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := sf.finish(&c); err != nil || c.Token != "serve-from-env" {
		t.Fatalf("token %q, err %v", c.Token, err)
	}
	c = serve.Config{}
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	sf = addServeFlags(fs, &c)
	if err := fs.Parse([]string{"--serve-token", "flag"}); err != nil {
		t.Fatal(err)
	}
	if err := sf.finish(&c); err != nil || c.Token != "flag" {
		t.Fatalf("token %q, err %v, want the flag's", c.Token, err)
	}
}
