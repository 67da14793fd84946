package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// unitService reads the [Service] section of a systemd unit: each key's values in order.
func unitService(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, section := map[string][]string{}, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: malformed line %q", path, line)
			}
			out[k] = append(out[k], v)
		}
	}
	return out
}

// TestSystemdUnitStartsTheFleet runs the shipped unit's service as systemd would, as far
// as a test can without systemd: its ExecStart (split on spaces; the unit uses no
// quoting) with its Environment and WorkingDirectory, the binary and /var/lib/mirrorfleet
// swapped for the test's build and a temporary directory, and the port for a free one.
// The fleet must start, answer its public name (--allow-host) with clone URLs under
// --clone-base-url, and stop cleanly on the unit's KillSignal within TimeoutStopSec.
func TestSystemdUnitStartsTheFleet(t *testing.T) {
	t.Parallel()
	svc := unitService(t, filepath.Join("..", "..", "docs", "systemd", "mirrorfleet.service"))
	for _, k := range []string{"ExecStart", "WorkingDirectory", "User", "KillSignal", "TimeoutStopSec"} {
		if len(svc[k]) != 1 {
			t.Fatalf("the unit has %d %s lines, want 1", len(svc[k]), k)
		}
	}
	if svc["KillSignal"][0] != "SIGTERM" {
		t.Errorf("KillSignal=%s: the fleet stops cleanly on SIGTERM", svc["KillSignal"][0])
	}
	root := t.TempDir()
	swap := func(s string) string {
		s = strings.ReplaceAll(s, "/var/lib/mirrorfleet", root)
		return strings.ReplaceAll(s, "127.0.0.1:8080", "127.0.0.1:0")
	}
	// What a site must change is marked where it is: the comment just above ExecStart
	// names the example host it uses.
	unit, _ := os.ReadFile(filepath.Join("..", "..", "docs", "systemd", "mirrorfleet.service"))
	before, _, _ := strings.Cut(string(unit), "\nExecStart=")
	if i := strings.LastIndex(before, "# EDIT:"); i < 0 || strings.Contains(before[i:], "\n\n") || !strings.Contains(before[i:], "mirrors.example.org") ||
		!strings.Contains(svc["ExecStart"][0], "mirrors.example.org") {
		t.Error("the unit does not mark, just above ExecStart, the public name a site must edit")
	}
	argv := strings.Fields(swap(svc["ExecStart"][0]))
	if argv[0] != "/usr/local/bin/mirrorfleet" || argv[1] != "run" {
		t.Fatalf("ExecStart runs %q, want /usr/local/bin/mirrorfleet run", argv[:2])
	}
	env := cleanEnv()
	for _, kv := range svc["Environment"] {
		env = append(env, swap(kv))
	}
	dir := swap(svc["WorkingDirectory"][0])
	p := launch(t, "systemd unit", dir, env, binary(t), argv[1:]...)
	p.data = filepath.Join(root, "data")
	tok, err := os.ReadFile(filepath.Join(p.data, "token"))
	if err != nil {
		t.Fatalf("the fleet generated no token in its data directory: %v", err)
	}
	p.token = strings.TrimSpace(string(tok))

	// Through the proxy the request carries the public name.
	req, _ := http.NewRequest(http.MethodGet, p.base+"/v1/status", nil)
	req.Host = "mirrors.example.org"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/status for Host mirrors.example.org: %s", resp.Status)
	}
	p.mustCLI(t, "repos", "add", "https://example.com/systemd/one")
	var repo apiRepo
	p.getJSON(t, "/v1/repos/"+url2id(t, p, "https://example.com/systemd/one"), &repo)
	if !strings.HasPrefix(repo.CloneURL, "https://mirrors.example.org/git/") {
		t.Errorf("clone URL %v, want it under --clone-base-url", repo.CloneURL)
	}
	if took := p.stop(t); took.Seconds() > 60 {
		t.Errorf("stopping took %v, past TimeoutStopSec", took)
	}
}

// url2id is the id of a stored repo, by its URL.
func url2id(t *testing.T, p *fleetProc, u string) string {
	t.Helper()
	for id, r := range p.repos(t) {
		if r.URL == u {
			return id
		}
	}
	t.Fatalf("no repo %s", u)
	return ""
}

// TestSystemdUnitVerifies runs `systemd-analyze verify` on the shipped unit, with the
// test's build standing in for ExecStart's binary (verify wants it to exist). Only what
// it says about this unit counts: the host's other units are not ours. Skipped, saying
// so, where systemd-analyze is not installed.
func TestSystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the shipped unit is not verified here")
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "systemd", "mirrorfleet.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "mirrorfleet.service")
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/mirrorfleet", binary(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", unit).CombinedOutput()
	var about []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "mirrorfleet.service") {
			about = append(about, l)
		}
	}
	if err != nil || len(about) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
