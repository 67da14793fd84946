package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/api"
)

// TestNewcomerCLI drives the CLI as a new user does, against a real fleet and real git:
// an empty fleet's status, a repo that never clones (failing at once, its error said
// once, one log line), repos ls by URL with its filters, show by URL, -o json and its
// exit status, one flag set per command, and dead workers hidden by default.
func TestNewcomerCLI(t *testing.T) {
	t.Parallel()
	step := stepper(t)
	srv1, srv2 := gittest.NewServer(t), gittest.NewServer(t)
	var urls []string
	for _, r := range []struct {
		srv  *gittest.Server
		name string
	}{{srv1, "team/b"}, {srv1, "team/a"}, {srv2, "other/c"}} {
		up := r.srv.NewRepo(t, r.name)
		up.Commit(t, "init", map[string][]byte{"README": []byte(r.name + "\n")})
		urls = append(urls, up.URL())
	}
	// An upstream that refuses connections: it never clones.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/gone/never"
	l.Close()

	data := t.TempDir()
	p := startFleet(t, "newcomer fleet", data, e2eToken, "--allow-private-hosts")
	p.waitRing(t, 3)
	step("fleet started")
	// The start-up hint works as printed: this binary is not on PATH, so the hint names
	// it by its path; the fleet is not at the CLI's default address, so it names that too.
	hint := regexp.MustCompile(`Add a repo:  (.+)\n`).FindStringSubmatch(p.out.String())
	if hint == nil || !strings.HasPrefix(hint[1], binary(t)+" repos add https://github.com/git/git --api "+p.base+" --data "+data) {
		t.Fatalf("start-up hint: %q, want %s repos add … --api %s --data %s", hint, binary(t), p.base, data)
	}

	out, _ := p.mustCLI(t, "status")
	if !strings.Contains(out, "repos:   none") || strings.Contains(out, "()") {
		t.Errorf("status of an empty fleet:\n%s", out)
	}
	out, _ = p.mustCLI(t, "repos", "ls")
	if strings.TrimSpace(out) != "no repos" {
		t.Errorf("repos ls of an empty fleet:\n%s", out)
	}

	// The hint, run as printed (with a URL of the test's), adds a repo. This fleet's
	// token was given with --token, not generated into --data, so the CLI is told it
	// as its user would.
	sh := exec.Command("sh", "-c", strings.Replace(hint[1], "https://github.com/git/git", dead, 1))
	sh.Env = append(cleanEnv(), "MIRRORFLEET_TOKEN="+e2eToken)
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the hint as printed: %v\n%s", err, out)
	}
	p.mustCLI(t, append([]string{"repos", "add"}, urls...)...)
	var deadRepo api.Repo
	eventually(t, 30*time.Second, "the repo that never clones is failing", func() string {
		p.getJSON(t, "/v1/repos/"+strings.ReplaceAll(dead, "/", "%2F"), &deadRepo)
		if deadRepo.State != "failing" || deadRepo.LastError == "" {
			return fmt.Sprintf("%s %q", deadRepo.State, deadRepo.LastError)
		}
		return ""
	})
	if !strings.HasPrefix(deadRepo.LastError, "network: ") || strings.Count(deadRepo.LastError, "network: ") != 1 || deadRepo.CloneFailCnt != 1 {
		t.Errorf("the error names its kind more than once, or the count is off (%d): %q", deadRepo.CloneFailCnt, deadRepo.LastError)
	}
	for _, u := range urls {
		eventually(t, 30*time.Second, u+" mirrored", func() string {
			var r api.Repo
			p.getJSON(t, "/v1/repos/"+strings.ReplaceAll(u, "/", "%2F"), &r)
			if r.State != "ok" {
				return string(r.State)
			}
			return ""
		})
	}
	step("repos settled")
	// One log line for the one failed fetch (the next try is a minute later), and no
	// attribute twice on a line.
	var failLines []string
	for _, line := range strings.Split(p.out.String(), "\n") {
		if strings.Contains(line, deadRepo.ID) && strings.Contains(line, "fail") {
			failLines = append(failLines, line)
		}
		if strings.Count(line, " worker=") > 1 {
			t.Errorf("worker= twice: %s", line)
		}
	}
	if len(failLines) != 1 {
		t.Errorf("%d log lines for one failed fetch, want 1:\n%s", len(failLines), strings.Join(failLines, "\n"))
	}

	// repos ls: by URL, with --limit, --state and --host.
	want := append(slices.Clone(urls), dead)
	slices.Sort(want)
	rowURLs := func(out string) []string {
		var got []string
		for _, m := range regexp.MustCompile(`(?m)^[0-9a-f]{16}\s+\S+\s+\S+\s+.*?\s(http://\S+)\s+http://\S+$`).FindAllStringSubmatch(out, -1) {
			got = append(got, m[1])
		}
		return got
	}
	out, _ = p.mustCLI(t, "repos", "ls")
	if got := rowURLs(out); !slices.Equal(got, want) || !strings.Contains(out, "\n4 repos\n") {
		t.Errorf("repos ls: %v, want %v by URL:\n%s", got, want, out)
	}
	out, _ = p.mustCLI(t, "repos", "ls", "--limit", "2")
	if got := rowURLs(out); !slices.Equal(got, want[:2]) || !strings.Contains(out, "2 of 4 repos") {
		t.Errorf("repos ls --limit 2: %v:\n%s", got, out)
	}
	out, _ = p.mustCLI(t, "repos", "ls", "--state", "failing")
	if got := rowURLs(out); !slices.Equal(got, []string{dead}) {
		t.Errorf("repos ls --state failing: %v:\n%s", got, out)
	}
	out, _ = p.mustCLI(t, "repos", "ls", "--host", strings.TrimPrefix(srv2.URL, "http://"))
	if got := rowURLs(out); !slices.Equal(got, urls[2:]) {
		t.Errorf("repos ls --host: %v:\n%s", got, out)
	}

	// show by URL: the error, the mirror path and the clone URL.
	out, _ = p.mustCLI(t, "repos", "show", dead)
	for _, w := range []string{deadRepo.ID, "failing", deadRepo.LastError, "mirror path", "/gone/never.git", "clone url", p.base + "/git/"} {
		if !strings.Contains(out, w) {
			t.Errorf("repos show: %q missing:\n%s", w, out)
		}
	}
	// show of a mirrored repo: when its worker expects to fetch it next.
	out, _ = p.mustCLI(t, "repos", "show", urls[0])
	if !regexp.MustCompile(`(?m)^next poll\s+(about \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(in \S+, its worker's estimate\)|now \(due or in flight\))$`).MatchString(out) {
		t.Errorf("repos show: no next poll from its worker:\n%s", out)
	}
	out, _ = p.mustCLI(t, "repos", "sync", urls[0])
	if !strings.Contains(out, "sync requested for") || !strings.Contains(out, urls[0]) {
		t.Errorf("repos sync by URL:\n%s", out)
	}

	// -o json: one indented format, and exit 1 (with the API's error body) when refused.
	for _, args := range [][]string{{"status"}, {"workers"}, {"ring"}, {"repos", "ls"}, {"repos", "show", urls[1]}, {"list"}} {
		out, _ := p.mustCLI(t, append(args, "-o", "json")...)
		if !json.Valid([]byte(out)) || !strings.HasPrefix(out, "{\n  \"") {
			t.Errorf("%v -o json is not the indented format:\n%.300s", args, out)
		}
	}
	out, _, code := p.cli(t, "repos", "add", "-o", "json", "file:///etc/passwd")
	var bulk api.BulkAdd
	if code != 1 || json.Unmarshal([]byte(out), &bulk) != nil || bulk.Errors != 1 {
		t.Errorf("repos add -o json of a refused URL: exit %d\n%s", code, out)
	}
	out, _, code = p.cli(t, "repos", "show", "-o", "json", "0123456789abcdef")
	var e api.ErrorBody
	if code != 1 || json.Unmarshal([]byte(out), &e) != nil || e.Error == nil || e.Error.Code != "not_found" {
		t.Errorf("repos show -o json of an unknown id: exit %d\n%s", code, out)
	}

	// One flag set per command.
	_, errOut, code := p.cli(t, "repos", "add", "-h")
	if code != 0 || !strings.Contains(errOut, "-file") || strings.Contains(errOut, "-state") || strings.Contains(errOut, "-limit") {
		t.Errorf("repos add -h: exit %d\n%s", code, errOut)
	}
	_, errOut, code = p.cli(t, "repos", "ls", "-h")
	if code != 0 || !strings.Contains(errOut, "-limit") || !strings.Contains(errOut, "-host") || strings.Contains(errOut, "-file") {
		t.Errorf("repos ls -h: exit %d\n%s", code, errOut)
	}
	_, errOut, code = p.cli(t, "repos", "-h")
	if code != 0 || !strings.Contains(errOut, "repos add") || strings.Contains(errOut, "workers") || strings.Contains(errOut, "-file string") {
		t.Errorf("repos -h: exit %d\n%s", code, errOut)
	}
	if _, _, code := p.cli(t, "repos", "add", "--state", "ok", urls[0]); code != 2 {
		t.Errorf("repos add --state: exit %d, want 2 (not a flag of repos add)", code)
	}
	// A bulk add undone: repos rm takes the same --file, and many ids or URLs.
	undo := filepath.Join(t.TempDir(), "undo.txt")
	if err := os.WriteFile(undo, []byte("# added by mistake\nhttps://example.com/undo/a\nhttps://example.com/undo/b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.mustCLI(t, "repos", "add", "--file", undo, "https://example.com/undo/c")
	if _, errOut, code := p.cli(t, "repos", "rm", "--file", undo, "https://example.com/undo/c"); code != 2 || !strings.Contains(errOut, "deletes 3 repos") {
		t.Errorf("repos rm of many without -y off a terminal: exit %d\n%s", code, errOut)
	}
	out, _, code = p.cli(t, "repos", "rm", "-y", "--file", undo, "https://example.com/undo/c", "https://example.com/undo/never-added")
	if code != 1 || !strings.Contains(out, "3 deleting") || !strings.Contains(out, "1 not deleted") || !strings.Contains(out, "never-added") {
		t.Errorf("repos rm --file and URLs: exit %d\n%s", code, out)
	}
	for _, u := range []string{"a", "b", "c"} {
		eventually(t, 10*time.Second, "undo/"+u+" deleted", func() string {
			if r := p.call(t, http.MethodGet, "/v1/repos/"+url.PathEscape("https://example.com/undo/"+u), nil, false); r.Status != http.StatusNotFound {
				return fmt.Sprint(r.Status)
			}
			return ""
		})
	}
	step("CLI checked")

	// A restart with one worker fewer: the missing one dies after the grace, and
	// `workers` lists it only with --all.
	p.stop(t)
	p = startFleet(t, "smaller fleet", data, e2eToken, "--allow-private-hosts", "--workers", "2", "--grace", "2s")
	eventually(t, 60*time.Second, "the missing worker is dead", func() string {
		out, _ := p.mustCLI(t, "workers", "--all")
		if !regexp.MustCompile(`(?m)^\S+-w3\s+\d+\s+dead`).MatchString(out) {
			return out
		}
		return ""
	})
	out, _ = p.mustCLI(t, "workers")
	if !strings.Contains(out, "(1 dead workers not shown; --all lists them)") || strings.Contains(out, "-w3 ") {
		t.Errorf("workers lists the dead one:\n%s", out)
	}
	if n := len(regexp.MustCompile(`(?m)^\S+-w[12]\s+\d+\s+active`).FindAllString(out, -1)); n != 2 {
		t.Errorf("workers: %d active rows, want 2:\n%s", n, out)
	}
	p.stop(t)
}
