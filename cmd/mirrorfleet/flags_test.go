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
