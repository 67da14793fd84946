package main

// End-to-end tests: the mirrorfleet binary, run as `mirrorfleet run` in a subprocess,
// mirroring repositories served by real git (gittest), driven through its HTTP API and
// its CLI, stopped with SIGTERM and restarted on the same data directory.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
)

const e2eToken = "e2e-test-token"

// upstream is a test repo and the id the fleet gave it.
type upstream struct {
	*gittest.Repo
	id string
}

// buildUpstreams creates the upstream repos of TestE2E, by name.
func buildUpstreams(t *testing.T, srv *gittest.Server) map[string]*upstream {
	t.Helper()
	ups := map[string]*upstream{}
	add := func(name string) *gittest.Repo {
		r := srv.NewRepo(t, "team/"+name)
		ups[name] = &upstream{Repo: r}
		return r
	}

	// Branches, lightweight and annotated tags.
	basic := add("basic")
	basic.Commit(t, "init", map[string][]byte{"README": []byte("basic\n")})
	basic.Tag(t, "v0.1", "")
	basic.Commit(t, "two", map[string][]byte{"a.txt": []byte("a\n")})
	basic.Branch(t, "dev", "")
	basic.Branch(t, "old", "v0.1")
	basic.AnnotatedTag(t, "v1.0", "", "release 1.0")

	add("empty")

	many := add("many")
	for i := range 4 {
		many.Commit(t, fmt.Sprint("c", i), map[string][]byte{"f": []byte(fmt.Sprint(i))})
	}
	many.AddManyRefs(t, "r", 300, 150)

	// A merge history with a binary file.
	merge := add("merge")
	merge.Commit(t, "init", map[string][]byte{"README": []byte("merge\n")})
	merge.CheckoutNew(t, "feature")
	merge.Commit(t, "binary", map[string][]byte{"bin/blob.dat": gittest.RandomBytes(t, 96<<10)})
	merge.Commit(t, "feature 2", map[string][]byte{"b.txt": []byte("b\n")})
	merge.Checkout(t, "main")
	merge.Commit(t, "on main", map[string][]byte{"c.txt": []byte("c\n")})
	merge.Merge(t, "feature")
	merge.AnnotatedTag(t, "v2.0", "", "merged")

	// Followed through changes (sync), and deleted with the CLI.
	moving := add("moving")
	moving.Commit(t, "init", map[string][]byte{"README": []byte("moving\n")})
	moving.Commit(t, "two", nil)
	moving.Branch(t, "dev", "")
	moving.Branch(t, "old", "HEAD~1")
	rmme := add("rmme")
	rmme.Commit(t, "init", map[string][]byte{"README": []byte("rm me\n")})
	return ups
}

// waitMirrored waits until every upstream of names is ok and its mirror's refs equal
// the upstream's exactly.
func waitMirrored(t *testing.T, p *fleetProc, ups map[string]*upstream, within time.Duration, names ...string) {
	t.Helper()
	want := map[string]string{}
	for _, n := range names {
		want[n] = ups[n].Refs(t)
	}
	eventually(t, within, "mirrors equal upstream", func() string {
		repos := p.repos(t)
		var bad []string
		for _, n := range names {
			r := repos[ups[n].id]
			if r.State != "ok" {
				bad = append(bad, fmt.Sprintf("%s is %q (%s)", n, r.State, r.LastError))
				continue
			}
			dir := mirrorPath(t, p.data, r.URL)
			if _, err := os.Stat(dir); err != nil {
				bad = append(bad, n+": no mirror")
			} else if got := gittest.RefsOf(t, dir); got != want[n] {
				bad = append(bad, n+": refs differ")
			}
		}
		return strings.Join(bad, "; ")
	})
}

// TestE2E runs one fleet through its life: bulk add over the API, exact mirrors, a
// repo missing upstream, following upstream changes with and without sync, input the
// API refuses, the CLI, SIGTERM, and a restart on the same data directory.
func TestE2E(t *testing.T) {
	t.Parallel()
	step := stepper(t)
	srv := gittest.NewServer(t)
	ups := buildUpstreams(t, srv)
	step("upstreams built")
	good := []string{"basic", "empty", "many", "merge", "moving", "rmme"}
	data := t.TempDir()
	p := startFleet(t, "fleet", data, e2eToken, "--allow-private-hosts")
	p.waitRing(t, 3)
	step("fleet started")

	// Bulk add over the API: the repos and one that does not exist upstream.
	missingURL := srv.URL + "/team/missing"
	urls := []string{missingURL}
	for _, n := range good {
		urls = append(urls, ups[n].URL())
	}
	r := p.call(t, http.MethodPost, "/v1/repos", map[string]any{"urls": urls}, true)
	var bulk struct {
		Results []struct{ URL, ID, Status string }
		Created int
		Errors  int
	}
	if err := json.Unmarshal(r.Body, &bulk); err != nil || r.Status != http.StatusOK || bulk.Created != len(urls) || bulk.Errors != 0 {
		t.Fatalf("bulk add: %d %s (%v)", r.Status, r.Body, err)
	}
	missingID := bulk.Results[0].ID
	for i, n := range good {
		ups[n].id = bulk.Results[i+1].ID
	}
	// Adding again is idempotent.
	r = p.call(t, http.MethodPost, "/v1/repos", map[string]any{"url": ups["basic"].URL()}, true)
	if r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte(`"id":"`+ups["basic"].id+`"`)) {
		t.Fatalf("adding an existing repo: %d %s", r.Status, r.Body)
	}

	mustRun := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow() // the steps build on each other
		}
	}
	mustRun("mirrors equal upstream", func(t *testing.T) {
		waitMirrored(t, p, ups, 60*time.Second, good...)
		// The missing repo ends gone (or failing) with its error, and held up nothing.
		eventually(t, 30*time.Second, "the missing repo is gone", func() string {
			var m apiRepo
			p.getJSON(t, "/v1/repos/"+missingID, &m)
			if (m.State != "gone" && m.State != "failing") || m.LastError == "" {
				return fmt.Sprintf("state %q, last_error %q", m.State, m.LastError)
			}
			return ""
		})

		// A clone of a mirror through its clone_url (the fleet's /git/ front, with the
		// binary as the pack cache's hook) is a working repository with the binary
		// file intact; a second clone comes from the pack cache.
		merge := ups["merge"]
		cloneURL := p.repos(t)[merge.id].CloneURL
		if !strings.HasPrefix(cloneURL, p.base+"/git/") {
			t.Fatalf("clone_url %q", cloneURL)
		}
		work := filepath.Join(t.TempDir(), "clone")
		gittest.Run(t, srv.Home, "", nil, "clone", "-q", cloneURL, work)
		again := filepath.Join(t.TempDir(), "again")
		gittest.Run(t, srv.Home, "", nil, "clone", "-q", cloneURL, again)
		if got := gittest.Run(t, srv.Home, again, nil, "rev-parse", "HEAD"); got != merge.Head(t) {
			t.Fatalf("second clone at %s", got)
		}
		eventually(t, 10*time.Second, "a pack cache hit", func() string {
			if m := p.call(t, http.MethodGet, "/metrics", nil, false); !bytes.Contains(m.Body, []byte("mirrorfleet_pack_cache_hits_total 1")) {
				return "no hit yet"
			}
			return ""
		})
		want, err := os.ReadFile(filepath.Join(merge.Dir, "bin", "blob.dat"))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(work, "bin", "blob.dat")); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("binary file differs in a clone of the mirror (err %v)", err)
		}
		if got := gittest.Run(t, srv.Home, work, nil, "rev-parse", "HEAD"); got != merge.Head(t) {
			t.Fatalf("clone of the mirror is at %s, upstream main at %s", got, merge.Head(t))
		}
		gittest.Fsck(t, mirrorPath(t, data, p.repos(t)[ups["many"].id].URL))
	})

	mustRun("follows upstream", func(t *testing.T) {
		// With a sync request: a new commit, a deleted branch, a force-push.
		mv := ups["moving"]
		mv.Commit(t, "three", map[string][]byte{"d.txt": []byte("d\n")})
		mv.DeleteBranch(t, "old")
		oldDev, newDev := mv.Rewrite(t, "dev", 1, "dev rewritten", map[string][]byte{"dev.txt": []byte("x\n")})
		r := p.call(t, http.MethodPost, "/v1/repos/"+mv.id+"/sync", nil, true)
		if r.Status != http.StatusAccepted || !bytes.Contains(r.Body, []byte(`"sync_requested"`)) {
			t.Fatalf("sync: %d %s", r.Status, r.Body)
		}
		waitMirrored(t, p, ups, 15*time.Second, "moving")
		refs := gittest.RefsOf(t, mirrorPath(t, data, p.repos(t)[mv.id].URL))
		if strings.Contains(refs, "refs/heads/old") || strings.Contains(refs, oldDev) || !strings.Contains(refs, newDev+" refs/heads/dev") {
			t.Fatalf("mirror after delete and force-push:\n%s", refs)
		}
		eventually(t, 10*time.Second, "sync_requested cleared", func() string {
			if p.repos(t)[mv.id].SyncRequested {
				return "still requested"
			}
			return ""
		})

		// Without one: the min-interval schedule (1s) picks changes up by itself.
		b := ups["basic"]
		changedAt := time.Now()
		b.Commit(t, "scheduled", map[string][]byte{"s.txt": []byte("s\n")})
		b.Tag(t, "v1.1", "")
		b.DeleteTag(t, "v0.1")
		waitMirrored(t, p, ups, 15*time.Second, "basic")
		// The fetch's report reaches the store just after the mirror's refs move.
		eventually(t, 10*time.Second, "last_change_at moved", func() string {
			if lc := p.repos(t)[b.id].LastChangeAt; lc == nil || lc.Before(changedAt) {
				return fmt.Sprintf("last_change_at = %v, want after %v", lc, changedAt)
			}
			return ""
		})

		// A gone repo is polled again only after a day; a sync request brings it back at
		// once when it appears upstream.
		back := srv.NewRepo(t, "team/missing")
		back.Commit(t, "now it exists", map[string][]byte{"README": []byte("back\n")})
		ups["missing"] = &upstream{Repo: back, id: missingID}
		if r := p.call(t, http.MethodPost, "/v1/repos/"+missingID+"/sync", nil, true); r.Status != http.StatusAccepted {
			t.Fatalf("sync of the gone repo: %d %s", r.Status, r.Body)
		}
		waitMirrored(t, p, ups, 15*time.Second, "missing")
	})

	t.Run("API refuses bad input", func(t *testing.T) {
		before := len(p.repos(t))
		huge := make([]string, 0, 40000)
		for i := range cap(huge) {
			huge = append(huge, fmt.Sprintf("https://example.com/some/repository-%06d", i))
		}
		hugeBody, _ := json.Marshal(map[string]any{"urls": huge})
		if len(hugeBody) <= 1<<20 {
			t.Fatalf("the big body is only %d bytes", len(hugeBody))
		}
		for _, c := range []struct {
			name       string
			body       any
			noAuth     bool
			status     int
			code       string
			reason     string
			msgContain string
		}{
			{name: "file URL", body: map[string]string{"url": "file:///etc/passwd"}, status: 400, code: "invalid_url", reason: "local_path"},
			{name: "local path", body: map[string]string{"url": "/etc"}, status: 400, code: "invalid_url", reason: "local_path"},
			{name: "credentials", body: map[string]string{"url": "https://user:pw@host/x.git"}, status: 400, code: "invalid_url", reason: "credentials"},
			{name: "metadata address", body: map[string]string{"url": "http://169.254.169.254/latest"}, status: 400, code: "invalid_url", reason: "metadata_host"},
			{name: "body over 1 MiB", body: hugeBody, status: 413, code: "body_too_large", msgContain: "1 MiB"},
			{name: "malformed JSON", body: []byte(`{"url": "https://example.com/a/b"`), status: 400, code: "invalid_json"},
			{name: "not JSON at all", body: []byte(`url=https://example.com/a/b`), status: 400, code: "invalid_json"},
			{name: "no token", body: map[string]string{"url": "https://example.com/a/b"}, noAuth: true, status: 401, code: "unauthorized", msgContain: "Authorization"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := p.call(t, http.MethodPost, "/v1/repos", c.body, !c.noAuth)
				var e apiErrorBody
				if err := json.Unmarshal(r.Body, &e); err != nil {
					t.Fatalf("%d, body not the JSON error: %v\n%s", r.Status, err, r.Body)
				}
				if r.Status != c.status || e.Error.Code != c.code || (c.reason != "" && e.Error.Reason != c.reason) {
					t.Fatalf("got %d %s/%s, want %d %s/%s: %s", r.Status, e.Error.Code, e.Error.Reason, c.status, c.code, c.reason, r.Body)
				}
				if len(e.Error.Message) < 15 || !strings.Contains(e.Error.Message, c.msgContain) {
					t.Fatalf("unclear message %q", e.Error.Message)
				}
				if c.reason == "credentials" && strings.Contains(e.Error.Message, "pw@") {
					t.Errorf("the refusal echoes the password: %q", e.Error.Message)
				}
				if c.noAuth && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("401 without a Bearer WWW-Authenticate header")
				}
			})
		}
		// Every write needs the token, and a wrong one is no better.
		for _, w := range []struct{ method, path string }{
			{http.MethodDelete, "/v1/repos/" + ups["basic"].id},
			{http.MethodPost, "/v1/repos/" + ups["basic"].id + "/sync"},
		} {
			if r := p.call(t, w.method, w.path, nil, false); r.Status != http.StatusUnauthorized {
				t.Errorf("%s %s without a token: %d %s", w.method, w.path, r.Status, r.Body)
			}
		}
		wrong := *p
		wrong.token = "not-the-token"
		if r := wrong.call(t, http.MethodPost, "/v1/repos", map[string]string{"url": "https://example.com/a/b"}, true); r.Status != http.StatusUnauthorized {
			t.Errorf("a wrong token: %d %s", r.Status, r.Body)
		}
		if after := len(p.repos(t)); after != before {
			t.Fatalf("refused requests changed the repos: %d -> %d", before, after)
		}
		if p.repos(t)[ups["basic"].id].State != "ok" {
			t.Fatal("an unauthorized delete touched the repo")
		}
	})

	mustRun("CLI", func(t *testing.T) { testCLI(t, p, srv, ups) })
	step("CLI done")

	// Every repo settles, then a crash: SIGKILL and a
	// restart. The workers resume their records, so every repo keeps its owner, its
	// owner epoch (nothing moves) and its state, and upstream is followed as before.
	eventually(t, 30*time.Second, "every repo settles", func() string {
		var st struct {
			ReposByState map[string]int `json:"repos_by_state"`
		}
		p.getJSON(t, "/v1/status", &st)
		if n := st.ReposByState["pending"] + st.ReposByState["cloning"]; n > 0 {
			return fmt.Sprintf("%d repos pending or cloning: %v", n, st.ReposByState)
		}
		return ""
	})
	before := p.repos(t)
	workersBefore := p.activeWorkers(t)
	p.kill(t)
	step("killed")
	restarted := time.Now()
	p = startFleet(t, "fleet after a crash", data, e2eToken, "--allow-private-hosts")
	eventually(t, 30*time.Second, "the workers resume their records", func() string {
		var ws struct {
			Workers []struct {
				ID          string
				State       string
				HeartbeatAt *time.Time `json:"heartbeat_at"`
			}
		}
		p.getJSON(t, "/v1/workers", &ws)
		var ids []string
		for _, w := range ws.Workers {
			ids = append(ids, w.ID)
			if w.State != "active" || w.HeartbeatAt == nil || w.HeartbeatAt.Before(restarted) {
				return fmt.Sprintf("worker %s is %s, heartbeat %v (restarted at %v)", w.ID, w.State, w.HeartbeatAt, restarted)
			}
		}
		if slices.Sort(ids); !slices.Equal(ids, workersBefore) {
			return fmt.Sprintf("workers %v, before the crash %v", ids, workersBefore)
		}
		return ""
	})
	for id, old := range before {
		if r := p.repos(t)[id]; r.owner() != old.owner() || r.OwnerEpoch != old.OwnerEpoch || r.State != old.State {
			t.Errorf("repo %s: %s, owner %s epoch %d before the crash; %s, owner %s epoch %d after",
				old.URL, old.State, old.owner(), old.OwnerEpoch, r.State, r.owner(), r.OwnerEpoch)
		}
	}
	ups["moving"].Commit(t, "after the crash", nil)
	waitMirrored(t, p, ups, 15*time.Second, "moving")
	step("resumed after a crash")

	// SIGTERM: a clean exit (the workers pause), then a restart on the same data
	// directory: no second warm-up, the same workers resume every repo as it was, new
	// repos are assigned at once.
	before = p.repos(t)
	var ring1 struct {
		Version     int64      `json:"version"`
		WarmupUntil *time.Time `json:"warmup_until"`
	}
	p.getJSON(t, "/v1/ring", &ring1)
	if took := p.stop(t); took > 10*time.Second {
		t.Errorf("exit after SIGTERM took %v", took)
	}

	// A one-hour warm-up: were there a second one, nothing new would be assigned.
	step("stopped")
	p2 := startFleet(t, "restarted fleet", data, e2eToken, "--allow-private-hosts", "--warmup", "1h")
	var ring2 struct {
		Version     int64      `json:"version"`
		WarmupUntil *time.Time `json:"warmup_until"`
	}
	p2.getJSON(t, "/v1/ring", &ring2)
	if ring2.Version < ring1.Version || ring1.WarmupUntil == nil || ring2.WarmupUntil == nil || !ring2.WarmupUntil.Equal(*ring1.WarmupUntil) {
		t.Fatalf("ring restarted: version %d -> %d, warm-up until %v -> %v", ring1.Version, ring2.Version, ring1.WarmupUntil, ring2.WarmupUntil)
	}
	// The same workers, under the same names, resume their repos: nothing moves, and
	// `workers` lists no dead ones from the previous run.
	eventually(t, 30*time.Second, "the workers resume after a clean restart", func() string {
		if active := p2.activeWorkers(t); !slices.Equal(active, workersBefore) {
			return fmt.Sprintf("active workers %v, before the restart %v", active, workersBefore)
		}
		return ""
	})
	for id, old := range before {
		if r := p2.repos(t)[id]; r.State != old.State || r.owner() != old.owner() || r.OwnerEpoch != old.OwnerEpoch {
			t.Errorf("repo %s: %s, owner %s epoch %d before the restart; %s, owner %s epoch %d after",
				old.URL, old.State, old.owner(), old.OwnerEpoch, r.State, r.owner(), r.OwnerEpoch)
		}
	}
	if out, _ := p2.mustCLI(t, "workers", "--all"); strings.Contains(out, "dead") || strings.Contains(out, ".2 ") {
		t.Errorf("workers after a clean restart:\n%s", out)
	}
	p2.waitRing(t, 3)
	step("resumed")
	later := srv.NewRepo(t, "team/after-restart")
	later.Commit(t, "init", map[string][]byte{"README": []byte("later\n")})
	r = p2.call(t, http.MethodPost, "/v1/repos", map[string]any{"url": later.URL()}, true)
	if r.Status != http.StatusCreated {
		t.Fatalf("add after restart: %d %s", r.Status, r.Body)
	}
	var created apiRepo
	if err := json.Unmarshal(r.Body, &created); err != nil {
		t.Fatal(err)
	}
	ups["later"] = &upstream{Repo: later, id: created.ID}
	waitMirrored(t, p2, ups, 20*time.Second, "later")
	for _, n := range good {
		if n == "rmme" {
			continue
		}
		if r := p2.repos(t)[ups[n].id]; r.State != "ok" {
			t.Errorf("%s is %s after the restart", n, r.State)
		}
	}
	if took := p2.stop(t); took > 10*time.Second {
		t.Errorf("exit after SIGTERM took %v", took)
	}
}

// testCLI drives the CLI against the running fleet p.
func testCLI(t *testing.T, p *fleetProc, srv *gittest.Server, ups map[string]*upstream) {
	step := stepper(t)
	// repos add, one URL.
	step("repos add")
	one := srv.NewRepo(t, "team/cli-one")
	one.Commit(t, "init", map[string][]byte{"README": []byte("cli\n")})
	out, _ := p.mustCLI(t, "repos", "add", one.URL())
	if !strings.Contains(out, "created") || !strings.Contains(out, one.URL()) || !strings.Contains(out, "1 created, 0 already present, 0 refused") {
		t.Fatalf("repos add:\n%s", out)
	}
	var oneID string
	for id, r := range p.repos(t) {
		if r.URL == one.URL() {
			oneID = id
		}
	}
	if oneID == "" {
		t.Fatalf("repos add did not add %s", one.URL())
	}
	ups["cli-one"] = &upstream{Repo: one, id: oneID}

	total := len(p.repos(t))

	// repos add refuses what the API refuses, with its message, and exits 1.
	_, errOut, code := p.cli(t, "repos", "add", "file:///etc/passwd")
	if code != 1 || !strings.Contains(errOut, "refused") {
		t.Fatalf("repos add of a refused URL: exit %d\n%s", code, errOut)
	}

	step("repos ls, show")
	// repos ls, table and JSON.
	out, _ = p.mustCLI(t, "repos", "ls")
	if !regexp.MustCompile(`(?m)^ID\s+STATE\s+OWNER\s+LAST SUCCESS\s+LAST ERROR\s+URL\s+CLONE URL\s*$`).MatchString(out) || !strings.Contains(out, fmt.Sprintf("\n%d repos\n", total)) {
		t.Fatalf("repos ls: header or count (%d) missing:\n%.2000s", total, out)
	}
	if !regexp.MustCompile(`(?m)^` + ups["merge"].id + `\s+ok\s+\S+\s+\S+.*\s` + regexp.QuoteMeta(p.base) + `/git/\S+/team/merge\.git$`).MatchString(out) {
		t.Fatalf("repos ls: no ok row for %s", ups["merge"].id)
	}
	out, _ = p.mustCLI(t, "repos", "ls", "--state", "ok", "-o", "json")
	var ls struct{ Repos []apiRepo }
	if err := json.Unmarshal([]byte(out), &ls); err != nil || len(ls.Repos) == 0 {
		t.Fatalf("repos ls -o json: %v\n%.2000s", err, out)
	}
	for _, r := range ls.Repos {
		if r.State != "ok" {
			t.Fatalf("repos ls --state ok listed a %s repo", r.State)
		}
	}

	// repos show.
	out, _ = p.mustCLI(t, "repos", "show", ups["merge"].id)
	for _, want := range []string{"url", ups["merge"].URL(), "state", "ok", "owner"} {
		if !strings.Contains(out, want) {
			t.Fatalf("repos show: %q missing:\n%s", want, out)
		}
	}
	out, _ = p.mustCLI(t, "repos", "show", "-o", "json", ups["merge"].id)
	var shown apiRepo
	if err := json.Unmarshal([]byte(out), &shown); err != nil || shown.ID != ups["merge"].id || shown.State != "ok" {
		t.Fatalf("repos show -o json: %v\n%s", err, out)
	}
	if _, errOut, code := p.cli(t, "repos", "show", "0123456789abcdef"); code != 1 || !strings.Contains(errOut, "does not exist") {
		t.Fatalf("repos show of an unknown id: exit %d\n%s", code, errOut)
	}

	step("status, workers, ring")
	// status, workers, ring: tables and JSON.
	out, _ = p.mustCLI(t, "status")
	if !regexp.MustCompile(`leader local-\S+ \(term \d+\), ring version \d+`).MatchString(out) || !strings.Contains(out, "workers: 3 active") ||
		!strings.Contains(out, fmt.Sprintf("repos:   %d (", total)) {
		t.Fatalf("status:\n%s", out)
	}
	out, _ = p.mustCLI(t, "status", "-o", "json")
	var st struct {
		ReposTotal     int            `json:"repos_total"`
		WorkersByState map[string]int `json:"workers_by_state"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.ReposTotal != total || st.WorkersByState["active"] != 3 {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	out, _ = p.mustCLI(t, "workers")
	if n := len(regexp.MustCompile(`(?m)^\S+\s+\d+\s+active\s+\d+s ago`).FindAllString(out, -1)); n != 3 {
		t.Fatalf("workers: %d active rows, want 3:\n%s", n, out)
	}
	out, _ = p.mustCLI(t, "workers", "-o", "json")
	var ws struct{ Workers []struct{ ID, State string } }
	if err := json.Unmarshal([]byte(out), &ws); err != nil || len(ws.Workers) != 3 {
		t.Fatalf("workers -o json: %v\n%s", err, out)
	}
	out, _ = p.mustCLI(t, "ring")
	if !regexp.MustCompile(`ring version \d+, 3 members, \d+ virtual nodes`).MatchString(out) {
		t.Fatalf("ring:\n%s", out)
	}
	out, _ = p.mustCLI(t, "ring", "-o", "json")
	var rg struct {
		Members []struct {
			ID    string
			Share float64
		}
	}
	if err := json.Unmarshal([]byte(out), &rg); err != nil || len(rg.Members) != 3 {
		t.Fatalf("ring -o json: %v\n%s", err, out)
	}

	// The repo added with the CLI is mirrored.
	waitMirrored(t, p, ups, 30*time.Second, "cli-one")

	step("repos rm")
	// repos rm: the repo goes, and its mirror leaves <data>/mirrors.
	t.Run("repos rm", func(t *testing.T) {
		rm := ups["rmme"]
		dir := mirrorPath(t, p.data, p.repos(t)[rm.id].URL)
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("no mirror to remove: %v", err)
		}
		// Not a terminal: without -y it refuses and deletes nothing.
		if _, errOut, code := p.cli(t, "repos", "rm", rm.URL()); code != 2 || !strings.Contains(errOut, "pass -y") {
			t.Fatalf("repos rm without -y off a terminal: exit %d\n%s", code, errOut)
		}
		if r := p.call(t, http.MethodGet, "/v1/repos/"+rm.id, nil, false); r.Status != http.StatusOK {
			t.Fatalf("repos rm without -y deleted the repo: %d %s", r.Status, r.Body)
		}
		out, _ := p.mustCLI(t, "repos", "rm", "-y", rm.URL()) // by URL
		if !strings.Contains(out, "deleting "+rm.id) {
			t.Fatalf("repos rm:\n%s", out)
		}
		eventually(t, 5*time.Second, "the repo is deleted", func() string {
			if r := p.call(t, http.MethodGet, "/v1/repos/"+rm.id, nil, false); r.Status != http.StatusNotFound {
				return fmt.Sprintf("GET: %d %s", r.Status, r.Body)
			}
			return ""
		})
		deadline := time.Now().Add(5 * time.Second)
		for {
			if _, err := os.Stat(dir); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still exists 5s after the repo was deleted", dir)
			}
			time.Sleep(200 * time.Millisecond)
		}
		delete(ups, "rmme")
	})
}

// TestE2EDefaultPolicyAndBulkAdd runs a fleet without --allow-private-hosts and with a
// one-hour warm-up (so nothing is ever fetched): it refuses a repo on 127.0.0.1, and
// `repos add --file` adds hundreds of URLs in chunks, with progress on stderr.
func TestE2EDefaultPolicyAndBulkAdd(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	up := srv.NewRepo(t, "team/private")
	up.Commit(t, "init", nil)
	p := startFleet(t, "strict fleet", t.TempDir(), e2eToken, "--warmup", "1h")

	r := p.call(t, http.MethodPost, "/v1/repos", map[string]any{"url": up.URL()}, true)
	var e apiErrorBody
	if err := json.Unmarshal(r.Body, &e); err != nil || r.Status != http.StatusBadRequest || e.Error.Code != "invalid_url" ||
		e.Error.Reason != "private_host" || !strings.Contains(e.Error.Message, "--allow-private-hosts") {
		t.Fatalf("a 127.0.0.1 repo without --allow-private-hosts: %d %s", r.Status, r.Body)
	}
	if _, errOut, code := p.cli(t, "repos", "add", up.URL()); code != 1 || !strings.Contains(errOut, "1 URL refused") {
		t.Fatalf("repos add of a 127.0.0.1 repo: exit %d\n%s", code, errOut)
	}
	if n := len(p.repos(t)); n != 0 {
		t.Fatalf("%d repos stored", n)
	}

	// repos add --file: more URLs than one request carries (500), comments, blank lines,
	// and a few already present: progress on stderr, a summary on stdout.
	p.mustCLI(t, "repos", "add", "https://example.com/bulk/first", "https://example.com/bulk/second")
	const bulkN = 520
	var file strings.Builder
	fmt.Fprintln(&file, "# repos for the e2e test")
	for i := range bulkN {
		fmt.Fprintf(&file, "https://example.com/bulk/repo-%03d\n", i)
		if i%100 == 0 {
			fmt.Fprintln(&file, "\n# a comment")
		}
	}
	fmt.Fprintln(&file, "https://example.com/bulk/first")
	fmt.Fprintln(&file, "https://example.com/bulk/second.git") // the same repo as .../second
	fmt.Fprintln(&file, "ftp://example.com/bulk/bad")          // refused: its line is named
	badLine := strings.Count(file.String(), "\n")
	path := filepath.Join(t.TempDir(), "repos.txt")
	if err := os.WriteFile(path, []byte(file.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := p.cli(t, "repos", "add", "--file", path)
	if code != 1 {
		t.Fatalf("repos add --file with a refused line: exit %d, want 1\n%s", code, errOut)
	}
	// Not a terminal: a line per chunk, no carriage returns.
	if !strings.Contains(errOut, fmt.Sprintf("added 500/%d (500 new, 0 existing, 0 refused)\n", bulkN+3)) ||
		!strings.Contains(errOut, fmt.Sprintf("added %d/%d (%d new, 2 existing, 1 refused)\n", bulkN+3, bulkN+3, bulkN)) ||
		strings.Contains(errOut, "\r") {
		t.Fatalf("repos add --file: no progress lines on stderr, or carriage returns:\n%q", errOut)
	}
	if !strings.Contains(out, fmt.Sprintf("%d created, 2 already present, 1 refused", bulkN)) {
		t.Fatalf("repos add --file: no summary:\n%s", out)
	}
	if want := fmt.Sprintf("%s:%d", path, badLine); !strings.Contains(out, want) || !strings.Contains(out, "ftp://example.com/bulk/bad") ||
		strings.Count(out, "\n") != 3 {
		t.Fatalf("repos add --file: the refused line is not named as %s (or other lines are listed):\n%s", want, out)
	}
	out, _ = p.mustCLI(t, "repos", "ls")
	if !strings.Contains(out, fmt.Sprintf("\n%d repos\n", bulkN+2)) {
		t.Fatalf("repos ls after the bulk add:\n%.1000s", out)
	}
	// The warm-up holds every repo pending.
	out, _ = p.mustCLI(t, "status")
	if !strings.Contains(out, fmt.Sprintf("repos:   %d (%d pending)", bulkN+2, bulkN+2)) {
		t.Fatalf("status:\n%.1000s", out)
	}
	p.stop(t)
}
