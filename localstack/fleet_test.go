//go:build integration

package localstack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/mirrorfleet/mirrorfleet/functions/runtimeapi"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
	"github.com/mirrorfleet/mirrorfleet/shared/events"
	"github.com/mirrorfleet/mirrorfleet/shared/mirrorpath"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
	"github.com/mirrorfleet/mirrorfleet/shared/timer/scheduler"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// The fleet's timings in this tier: short, so the tier takes minutes, and in the same
// proportions as the defaults (a worker is suspect after a few silent heartbeats, dead
// after a few more).
const (
	heartbeat = 5 * time.Second
	suspect   = 12 * time.Second
	grace     = 30 * time.Second
	secretTTL = 10 * time.Second // the API's webhook secret cache (default 5m)
	tickEvery = time.Second      // the test's stand-in for the minute rule
)

// fleetIT is one fleet on the emulator, built as the stack builds it.
type fleetIT struct {
	t     *testing.T
	aws   *cloudAPI
	fleet string
	table string
	group string
	root  string // the mirrors' file system (EFS on AWS)
	coord *lambda
	api   *lambda
	st    *dynamo.Store // the test's own reads of the table
	// What the coordinator's timers must target.
	schedulerRole, dlqARN string
	ticks                 int
	policy                urlpolicy.Policy
}

// The whole AWS path through the real binaries against one emulator endpoint: repos
// added with the CLI (`mirrorfleet repos add`, SigV4-signed, through a gateway to the
// API Lambda that checks the signature) are mirrored by two `mirrorfleet worker`
// processes; a push and a signed GitHub hook through the API Lambda are fetched within
// a heartbeat; the mirror.updated event reaches the stack's bus and, through a rule, an
// SQS queue; the webhook secret and the forge tokens come from Secrets Manager and
// rotated values are taken up when documented; the CLI's repos sync and repos rm and
// the list sync run; a stopped worker's death timer is armed in Scheduler and fired as
// Scheduler would, its repos move, and every repo is fetched by its new owner and
// cloned from `mirrorfleet serve`.
func TestFleetOnAWS(t *testing.T) {
	began := time.Now()
	c := newCloudAPI(t)
	suffix := fmt.Sprint(time.Now().UnixNano() % 1e9)
	f := &fleetIT{t: t, aws: c, fleet: "it" + suffix, table: "mirrorfleet_it_" + suffix, group: "it" + suffix + "-timers",
		root: t.TempDir(), policy: urlpolicy.Policy{AllowPrivateHosts: true}}
	t.Logf("engine: %s", engine())

	// What the stack creates: the table and schedule group (here by `mirrorfleet
	// init-aws`, the command for emulators), the event bus, the secrets, the timers' DLQ.
	out := run(t, map[string]string{}, "init-aws", "--table", f.table, "--schedule-group", f.group)
	if !strings.Contains(out, "table "+f.table+" created") || !strings.Contains(out, "schedule group "+f.group+" ready") {
		t.Fatalf("init-aws said:\n%s", out)
	}
	var err error
	if f.st, err = cloud.NewDynamoStore(t.Context(), "", f.table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.st.Close() })
	const hookSecret1, hookSecret2 = "hook-secret-one", "hook-secret-two"
	hookARN := c.putSecret(t, f.fleet+"/webhook", hookSecret1)
	forge := newForgeFake(t)
	forgeURL, _ := url.Parse(forge.URL)
	forgeHost := forgeURL.Hostname()
	tokensARN := c.putSecret(t, f.fleet+"/forge-tokens", "# feeds' tokens\n"+forgeHost+"=forge-token-one\n")
	f.dlqARN = c.queue(t, f.fleet+"-timer-dlq")
	f.schedulerRole = "arn:aws:iam::123456789012:role/" + f.fleet + "-scheduler"

	// The upstreams: four repos added through the API, two through the list.
	srv := gittest.NewServer(t)
	var ups, listed []*gittest.Repo
	for i := range 4 {
		r := srv.NewRepo(t, fmt.Sprintf("team/r%d", i))
		r.Commit(t, "first", map[string][]byte{"README": fmt.Appendf(nil, "r%d\n", i)})
		ups = append(ups, r)
	}
	for i := range 2 {
		r := srv.NewRepo(t, fmt.Sprintf("listed/l%d", i))
		r.Commit(t, "first", map[string][]byte{"README": fmt.Appendf(nil, "l%d\n", i)})
		listed = append(listed, r)
	}
	lists := srv.NewRepo(t, "ops/lists")
	lists.Commit(t, "the list", map[string][]byte{"repos.txt": []byte(listed[0].URL() + "\n" + listed[1].URL() + "\n")})

	// mirror.updated events of r0 go to a queue, through a rule on the bus. (Not by ref
	// name as in docs/events.md: moto matches no pattern on the fields of an array's
	// objects, such as refs[].name.)
	bus := f.fleet + "-mirrorfleet" // the stack's name for it
	queue := c.eventsToQueue(t, bus, f.fleet+"-r0", map[string]any{
		"source": []string{events.Source}, "detail-type": []string{events.Type},
		"detail": map[string]any{"url": []any{map[string]string{"prefix": f.norm(ups[0].URL())}}},
	})

	// The git server, the two functions, two workers.
	ecs := newECSAgentFake(t, f.fleet)
	sv := startProc(t, "serve", deployenv.Merge(deployenv.Serve{Common: f.common(), MirrorRoot: f.root, Listen: "127.0.0.1:0",
		PackCacheDir: t.TempDir(), PackCacheBytes: "64M"}.Env(), ecs.env("serve")), "serve")
	serveURL := "http://" + sv.waitLog(t, "serving git", 2*time.Minute)["listen"].(string)

	hundred := 100.0
	list := deployenv.List{Repo: lists.URL(), Interval: time.Second, PurgeThreshold: &hundred, Dir: filepath.Join(t.TempDir(), "list")}
	ce := deployenv.Coordinator{Common: f.common(), ScheduleGroup: f.group,
		SchedulerRoleARN: f.schedulerRole, TimerDLQARN: f.dlqARN,
		Grace: grace, Warmup: 0, List: list}.Env()
	ce[deployenv.SuspectAfter] = suspect.String()
	ce[deployenv.AllowPrivateHosts] = "true" // the upstreams are on 127.0.0.1
	f.coord = startLambda(t, bins.coordinator, f.fleet+"-coordinator", ce)

	ae := deployenv.API{Common: f.common(), CloneBaseURL: serveURL, WebhookSecretARN: hookARN, List: list}.Env()
	ae[deployenv.AllowPrivateHosts] = "true"
	ae[deployenv.WebhookSecretTTL] = secretTTL.String()
	f.api = startLambda(t, bins.api, f.fleet+"-api", ae)

	// The operator's CLI reaches the API over HTTP through the gateway, which takes IAM
	// auth as the stack's API Gateway does: its config file names the API and turns
	// SigV4 signing on; credentials and region come from the AWS SDK's default chain
	// (the tier's).
	gw := startGateway(t, f.api)
	cliConfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(cliConfig, fmt.Appendf(nil, "url = %q\naws = true\n", gw.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	cliEnv := map[string]string{"MIRRORFLEET_CONFIG": cliConfig}
	cli := func(args ...string) string {
		t.Helper()
		before, _ := gw.counts()
		stdout, stderr, code := mirrorfleet(t, cliEnv, args...)
		if code != 0 {
			t.Fatalf("mirrorfleet %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
		}
		if after, _ := gw.counts(); after == before {
			t.Fatalf("mirrorfleet %s sent no signed request through %s:\n%s", strings.Join(args, " "), gw.URL, stdout)
		}
		return stdout
	}

	workerEnv := func(id string) map[string]string {
		e := deployenv.Worker{Common: f.common(), MirrorRoot: f.root, Fetchers: 4, MemoryBudget: "256M", Drain: 2 * time.Second,
			EventBus: bus, Feeds: []string{"gitlab=" + forge.URL}, FeedEvery: time.Minute, ForgeTokensARN: tokensARN}.Env()
		maps.Copy(e, ecs.env(id)) // the worker's id is its task's, from the task metadata
		e[deployenv.Heartbeat] = heartbeat.String()
		e[deployenv.MinInterval] = "1h" // no poll in the test's time: what moves a mirror is a hook, a sync or a first clone
		e[deployenv.AllowPrivateHosts] = "true"
		e["SSL_CERT_FILE"] = forge.CAFile // the forge fake's certificate
		return e
	}
	workers := map[string]*proc{}
	for _, id := range []string{"w1", "w2"} {
		workers[id] = startProc(t, id, workerEnv(id), "worker")
	}

	// The gateway refuses what API Gateway's IAM authorization refuses: a request with
	// the API token instead of a signature, and one signed with another secret.
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"unsigned", cliEnv, []string{"--aws=false", "--token", "a-token"}, []string{"POST /v1/repos: 403 Forbidden"}},
		{"signed with another secret", map[string]string{"MIRRORFLEET_CONFIG": cliConfig, "AWS_SECRET_ACCESS_KEY": "not-the-secret"}, nil,
			[]string{"403 Forbidden", "signature does not match", "execute-api:Invoke"}},
	} {
		_, refusedBefore := gw.counts()
		stdout, stderr, code := mirrorfleet(t, tc.env, append([]string{"repos", "add", ups[0].URL()}, tc.args...)...)
		_, refused := gw.counts()
		if code != 1 || refused != refusedBefore+1 {
			t.Errorf("repos add, %s: exit %d, %d refused by the gateway, want exit 1 and one refusal\n%s%s", tc.name, code, refused-refusedBefore, stdout, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("repos add, %s: stderr lacks %q:\n%s", tc.name, w, stderr)
			}
		}
	}

	// Repos added with `mirrorfleet repos add --aws` are mirrored; the list's repos too.
	var urls []string
	for _, u := range ups {
		urls = append(urls, u.URL())
	}
	if out := cli(append([]string{"repos", "add"}, urls...)...); !strings.Contains(out, "4 created, 0 already present, 0 refused") {
		t.Fatalf("mirrorfleet repos add:\n%s", out)
	}
	all := append(slices.Clone(ups), listed...)
	f.until("every repo mirrored", 2*time.Minute, func() string { return f.mirrored(all...) })
	var status api.Status
	if out := cli("status", "-o", "json"); json.Unmarshal([]byte(out), &status) != nil || status.ReposTotal != len(all) ||
		status.Leader == nil || status.WorkersByState[store.WorkerActive]+status.WorkersByState[store.WorkerJoining] != 2 {
		t.Errorf("mirrorfleet status -o json: %s, want %d repos, a leader and the two workers", out, len(all))
	}
	repos := f.repos()
	for _, u := range listed {
		if r := repos[f.norm(u.URL())]; r.Source != store.SourceList {
			t.Errorf("%s: source %q, want the list's", u.URL(), r.Source)
		}
	}
	t.Logf("mirrored %d repos after %s; owners %v", len(repos), time.Since(began).Round(time.Second), f.owned())

	// A forged hook is refused; a signed one is fetched by the owner within a heartbeat,
	// with no coordinator tick in between.
	hook := func(u *gittest.Repo, secret, delivery string) int {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "after": u.Head(t),
			"repository": map[string]any{"clone_url": u.URL(), "html_url": u.URL()}})
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		return f.api.call("POST", "/v1/hooks/github", string(body), map[string]string{"X-GitHub-Event": "push",
			"X-GitHub-Delivery": delivery, "X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac.Sum(nil))}, false).StatusCode
	}
	head := ups[0].Commit(t, "pushed", map[string][]byte{"README": []byte("pushed\n")})
	if code := hook(ups[0], "not-the-secret", "forged"); code != 401 {
		t.Fatalf("forged hook: %d, want 401", code)
	}
	if f.mirrored(ups[0]) == "" {
		t.Fatal("r0's mirror has the push before any hook")
	}
	if code := hook(ups[0], hookSecret1, "push-1"); code != 202 {
		t.Fatalf("signed hook: %d, want 202", code)
	}
	took := f.wait("the hooked push fetched", heartbeat, func() string { return f.mirrored(ups[0]) })
	t.Logf("hook → fetched by the owner in %s (heartbeat %s)", took.Round(time.Millisecond), heartbeat)

	// Its mirror.updated event went to the bus; the rule sent it to the queue.
	ev, seen := c.receive(t, queue, 30*time.Second, func(ev busEvent) bool {
		var d events.Event
		return json.Unmarshal(ev.Detail, &d) == nil && slices.ContainsFunc(d.Refs, func(r events.Ref) bool {
			return r.Name == "refs/heads/main" && r.New == head
		})
	})
	if ev.Source != events.Source || ev.DetailType != events.Type {
		t.Fatalf("no mirror.updated event for %s at %s in the queue; read %d events: %+v", ups[0].URL(), head, len(seen), seen)
	}
	for _, e := range seen {
		var d events.Event
		if json.Unmarshal(e.Detail, &d) != nil || d.URL != f.norm(ups[0].URL()) {
			t.Errorf("the rule let through an event of another repo: %s", e.Detail)
		}
	}

	// The webhook secret rotated in Secrets Manager is taken up within the API's cache
	// time: hooks signed with the new value are refused until then, accepted after, and
	// the old value is refused from then on.
	if code := hook(ups[1], hookSecret1, "before-rotation"); code != 202 { // the value in use, read at most secretTTL ago
		t.Fatalf("signed hook: %d, want 202", code)
	}
	c.rotate(t, hookARN, hookSecret2)
	ups[1].Commit(t, "after the rotation", map[string][]byte{"README": []byte("rotated\n")})
	n := 0
	took = f.wait("the rotated webhook secret taken up", secretTTL+5*time.Second, func() string {
		n++
		if code := hook(ups[1], hookSecret2, fmt.Sprintf("rotated-%d", n)); code != 202 {
			return fmt.Sprintf("a hook signed with the new secret answered %d", code)
		}
		return ""
	})
	t.Logf("rotated webhook secret taken up after %s (cache %s)", took.Round(time.Millisecond), secretTTL)
	if code := hook(ups[1], hookSecret1, "old-secret"); code != 401 {
		t.Errorf("a hook signed with the old secret after the rotation: %d, want 401", code)
	}
	f.wait("the push after the rotation fetched", heartbeat, func() string { return f.mirrored(ups[1]) })

	// mirrorfleet repos sync: the owner fetches at once.
	ups[2].Commit(t, "synced", map[string][]byte{"README": []byte("sync\n")})
	id2 := store.RepoID(f.norm(ups[2].URL()))
	if f.mirrored(ups[2]) == "" {
		t.Fatal("r2's mirror has the commit before the sync")
	}
	if out := cli("repos", "sync", ups[2].URL()); !strings.Contains(out, "sync requested for "+id2) {
		t.Fatalf("mirrorfleet repos sync %s:\n%s", ups[2].URL(), out)
	}
	took = f.wait("the synced repo fetched", heartbeat, func() string { return f.mirrored(ups[2]) })
	t.Logf("repos sync → fetched in %s", took.Round(time.Millisecond))

	// mirrorfleet repos rm, and a repo dropped from the list: both go, mirrors too.
	id3 := store.RepoID(f.norm(ups[3].URL()))
	if out := cli("repos", "rm", "-y", ups[3].URL()); !strings.Contains(out, "deleting "+id3) {
		t.Fatalf("mirrorfleet repos rm %s:\n%s", ups[3].URL(), out)
	}
	lists.Commit(t, "drop l1", map[string][]byte{"repos.txt": []byte(listed[0].URL() + "\n")})
	f.until("the removed repos gone", time.Minute, func() string { return f.gone(ups[3], listed[1]) })
	signed, refused := gw.counts()
	t.Logf("the CLI through the gateway: %d signed requests verified, %d refused", signed, refused)
	ups, listed = ups[:3], listed[:1]
	all = append(slices.Clone(ups), listed...)
	if r := f.api.call("GET", "/v1/list", "", nil, true); r.StatusCode != 200 || !strings.Contains(r.Body, lists.Head(t)) {
		t.Errorf("GET /v1/list: %d %s, want the list's commit %s", r.StatusCode, r.Body, lists.Head(t))
	}

	// A worker that stops (SIGSTOP: a frozen task) and comes back within the grace: its
	// death timer is armed in Scheduler while it is silent, cancelled (the schedule
	// deleted) once its heartbeats are seen again, and a firing of the cancelled timer
	// that arrives anyway is ignored.
	workers["w2"].signal(syscall.SIGSTOP)
	stopped := time.Now()
	stale := f.armed("w2")
	workers["w2"].signal(syscall.SIGCONT)
	armedAfter, resumed := time.Since(stopped), time.Now()
	f.until("w2's death timer cancelled", grace+2*heartbeat, func() string {
		if _, ok := c.schedule(t, f.group, scheduler.ScheduleName("death-w2")); ok {
			return "death-w2 still scheduled"
		}
		return ""
	})
	t.Logf("w2 stopped: its death timer armed %s later; resumed: cancelled %s later", armedAfter.Round(time.Second),
		time.Since(resumed).Round(time.Second))
	if r := f.coord.tick([]byte(aws.ToString(stale.Target.Input))); r.Event != "timer" || !strings.Contains(r.Ignored, "heartbeated since") {
		t.Fatalf("a firing of the cancelled timer: %+v, want it ignored", r)
	}
	if w := f.tableWorker("w2"); w.State != store.WorkerActive {
		t.Fatalf("w2 is %s after it came back, want active", w.State)
	}

	// A worker stops without a goodbye (SIGKILL: a lost task). The coordinator arms its
	// death timer, the test delivers the firing as Scheduler would (its Input is the
	// event) once the timer is due: at the grace after the silence the coordinator
	// recorded (Scheduler itself fires at the next whole minute). Its repos move.
	victim := "w1"
	if f.owned()["w2"] > f.owned()["w1"] {
		victim = "w2"
	}
	workers[victim].stop(syscall.SIGKILL, 10*time.Second)
	killed := time.Now()

	// ECS starts a task in its place, after the forge tokens' secret was rotated: the
	// feeds read their tokens once, at start (ADR 28), so its probes carry the new token,
	// the first workers' the old one. Its first probe is a period after its start; it is
	// checked at the end.
	c.rotate(t, tokensARN, forgeHost+"=forge-token-two\n")
	workers["w3"] = startProc(t, "w3", workerEnv("w3"), "worker")
	replaced := time.Now()

	s := f.armed(victim)
	w := f.tableWorker(victim)
	due := w.SilentSince.Add(grace)
	at, err := scheduler.ParseAt(aws.ToString(s.ScheduleExpression))
	if err != nil || w.State != store.WorkerSuspect || at.Before(due) || at.Sub(due) > 2*time.Minute {
		t.Errorf("%s is %s, silent since %s; its timer fires at %s (%v), want the minute after %s", victim, w.State,
			w.SilentSince, at, err, due)
	}
	time.Sleep(time.Until(due.Add(time.Second)))
	if r := f.coord.tick([]byte(aws.ToString(s.Target.Input))); r.Event != "timer" || r.Ignored != "" || !r.Leader {
		t.Fatalf("the death firing: %+v", r)
	}
	if w := f.worker(victim); w.ID != "" && w.State != store.WorkerDead {
		t.Fatalf("%s is %s after its death firing, want dead", victim, w.State)
	}
	f.until("the repos moved from "+victim, 30*time.Second, func() string {
		if n := f.owned()[victim]; n > 0 {
			return fmt.Sprintf("owners %v", f.owned())
		}
		return ""
	})
	if w := f.worker("w3"); w.State != store.WorkerActive {
		t.Errorf("w3 is %q, want active", w.State)
	}
	t.Logf("%s killed; its repos moved %s later; owners %v", victim, time.Since(killed).Round(time.Second), f.owned())

	// Every upstream moves; a hook for each reaches its new owner, which fetches it; each
	// mirror is cloned through the git server at the clone URL the API gives.
	for i, u := range all {
		u.Commit(t, "after the move", map[string][]byte{"MOVED": []byte("yes\n")})
		if code := hook(u, hookSecret2, fmt.Sprintf("moved-%d", i)); code != 202 {
			t.Fatalf("hook after the move: %d", code)
		}
	}
	f.until("every repo fetched by its new owner", time.Minute, func() string { return f.mirrored(all...) })
	for _, u := range all {
		r := f.api.call("GET", "/v1/repos/"+store.RepoID(f.norm(u.URL())), "", nil, true)
		var rp api.Repo
		if err := json.Unmarshal([]byte(r.Body), &rp); err != nil || rp.CloneURL == nil || !strings.HasPrefix(*rp.CloneURL, serveURL+"/git/") {
			t.Fatalf("GET %s: %s", u.URL(), r.Body)
		}
		dir := filepath.Join(t.TempDir(), "clone")
		cmd := exec.Command("git", "clone", "-q", "--mirror", *rp.CloneURL, dir)
		cmd.Env = gittest.Env("")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git clone %s: %v\n%s", *rp.CloneURL, err, b)
		}
		if got, want := gittest.RefsOf(t, dir), u.Refs(t); got != want {
			t.Errorf("clone of %s through %s:\n%s\nwant\n%s", u.URL(), *rp.CloneURL, got, want)
		}
	}

	// The feeds' probes carried the token from Secrets Manager: the first workers the
	// first value, the replacement the rotated one (its first probe is a period after
	// its start).
	f.wait("the replacement's feed probe with the rotated token", time.Until(replaced.Add(time.Minute+30*time.Second)), func() string {
		if !forge.sawToken("forge-token-two") {
			return fmt.Sprintf("tokens seen: %v", forge.seen())
		}
		return ""
	})
	if !forge.sawToken("forge-token-one") {
		t.Errorf("no probe carried the first token: %v", forge.seen())
	}
	// Each task took its role's credentials from the ECS agent, and each worker its id
	// from the task metadata (none was given one).
	for _, task := range []string{"serve", "w1", "w2", "w3"} {
		if ecs.credentialReads(task) == 0 {
			t.Errorf("%s never read its task role's credentials", task)
		}
	}
	t.Logf("the whole path on %s took %s (%d coordinator ticks)", engine(), time.Since(began).Round(time.Second), f.ticks)
}

func (f *fleetIT) common() deployenv.Common {
	return deployenv.Common{Table: f.table, Fleet: f.fleet}
}

// norm is a repo URL as the fleet keeps it.
func (f *fleetIT) norm(u string) string {
	n, err := f.policy.Normalize(u)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// until ticks the coordinator (as the minute rule does) every tickEvery until cond says
// "" or within has passed.
func (f *fleetIT) until(what string, within time.Duration, cond func() string) {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := f.coord.tick(runtimeapi.ScheduledEvent(time.Now(), "arn:aws:events:"+region+":123456789012:rule/"+f.fleet+"-tick"))
		f.ticks++
		if r.ListError != "" {
			f.t.Fatalf("the tick's list sync failed: %s", r.ListError)
		}
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: not within %s: %s", what, within, why)
		}
		time.Sleep(tickEvery)
	}
}

// wait polls cond, without coordinator ticks, and returns how long it took.
func (f *fleetIT) wait(what string, within time.Duration, cond func() string) time.Duration {
	f.t.Helper()
	start := time.Now()
	for {
		why := cond()
		if why == "" {
			return time.Since(start)
		}
		if time.Since(start) > within {
			f.t.Fatalf("%s: not within %s: %s", what, within, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// repos is every repo the API lists, by URL, read page by page.
func (f *fleetIT) repos() map[string]api.Repo {
	f.t.Helper()
	out := map[string]api.Repo{}
	cursor := ""
	for pages := 0; ; pages++ {
		r := f.api.call("GET", "/v1/repos?limit=2&cursor="+url.QueryEscape(cursor), "", nil, true)
		var page api.RepoList
		if r.StatusCode != 200 || json.Unmarshal([]byte(r.Body), &page) != nil {
			f.t.Fatalf("GET /v1/repos: %d %s", r.StatusCode, r.Body)
		}
		for _, rp := range page.Repos {
			if _, dup := out[rp.URL]; dup {
				f.t.Fatalf("GET /v1/repos listed %s twice", rp.URL)
			}
			out[rp.URL] = rp
		}
		if page.NextCursor == "" {
			return out
		}
		if pages > 100 {
			f.t.Fatal("GET /v1/repos: no end to the pages")
		}
		cursor = page.NextCursor
	}
}

// armed waits for worker's death timer in Scheduler, checks what it targets and
// carries, and returns it. Silence is judged on the coordinator's clock, from when it
// first saw the last heartbeat count: up to a SuspectAfter after the last heartbeat when
// it reads the workers only as often as a quiet plan allows.
func (f *fleetIT) armed(worker string) *awsscheduler.GetScheduleOutput {
	f.t.Helper()
	name := scheduler.ScheduleName("death-" + worker)
	f.until("the death timer of "+worker+" armed", 2*suspect+2*heartbeat, func() string {
		if names := f.aws.schedules(f.t, f.group); !slices.Contains(names, name) {
			return fmt.Sprintf("no schedule %s in %s: %v", name, f.group, names)
		}
		return ""
	})
	s, ok := f.aws.schedule(f.t, f.group, name)
	if !ok {
		f.t.Fatalf("schedule %s listed but not found", name)
	}
	if aws.ToString(s.Target.Arn) != f.coord.fn.ARN || aws.ToString(s.Target.RoleArn) != f.schedulerRole ||
		s.Target.DeadLetterConfig == nil || aws.ToString(s.Target.DeadLetterConfig.Arn) != f.dlqARN {
		f.t.Errorf("the timer targets %+v, want the coordinator's own ARN %s, the Scheduler role and the DLQ", s.Target, f.coord.fn.ARN)
	}
	var p coordinator.TimerPayload
	if err := json.Unmarshal([]byte(aws.ToString(s.Target.Input)), &p); err != nil || p.Kind != "death" || p.Worker != worker {
		f.t.Fatalf("timer input %s (%v)", aws.ToString(s.Target.Input), err)
	}
	return s
}

// owned counts the repos each worker owns, as the API lists them.
func (f *fleetIT) owned() map[string]int {
	n := map[string]int{}
	for _, r := range f.repos() {
		n[deref(r.Owner)]++
	}
	return n
}

// mirrored says why the mirrors of ups are not (yet) the upstreams' refs, "" when they are.
func (f *fleetIT) mirrored(ups ...*gittest.Repo) string {
	for _, u := range ups {
		dir := f.mirrorDir(u)
		if _, err := os.Stat(dir); err != nil {
			return "no mirror of " + u.URL() + " yet"
		}
		if gittest.RefsOf(f.t, dir) != u.Refs(f.t) {
			return "the mirror of " + u.URL() + " is behind"
		}
	}
	return ""
}

// gone says why ups are still there: in the API or on disk.
func (f *fleetIT) gone(ups ...*gittest.Repo) string {
	for _, u := range ups {
		r := f.api.call("GET", "/v1/repos/"+store.RepoID(f.norm(u.URL())), "", nil, true)
		if r.StatusCode != 404 {
			return fmt.Sprintf("GET %s: %d %s", u.URL(), r.StatusCode, r.Body)
		}
		if _, err := os.Stat(f.mirrorDir(u)); err == nil {
			return "the mirror of " + u.URL() + " is still on disk"
		}
	}
	return ""
}

// mirrorDir is where the fleet keeps u's mirror, as the API's mirror path says.
func (f *fleetIT) mirrorDir(u *gittest.Repo) string {
	rel, err := mirrorpath.Rel(f.norm(u.URL()))
	if err != nil {
		f.t.Fatal(err)
	}
	return filepath.Join(f.root, rel)
}

// tableWorker reads one worker's record from the table.
func (f *fleetIT) tableWorker(id string) store.Worker {
	f.t.Helper()
	w, err := f.st.GetWorker(f.t.Context(), id)
	if err != nil {
		f.t.Fatalf("read worker %s: %v", id, err)
	}
	return w
}

// worker reads one worker through the API; the zero Worker when it is not listed.
func (f *fleetIT) worker(id string) api.Worker {
	f.t.Helper()
	r := f.api.call("GET", "/v1/workers", "", nil, true)
	var ws api.WorkerList
	if r.StatusCode != 200 || json.Unmarshal([]byte(r.Body), &ws) != nil {
		f.t.Fatalf("GET /v1/workers: %d %s", r.StatusCode, r.Body)
	}
	for _, w := range ws.Workers {
		if w.ID == id {
			return w
		}
	}
	return api.Worker{}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
