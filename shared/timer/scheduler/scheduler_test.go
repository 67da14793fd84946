package scheduler_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/smithy-go"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/schedulerfake"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"

	sched "github.com/mirrorfleet/mirrorfleet/shared/timer/scheduler"
)

const (
	group  = "mirrorfleet-timers"
	lambda = "arn:aws:lambda:us-east-1:123456789012:function:mirrorfleet-coordinator"
	role   = "arn:aws:iam::123456789012:role/mirrorfleet-scheduler"
	dlq    = "arn:aws:sqs:us-east-1:123456789012:mirrorfleet-timers-dlq"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

type env struct {
	timer *sched.Timer
	fake  *schedulerfake.Fake
	clock *clock.Virtual
}

// newEnv wires a Timer to a fresh fake whose clock is the test's virtual clock.
func newEnv(t *testing.T, fo schedulerfake.Options, cfg sched.Config, clientOpts ...func(*scheduler.Options)) *env {
	t.Helper()
	clk := clock.NewVirtual(t0)
	fo.Now = clk.Now
	fo.Groups = append(fo.Groups, group)
	fake := schedulerfake.New(fo)
	t.Cleanup(fake.Close)
	cfg.Client = fake.Client(clientOpts...)
	if cfg.Group == "" {
		cfg.Group = group
	}
	cfg.TargetARN, cfg.RoleARN, cfg.Clock = lambda, role, clk
	tm, err := sched.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{timer: tm, fake: fake, clock: clk}
}

func ops(calls []schedulerfake.Call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Op)
	}
	return out
}

func TestSetCreatesOneTimeSchedule(t *testing.T) {
	e := newEnv(t, schedulerfake.Options{}, sched.Config{DLQARN: dlq})
	ctx := context.Background()
	payload := `{"kind":"death","worker":"w1","heartbeat_at":"2030-01-01T00:00:00Z"}`
	if err := e.timer.Set(ctx, "death-w1", t0.Add(10*time.Minute+15*time.Second), []byte(payload)); err != nil {
		t.Fatal(err)
	}
	s, ok := e.fake.Get(group, "death-w1")
	if !ok {
		t.Fatalf("no schedule; have %+v", e.fake.Schedules())
	}
	if s.Expression != "at(2030-01-01T00:11:00)" || s.Timezone != "UTC" {
		t.Errorf("expression %q in %q, want at(2030-01-01T00:11:00) in UTC (rounded up)", s.Expression, s.Timezone)
	}
	if s.FlexibleMode != "OFF" || s.ActionAfterCompletion != "DELETE" || s.State != "ENABLED" {
		t.Errorf("flexible %q, after completion %q, state %q", s.FlexibleMode, s.ActionAfterCompletion, s.State)
	}
	tg := s.Target
	if tg.Arn != lambda || tg.RoleArn != role || tg.Input != payload || tg.DLQArn != dlq {
		t.Errorf("target %+v", tg)
	}
	if tg.MaxRetryAttempts == nil || *tg.MaxRetryAttempts != sched.MaxRetryAttempts ||
		tg.MaxEventAgeSeconds == nil || *tg.MaxEventAgeSeconds != int32(sched.DefaultMaxEventAge/time.Second) {
		t.Errorf("retry policy %v / %v", tg.MaxRetryAttempts, tg.MaxEventAgeSeconds)
	}
	if !strings.Contains(s.Description, "death-w1") {
		t.Errorf("description %q does not name the timer", s.Description)
	}
	if got := ops(e.fake.Calls()); !slices.Equal(got, []string{schedulerfake.OpCreate}) {
		t.Errorf("calls %v, want one CreateSchedule", got)
	}
	if c := e.fake.Calls()[0]; c.Group != group {
		t.Errorf("created in group %q, want %q", c.Group, group)
	}

	f, ok, err := e.timer.Get(ctx, "death-w1")
	if err != nil || !ok || !f.At.Equal(t0.Add(11*time.Minute)) || string(f.Payload) != payload || f.Name != "death-w1" {
		t.Errorf("Get = %+v, %v, %v", f, ok, err)
	}
}

func TestNoDLQWhenNotConfigured(t *testing.T) {
	e := newEnv(t, schedulerfake.Options{}, sched.Config{MaxEventAge: 5 * time.Minute})
	if err := e.timer.Set(context.Background(), "warmup", t0.Add(10*time.Minute), []byte(`{"kind":"warmup"}`)); err != nil {
		t.Fatal(err)
	}
	s, _ := e.fake.Get(group, "warmup")
	if s.Target.DLQArn != "" || *s.Target.MaxEventAgeSeconds != 300 {
		t.Errorf("target %+v", s.Target)
	}
}

func TestSecondSetReplaces(t *testing.T) {
	e := newEnv(t, schedulerfake.Options{}, sched.Config{})
	ctx := context.Background()
	if err := e.timer.Set(ctx, "death-w1", t0.Add(10*time.Minute), []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.timer.Set(ctx, "death-w1", t0.Add(20*time.Minute), []byte(`{"n":2}`)); err != nil {
		t.Fatal(err)
	}
	all := e.fake.Schedules()
	if len(all) != 1 {
		t.Fatalf("%d schedules, want 1: %+v", len(all), all)
	}
	if s := all[0]; s.Expression != "at(2030-01-01T00:20:00)" || s.Target.Input != `{"n":2}` || s.ActionAfterCompletion != "DELETE" {
		t.Errorf("after the second Set: %+v", s)
	}
	want := []string{schedulerfake.OpCreate, schedulerfake.OpCreate, schedulerfake.OpUpdate}
	if got := ops(e.fake.Calls()); !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	// The replaced timer does not fire at its old time.
	n, err := e.fake.FireDue(ctx, t0.Add(15*time.Minute), func(context.Context, schedulerfake.Delivery) error { return nil })
	if n != 0 || err != nil {
		t.Errorf("FireDue at the old time delivered %d (%v)", n, err)
	}
}

// A schedule that fires (deleting itself) between our CreateSchedule and UpdateSchedule
// is created again rather than lost.
func TestSetRecreatesScheduleThatVanished(t *testing.T) {
	e := newEnv(t, schedulerfake.Options{}, sched.Config{})
	e.fake.FailNext(schedulerfake.OpCreate, "ConflictException", 409, "Schedule death-w1 already exists.")
	if err := e.timer.Set(context.Background(), "death-w1", t0.Add(10*time.Minute), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	want := []string{schedulerfake.OpCreate, schedulerfake.OpUpdate, schedulerfake.OpCreate}
	if got := ops(e.fake.Calls()); !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	if _, ok := e.fake.Get(group, "death-w1"); !ok {
		t.Error("schedule missing")
	}
}

func TestCancel(t *testing.T) {
	e := newEnv(t, schedulerfake.Options{}, sched.Config{})
	ctx := context.Background()
	if err := e.timer.Set(ctx, "death-w1", t0.Add(10*time.Minute), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.timer.Cancel(ctx, "death-w1"); err != nil {
		t.Fatal(err)
	}
	if all := e.fake.Schedules(); len(all) != 0 {
		t.Errorf("schedules left: %+v", all)
	}
	for _, name := range []string{"death-w1", "never-armed", "death-a/b"} {
		if err := e.timer.Cancel(ctx, name); err != nil {
			t.Errorf("Cancel(%q) of an unknown timer: %v", name, err)
		}
	}
	if _, ok, err := e.timer.Get(ctx, "death-w1"); ok || err != nil {
		t.Errorf("Get after Cancel: %v, %v", ok, err)
	}
	if err := e.timer.Cancel(ctx, ""); err == nil {
		t.Error("Cancel of an empty name succeeded")
	}
}

func TestFiringDeliversPayloadExactly(t *testing.T) {
	e := newEnv(t, schedulerfake.Options{}, sched.Config{})
	ctx := context.Background()
	payloads := map[string]string{
		"death-w1": `{"kind":"death","worker":"w1","heartbeat_at":"2030-01-01T00:00:00.123456789Z"}`,
		"warmup":   "{ \"kind\" : \"warmup\", \"note\": \"ü \\\"q\\\" <&> \\u2028\" }\n",
	}
	for name, p := range payloads {
		if err := e.timer.Set(ctx, name, t0.Add(10*time.Minute), []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]string{}
	n, err := e.fake.FireDue(ctx, t0.Add(10*time.Minute), func(_ context.Context, d schedulerfake.Delivery) error {
		got[d.Name] = string(d.Input)
		return nil
	})
	if err != nil || n != 2 {
		t.Fatalf("FireDue = %d, %v", n, err)
	}
	for name, p := range payloads {
		if got[name] != p {
			t.Errorf("%s delivered %q, want exactly %q", name, got[name], p)
		}
	}
	if all := e.fake.Schedules(); len(all) != 0 {
		t.Errorf("fired schedules not deleted: %+v", all)
	}
}

// Whatever the second a timer is due at, its schedule is not delivered before then.
func TestRoundingNeverFiresEarly(t *testing.T) {
	e := newEnv(t, schedulerfake.Options{}, sched.Config{})
	ctx := context.Background()
	due := map[string]time.Time{}
	for i, off := range []time.Duration{10 * time.Minute, 10*time.Minute + time.Second, 10*time.Minute + 59*time.Second,
		10*time.Minute + 30*time.Second + 1, 61 * time.Second, 0, -time.Hour} {
		name := "t" + string(rune('a'+i))
		due[name] = t0.Add(off)
		if err := e.timer.Set(ctx, name, t0.Add(off), []byte(`{}`)); err != nil {
			t.Fatalf("Set %s (%s): %v", name, off, err)
		}
	}
	fired := map[string]time.Time{}
	for now := t0; now.Before(t0.Add(15 * time.Minute)); now = now.Add(time.Second) {
		_, err := e.fake.FireDue(ctx, now, func(_ context.Context, d schedulerfake.Delivery) error {
			fired[d.Name] = now
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for name, at := range due {
		f, ok := fired[name]
		switch {
		case !ok:
			t.Errorf("%s (due %s) never fired", name, at)
		case f.Before(at):
			t.Errorf("%s fired at %s, before it was due at %s", name, f, at)
		case f.Before(t0.Add(sched.MinLead)):
			t.Errorf("%s fired at %s, sooner than MinLead after it was armed", name, f)
		case f.Sub(latest(at, t0.Add(sched.MinLead))) >= time.Minute:
			t.Errorf("%s due %s fired at %s: a minute or more late", name, at, f)
		}
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Scheduler refuses an at() in the past; the Timer moves such a timer to the next
// minute it can and the service accepts it.
func TestPastTimeIsScheduledSoon(t *testing.T) {
	e := newEnv(t, schedulerfake.Options{}, sched.Config{})
	e.clock.Advance(30 * time.Second)
	if err := e.timer.Set(context.Background(), "death-w1", t0.Add(-time.Hour), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if s, _ := e.fake.Get(group, "death-w1"); s.Expression != "at(2030-01-01T00:02:00)" {
		t.Errorf("expression %q, want at(2030-01-01T00:02:00)", s.Expression)
	}
}

func TestNameMappingEndToEnd(t *testing.T) {
	e := newEnv(t, schedulerfake.Options{}, sched.Config{})
	ctx := context.Background()
	names := []string{"death-wörker/1", "death-wörker:1", "death-" + strings.Repeat("n", 80)}
	for i, n := range names {
		if err := e.timer.Set(ctx, n, t0.Add(10*time.Minute), []byte(`{"i":`+string(rune('0'+i))+`}`)); err != nil {
			t.Fatalf("Set(%q): %v", n, err)
		}
	}
	all := e.fake.Schedules()
	if len(all) != len(names) {
		t.Fatalf("%d schedules for %d names: %+v", len(all), len(names), all)
	}
	for i, n := range names {
		s, ok := e.fake.Get(group, sched.ScheduleName(n))
		if !ok || s.Target.Input != `{"i":`+string(rune('0'+i))+`}` || !strings.Contains(s.Description, n) {
			t.Errorf("%q: schedule %+v", n, s)
		}
		f, ok, err := e.timer.Get(ctx, n)
		if !ok || err != nil || f.Name != n {
			t.Errorf("Get(%q) = %+v, %v, %v", n, f, ok, err)
		}
		if err := e.timer.Cancel(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if all := e.fake.Schedules(); len(all) != 0 {
		t.Errorf("left after Cancel: %+v", all)
	}
}

func TestServiceErrorsSurface(t *testing.T) {
	ctx := context.Background()
	noRetry := func(o *scheduler.Options) { o.RetryMaxAttempts = 1 }

	t.Run("validation", func(t *testing.T) {
		e := newEnv(t, schedulerfake.Options{}, sched.Config{}, noRetry)
		e.fake.FailNext(schedulerfake.OpCreate, "ValidationException", 400, "boom")
		err := e.timer.Set(ctx, "death-w1", t0.Add(10*time.Minute), []byte(`{}`))
		if _, ok := errors.AsType[*types.ValidationException](err); !ok {
			t.Fatalf("Set = %v, want a ValidationException", err)
		}
		for _, want := range []string{`"death-w1"`, "create schedule " + group + "/death-w1", "boom"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
	})
	t.Run("update fails", func(t *testing.T) {
		e := newEnv(t, schedulerfake.Options{}, sched.Config{}, noRetry)
		if err := e.timer.Set(ctx, "death-w1", t0.Add(10*time.Minute), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		e.fake.FailNext(schedulerfake.OpUpdate, "ValidationException", 400, "quota")
		err := e.timer.Set(ctx, "death-w1", t0.Add(20*time.Minute), []byte(`{}`))
		if _, ok := errors.AsType[*types.ValidationException](err); !ok || !strings.Contains(err.Error(), "update schedule") {
			t.Fatalf("Set = %v", err)
		}
	})
	t.Run("unmodelled error keeps its code", func(t *testing.T) {
		e := newEnv(t, schedulerfake.Options{}, sched.Config{}, noRetry)
		e.fake.FailNext(schedulerfake.OpDelete, "AccessDeniedException", 403, "not allowed")
		err := e.timer.Cancel(ctx, "death-w1")
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "AccessDeniedException" || !strings.Contains(err.Error(), "delete schedule "+group+"/death-w1") {
			t.Fatalf("Cancel = %v", err)
		}
	})
	t.Run("missing group is not swallowed by Set", func(t *testing.T) {
		e := newEnv(t, schedulerfake.Options{}, sched.Config{Group: "no-such-group"}, noRetry)
		err := e.timer.Set(ctx, "death-w1", t0.Add(10*time.Minute), []byte(`{}`))
		if _, ok := errors.AsType[*types.ResourceNotFoundException](err); !ok || !strings.Contains(err.Error(), "no-such-group") {
			t.Fatalf("Set = %v", err)
		}
	})
	t.Run("get fails", func(t *testing.T) {
		e := newEnv(t, schedulerfake.Options{}, sched.Config{}, noRetry)
		e.fake.FailNext(schedulerfake.OpGet, "InternalServerException", 500, "oops")
		if _, _, err := e.timer.Get(ctx, "death-w1"); err == nil || !strings.Contains(err.Error(), "oops") {
			t.Fatalf("Get = %v", err)
		}
	})
	t.Run("throttling is retried by the SDK", func(t *testing.T) {
		e := newEnv(t, schedulerfake.Options{}, sched.Config{}, func(o *scheduler.Options) { o.RetryMaxAttempts = 2 })
		e.fake.FailNext(schedulerfake.OpCreate, "ThrottlingException", 429, "slow down")
		if err := e.timer.Set(ctx, "death-w1", t0.Add(10*time.Minute), []byte(`{}`)); err != nil {
			t.Fatalf("Set after one throttle = %v", err)
		}
		if len(e.fake.Schedules()) != 1 {
			t.Error("schedule not created")
		}
	})
}

func TestSetRefusesBadInput(t *testing.T) {
	e := newEnv(t, schedulerfake.Options{}, sched.Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		payload string
	}{
		{"death-w1", `not json`},
		{"death-w1", ``},
		{"death-w1", `{"x":"` + strings.Repeat("a", 8200) + `"}`},
		{"", `{}`},
	} {
		if err := e.timer.Set(ctx, tc.name, t0.Add(10*time.Minute), []byte(tc.payload)); err == nil {
			t.Errorf("Set(%q, %.20q) succeeded", tc.name, tc.payload)
		}
	}
	if calls := e.fake.Calls(); len(calls) != 0 {
		t.Errorf("bad input reached the service: %v", calls)
	}
}

func TestNewChecksConfig(t *testing.T) {
	fake := schedulerfake.New(schedulerfake.Options{})
	defer fake.Close()
	c := fake.Client()
	for _, cfg := range []sched.Config{
		{TargetARN: lambda, RoleARN: role},
		{Client: c, RoleARN: role},
		{Client: c, TargetARN: lambda},
		{Client: c, TargetARN: lambda, RoleARN: role, Group: "bad/group"},
		{Client: c, TargetARN: lambda, RoleARN: role, MaxEventAge: 30 * time.Second},
		{Client: c, TargetARN: lambda, RoleARN: role, MaxEventAge: 25 * time.Hour},
	} {
		if _, err := sched.New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	if _, err := sched.New(sched.Config{Client: c, TargetARN: lambda, RoleARN: role}); err != nil {
		t.Errorf("New with the default group: %v", err)
	}
}

// At-least-once: a duplicate delivery hands over the same payload again.
func TestDuplicateDelivery(t *testing.T) {
	e := newEnv(t, schedulerfake.Options{DeliverTwice: true}, sched.Config{})
	ctx := context.Background()
	if err := e.timer.Set(ctx, "warmup", t0.Add(10*time.Minute), []byte(`{"kind":"warmup"}`)); err != nil {
		t.Fatal(err)
	}
	var got []string
	n, err := e.fake.FireDue(ctx, t0.Add(10*time.Minute), func(_ context.Context, d schedulerfake.Delivery) error {
		got = append(got, string(d.Input))
		return nil
	})
	if err != nil || n != 2 || !slices.Equal(got, []string{`{"kind":"warmup"}`, `{"kind":"warmup"}`}) {
		t.Errorf("FireDue = %d, %v, %q", n, err, got)
	}
}

// A failed delivery is retried until the event age runs out, then dead-lettered.
func TestFailedDeliveryRetriedThenDeadLettered(t *testing.T) {
	e := newEnv(t, schedulerfake.Options{}, sched.Config{DLQARN: dlq, MaxEventAge: 2 * time.Minute})
	ctx := context.Background()
	if err := e.timer.Set(ctx, "warmup", t0.Add(10*time.Minute), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	fail := func(context.Context, schedulerfake.Delivery) error { return errors.New("lambda throttled") }
	var attempts []int
	for _, at := range []time.Duration{10, 11, 12, 13, 14} {
		_, err := e.fake.FireDue(ctx, t0.Add(at*time.Minute), func(ctx context.Context, d schedulerfake.Delivery) error {
			attempts = append(attempts, d.Attempt)
			return fail(ctx, d)
		})
		if err == nil || !strings.Contains(err.Error(), "lambda throttled") {
			t.Fatalf("FireDue at +%dm = %v", at, err)
		}
		if len(e.fake.DeadLetters()) > 0 {
			break
		}
	}
	if !slices.Equal(attempts, []int{1, 2, 3, 4}) || len(e.fake.DeadLetters()) != 1 || len(e.fake.Schedules()) != 0 {
		t.Errorf("attempts %v, dead letters %v, left %v", attempts, e.fake.DeadLetters(), e.fake.Schedules())
	}
}
