// Package scheduler is the coordinator's Timer on Amazon EventBridge Scheduler (ADR 3):
// each armed timer is a one-time at() schedule in one schedule group whose target is
// the coordinator Lambda and whose Input is the timer's payload. A fired schedule
// deletes itself (ActionAfterCompletion DELETE).
//
// Delivery is at-least-once and to the minute: the handler (coordinator.OnTimer) already
// ignores stale and repeated firings, so nothing here tries to be exactly-once.
package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/timer"
)

// API is the part of the Scheduler client the Timer uses; *scheduler.Client satisfies it.
type API interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error)
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
	GetSchedule(ctx context.Context, in *scheduler.GetScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error)
}

// Delivery policy of every schedule. A firing only brings forward what the next
// scheduled tick (every minute) would do anyway, so retrying for the service's full 24
// hours buys nothing; an hour rides out a Lambda throttle or a short outage, and what
// still fails goes to the DLQ (when configured), where an alarm can see it. The attempt
// cap is the service's maximum: the age is the limit that binds.
const (
	DefaultMaxEventAge = time.Hour
	MaxRetryAttempts   = 185
)

// Service limits checked before calling, so a bad payload fails with a clear error
// rather than a ValidationException.
const (
	maxInput       = 8192 // Target.Input characters
	maxDescription = 512
)

// Config configures a Timer.
type Config struct {
	Client    API
	Group     string // schedule group (must exist; created by the infrastructure); "" = "default"
	TargetARN string // the coordinator Lambda
	RoleARN   string // role Scheduler assumes to invoke the target
	DLQARN    string // optional SQS queue for firings that exhausted their retries
	// MaxEventAge bounds retries of a failed delivery (1 minute to 24 hours); 0 means
	// DefaultMaxEventAge.
	MaxEventAge time.Duration
	Clock       clock.Clock // for "now" when a timer is already due; nil = wall clock
	Log         *slog.Logger
}

// Timer arms coordinator timers as one-time schedules. Its Set and Cancel have the
// semantics of the in-process timer.Local: a later Set of a name replaces the earlier
// one, and cancelling an unknown name is not an error. It is safe for concurrent use
// (it holds no state of its own: the schedules are the state).
type Timer struct {
	cfg Config
}

// New checks cfg and returns a Timer.
func New(cfg Config) (*Timer, error) {
	if cfg.Client == nil {
		return nil, errors.New("scheduler: config: Client is required")
	}
	if cfg.Group == "" {
		cfg.Group = "default"
	}
	if !ValidName(cfg.Group) {
		return nil, fmt.Errorf("scheduler: config: group %q is not a valid schedule group name", cfg.Group)
	}
	if cfg.TargetARN == "" || cfg.RoleARN == "" {
		return nil, errors.New("scheduler: config: TargetARN and RoleARN are required")
	}
	if cfg.MaxEventAge == 0 {
		cfg.MaxEventAge = DefaultMaxEventAge
	}
	if cfg.MaxEventAge < time.Minute || cfg.MaxEventAge > 24*time.Hour {
		return nil, fmt.Errorf("scheduler: config: MaxEventAge %s is outside the service's 1m..24h", cfg.MaxEventAge)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Timer{cfg: cfg}, nil
}

// schedule is the shape shared by CreateSchedule and UpdateSchedule. UpdateSchedule
// replaces every field (omitted ones revert to defaults), so both send all of it.
type schedule struct {
	name, description, expr string
	target                  *types.Target
}

// Set arms timer name to fire at at (rounded up to the minute; see FireTime) with
// payload, which must be JSON: it becomes the event the coordinator Lambda receives.
// It creates the schedule, or updates it when one of that name exists.
func (t *Timer) Set(ctx context.Context, name string, at time.Time, payload []byte) error {
	if name == "" {
		return errors.New("scheduler: set: empty timer name")
	}
	if !json.Valid(payload) {
		return fmt.Errorf("scheduler: set %q: payload is not JSON (the target Lambda receives it as its event)", name)
	}
	if n := utf8.RuneCount(payload); n > maxInput {
		return fmt.Errorf("scheduler: set %q: payload of %d characters exceeds Scheduler's %d", name, n, maxInput)
	}
	now := t.cfg.Clock.Now()
	fire := FireTime(at, now)
	if !fire.Equal(ceilMinute(at)) {
		t.cfg.Log.Info("timer due too soon for Scheduler; firing at the earliest minute it can",
			"timer", name, "due", at, "fire_at", fire, "now", now)
	}
	s := schedule{
		name:        ScheduleName(name),
		description: description(name),
		expr:        AtExpression(fire),
		target:      t.target(payload),
	}
	// Create, else update; an update that finds nothing means the schedule fired (and
	// deleted itself) between the two calls, so create again. Bounded: each round needs
	// the schedule to be created and fired by someone else in between.
	for range 3 {
		_, err := t.cfg.Client.CreateSchedule(ctx, t.createInput(s))
		if err == nil {
			t.cfg.Log.Debug("timer armed", "timer", name, "schedule", s.name, "at", s.expr)
			return nil
		}
		if _, ok := errors.AsType[*types.ConflictException](err); !ok {
			return fmt.Errorf("scheduler: set %q: create schedule %s/%s: %w", name, t.cfg.Group, s.name, err)
		}
		_, err = t.cfg.Client.UpdateSchedule(ctx, t.updateInput(s))
		if err == nil {
			t.cfg.Log.Debug("timer re-armed", "timer", name, "schedule", s.name, "at", s.expr)
			return nil
		}
		if _, ok := errors.AsType[*types.ResourceNotFoundException](err); !ok {
			return fmt.Errorf("scheduler: set %q: update schedule %s/%s: %w", name, t.cfg.Group, s.name, err)
		}
	}
	return fmt.Errorf("scheduler: set %q: schedule %s/%s kept appearing and vanishing between create and update", name, t.cfg.Group, s.name)
}

// Cancel deletes timer name's schedule; a schedule that does not exist (never armed,
// already fired, already cancelled) is not an error. A firing already in flight may
// still arrive: the handler copes, as it copes with any duplicate.
func (t *Timer) Cancel(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("scheduler: cancel: empty timer name")
	}
	sn := ScheduleName(name)
	_, err := t.cfg.Client.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(sn), GroupName: aws.String(t.cfg.Group)})
	if _, ok := errors.AsType[*types.ResourceNotFoundException](err); ok {
		return nil
	}
	if err != nil {
		return fmt.Errorf("scheduler: cancel %q: delete schedule %s/%s: %w", name, t.cfg.Group, sn, err)
	}
	t.cfg.Log.Debug("timer cancelled", "timer", name, "schedule", sn)
	return nil
}

// Get returns timer name as armed (At is the minute it fires at), or false when no
// schedule of that name exists. It is for tests and the status page.
func (t *Timer) Get(ctx context.Context, name string) (timer.Firing, bool, error) {
	sn := ScheduleName(name)
	out, err := t.cfg.Client.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(sn), GroupName: aws.String(t.cfg.Group)})
	if _, ok := errors.AsType[*types.ResourceNotFoundException](err); ok {
		return timer.Firing{}, false, nil
	}
	if err != nil {
		return timer.Firing{}, false, fmt.Errorf("scheduler: get %q: get schedule %s/%s: %w", name, t.cfg.Group, sn, err)
	}
	at, err := ParseAt(aws.ToString(out.ScheduleExpression))
	if err != nil {
		return timer.Firing{}, false, fmt.Errorf("scheduler: get %q: %w", name, err)
	}
	f := timer.Firing{Name: name, At: at}
	if out.Target != nil && out.Target.Input != nil {
		f.Payload = []byte(*out.Target.Input)
	}
	return f, true, nil
}

func (t *Timer) target(payload []byte) *types.Target {
	tg := &types.Target{
		Arn:     aws.String(t.cfg.TargetARN),
		RoleArn: aws.String(t.cfg.RoleARN),
		Input:   aws.String(string(payload)),
		RetryPolicy: &types.RetryPolicy{
			MaximumEventAgeInSeconds: aws.Int32(int32(t.cfg.MaxEventAge / time.Second)),
			MaximumRetryAttempts:     aws.Int32(MaxRetryAttempts),
		},
	}
	if t.cfg.DLQARN != "" {
		tg.DeadLetterConfig = &types.DeadLetterConfig{Arn: aws.String(t.cfg.DLQARN)}
	}
	return tg
}

func (t *Timer) createInput(s schedule) *scheduler.CreateScheduleInput {
	return &scheduler.CreateScheduleInput{
		Name:                       aws.String(s.name),
		GroupName:                  aws.String(t.cfg.Group),
		Description:                aws.String(s.description),
		ScheduleExpression:         aws.String(s.expr),
		ScheduleExpressionTimezone: aws.String("UTC"),
		FlexibleTimeWindow:         &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		ActionAfterCompletion:      types.ActionAfterCompletionDelete,
		State:                      types.ScheduleStateEnabled,
		Target:                     s.target,
	}
}

func (t *Timer) updateInput(s schedule) *scheduler.UpdateScheduleInput {
	c := t.createInput(s)
	return &scheduler.UpdateScheduleInput{
		Name:                       c.Name,
		GroupName:                  c.GroupName,
		Description:                c.Description,
		ScheduleExpression:         c.ScheduleExpression,
		ScheduleExpressionTimezone: c.ScheduleExpressionTimezone,
		FlexibleTimeWindow:         c.FlexibleTimeWindow,
		ActionAfterCompletion:      c.ActionAfterCompletion,
		State:                      c.State,
		Target:                     c.Target,
	}
}

// description keeps the full timer name on the schedule, since a mapped schedule name
// may have lost part of it.
func description(name string) string {
	d := "mirrorfleet timer " + name
	n := 0
	for i := range d { // i steps over runes
		if n == maxDescription {
			return d[:i]
		}
		n++
	}
	return d
}
