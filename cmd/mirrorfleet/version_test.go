package main

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"testing"
)

// TestVersion runs the built binary's version command: exit 0, the version and the
// commit Go stamped into it (the test binary is built inside the repository's work tree).
func TestVersion(t *testing.T) {
	bin := binary(t)
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("mirrorfleet version: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`^mirrorfleet \S+ commit [0-9a-f]{40}(\+dirty)? `).Match(out) {
		t.Errorf("mirrorfleet version printed %q; want the version and a 40-hex commit", out)
	}
	out, err = exec.Command(bin, "version", "-o", "json").Output()
	var in struct{ Version, Commit string }
	if err != nil || json.Unmarshal(out, &in) != nil || in.Version == "" || len(in.Commit) != 40 {
		t.Errorf("mirrorfleet version -o json: %v\n%s", err, out)
	}
}
