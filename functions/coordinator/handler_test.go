package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/schedulerfake"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
)

// scheduledEvent is the event an EventBridge schedule rule sends, as the Lambda
// developer guide shows it ("Invoke a Lambda function on a schedule").
const scheduledEvent = `{
  "version": "0",
  "account": "123456789012",
  "region": "us-east-2",
  "detail": {},
  "detail-type": "Scheduled Event",
  "source": "aws.events",
  "time": "2019-03-01T01:23:45Z",
  "id": "cdc73f9d-aea9-11e3-9d5a-835b769c0d9c",
  "resources": [
    "arn:aws:events:us-east-2:123456789012:rule/my-schedule"
  ]
}`

const (
	functionARN = "arn:aws:lambda:us-east-1:000000000000:function:mirrorfleet-coordinator"
	roleARN     = "arn:aws:iam::000000000000:role/mirrorfleet-scheduler"
	group       = "mirrorfleet-timers"
)

// boltStore returns a store in a temporary bbolt file, closed at the end.
func boltStore(t *testing.T) *bolt.Store {
	t.Helper()
	st, err := bolt.OpenWith(filepath.Join(t.TempDir(), "s.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// dynamoStore returns a store on a fresh DynamoDB Local table, deleted at the end.
func dynamoStore(t *testing.T) storetest.Store {
	return dynamotest.Table(t, "mf_coord", dynamo.Config{})
}

type env struct {
	h     *Handler
	st    storetest.Store
	fake  *schedulerfake.Fake
	clock *clock.Virtual
	emf   *bytes.Buffer
}

func newEnv(t *testing.T, st storetest.Store) *env {
	t.Helper()
	return newEnvAt(t, st, clock.NewVirtual(time.Now().UTC().Truncate(time.Minute)), "env-1")
}

// newEnvAt is one execution environment of the function, named instance, on clk.
func newEnvAt(t *testing.T, st storetest.Store, clk *clock.Virtual, instance string) *env {
	t.Helper()
	fake := schedulerfake.New(schedulerfake.Options{Now: clk.Now, Groups: []string{group}})
	t.Cleanup(fake.Close)
	var buf bytes.Buffer
	cfg := cloud.CoordinatorConfig{Table: "unused", ScheduleGroup: group, SchedulerRoleARN: roleARN, Fleet: "test",
		Coordinator: coordinator.Config{Warmup: coordinator.NoWarmup, Grace: 10 * time.Minute, SuspectAfter: 30 * time.Second, Lease: 3 * time.Minute}}
	h, err := NewHandler(cfg, Deps{Store: st, Scheduler: fake.Client(), Clock: clk, Metrics: &buf, Instance: instance,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	return &env{h: h, st: st, fake: fake, clock: clk, emf: &buf}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// invoke calls the handler as the Lambda runtime would: with a Lambda context.
func (e *env) invoke(t *testing.T, event string) (Result, error) {
	t.Helper()
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{
		AwsRequestID: "req-1", InvokedFunctionArn: functionARN})
	return e.h.Handle(ctx, json.RawMessage(event))
}

func seed(t *testing.T, st storetest.Store, now time.Time, repos int) {
	t.Helper()
	if _, err := st.ClaimSlot(t.Context(), store.Worker{ID: "w1", StartedAt: now, HeartbeatAt: now, State: store.WorkerJoining}, 64); err != nil {
		t.Fatal(err)
	}
	for i := range repos {
		url := fmt.Sprintf("https://git.example.org/team/repo%d.git", i)
		if _, _, err := st.CreateRepo(t.Context(), store.Repo{ID: store.RepoID(url), URL: url, Source: store.SourceAPI,
			State: store.RepoPending, CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
}

// emfLines parses every line written so far: each must be a JSON object with _aws.
func emfLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("EMF line is not JSON: %v\n%s", err, sc.Text())
		}
		if _, ok := m["_aws"].(map[string]any); !ok {
			t.Fatalf("EMF line without an _aws object: %s", sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// The scheduled tick: the election term is written, the seeded worker joins the ring
// and the pending repos are assigned to it; metrics go out as EMF.
func TestScheduledEventTicks(t *testing.T) {
	st := dynamoStore(t)
	e := newEnv(t, st)
	seed(t, st, e.clock.Now(), 5)

	res, err := e.invoke(t, scheduledEvent)
	if err != nil {
		t.Fatal(err)
	}
	const me = "mirrorfleet-coordinator/env-1"
	if res.Event != EventTick || !res.Leader || res.Term != 1 || res.Coordinator != me {
		t.Fatalf("result %+v, want the leader's tick in term 1 as %s", res, me)
	}
	el, err := st.GetElection(t.Context())
	if err != nil || el.Term != 1 || el.VotedFor != me || !el.LeaseUntil.After(e.clock.Now()) {
		t.Fatalf("election %+v (%v), want term 1 held by %s", el, err, me)
	}
	w, err := st.GetWorker(t.Context(), "w1")
	if err != nil || w.State != store.WorkerActive {
		t.Fatalf("worker %+v (%v), want active", w, err)
	}
	repos, _, err := st.ListRepos(t.Context(), "", 100)
	if err != nil || len(repos) != 5 {
		t.Fatalf("ListRepos: %d repos, %v", len(repos), err)
	}
	for _, r := range repos {
		if r.Owner != "w1" {
			t.Errorf("repo %s owner %q state %s, want w1", r.URL, r.Owner, r.State)
		}
	}
	if res.Assigned != 5 {
		t.Errorf("result assigned %d, want 5", res.Assigned)
	}

	names := map[string]bool{}
	for _, l := range emfLines(t, e.emf) {
		if l["Fleet"] != "test" {
			t.Errorf("EMF line without Fleet=test: %v", l)
		}
		for k := range l {
			names[k] = true
		}
	}
	for _, want := range []string{"Ticks", "LeaderTerm", "WorkersByState", "ReposByState", "ReposMoved"} {
		if !names[want] {
			t.Errorf("no %s in the EMF output:\n%s", want, e.emf.String())
		}
	}

	// A second tick from the same environment renews the lease: same term.
	res, err = e.invoke(t, scheduledEvent)
	if err != nil || !res.Leader || res.Term != 1 || res.Campaign != "renew" {
		t.Fatalf("second tick %+v, %v: want a renewal of term 1", res, err)
	}
}

// A death timer armed for a heartbeat is ignored when it fires after a newer heartbeat;
// a warm-up firing runs a tick; a death firing for a silent worker declares it dead.
func TestSchedulerTimerFirings(t *testing.T) {
	st := dynamoStore(t)
	e := newEnv(t, st)
	t0 := e.clock.Now()
	seed(t, st, t0, 3)
	if _, err := e.invoke(t, scheduledEvent); err != nil { // w1 joins, owns the repos
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute) // w1 silent past SuspectAfter: suspect, death timer armed
	if _, err := e.invoke(t, scheduledEvent); err != nil {
		t.Fatal(err)
	}
	s, ok := e.fake.Get(group, "death-w1")
	if !ok {
		t.Fatalf("no death-w1 schedule; schedules: %+v", e.fake.Schedules())
	}
	if s.Target.Arn != functionARN || s.Target.RoleArn != roleARN {
		t.Errorf("schedule target %+v, want the function's own ARN and the role", s.Target)
	}
	var p coordinator.TimerPayload
	if err := json.Unmarshal([]byte(s.Target.Input), &p); err != nil || p.Kind != "death" || p.Worker != "w1" || p.Beats != 1 {
		t.Fatalf("payload %s (%v)", s.Target.Input, err)
	}
	if !s.At.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("death timer at %s, want the grace after the tick that last saw w1's count move (%s)", s.At, t0.Add(10*time.Minute))
	}

	// w1 heartbeats after the timer was armed; the firing must change nothing.
	if _, err := st.Heartbeat(t.Context(), "w1", store.Heartbeat{At: t0.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(s.At)
	var results []Result
	n, err := e.fake.FireDue(t.Context(), e.clock.Now(), func(ctx context.Context, d schedulerfake.Delivery) error {
		res, err := e.invoke(t, string(d.Input))
		results = append(results, res)
		return err
	})
	if err != nil || n != 1 {
		t.Fatalf("FireDue: %d, %v", n, err)
	}
	if results[0].Event != EventTimer || !strings.Contains(results[0].Ignored, "heartbeated since") {
		t.Fatalf("firing result %+v, want the death timer ignored", results[0])
	}
	if w, err := st.GetWorker(t.Context(), "w1"); err != nil || w.State == store.WorkerDead {
		t.Fatalf("w1 %+v (%v) after an ignored firing", w, err)
	}

	// A warm-up firing runs a tick; it sees w1's new count: w1 is active again.
	res, err := e.invoke(t, `{"kind":"warmup"}`)
	if err != nil || res.Event != EventTimer || !res.Leader || res.Ignored != "" {
		t.Fatalf("warm-up firing %+v, %v: want a leader's tick", res, err)
	}
	if w, err := st.GetWorker(t.Context(), "w1"); err != nil || w.State != store.WorkerActive {
		t.Fatalf("w1 %+v (%v) after its heartbeat was seen, want active", w, err)
	}

	// Silent again: suspect at the next tick, a new timer for the new count; its firing
	// when the grace ends declares w1 dead.
	seenAt := e.clock.Now()
	e.clock.Advance(time.Minute)
	if _, err := e.invoke(t, scheduledEvent); err != nil {
		t.Fatal(err)
	}
	s, ok = e.fake.Get(group, "death-w1")
	if !ok || !s.At.Equal(seenAt.Add(10*time.Minute)) {
		t.Fatalf("second death timer %+v (%v), want one at %s", s, ok, seenAt.Add(10*time.Minute))
	}
	e.clock.Set(s.At)
	res, err = e.invoke(t, s.Target.Input)
	if err != nil || res.Ignored != "" || !res.Leader {
		t.Fatalf("death firing %+v, %v", res, err)
	}
	switch w, err := st.GetWorker(t.Context(), "w1"); {
	case errors.Is(err, store.ErrNotFound): // dead and already removed: fine
	case err != nil:
		t.Fatal(err)
	case w.State != store.WorkerDead:
		t.Fatalf("w1 is %s after its death firing, want dead", w.State)
	}
	if len(emfLines(t, e.emf)) == 0 { // and each line parsed as JSON with _aws
		t.Error("no EMF output from the ticks")
	}
}

// A death timer fired into another execution environment while the leader's lease is
// live acts at once: the new environment is of the same function (one group), takes the
// next term and declares the death; the old leader's writes are fenced from then on.
func TestTimerInAnotherEnvironmentActs(t *testing.T) {
	st := dynamoStore(t)
	clk := clock.NewVirtual(time.Now().UTC().Truncate(time.Minute))
	a, b := newEnvAt(t, st, clk, "env-a"), newEnvAt(t, st, clk, "env-b")
	seed(t, st, clk.Now(), 3)
	if res, err := a.invoke(t, scheduledEvent); err != nil || !res.Leader {
		t.Fatalf("first tick in env-a: %+v, %v", res, err)
	}
	clk.Advance(time.Minute)
	if res, err := a.invoke(t, scheduledEvent); err != nil || !res.Leader || res.Term != 1 {
		t.Fatalf("second tick in env-a: %+v, %v", res, err)
	}
	s, ok := a.fake.Get(group, "death-w1")
	if !ok {
		t.Fatal("no death timer armed")
	}
	// env-a keeps ticking every minute, so its lease (3 min) is always live; the timer
	// fires into env-b half a minute after env-a's last tick.
	for clk.Now().Add(time.Minute).Before(s.At) {
		clk.Advance(time.Minute)
		if res, err := a.invoke(t, scheduledEvent); err != nil || !res.Leader || res.Term != 1 {
			t.Fatalf("minute tick in env-a: %+v, %v", res, err)
		}
	}
	clk.Set(s.At)
	res, err := b.invoke(t, s.Target.Input)
	if err != nil || !res.Leader || res.Term != 2 || res.Campaign != "takeover" {
		t.Fatalf("timer in env-b: %+v, %v; want it to take term 2 and act", res, err)
	}
	if w, err := st.GetWorker(t.Context(), "w1"); err == nil && w.State != store.WorkerDead {
		t.Fatalf("w1 is %s after the firing in env-b, want dead", w.State)
	}
	// env-a's next tick takes term 3 in turn: never two leaders of one term.
	res, err = a.invoke(t, scheduledEvent)
	if err != nil || !res.Leader || res.Term != 3 {
		t.Fatalf("env-a after env-b led: %+v, %v", res, err)
	}
	// Another function's coordinator still follows a live lease.
	other := newEnvAt(t, st, clk, "env-c")
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "req-9",
		InvokedFunctionArn: "arn:aws:lambda:us-east-1:000000000000:function:another-fleet"})
	if res, err := other.h.Handle(ctx, json.RawMessage(scheduledEvent)); err != nil || res.Leader {
		t.Fatalf("another function's tick: %+v, %v; want it to follow", res, err)
	}
}

func TestFunctionName(t *testing.T) {
	for arn, want := range map[string]string{
		functionARN: "mirrorfleet-coordinator",
		"arn:aws:lambda:us-east-1:000000000000:function:mirrorfleet-coordinator:live": "mirrorfleet-coordinator",
		"not-an-arn": "not-an-arn",
	} {
		if got := functionName(arn); got != want {
			t.Errorf("functionName(%q) = %q, want %q", arn, got, want)
		}
	}
}

// Events that are neither a scheduled event nor our timer payload are refused with a
// message that says what was expected. The store is bolt: nothing reaches it.
func TestUnknownEventsAreErrors(t *testing.T) {
	st := boltStore(t)
	e := newEnv(t, st)
	for _, ev := range []string{
		`{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put"}]}`,
		`{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{}}`,
		`{"source":"aws.events","detail-type":"Something Else"}`,
		`{"kind":"reboot"}`,
		`{"kind":"death","source":"aws.events"}`,
		`[1,2]`,
		`"tick"`,
		`{}`,
	} {
		res, err := e.invoke(t, ev)
		if err == nil {
			t.Errorf("event %s: no error (result %+v)", ev, res)
			continue
		}
		if !strings.Contains(err.Error(), "coordinator:") {
			t.Errorf("event %s: error %q does not say who refused it", ev, err)
		}
	}
	if el, _ := st.GetElection(t.Context()); el.Version != 0 {
		t.Errorf("an unknown event campaigned: %+v", el)
	}
	if e.emf.Len() != 0 {
		t.Errorf("metrics written for refused events: %s", e.emf.String())
	}
	// Without a Lambda context there is no ARN for the timers' target.
	if _, err := e.h.Handle(t.Context(), json.RawMessage(scheduledEvent)); err == nil || !strings.Contains(err.Error(), "Lambda context") {
		t.Errorf("no Lambda context: err %v", err)
	}
}

func TestClassify(t *testing.T) {
	for ev, want := range map[string]string{
		scheduledEvent: EventTick,
		`{"kind":"death","worker":"w1","heartbeat_at":"2030-01-01T00:00:00Z"}`: EventTimer,
		`{"kind":"warmup"}`: EventTimer,
	} {
		if got, err := Classify(json.RawMessage(ev)); got != want || err != nil {
			t.Errorf("Classify(%s) = %q, %v; want %q", ev, got, err, want)
		}
	}
}

// emfValues returns the values of metric name across the EMF lines written so far.
func emfValues(t *testing.T, buf *bytes.Buffer, name string) []float64 {
	t.Helper()
	var out []float64
	for _, l := range emfLines(t, buf) {
		switch v := l[name].(type) {
		case float64:
			out = append(out, v)
		case []any: // a histogram's observations
			for _, x := range v {
				out = append(out, x.(float64))
			}
		}
	}
	return out
}

// The fleet's staleness comes from the summaries the workers sent with their
// heartbeats: no repo is read for it. A heartbeating worker's are taken as sent, never
// aged by the worker's own timestamp (here 10 s old).
func TestStalenessFromHeartbeats(t *testing.T) {
	st := boltStore(t)
	e := newEnv(t, st)
	now := e.clock.Now()
	seed(t, st, now, 0)
	if _, err := st.Heartbeat(t.Context(), "w1", store.Heartbeat{At: now.Add(-10 * time.Second),
		Staleness: store.Staleness{Repos: 1000, P50: time.Hour, P99: 3 * time.Hour, Max: 5 * time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.invoke(t, scheduledEvent); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"StalenessP50": 3600, "StalenessP99": 3 * 3600, "StalenessMax": 5 * 3600} {
		if got := emfValues(t, e.emf, name); len(got) != 1 || got[0] != want {
			t.Errorf("%s = %v, want [%v]", name, got, want)
		}
	}
}

// failingStore fails every election read: no tick can run.
type failingStore struct{ storetest.Store }

func (failingStore) GetElection(context.Context) (store.Election, error) {
	return store.Election{}, errors.New("store unreachable")
}

// A failed tick fails the invocation and is not counted in Ticks (the no-tick alarm
// must see a coordinator that fails every minute); its duration still is.
func TestFailedTickIsNotATick(t *testing.T) {
	st := boltStore(t)
	e := newEnv(t, failingStore{st})
	if _, err := e.invoke(t, scheduledEvent); err == nil || !strings.Contains(err.Error(), "store unreachable") {
		t.Fatalf("invocation error %v, want the store's", err)
	}
	if got := emfValues(t, e.emf, "Ticks"); len(got) != 0 {
		t.Errorf("failed tick counted: Ticks %v", got)
	}
	if got := emfValues(t, e.emf, "TickDuration"); len(got) != 1 {
		t.Errorf("TickDuration %v, want one value", got)
	}
}
