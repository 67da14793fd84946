package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// An unknown --policy is a usage error before anything starts, and -h names the choices.
func TestRunPolicyFlag(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"run", "--data", t.TempDir(), "--policy", "fifo"}, io.Discard, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), `--policy "fifo"`) {
		t.Fatalf("run --policy fifo: exit %d\n%s", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"run", "-h"}, io.Discard, &stderr); code != 0 ||
		!strings.Contains(stderr.String(), "rate") || !strings.Contains(stderr.String(), "cbrt") || !strings.Contains(stderr.String(), `(default "bayes")`) {
		t.Fatalf("run -h: exit %d\n%s", code, stderr.String())
	}
}

// --poll-budget takes polls per repo per day or none, on the command line or as
// $MIRRORFLEET_POLL_BUDGET; -h says what no budget does.
func TestRunPollBudgetFlag(t *testing.T) {
	for _, bad := range []string{"-1", "often", "NaN"} {
		var stderr bytes.Buffer
		if code := run([]string{"run", "--data", t.TempDir(), "--poll-budget", bad}, io.Discard, &stderr); code == 0 ||
			!strings.Contains(stderr.String(), "poll-budget") {
			t.Errorf("run --poll-budget %s: exit %d\n%s", bad, code, stderr.String())
		}
	}
	for v, want := range map[string]float64{"none": 0, "0.5": 0.5, "24": 24} {
		cfg, err := newRunFlags(io.Discard).parse([]string{"--data", t.TempDir(), "--poll-budget", v}, func(string) string { return "" })
		if err != nil || cfg.PollBudget != want {
			t.Errorf("--poll-budget %s: %v %v, want %v", v, cfg.PollBudget, err, want)
		}
	}
	env := func(k string) string {
		if k == "MIRRORFLEET_POLL_BUDGET" {
			return "0.5"
		}
		return ""
	}
	if cfg, err := newRunFlags(io.Discard).parse([]string{"--data", t.TempDir()}, env); err != nil || cfg.PollBudget != 0.5 {
		t.Errorf("$MIRRORFLEET_POLL_BUDGET=0.5: %v %v", cfg.PollBudget, err)
	}
	if cfg, err := newRunFlags(io.Discard).parse([]string{"--data", t.TempDir()}, func(string) string { return "" }); err != nil || cfg.PollBudget != 0 {
		t.Errorf("no budget set: %v %v, want none", cfg.PollBudget, err)
	}
	var stderr bytes.Buffer
	if code := run([]string{"run", "-h"}, io.Discard, &stderr); code != 0 ||
		!strings.Contains(stderr.String(), "-poll-budget") || !strings.Contains(stderr.String(), "as fast as the per-host limits") {
		t.Fatalf("run -h: exit %d\n%s", code, stderr.String())
	}
}
