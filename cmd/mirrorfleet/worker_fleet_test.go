package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
	"github.com/mirrorfleet/mirrorfleet/shared/timer"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// Timing of the test fleet: heartbeats every 500 ms, suspect after 1.5 s of silence,
// dead (repos move) after 4 s.
const (
	heartbeat = 500 * time.Millisecond
	grace     = 4 * time.Second
	tickEvery = 250 * time.Millisecond
)

// proc is a worker process.
type proc struct {
	id             string
	cmd            *exec.Cmd
	stdout, stderr string // files
	done           chan struct{}
	err            error
	stopped        bool // the test killed or stopped it
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Two `mirrorfleet worker` processes on DynamoDB Local and a shared mirror root, a coordinator ticking
// in the test: every repo gets mirrored; one worker is SIGKILLed; after the grace the
// survivor owns every repo and follows new upstream commits; no repo is lost or owned
// twice; SIGTERM then stops the survivor cleanly, with a goodbye.
func TestTwoWorkerProcessesSurviveAKill(t *testing.T) {
	ep := dynamotest.Endpoint(t) // skips without DynamoDB Local
	if testing.Short() {
		t.Skip("multi-process fleet test: skipped in -short mode")
	}
	srv := gittest.NewServer(t) // skips without git http-backend
	// `mirrorfleet worker` is what the ECS task runs; the build (shared with the other
	// tests of the binary) is not the fleet's time.
	bin := binary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	start := time.Now()

	// DynamoDB Local keeps one database per access key and region: the workers use the
	// test's pair.
	creds := map[string]string{"AWS_ACCESS_KEY_ID": dynamotest.AccessKey, "AWS_SECRET_ACCESS_KEY": dynamotest.AccessKey, "AWS_REGION": dynamotest.Region}
	st := dynamotest.Table(t, "mf_fleet", dynamo.Config{})
	root := t.TempDir()
	// Only to compute mirror paths; created before the workers start, as New clears
	// <root>/.tmp of clones in progress.
	paths, err := mirror.New(mirror.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { paths.Close() })

	const n = 8
	policy := urlpolicy.Policy{AllowPrivateHosts: true}
	ups := make([]*gittest.Repo, n)
	targets := make([]fetch.Target, n)
	for i := range n {
		ups[i] = srv.NewRepo(t, fmt.Sprintf("team/repo%d", i))
		ups[i].Commit(t, "init", map[string][]byte{"README": fmt.Appendf(nil, "repo %d\n", i)})
		norm, err := policy.Normalize(ups[i].URL())
		if err != nil {
			t.Fatal(err)
		}
		targets[i] = fetch.Target{ID: store.RepoID(norm), URL: norm}
		if _, _, err := st.CreateRepo(ctx, store.Repo{ID: targets[i].ID, URL: norm, Source: store.SourceAPI,
			State: store.RepoPending, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}

	runCoordinator(t, ctx, st)
	workers := map[string]*proc{}
	for _, id := range []string{"w-a", "w-b"} {
		workers[id] = startWorker(t, bin, id, ep, st.Table(), root, creds)
	}

	// 1. Every repo ok, owned by one of the two, and its mirror equal to the upstream.
	owners := waitFor(t, ctx, "every repo mirrored by the two workers", 30*time.Second, func() (map[string]string, string) {
		return check(t, ctx, st, paths, ups, targets, func(o string) bool { return o == "w-a" || o == "w-b" }, workers)
	})
	count := map[string]int{}
	for _, o := range owners {
		count[o]++
	}
	t.Logf("%s: all %d repos mirrored; owners %v", time.Since(start).Round(time.Millisecond), n, count)
	victim, survivor := "w-a", "w-b"
	if count["w-a"] == 0 {
		victim, survivor = "w-b", "w-a" // kill the one that owns something
	}

	// 2. SIGKILL: no goodbye. Its repos stay put until the grace, then move.
	v := workers[victim]
	v.stopped = true
	if err := v.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-v.done
	killed := time.Now()
	waitFor(t, ctx, "every repo owned by the survivor", grace+20*time.Second, func() (map[string]string, string) {
		return check(t, ctx, st, paths, ups, targets, func(o string) bool { return o == survivor }, workers)
	})
	moved := time.Since(killed)
	t.Logf("%s: repos moved to %s %s after the kill", time.Since(start).Round(time.Millisecond), survivor, moved.Round(time.Millisecond))
	if moved < grace-2*heartbeat {
		t.Errorf("repos moved %s after the kill, before the grace (%s) could have passed", moved, grace)
	}
	if w, err := st.GetWorker(ctx, victim); err == nil && w.State != store.WorkerDead {
		t.Errorf("killed worker %s is %s, want dead", victim, w.State)
	}

	// 3. The survivor fetches them: new upstream commits reach the shared mirrors.
	for i, up := range ups {
		up.Commit(t, "after the kill", map[string][]byte{"CHANGES": fmt.Appendf(nil, "change %d\n", i)})
	}
	waitFor(t, ctx, "the survivor's mirrors following new commits", 20*time.Second, func() (map[string]string, string) {
		return check(t, ctx, st, paths, ups, targets, func(o string) bool { return o == survivor }, workers)
	})
	t.Logf("%s: survivor follows upstream", time.Since(start).Round(time.Millisecond))

	// No repo lost or owned twice: the owner index agrees with the records.
	byOwner := map[string][]string{}
	for _, w := range []string{victim, survivor} {
		repos, _, err := st.ListReposByOwner(ctx, w, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range repos {
			byOwner[w] = append(byOwner[w], r.ID)
		}
	}
	want := make([]string, n)
	for i := range targets {
		want[i] = targets[i].ID
	}
	slices.Sort(want)
	slices.Sort(byOwner[survivor])
	if len(byOwner[victim]) != 0 || !slices.Equal(byOwner[survivor], want) {
		t.Errorf("owner index: %s owns %v, %s owns %v; want all %d with %s", victim, byOwner[victim], survivor, byOwner[survivor], n, survivor)
	}

	// 4. SIGTERM: the survivor drains, says goodbye and exits 0 well within ECS's 30 s.
	s := workers[survivor]
	s.stopped = true
	termAt := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(25 * time.Second):
		t.Fatalf("worker %s still running 25 s after SIGTERM", survivor)
	}
	if s.err != nil {
		t.Errorf("worker %s exited with %v after SIGTERM\n%s", survivor, s.err, tail(s.stderr))
	}
	t.Logf("%s: %s stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond), survivor, time.Since(termAt).Round(time.Millisecond))
	if w, err := st.GetWorker(ctx, survivor); err != nil || (w.State != store.WorkerDraining && w.State != store.WorkerDead) {
		t.Errorf("after SIGTERM %s is %+v (%v), want draining (it left) or dead", survivor, w, err)
	}

	// The worker wrote EMF metrics on stdout: JSON lines with _aws, fetches counted.
	metrics := emfMetrics(t, s.stdout)
	if metrics["FetchSuccesses"] == 0 || !slices.Contains(metricNames(t, s.stdout), "QueueDepth") {
		t.Errorf("survivor's EMF output lacks FetchSuccesses/QueueDepth: %v\n%s", metrics, tail(s.stdout))
	}
	t.Logf("total %s", time.Since(start).Round(time.Millisecond))
}

// check returns the repos' owners, and what is not yet as wanted ("" when everything
// is): every repo ok, its owner accepted by ownerOK, its mirror's refs equal upstream's.
func check(t *testing.T, ctx context.Context, st *dynamo.Store, paths *mirror.Mirrorer, ups []*gittest.Repo,
	targets []fetch.Target, ownerOK func(string) bool, workers map[string]*proc) (map[string]string, string) {
	t.Helper()
	for id, p := range workers {
		if !p.stopped && p.exited() {
			t.Fatalf("worker %s exited on its own: %v\n%s", id, p.err, tail(p.stderr))
		}
	}
	owners := map[string]string{}
	for i, tg := range targets {
		r, err := st.GetRepo(ctx, tg.ID)
		if err != nil {
			return nil, fmt.Sprintf("repo %s: %v", tg.URL, err)
		}
		owners[tg.ID] = r.Owner
		if !ownerOK(r.Owner) || r.State != store.RepoOK {
			return owners, fmt.Sprintf("repo %s: owner %q state %s (%s)", tg.URL, r.Owner, r.State, r.LastError)
		}
		dir, err := paths.Path(tg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); err != nil {
			return owners, fmt.Sprintf("repo %s: no mirror yet", tg.URL)
		}
		if got, want := gittest.RefsOf(t, dir), ups[i].Refs(t); got != want {
			return owners, fmt.Sprintf("repo %s: mirror refs\n%s\nupstream\n%s", tg.URL, got, want)
		}
	}
	return owners, ""
}

// waitFor polls cond until it reports nothing missing, failing the test at the deadline
// with the last thing that was missing.
func waitFor(t *testing.T, ctx context.Context, what string, d time.Duration, cond func() (map[string]string, string)) map[string]string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		owners, missing := cond()
		if missing == "" {
			return owners
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waiting for %s: gave up after %s; still: %s", what, d, missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runCoordinator ticks a coordinator until the test ends, as the Lambda would on its
// schedule, only faster.
func runCoordinator(t *testing.T, ctx context.Context, st *dynamo.Store) {
	t.Helper()
	c := &coordinator.Coordinator{ID: "test-coordinator", Store: st, Timer: timer.NewLocal(), Clock: clock.Real{},
		Config: coordinator.Config{Warmup: coordinator.NoWarmup, Grace: grace, SuspectAfter: 3 * heartbeat, Lease: 5 * time.Second},
		Log:    slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(tickEvery)
		defer tk.Stop()
		for {
			if _, err := c.Tick(cctx); err != nil && cctx.Err() == nil {
				t.Logf("coordinator tick: %v", err)
			}
			select {
			case <-cctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done })
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log("coordinator: " + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startWorker starts a worker process configured as an ECS task would be, with the
// endpoint pointed at DynamoDB Local. Its environment is built from scratch so nothing
// of the developer's AWS setup leaks in.
func startWorker(t *testing.T, bin, id, ep, table, root string, creds map[string]string) *proc {
	t.Helper()
	dir := t.TempDir()
	p := &proc{id: id, stdout: filepath.Join(dir, "stdout"), stderr: filepath.Join(dir, "stderr"), done: make(chan struct{})}
	out, err := os.Create(p.stdout)
	if err != nil {
		t.Fatal(err)
	}
	errf, err := os.Create(p.stderr)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, "worker")
	p.cmd.Stdout, p.cmd.Stderr = out, errf
	p.cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + os.TempDir(),
		"AWS_ENDPOINT_URL=" + ep,
		"AWS_EC2_METADATA_DISABLED=true",
		"MIRRORFLEET_TABLE=" + table,
		"MIRRORFLEET_WORKER_ID=" + id,
		"MIRRORFLEET_MIRROR_ROOT=" + root,
		"MIRRORFLEET_ALLOW_PRIVATE_HOSTS=1",
		"MIRRORFLEET_HEARTBEAT=" + heartbeat.String(),
		"MIRRORFLEET_MIN_INTERVAL=300ms",
		// Every upstream of the test is on one host: no politeness, or the survivor's
		// polls would queue behind the per-host budget.
		"MIRRORFLEET_HOST_CONCURRENCY=-1",
		"MIRRORFLEET_HOST_RATE=-1",
		"MIRRORFLEET_FETCHERS=4",
		"MIRRORFLEET_DRAIN=5s",
		"MIRRORFLEET_METRICS_INTERVAL=1s",
		"MIRRORFLEET_FLEET=test",
	}
	for k, v := range creds {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		out.Close()
		errf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("worker %s stderr (tail):\n%s", id, tail(p.stderr))
		}
	})
	return p
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}

// emfMetrics sums each metric's values over the EMF lines in path; every line must be
// a JSON object with an _aws member.
func emfMetrics(t *testing.T, path string) map[string]float64 {
	t.Helper()
	sums := map[string]float64{}
	for _, l := range emfLines(t, path) {
		aws := l["_aws"].(map[string]any)
		for _, cm := range aws["CloudWatchMetrics"].([]any) {
			for _, m := range cm.(map[string]any)["Metrics"].([]any) {
				name := m.(map[string]any)["Name"].(string)
				switch v := l[name].(type) {
				case float64:
					sums[name] += v
				case []any:
					for _, x := range v {
						sums[name] += x.(float64)
					}
				}
			}
		}
	}
	return sums
}

func metricNames(t *testing.T, path string) []string {
	var out []string
	for _, l := range emfLines(t, path) {
		for k := range l {
			out = append(out, k)
		}
	}
	return out
}

func emfLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("stdout line is not JSON: %v\n%s", err, sc.Text())
		}
		if _, ok := m["_aws"].(map[string]any); !ok {
			t.Fatalf("stdout line without _aws: %s", sc.Text())
		}
		out = append(out, m)
	}
	return out
}
