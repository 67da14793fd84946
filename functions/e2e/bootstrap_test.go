// Package e2e runs the built Lambda binaries — functions/coordinator and functions/api,
// compiled as bootstraps with -tags lambda.norpc — through an in-process Lambda Runtime
// API (functions/runtimeapi), with exactly the environment the stack gives each function
// (shared/deployenv builds it for the stack and for these tests), against DynamoDB Local
// and the EventBridge Scheduler fake: a minute tick, death timers, signed API calls.
// What a template or a binary gets wrong about the other shows up here as a function
// that refuses to start or answers wrongly.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/functions/runtimeapi"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/schedulerfake"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
)

const (
	group   = "MirrorFleet-timers"
	roleARN = "arn:aws:iam::123456789012:role/MirrorFleet-SchedulerRole"
	dlqARN  = "arn:aws:sqs:us-east-1:123456789012:MirrorFleet-TimerDLQ"
	ruleARN = "arn:aws:events:us-east-1:123456789012:rule/MirrorFleet-Tick"
)

var (
	buildOnce sync.Once
	bins      map[string]string
	buildErr  error
	buildDir  string
)

// binaries builds both bootstraps once per test binary.
func binaries(t *testing.T) map[string]string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "mirrorfleet-bootstraps-"); buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		bins = map[string]string{}
		for _, fn := range []string{"coordinator", "api"} {
			if bins[fn], buildErr = runtimeapi.Build(ctx, buildDir, "../"+fn); buildErr != nil {
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bins
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// fixture is a table on DynamoDB Local and the Scheduler fake.
type fixture struct {
	st       *dynamo.Store
	endpoint string
	sched    *schedulerfake.Fake
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ep := dynamotest.Endpoint(t) // skips without DynamoDB Local
	binaries(t)                  // before anything is timed: the first build takes minutes
	st := dynamotest.Table(t, "mf_e2e", dynamo.Config{})
	sched := schedulerfake.New(schedulerfake.Options{Groups: []string{group}})
	t.Cleanup(sched.Close)
	return &fixture{st: st, endpoint: ep, sched: sched}
}

// local is what points a function at the local services instead of AWS's: their
// endpoints and the credentials DynamoDB Local keeps the test's tables under. Lambda
// sets credentials too (the execution role's); these stand in for them.
func (f *fixture) local() map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB":  f.endpoint,
		"AWS_ENDPOINT_URL_SCHEDULER": f.sched.URL(),
		"AWS_ACCESS_KEY_ID":          dynamotest.AccessKey,
		"AWS_SECRET_ACCESS_KEY":      dynamotest.AccessKey,
		"AWS_SESSION_TOKEN":          "session",
	}
}

// start runs a built function with the stack's environment for it plus local.
func (f *fixture) start(t *testing.T, fn string, env map[string]string) *runtimeapi.Function {
	t.Helper()
	all := f.local()
	for k, v := range env {
		all[k] = v
	}
	lf, err := runtimeapi.Start(runtimeapi.Config{Binary: binaries(t)[fn], Name: "MirrorFleet-" + fn, Region: dynamotest.Region, Env: all})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lf.Close()
		if t.Failed() {
			t.Logf("%s stderr:\n%s\nstdout:\n%s", fn, lf.Stderr(), lf.Stdout())
		}
	})
	return lf
}

// coordinatorEnv is what the stack gives the coordinator, for -c warmup=0 (a fleet
// being rebuilt: the case the stack once wrote as "0s", which the coordinator refused).
func (f *fixture) coordinatorEnv() map[string]string {
	return deployenv.Coordinator{
		Common:           deployenv.Common{Table: f.st.Table(), Fleet: "MirrorFleet"},
		ScheduleGroup:    group,
		SchedulerRoleARN: roleARN,
		TimerDLQARN:      dlqARN,
		Grace:            10 * time.Minute,
		Warmup:           0,
	}.Env()
}

// result is the coordinator's answer (functions/coordinator Result).
type result struct {
	Event       string `json:"event"`
	Coordinator string `json:"coordinator"`
	Leader      bool   `json:"leader"`
	Term        int64  `json:"term"`
	Campaign    string `json:"campaign"`
	Assigned    int    `json:"assigned"`
	Ignored     string `json:"ignored"`
}

func invoke(t *testing.T, fn *runtimeapi.Function, payload []byte) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := fn.Invoke(ctx, payload)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != nil {
		t.Fatalf("%s: function error %v", payload, res.Error)
	}
	var r result
	if err := json.Unmarshal(res.Payload, &r); err != nil {
		t.Fatalf("answer %s: %v", res.Payload, err)
	}
	return r
}

// header makes a response's headers an http.Header, for case-insensitive lookup.
func header(m map[string]string) http.Header {
	h := http.Header{}
	for k, v := range m {
		h.Set(k, v)
	}
	return h
}

func heartbeat(t *testing.T, st storetest.Store, at time.Time) {
	t.Helper()
	if _, err := st.Heartbeat(t.Context(), "w1", store.Heartbeat{At: at}); err != nil {
		t.Fatal(err)
	}
}

// The coordinator bootstrap: minute ticks elect it and assign the repos; a silent
// worker gets a death timer in Scheduler, targeting the function's own ARN; a firing
// after a newer heartbeat is ignored; a firing for a worker silent past the grace
// declares it dead. Metrics go to stdout as EMF.
func TestCoordinatorBootstrap(t *testing.T) {
	f := newFixture(t)
	now := time.Now().UTC()
	if _, err := f.st.ClaimSlot(t.Context(), store.Worker{ID: "w1", StartedAt: now, HeartbeatAt: now, State: store.WorkerJoining}, 64); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		url := fmt.Sprintf("https://git.example.org/team/repo%d.git", i)
		if _, _, err := f.st.CreateRepo(t.Context(), store.Repo{ID: store.RepoID(url), URL: url, Source: store.SourceAPI,
			State: store.RepoPending, CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	// Liveness is judged on the coordinator's own clock (a worker's timestamps are its
	// own), so the test waits out real seconds: suspect after 1 s of silence, dead after 3 s.
	env := f.coordinatorEnv()
	env[deployenv.SuspectAfter], env[deployenv.Grace] = "1s", "3s"
	fn := f.start(t, "coordinator", env)

	r := invoke(t, fn, runtimeapi.ScheduledEvent(now, ruleARN))
	if r.Event != "tick" || !r.Leader || r.Term != 1 || r.Assigned != 5 || !strings.Contains(r.Coordinator, "[$LATEST]") {
		t.Fatalf("first tick %+v: want the leader of term 1, as its log stream, assigning the 5 repos", r)
	}
	repos, _, err := f.st.ListRepos(t.Context(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, rp := range repos {
		if rp.Owner != "w1" {
			t.Errorf("repo %s owned by %q, want w1", rp.URL, rp.Owner)
		}
	}
	if r := invoke(t, fn, runtimeapi.ScheduledEvent(now, ruleARN)); r.Campaign != "renew" || r.Term != 1 {
		t.Errorf("second tick %+v: want the same environment renewing term 1", r)
	}
	for _, want := range []string{`"Ticks":1`, `"LeaderTerm":1`, `"Fleet":"MirrorFleet"`, `"WorkersByState"`} {
		if !strings.Contains(fn.Stdout(), want) {
			t.Errorf("EMF on stdout lacks %s:\n%s", want, fn.Stdout())
		}
	}

	// w1 falls silent: suspect, and a death timer armed for the heartbeat count it stopped at.
	w1, err := f.st.GetWorker(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	invoke(t, fn, runtimeapi.ScheduledEvent(time.Now(), ruleARN))
	s, ok := f.sched.Get(group, "death-w1")
	if !ok {
		t.Fatalf("no death-w1 schedule; schedules %+v", f.sched.Schedules())
	}
	if s.Target.Arn != fn.ARN || s.Target.RoleArn != roleARN || s.Target.DLQArn != dlqARN {
		t.Errorf("timer target %+v: want the function's own ARN, the Scheduler role and the DLQ", s.Target)
	}
	var p coordinator.TimerPayload
	if err := json.Unmarshal([]byte(s.Target.Input), &p); err != nil || p.Kind != "death" || p.Worker != "w1" || p.Beats != w1.Beats {
		t.Fatalf("timer payload %s (%v), want w1's count %d", s.Target.Input, err, w1.Beats)
	}

	// The firing is delivered as Scheduler delivers it: its Input is the event. w1 has
	// heartbeated since it was armed: ignored.
	heartbeat(t, f.st, time.Now().UTC())
	fire := func() result {
		t.Helper()
		var got result
		n, err := f.sched.FireDue(t.Context(), s.At, func(ctx context.Context, d schedulerfake.Delivery) error {
			got = invoke(t, fn, d.Input)
			return nil
		})
		if err != nil || n != 1 {
			t.Fatalf("FireDue: %d, %v", n, err)
		}
		return got
	}
	if r := fire(); r.Event != "timer" || !strings.Contains(r.Ignored, "heartbeated since") {
		t.Fatalf("firing after a newer heartbeat %+v, want it ignored", r)
	}

	// Silent again after that heartbeat: a tick sees the new count, the next one (past
	// 1 s) finds it silent, and a firing for that count past the 3 s grace declares w1 dead.
	invoke(t, fn, runtimeapi.ScheduledEvent(time.Now(), ruleARN))
	time.Sleep(1500 * time.Millisecond)
	invoke(t, fn, runtimeapi.ScheduledEvent(time.Now(), ruleARN))
	w1, err = f.st.GetWorker(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	payload, _ := json.Marshal(coordinator.TimerPayload{Kind: "death", Worker: "w1", Beats: w1.Beats})
	if r := invoke(t, fn, payload); r.Event != "timer" || r.Ignored != "" || !r.Leader {
		t.Fatalf("death firing %+v", r)
	}
	if w, err := f.st.GetWorker(t.Context(), "w1"); err == nil && w.State != store.WorkerDead {
		t.Fatalf("w1 is %s after its death firing, want dead (or gone)", w.State)
	}
}

// The coordinator refuses to start on the environment a broken stack would give it,
// and says which variable is at fault: Lambda reports that as Runtime.ExitError.
func TestCoordinatorRefusesABrokenEnvironment(t *testing.T) {
	f := newFixture(t)
	env := f.coordinatorEnv()
	delete(env, deployenv.ScheduleGroup)
	env[deployenv.Warmup] = "zero"
	fn := f.start(t, "coordinator", env)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := fn.Invoke(ctx, runtimeapi.ScheduledEvent(time.Now(), ruleARN))
	if err == nil || !strings.Contains(err.Error(), deployenv.ScheduleGroup+" is not set") || !strings.Contains(err.Error(), deployenv.Warmup) {
		t.Fatalf("err %v, want an exit naming %s and %s", err, deployenv.ScheduleGroup, deployenv.Warmup)
	}
}

// The API bootstrap: signed calls (API Gateway's IAM authorizer context) add and read
// repos in the table; an unsigned call is refused; the repo reaches the coordinator's
// next tick.
func TestAPIBootstrap(t *testing.T) {
	f := newFixture(t)
	env := deployenv.API{Common: deployenv.Common{Table: f.st.Table(), Fleet: "MirrorFleet"},
		CloneBaseURL: "http://mirrors.example.org"}.Env()
	api := f.start(t, "api", env)
	call := func(method, path, body string, id *runtimeapi.IAMIdentity) runtimeapi.HTTPResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		res, err := api.Invoke(ctx, runtimeapi.HTTPEvent(method, path, body, id))
		if err != nil || res.Error != nil {
			t.Fatalf("%s %s: %v %v", method, path, err, res.Error)
		}
		var r runtimeapi.HTTPResponse
		if err := json.Unmarshal(res.Payload, &r); err != nil {
			t.Fatalf("%s %s answered %s", method, path, res.Payload)
		}
		return r
	}
	r := call("POST", "/v1/repos", `{"url":"https://github.com/golang/go"}`, runtimeapi.Operator)
	if r.StatusCode != 201 {
		t.Fatalf("signed POST /v1/repos: %d %s", r.StatusCode, r.Body)
	}
	var created struct {
		ID, URL, State string
	}
	if err := json.Unmarshal([]byte(r.Body), &created); err != nil || created.State != "pending" {
		t.Fatalf("created %s (%v)", r.Body, err)
	}
	if rp, err := f.st.GetRepo(t.Context(), created.ID); err != nil || rp.URL != "https://github.com/golang/go" {
		t.Fatalf("the table has %+v (%v)", rp, err)
	}
	if r := call("GET", "/v1/repos/"+created.ID, "", runtimeapi.Operator); r.StatusCode != 200 || !strings.Contains(r.Body, created.ID) {
		t.Errorf("signed GET: %d %s", r.StatusCode, r.Body)
	}
	if r := call("GET", "/v1/status", "", nil); r.StatusCode != 401 || header(r.Headers).Get("WWW-Authenticate") != "AWS4-HMAC-SHA256" {
		t.Errorf("unsigned GET /v1/status: %d %v %s, want 401 asking for SigV4", r.StatusCode, r.Headers, r.Body)
	}
	if r := call("POST", "/v1/repos", `{"url":"file:///etc"}`, runtimeapi.Operator); r.StatusCode != 400 {
		t.Errorf("a local path: %d %s, want 400", r.StatusCode, r.Body)
	}
	if !strings.Contains(api.Stderr(), runtimeapi.Operator.UserARN) {
		t.Errorf("the API did not log the caller:\n%s", api.Stderr())
	}

	// The coordinator's next tick assigns it (to a joining worker).
	now := time.Now().UTC()
	if _, err := f.st.ClaimSlot(t.Context(), store.Worker{ID: "w1", StartedAt: now, HeartbeatAt: now, State: store.WorkerJoining}, 64); err != nil {
		t.Fatal(err)
	}
	coord := f.start(t, "coordinator", f.coordinatorEnv())
	if res := invoke(t, coord, runtimeapi.ScheduledEvent(now, ruleARN)); res.Assigned != 1 {
		t.Errorf("tick after the API's add: %+v, want it assigned", res)
	}
}
