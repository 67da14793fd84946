package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
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
	webhookSecretFromEnv(&secret)
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
	webhookSecretFromEnv(&secret)
	if secret != "flag-secret" {
		t.Fatalf("secret %q, want the flag's", secret)
	}
	if err := fs2.Parse([]string{"--webhook-secret-for", "https://x=y"}); err == nil {
		t.Error("a per-host secret with a scheme was accepted")
	}
}
