package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// readmeCommands are the commands of the README's ```sh blocks, in order, with their
// continuation lines joined and their comments removed.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	in := false
	cont := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			in = line == "```sh"
			continue
		case !in:
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			line = ""
		}
		if c, ok := strings.CutSuffix(line, `\`); ok {
			cont += c + " "
			continue
		}
		line = strings.TrimSpace(cont + line)
		cont = ""
		if line != "" {
			cmds = append(cmds, strings.Join(strings.Fields(line), " "))
		}
	}
	return cmds
}

// TestREADMECommands runs every command of the README's sh blocks as a newcomer would,
// in a fresh directory holding the binary `make run` builds (build/host/mirrorfleet),
// against a real `mirrorfleet run` there and real git: the README's github.com
// repositories and list repository are served by a local git server (the only rewrite
// of the commands, with the fleet's address for 127.0.0.1:8080). make targets are
// checked with `make -n` (`make run` itself is run by TestMakeRun, the test tiers by
// CI); `make run ARGS=...` also restarts the test's fleet with those flags. A command the
// test does not know fails it: a new README command needs a way to be run here. The
// README builds nothing itself: its commands use the binary `make run` built.
func TestREADMECommands(t *testing.T) {
	t.Parallel()
	cmds := readmeCommands(t)
	if len(cmds) < 15 {
		t.Fatalf("only %d commands found in the README's sh blocks: %q", len(cmds), cmds)
	}
	step := stepper(t)
	srv := gittest.NewServer(t)
	for _, name := range []string{"git/git", "go-git/go-git", "go-git/go-billy", "go-git/gcfg"} {
		r := srv.NewRepo(t, name)
		r.Commit(t, "init", map[string][]byte{"README": []byte(name + "\n")})
	}
	list := srv.NewRepo(t, "mirrors/list")
	var urls []string
	for i := range 40 {
		urls = append(urls, fmt.Sprintf("%s/listed/r%02d", srv.URL, i))
	}
	list.Commit(t, "forty repos", map[string][]byte{"repos.txt": []byte(strings.Join(urls, "\n") + "\n")})

	// The newcomer's checkout, after `make run`: the binary in build/host, the fleet's
	// data in ./.mirrorfleet.
	dir := t.TempDir()
	cli := filepath.Join(dir, "build", "host", "mirrorfleet")
	if err := os.MkdirAll(filepath.Dir(cli), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(binary(t), cli); err != nil {
		t.Fatal(err)
	}
	// A newcomer's home (no config file of the host's user), with the host's Go caches,
	// so the make targets the README names find Go as the user's would.
	env := append(cleanEnv(), "HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	goCmd, err := goTool()
	if err != nil {
		t.Fatal(err)
	}
	goEnv, err := exec.Command(goCmd, "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range strings.Split(strings.TrimSpace(string(goEnv)), "\n") {
		env = append(env, []string{"GOCACHE", "GOMODCACHE", "GOPATH"}[i]+"="+v)
	}
	testFlags := []string{"--listen", "127.0.0.1:0", "--allow-private-hosts", "--heartbeat", "1s", "--tick", "1s",
		"--warmup", "0s", "--min-interval", "1s", "--host-concurrency", "-1", "--host-rate", "-1"}
	// `make run`: the binary with the defaults, in dir.
	fleet := startIn(t, dir, env, binary(t), append([]string{"run"}, testFlags...)...)
	step("fleet started")
	srvHostPath := "http+" + strings.TrimPrefix(srv.URL, "http://")
	purge := "" // the held purge's commit, once there is one

	rewrite := func(c string) string {
		return strings.NewReplacer(
			"https://github.com/", srv.URL+"/",
			"https://git.example.org/mirrors/list", list.URL(),
			"http://127.0.0.1:8080/git/github.com/", fleet.base+"/git/"+srvHostPath+"/",
			"http://127.0.0.1:8080", fleet.base,
			"<registry>/<repo>@sha256:…", "registry.example/repo@sha256:0123",
			"3f2c1a9d0b7e", purge,
		).Replace(c)
	}
	// sh runs c in wd; the fleet's address is in $MIRRORFLEET_URL, which stands for
	// the README's 127.0.0.1:8080 (one of the documented ways to name a fleet).
	sh := func(wd, c string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", c)
		cmd.Dir = wd
		cmd.Env = append(slices.Clip(env), "MIRRORFLEET_URL="+fleet.base)
		out, err := cmd.CombinedOutput()
		if err != nil && cmd.ProcessState == nil {
			t.Fatalf("%s: %v", c, err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	repoState := func(u string) string {
		var r api.Repo
		resp := fleet.call(t, "GET", "/v1/repos/"+strings.ReplaceAll(u, "/", "%2F"), nil, false)
		if resp.Status != 200 || json.Unmarshal(resp.Body, &r) != nil {
			return string(resp.Body)
		}
		return string(r.State)
	}
	// Output each mirrorfleet command must show, by its words.
	wantOut := map[string]string{
		"repos add": "created", "repos ls": "repos", "status": "workers:", "repos show": "mirror path",
		"repos sync": "sync requested", "workers": "active", "repos rm": "deleting", "list": "PURGE HELD",
		"list confirm": "confirmed",
	}

	for _, readme := range cmds {
		c := rewrite(readme)
		step("README: " + readme)
		switch {
		case strings.HasPrefix(c, "go build ") || strings.Contains(c, "go run "):
			t.Errorf("%s: the README builds with make run (build/host/mirrorfleet), not a second time", readme)
		case strings.HasPrefix(c, "make "):
			if out, code := sh("../..", "make -n "+strings.TrimPrefix(c, "make ")); code != 0 {
				t.Errorf("%s: make -n exits %d:\n%s", readme, code, out)
			}
			runArgs, ok := strings.CutPrefix(c, `make run ARGS="`)
			if !ok {
				continue
			}
			// The fleet restarted with ARGS, in the same directory: the running one
			// stops first (Ctrl-C in the README). Only a list fleet is known here.
			runArgs = strings.TrimSuffix(runArgs, `"`)
			if !strings.Contains(runArgs, "--list-repo ") {
				t.Fatalf("%s: teach this test what the fleet should do with these flags", readme)
			}
			fleet.stop(t)
			args := append(append([]string{"run"}, strings.Fields(runArgs)...), testFlags...)
			fleet = startIn(t, dir, env, cli, append(args, "--list-interval", "1s")...)
			eventually(t, 30*time.Second, "the list applied", func() string {
				var st api.ListStatus
				fleet.getJSON(t, "/v1/list", &st)
				if st.Commit == nil || st.Entries != len(urls) {
					return fmt.Sprintf("list: %+v", st)
				}
				return ""
			})
			// A change that removes 10% of the list: held for `list confirm`.
			list.Commit(t, "four fewer", map[string][]byte{"repos.txt": []byte(strings.Join(urls[4:], "\n") + "\n")})
			eventually(t, 30*time.Second, "a held purge", func() string {
				var st api.ListStatus
				fleet.getJSON(t, "/v1/list", &st)
				if st.HeldPurge == nil {
					return "none yet"
				}
				purge = short(st.HeldPurge.Commit)
				return ""
			})
			step("list fleet started")
		case strings.HasPrefix(c, "printf "):
			if out, code := sh(dir, c); code != 0 {
				t.Errorf("%s: exit %d:\n%s", readme, code, out)
			}
		case strings.HasPrefix(c, "build/host/mirrorfleet "):
			out, code := sh(dir, c)
			words := regexp.MustCompile(`^build/host/mirrorfleet ((?:repos )?[a-z]+(?: confirm)?)`).FindStringSubmatch(c)
			if code != 0 || words == nil || !strings.Contains(out, wantOut[words[1]]) {
				t.Errorf("%s: exit %d, want 0 and %q in:\n%s", readme, code, wantOut[words[1]], out)
			}
		case strings.HasPrefix(c, "curl "):
			if _, err := exec.LookPath("curl"); err != nil {
				t.Errorf("%s: curl is not installed here", readme)
				continue
			}
			if out, code := sh(dir, c); code != 0 || !strings.Contains(out, `"id":"`) || strings.Contains(out, `"error"`) {
				t.Errorf("%s: exit %d:\n%s", readme, code, out)
			}
		case strings.HasPrefix(c, "git clone "):
			u := srv.URL + "/git/git"
			eventually(t, 60*time.Second, "git/git mirrored", func() string {
				if st := repoState(u); st != "ok" {
					return st
				}
				return ""
			})
			if out, code := sh(dir, c); code != 0 {
				t.Errorf("%s: exit %d:\n%s", readme, code, out)
			} else if got := gittest.Run(t, srv.Home, filepath.Join(dir, "git"), nil, "log", "--format=%s"); got != "init" {
				t.Errorf("%s: the clone's log is %q", readme, got)
			}
		default:
			t.Errorf("README command %q is not run by this test: teach it how", readme)
		}
	}
	step("every README command run")

	// From anywhere: in another directory, the fleet is found through the config file.
	cfg := fmt.Sprintf("url = %s\ntoken_file = %s\n", fleet.base, filepath.Join(dir, ".mirrorfleet", "token"))
	if err := os.MkdirAll(filepath.Join(dir, "config", "mirrorfleet"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config", "mirrorfleet", "config"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	elsewhere := exec.Command(cli, "repos", "sync", srv.URL+"/git/git")
	elsewhere.Dir, elsewhere.Env = t.TempDir(), env
	if out, err := elsewhere.CombinedOutput(); err != nil || !strings.Contains(string(out), "sync requested") {
		t.Errorf("repos sync from another directory, with the config file: %v\n%s", err, out)
	}
	// What the commands did: the added repos are mirrored or failing for a reason, the
	// removed one is gone.
	if st := repoState(srv.URL + "/go-git/go-git"); !strings.Contains(st, "not_found") {
		t.Errorf("go-git after `repos rm`: %s", st)
	}
	fleet.stop(t)
}

// startIn runs `bin args...` (a `mirrorfleet run` with its data in dir/.mirrorfleet) in
// dir and waits for its status page line.
func startIn(t *testing.T, dir string, env []string, bin string, args ...string) *fleetProc {
	t.Helper()
	p := launch(t, "fleet in "+dir, dir, env, bin, args...)
	p.data = filepath.Join(dir, ".mirrorfleet")
	tok, err := os.ReadFile(filepath.Join(p.data, "token"))
	if err != nil {
		t.Fatal(err)
	}
	p.token = strings.TrimSpace(string(tok))
	return p
}
