// Package schedulerfake is an in-process FAKE of the Amazon EventBridge Scheduler API,
// for tests. It is not Scheduler: it is an httptest server that speaks the service's
// REST-JSON protocol well enough for aws-sdk-go-v2's scheduler client (CreateSchedule,
// UpdateSchedule, DeleteSchedule, GetSchedule on /schedules/{Name}), keeps schedules in
// memory and fires them only when a test calls FireDue.
//
// It is deliberately stricter than the real service where mirrorfleet's usage is fixed,
// so a test fails when the Timer sends a shape we did not mean to send: it accepts only
// one-time at() schedules in UTC, FlexibleTimeWindow OFF, ActionAfterCompletion DELETE and
// a target with an Input, and it refuses unknown request fields. Where the real service
// answers with an error (a name that exists, a name or group that does not, a bad name,
// an at() in the past) it answers with the same exception type and HTTP status, so the
// SDK hands the caller the same typed error (types.ConflictException, ...).
package schedulerfake

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
)

// Operation names, as in the API reference and Call.Op.
const (
	OpCreate = "CreateSchedule"
	OpUpdate = "UpdateSchedule"
	OpDelete = "DeleteSchedule"
	OpGet    = "GetSchedule"
)

const (
	region  = "us-east-1"
	account = "000000000000"
)

var (
	nameRE = regexp.MustCompile(`^[0-9a-zA-Z\-_.]{1,64}$`)
	atRE   = regexp.MustCompile(`^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$`)
	arnRE  = regexp.MustCompile(`^arn:aws(-[a-z]+)*:[a-z0-9-]+:[a-z0-9-]*:\d{12}:.+$`)
)

// Options configures a Fake.
type Options struct {
	// Now is the service's clock, used to refuse an at() in the past and to stamp
	// schedules; nil means time.Now. Tests in virtual time pass the virtual clock's Now.
	Now func() time.Time
	// Groups are schedule groups that exist besides "default".
	Groups []string
	// DeliverTwice makes FireDue deliver every firing twice, as Scheduler's at-least-once
	// delivery may.
	DeliverTwice bool
}

// Target is a schedule's target as stored.
type Target struct {
	Arn, RoleArn, Input string
	DLQArn              string // "" when no DeadLetterConfig
	MaxRetryAttempts    *int32 // nil when no RetryPolicy field
	MaxEventAgeSeconds  *int32
}

// Schedule is a stored schedule.
type Schedule struct {
	Group, Name           string
	Description           string
	Expression            string // as sent, e.g. at(2030-01-01T00:10:00)
	Timezone              string // as sent ("" when absent)
	At                    time.Time
	FlexibleMode          string
	ActionAfterCompletion string
	State                 string
	Target                Target
	Created, Modified     time.Time

	attempts int // deliveries that failed so far
}

// Call is one API request the fake answered (whatever the answer).
type Call struct {
	Op, Group, Name string
}

// Delivery is one invocation of a schedule's target.
type Delivery struct {
	Group, Name string
	At          time.Time // the time the schedule named
	Input       []byte    // the target's Input, exactly as stored
	Attempt     int       // 1 for the first try
}

// Fake is the fake Scheduler service. Its methods are safe for concurrent use.
type Fake struct {
	srv  *httptest.Server
	opts Options

	mu        sync.Mutex
	groups    map[string]bool
	schedules map[string]*Schedule // by group + "/" + name
	calls     []Call
	fail      map[string][]apiError // op → errors to answer with next
	dead      []Delivery
}

// New starts a fake. Close it when done.
func New(o Options) *Fake {
	if o.Now == nil {
		o.Now = time.Now
	}
	f := &Fake{opts: o, groups: map[string]bool{"default": true}, schedules: map[string]*Schedule{}, fail: map[string][]apiError{}}
	for _, g := range o.Groups {
		f.groups[g] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /schedules/{Name}", f.handle(OpCreate, f.create))
	mux.HandleFunc("PUT /schedules/{Name}", f.handle(OpUpdate, f.update))
	mux.HandleFunc("DELETE /schedules/{Name}", f.handle(OpDelete, f.delete))
	mux.HandleFunc("GET /schedules/{Name}", f.handle(OpGet, f.get))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, apiError{http.StatusNotFound, "UnknownOperationException", "fake Scheduler: no operation at " + r.Method + " " + r.URL.Path})
	})
	f.srv = httptest.NewServer(mux)
	return f
}

// URL is the endpoint to point an SDK client at (BaseEndpoint).
func (f *Fake) URL() string { return f.srv.URL }

// Close stops the server.
func (f *Fake) Close() { f.srv.Close() }

// Client returns an SDK client for the fake: BaseEndpoint set to it, static credentials,
// a fixed region. optFns adjust it further (e.g. RetryMaxAttempts).
func (f *Fake) Client(optFns ...func(*scheduler.Options)) *scheduler.Client {
	return scheduler.New(scheduler.Options{
		Region:       region,
		BaseEndpoint: aws.String(f.srv.URL),
		HTTPClient:   f.srv.Client(),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "fake", SecretAccessKey: "fake", Source: "schedulerfake"}, nil
		}),
	}, optFns...)
}

// FailNext makes the next call of op answer with the given exception (type as in the
// X-Amzn-ErrorType header, e.g. "ThrottlingException") and HTTP status instead of being
// served. Calls queue up: n FailNext calls fail the next n requests of op.
func (f *Fake) FailNext(op, errorType string, status int, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[op] = append(f.fail[op], apiError{status, errorType, message})
}

// Schedules returns the stored schedules by group then name.
func (f *Fake) Schedules() []Schedule {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Schedule, 0, len(f.schedules))
	for _, s := range f.schedules {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Schedule) int { return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Name, b.Name)) })
	return out
}

// Get returns one stored schedule.
func (f *Fake) Get(group, name string) (Schedule, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.schedules[group+"/"+name]
	if !ok {
		return Schedule{}, false
	}
	return *s, true
}

// Calls returns every request answered so far, in order.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// DeadLetters returns the deliveries that exhausted their retry policy.
func (f *Fake) DeadLetters() []Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.dead)
}

// FireDue invokes the target of every enabled schedule whose at() is at or before now,
// earliest first, passing its Input to deliver, and deletes each (the schedules are all
// ActionAfterCompletion DELETE). With Options.DeliverTwice each firing is delivered
// twice. A delivery that returns an error is retried at a later FireDue, as the service
// retries per the target's RetryPolicy; once the attempts or the event age are used up
// it is dropped into DeadLetters. deliver runs without the fake's lock held, so it may
// call the API (a handler that arms timers). FireDue returns how many deliveries it made
// and the delivery errors, joined.
func (f *Fake) FireDue(ctx context.Context, now time.Time, deliver func(context.Context, Delivery) error) (int, error) {
	f.mu.Lock()
	var due []*Schedule
	for k, s := range f.schedules {
		if s.State == "ENABLED" && !s.At.After(now) {
			due = append(due, s)
			delete(f.schedules, k)
		}
	}
	f.mu.Unlock()
	slices.SortFunc(due, func(a, b *Schedule) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Name, b.Name))
	})
	times := 1
	if f.opts.DeliverTwice {
		times = 2
	}
	n := 0
	var errs []error
	for _, s := range due {
		d := Delivery{Group: s.Group, Name: s.Name, At: s.At, Input: []byte(s.Target.Input), Attempt: s.attempts + 1}
		for range times {
			n++
			if err := deliver(ctx, d); err != nil {
				errs = append(errs, fmt.Errorf("deliver %s/%s (attempt %d): %w", s.Group, s.Name, d.Attempt, err))
				f.retryLater(s, d, now)
				break
			}
		}
	}
	return n, errors.Join(errs...)
}

// retryLater puts a schedule whose delivery failed back, unless its retry policy is
// used up or a new schedule of the same name was created meanwhile (it replaces this
// one, as on the service).
func (f *Fake) retryLater(s *Schedule, d Delivery, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.attempts++
	maxRetries, maxAge := int32(185), int32(86400) // the service's defaults
	if p := s.Target.MaxRetryAttempts; p != nil {
		maxRetries = *p
	}
	if p := s.Target.MaxEventAgeSeconds; p != nil {
		maxAge = *p
	}
	if s.attempts > int(maxRetries) || now.Sub(s.At) > time.Duration(maxAge)*time.Second {
		f.dead = append(f.dead, d)
		return
	}
	if _, taken := f.schedules[s.Group+"/"+s.Name]; !taken {
		f.schedules[s.Group+"/"+s.Name] = s
	}
}

// apiError is an error answer: status, X-Amzn-ErrorType and message.
type apiError struct {
	status int
	kind   string
	msg    string
}

func validation(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "ValidationException", fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, e apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", e.kind)
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Message": e.msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// handle wraps an operation with what every request gets: a signature check (the SDK
// must sign), the call log, injected failures, name validation and the lock.
func (f *Fake) handle(op string, serve func(name string, r *http.Request) (any, *apiError)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("Name")
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls = append(f.calls, Call{Op: op, Group: groupOf(r), Name: name})
		if q := f.fail[op]; len(q) > 0 {
			f.fail[op] = q[1:]
			writeError(w, q[0])
			return
		}
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
			writeError(w, apiError{http.StatusForbidden, "AccessDeniedException", "fake Scheduler: request is not SigV4-signed"})
			return
		}
		if !nameRE.MatchString(name) {
			writeError(w, *validation("1 validation error detected: Value '%s' at 'name' failed to satisfy constraint: Member must satisfy regular expression pattern: [0-9a-zA-Z-_.]+ and length 1-64", name))
			return
		}
		out, e := serve(name, r)
		if e != nil {
			writeError(w, *e)
			return
		}
		writeJSON(w, out)
	}
}

// groupOf reads the group the way each operation carries it: in the query for GET and
// DELETE, in the body for POST and PUT (peeked here only for the call log).
func groupOf(r *http.Request) string {
	if g := r.URL.Query().Get("groupName"); g != "" {
		return g
	}
	if r.Body == nil || (r.Method != http.MethodPost && r.Method != http.MethodPut) {
		return ""
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(r.Body)
	r.Body.Close()
	r.Body = readCloser{bytes.NewReader(buf.Bytes())}
	var b struct{ GroupName string }
	_ = json.Unmarshal(buf.Bytes(), &b)
	return b.GroupName
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// Request bodies of CreateSchedule and UpdateSchedule (the same shape).
type scheduleBody struct {
	ActionAfterCompletion *string
	ClientToken           *string
	Description           *string
	EndDate               *json.Number
	FlexibleTimeWindow    *struct {
		Mode                   *string
		MaximumWindowInMinutes *int32
	}
	GroupName                  *string
	KmsKeyArn                  *string
	ScheduleExpression         *string
	ScheduleExpressionTimezone *string
	StartDate                  *json.Number
	State                      *string
	Target                     *struct {
		Arn, RoleArn, Input *string
		DeadLetterConfig    *struct{ Arn *string }
		RetryPolicy         *struct{ MaximumEventAgeInSeconds, MaximumRetryAttempts *int32 }
	}
}

func (f *Fake) group(name string) *apiError {
	if name == "" {
		name = "default"
	}
	if !nameRE.MatchString(name) {
		return validation("Value '%s' at 'groupName' failed to satisfy constraint: Member must satisfy regular expression pattern: [0-9a-zA-Z-_.]+", name)
	}
	if !f.groups[name] {
		return notFound("Schedule group %s does not exist.", name)
	}
	return nil
}

// parse validates a create/update body and builds the schedule it describes.
func (f *Fake) parse(name string, r *http.Request) (*Schedule, *apiError) {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return nil, validation("fake Scheduler: Content-Type %q, want application/json", ct)
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields() // a field we do not model is a shape we did not mean to send
	var b scheduleBody
	if err := dec.Decode(&b); err != nil {
		return nil, validation("fake Scheduler: request body: %v", err)
	}
	s := &Schedule{Name: name, Group: deref(b.GroupName, "default")}
	if e := f.group(s.Group); e != nil {
		return nil, e
	}
	if b.Description != nil {
		if utf8.RuneCountInString(*b.Description) > 512 {
			return nil, validation("Description must be at most 512 characters")
		}
		s.Description = *b.Description
	}
	if b.ScheduleExpression == nil {
		return nil, validation("ScheduleExpression is required")
	}
	s.Expression = *b.ScheduleExpression
	m := atRE.FindStringSubmatch(s.Expression)
	if m == nil {
		return nil, validation("Invalid Schedule Expression %s (the fake takes only one-time at(yyyy-mm-ddThh:mm:ss))", s.Expression)
	}
	s.Timezone = deref(b.ScheduleExpressionTimezone, "")
	if s.Timezone != "" && s.Timezone != "UTC" {
		return nil, validation("fake Scheduler: ScheduleExpressionTimezone %q: the fake takes only UTC", s.Timezone)
	}
	at, err := time.ParseInLocation("2006-01-02T15:04:05", m[1], time.UTC)
	if err != nil {
		return nil, validation("Invalid Schedule Expression %s: %v", s.Expression, err)
	}
	if at.Before(f.opts.Now()) {
		return nil, validation("The schedule expression %s is in the past.", s.Expression)
	}
	s.At = at
	if b.FlexibleTimeWindow == nil || b.FlexibleTimeWindow.Mode == nil {
		return nil, validation("FlexibleTimeWindow.Mode is required")
	}
	s.FlexibleMode = *b.FlexibleTimeWindow.Mode
	if s.FlexibleMode != "OFF" || b.FlexibleTimeWindow.MaximumWindowInMinutes != nil {
		return nil, validation("fake Scheduler: FlexibleTimeWindow must be {Mode: OFF}, got mode %q", s.FlexibleMode)
	}
	s.ActionAfterCompletion = deref(b.ActionAfterCompletion, "NONE")
	if s.ActionAfterCompletion != "DELETE" {
		return nil, validation("fake Scheduler: ActionAfterCompletion must be DELETE, got %q", s.ActionAfterCompletion)
	}
	s.State = deref(b.State, "ENABLED")
	if s.State != "ENABLED" && s.State != "DISABLED" {
		return nil, validation("State must be ENABLED or DISABLED, got %q", s.State)
	}
	t := b.Target
	if t == nil || t.Arn == nil || t.RoleArn == nil {
		return nil, validation("Target with Arn and RoleArn is required")
	}
	if !arnRE.MatchString(*t.Arn) || !arnRE.MatchString(*t.RoleArn) {
		return nil, validation("Target Arn %q or RoleArn %q is not an ARN", *t.Arn, *t.RoleArn)
	}
	s.Target = Target{Arn: *t.Arn, RoleArn: *t.RoleArn}
	if t.Input == nil || *t.Input == "" {
		return nil, validation("fake Scheduler: Target.Input is required (the coordinator's payload)")
	}
	if utf8.RuneCountInString(*t.Input) > 8192 {
		return nil, validation("Target.Input must be at most 8192 characters")
	}
	s.Target.Input = *t.Input
	if p := t.RetryPolicy; p != nil {
		if a := p.MaximumRetryAttempts; a != nil && (*a < 0 || *a > 185) {
			return nil, validation("MaximumRetryAttempts must be 0..185, got %d", *a)
		}
		if a := p.MaximumEventAgeInSeconds; a != nil && (*a < 60 || *a > 86400) {
			return nil, validation("MaximumEventAgeInSeconds must be 60..86400, got %d", *a)
		}
		s.Target.MaxRetryAttempts, s.Target.MaxEventAgeSeconds = p.MaximumRetryAttempts, p.MaximumEventAgeInSeconds
	}
	if d := t.DeadLetterConfig; d != nil {
		if d.Arn == nil || !strings.HasPrefix(*d.Arn, "arn:aws:sqs:") || !arnRE.MatchString(*d.Arn) {
			return nil, validation("DeadLetterConfig.Arn must be an SQS queue ARN, got %q", deref(d.Arn, ""))
		}
		s.Target.DLQArn = *d.Arn
	}
	return s, nil
}

func (f *Fake) arn(s *Schedule) string {
	return fmt.Sprintf("arn:aws:scheduler:%s:%s:schedule/%s/%s", region, account, s.Group, s.Name)
}

func (f *Fake) create(name string, r *http.Request) (any, *apiError) {
	s, e := f.parse(name, r)
	if e != nil {
		return nil, e
	}
	k := s.Group + "/" + s.Name
	if _, ok := f.schedules[k]; ok {
		return nil, &apiError{http.StatusConflict, "ConflictException", fmt.Sprintf("Schedule %s already exists.", s.Name)}
	}
	s.Created = f.opts.Now()
	s.Modified = s.Created
	f.schedules[k] = s
	return map[string]string{"ScheduleArn": f.arn(s)}, nil
}

func (f *Fake) update(name string, r *http.Request) (any, *apiError) {
	s, e := f.parse(name, r)
	if e != nil {
		return nil, e
	}
	k := s.Group + "/" + s.Name
	old, ok := f.schedules[k]
	if !ok {
		return nil, notFound("Schedule %s does not exist.", s.Name)
	}
	s.Created, s.Modified = old.Created, f.opts.Now()
	f.schedules[k] = s // UpdateSchedule replaces every field
	return map[string]string{"ScheduleArn": f.arn(s)}, nil
}

func (f *Fake) delete(name string, r *http.Request) (any, *apiError) {
	g := cmp.Or(r.URL.Query().Get("groupName"), "default")
	if e := f.group(g); e != nil {
		return nil, e
	}
	if _, ok := f.schedules[g+"/"+name]; !ok {
		return nil, notFound("Schedule %s does not exist.", name)
	}
	delete(f.schedules, g+"/"+name)
	return struct{}{}, nil
}

func (f *Fake) get(name string, r *http.Request) (any, *apiError) {
	g := cmp.Or(r.URL.Query().Get("groupName"), "default")
	if e := f.group(g); e != nil {
		return nil, e
	}
	s, ok := f.schedules[g+"/"+name]
	if !ok {
		return nil, notFound("Schedule %s does not exist.", name)
	}
	target := map[string]any{"Arn": s.Target.Arn, "RoleArn": s.Target.RoleArn, "Input": s.Target.Input}
	if s.Target.MaxRetryAttempts != nil || s.Target.MaxEventAgeSeconds != nil {
		target["RetryPolicy"] = map[string]any{"MaximumRetryAttempts": s.Target.MaxRetryAttempts, "MaximumEventAgeInSeconds": s.Target.MaxEventAgeSeconds}
	}
	if s.Target.DLQArn != "" {
		target["DeadLetterConfig"] = map[string]string{"Arn": s.Target.DLQArn}
	}
	out := map[string]any{
		"Arn":                        f.arn(s),
		"Name":                       s.Name,
		"GroupName":                  s.Group,
		"Description":                s.Description,
		"ScheduleExpression":         s.Expression,
		"ScheduleExpressionTimezone": cmp.Or(s.Timezone, "UTC"),
		"FlexibleTimeWindow":         map[string]string{"Mode": s.FlexibleMode},
		"ActionAfterCompletion":      s.ActionAfterCompletion,
		"State":                      s.State,
		"Target":                     target,
		"CreationDate":               epoch(s.Created),
		"LastModificationDate":       epoch(s.Modified),
	}
	return out, nil
}

// epoch is the protocol's timestamp: seconds since the epoch as a JSON number.
func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

func deref(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}
