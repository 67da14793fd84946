package schedulerfake

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	lambda = "arn:aws:lambda:us-east-1:123456789012:function:f"
	role   = "arn:aws:iam::123456789012:role/r"
)

func good() *scheduler.CreateScheduleInput {
	return &scheduler.CreateScheduleInput{
		Name:                       aws.String("death-w1"),
		GroupName:                  aws.String("g"),
		ScheduleExpression:         aws.String("at(2030-01-01T00:10:00)"),
		ScheduleExpressionTimezone: aws.String("UTC"),
		FlexibleTimeWindow:         &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		ActionAfterCompletion:      types.ActionAfterCompletionDelete,
		Target: &types.Target{Arn: aws.String(lambda), RoleArn: aws.String(role), Input: aws.String(`{}`),
			RetryPolicy: &types.RetryPolicy{MaximumRetryAttempts: aws.Int32(185), MaximumEventAgeInSeconds: aws.Int32(3600)}},
	}
}

func newFake(t *testing.T) (*Fake, *scheduler.Client) {
	f := New(Options{Now: func() time.Time { return t0 }, Groups: []string{"g"}})
	t.Cleanup(f.Close)
	return f, f.Client(func(o *scheduler.Options) { o.RetryMaxAttempts = 1 })
}

// The fake refuses the shapes the real service refuses, and the ones mirrorfleet must
// never send, with the service's exception types.
func TestCreateValidates(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*scheduler.CreateScheduleInput)
		want   string // exception type
	}{
		{"name too long", func(in *scheduler.CreateScheduleInput) { in.Name = aws.String(strings.Repeat("a", 65)) }, "ValidationException"},
		{"name with slash", func(in *scheduler.CreateScheduleInput) { in.Name = aws.String("a/b") }, "ValidationException"},
		{"name with colon", func(in *scheduler.CreateScheduleInput) { in.Name = aws.String("a:b") }, "ValidationException"},
		{"rate expression", func(in *scheduler.CreateScheduleInput) { in.ScheduleExpression = aws.String("rate(1 minute)") }, "ValidationException"},
		{"at without seconds", func(in *scheduler.CreateScheduleInput) { in.ScheduleExpression = aws.String("at(2030-01-01T00:10)") }, "ValidationException"},
		{"at in the past", func(in *scheduler.CreateScheduleInput) { in.ScheduleExpression = aws.String("at(2029-12-31T23:59:00)") }, "ValidationException"},
		{"other timezone", func(in *scheduler.CreateScheduleInput) { in.ScheduleExpressionTimezone = aws.String("Europe/Paris") }, "ValidationException"},
		{"flexible window", func(in *scheduler.CreateScheduleInput) {
			in.FlexibleTimeWindow = &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeFlexible, MaximumWindowInMinutes: aws.Int32(5)}
		}, "ValidationException"},
		{"no action after completion", func(in *scheduler.CreateScheduleInput) { in.ActionAfterCompletion = "" }, "ValidationException"},
		{"action NONE", func(in *scheduler.CreateScheduleInput) { in.ActionAfterCompletion = types.ActionAfterCompletionNone }, "ValidationException"},
		{"no input", func(in *scheduler.CreateScheduleInput) { in.Target.Input = nil }, "ValidationException"},
		{"target not an ARN", func(in *scheduler.CreateScheduleInput) { in.Target.Arn = aws.String("coordinator") }, "ValidationException"},
		{"too many retries", func(in *scheduler.CreateScheduleInput) { in.Target.RetryPolicy.MaximumRetryAttempts = aws.Int32(186) }, "ValidationException"},
		{"event age too short", func(in *scheduler.CreateScheduleInput) {
			in.Target.RetryPolicy.MaximumEventAgeInSeconds = aws.Int32(59)
		}, "ValidationException"},
		{"DLQ not SQS", func(in *scheduler.CreateScheduleInput) {
			in.Target.DeadLetterConfig = &types.DeadLetterConfig{Arn: aws.String(lambda)}
		}, "ValidationException"},
		{"unmodelled target field", func(in *scheduler.CreateScheduleInput) {
			in.Target.SqsParameters = &types.SqsParameters{MessageGroupId: aws.String("x")}
		}, "ValidationException"},
		{"unknown group", func(in *scheduler.CreateScheduleInput) { in.GroupName = aws.String("nope") }, "ResourceNotFoundException"},
		{"default group exists", func(in *scheduler.CreateScheduleInput) { in.GroupName = nil }, ""},
		{"good", func(*scheduler.CreateScheduleInput) {}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t)
			in := good()
			tc.mutate(in)
			_, err := c.CreateSchedule(context.Background(), in)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(f.Schedules()) != 1 {
					t.Fatal("not stored")
				}
				return
			}
			if code := errorCode(err); code != tc.want {
				t.Fatalf("CreateSchedule = %v, want %s", err, tc.want)
			}
			if len(f.Schedules()) != 0 {
				t.Error("a refused schedule was stored")
			}
		})
	}
}

func errorCode(err error) string {
	var c interface{ ErrorCode() string }
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	return ""
}

func TestConflictAndNotFound(t *testing.T) {
	f, c := newFake(t)
	ctx := context.Background()
	if _, err := c.CreateSchedule(ctx, good()); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateSchedule(ctx, good())
	if _, ok := errors.AsType[*types.ConflictException](err); !ok {
		t.Errorf("second create = %v, want ConflictException", err)
	}
	up := &scheduler.UpdateScheduleInput{Name: aws.String("other"), GroupName: aws.String("g"), ScheduleExpression: aws.String("at(2030-01-01T00:10:00)"),
		FlexibleTimeWindow: &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff}, ActionAfterCompletion: types.ActionAfterCompletionDelete,
		Target: &types.Target{Arn: aws.String(lambda), RoleArn: aws.String(role), Input: aws.String(`{}`)}}
	_, err = c.UpdateSchedule(ctx, up)
	if _, ok := errors.AsType[*types.ResourceNotFoundException](err); !ok {
		t.Errorf("update of a missing schedule = %v, want ResourceNotFoundException", err)
	}
	_, err = c.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String("other"), GroupName: aws.String("g")})
	if _, ok := errors.AsType[*types.ResourceNotFoundException](err); !ok {
		t.Errorf("delete of a missing schedule = %v", err)
	}
	// The group travels in the query for GET and DELETE: the wrong group does not find it.
	_, err = c.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String("death-w1")})
	if _, ok := errors.AsType[*types.ResourceNotFoundException](err); !ok {
		t.Errorf("get in the default group = %v", err)
	}
	out, err := c.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String("death-w1"), GroupName: aws.String("g")})
	if err != nil || aws.ToString(out.ScheduleExpression) != "at(2030-01-01T00:10:00)" || aws.ToString(out.Target.Input) != `{}` ||
		out.ActionAfterCompletion != types.ActionAfterCompletionDelete || out.FlexibleTimeWindow.Mode != types.FlexibleTimeWindowModeOff ||
		!out.CreationDate.Equal(t0) || *out.Target.RetryPolicy.MaximumRetryAttempts != 185 {
		t.Errorf("GetSchedule = %+v, %v", out, err)
	}
	if _, err := c.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String("death-w1"), GroupName: aws.String("g")}); err != nil {
		t.Fatal(err)
	}
	if len(f.Schedules()) != 0 {
		t.Error("not deleted")
	}
	want := []Call{{OpCreate, "g", "death-w1"}, {OpCreate, "g", "death-w1"}, {OpUpdate, "g", "other"}, {OpDelete, "g", "other"},
		{OpGet, "", "death-w1"}, {OpGet, "g", "death-w1"}, {OpDelete, "g", "death-w1"}}
	got := f.Calls()
	if len(got) != len(want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("call %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// Requests the SDK would never send: unsigned, or to an operation the fake lacks.
func TestRawRequests(t *testing.T) {
	f, _ := newFake(t)
	resp, err := http.Post(f.URL()+"/schedules/x", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Amzn-ErrorType") != "AccessDeniedException" {
		t.Errorf("unsigned request: %d %s", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
	}
	resp, err = http.Get(f.URL() + "/schedule-groups")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("X-Amzn-ErrorType") != "UnknownOperationException" {
		t.Errorf("unknown operation: %d %s", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
	}
}

func TestFireDueOrderAndDisabled(t *testing.T) {
	f, c := newFake(t)
	ctx := context.Background()
	for _, s := range []struct{ name, at string }{{"b", "00:12"}, {"a", "00:11"}, {"c", "00:30"}} {
		in := good()
		in.Name = aws.String(s.name)
		in.ScheduleExpression = aws.String("at(2030-01-01T" + s.at + ":00)")
		if _, err := c.CreateSchedule(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	in := good()
	in.Name, in.State = aws.String("off"), types.ScheduleStateDisabled
	if _, err := c.CreateSchedule(ctx, in); err != nil {
		t.Fatal(err)
	}
	var order []string
	n, err := f.FireDue(ctx, t0.Add(20*time.Minute), func(_ context.Context, d Delivery) error {
		order = append(order, d.Name)
		return nil
	})
	if err != nil || n != 2 || strings.Join(order, ",") != "a,b" {
		t.Errorf("FireDue = %d, %v, order %v", n, err, order)
	}
	if left := f.Schedules(); len(left) != 2 || left[0].Name != "c" || left[1].Name != "off" {
		t.Errorf("left %+v", left)
	}
}
