package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/election"
	"github.com/mirrorfleet/mirrorfleet/shared/meter"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/timer/scheduler"
)

// Deps are the handler's collaborators; main builds the AWS ones, tests pass DynamoDB
// Local, a Scheduler fake and a virtual clock.
type Deps struct {
	// Store is the coordinator's view of the store, which covers the election and the
	// tick's metrics (meter.TickStore) too.
	Store     coordinator.Store
	Scheduler scheduler.API
	Clock     clock.Clock            // default: the wall clock
	Log       *slog.Logger           // default: discard
	Metrics   io.Writer              // EMF lines; default: stdout, which CloudWatch Logs reads
	List      coordinator.ListSyncer // nil: no list sync
	// Instance names this execution environment among the function's; default: the log
	// stream name (one per environment), else a random name.
	Instance string
}

// Handler serves the coordinator Lambda's invocations in one execution environment. It
// keeps no fleet state: each invocation reads the store, so any environment can serve
// any event; its coordinator's caches (the decoded ring, liveness sightings) only make
// warm invocations cheaper. It is safe for concurrent invocations.
//
// Leadership (docs/adr/0019-lambda-leadership.md): every environment of the function
// campaigns in one group, the function's name, so an invocation in an environment other
// than the last leader's — a death timer fired while another environment was warm —
// takes the next term at once and acts, instead of following until the lease lapses.
type Handler struct {
	cfg      cloud.CoordinatorConfig
	deps     Deps
	emf      *metrics.EMF
	instance string
	mu       sync.Mutex
	coords   map[string]*coordinator.Coordinator // by invoked function ARN
	id       string                              // the coordinator id this environment last campaigned as
}

// NewHandler checks deps and returns a Handler.
func NewHandler(cfg cloud.CoordinatorConfig, d Deps) (*Handler, error) {
	if d.Store == nil || d.Scheduler == nil {
		return nil, errors.New("coordinator: Deps.Store and Deps.Scheduler are required")
	}
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Metrics == nil {
		d.Metrics = os.Stdout
	}
	inst := d.Instance
	if inst == "" {
		inst = lambdacontext.LogStreamName
	}
	if inst == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("coordinator: instance name: %w", err)
		}
		inst = hex.EncodeToString(b[:])
	}
	return &Handler{cfg: cfg, deps: d, emf: metrics.NewEMF(d.Metrics, cfg.Fleet, d.Clock), instance: inst,
		coords: map[string]*coordinator.Coordinator{}}, nil
}

// Event kinds the handler serves.
const (
	EventTick  = "tick"  // an EventBridge rule's scheduled event
	EventTimer = "timer" // a Scheduler firing carrying a coordinator.TimerPayload
)

// Result is what an invocation returns (visible in the console and to a manual invoke).
type Result struct {
	Event       string `json:"event"`
	Coordinator string `json:"coordinator"`
	Leader      bool   `json:"leader"`
	Term        int64  `json:"term,omitempty"`
	Campaign    string `json:"campaign,omitempty"`
	WarmingUp   bool   `json:"warming_up,omitempty"`
	Members     int    `json:"members,omitempty"`
	Moved       int    `json:"moved,omitempty"`
	Assigned    int    `json:"assigned,omitempty"`
	Deleted     int    `json:"deleted,omitempty"`
	Skipped     int    `json:"skipped,omitempty"`
	PendingLeft int    `json:"pending_left,omitempty"`
	Incomplete  bool   `json:"incomplete,omitempty"`
	Ignored     string `json:"ignored,omitempty"`
	Stale       string `json:"stale,omitempty"`
	ListError   string `json:"list_error,omitempty"`
}

// Classify tells which kind of event raw is. EventBridge rule events carry
// "source":"aws.events" and "detail-type":"Scheduled Event"; a Scheduler firing is
// exactly the Input we armed it with, our own {"kind":...} payload.
func Classify(raw json.RawMessage) (string, error) {
	var ev struct {
		Source     string  `json:"source"`
		DetailType string  `json:"detail-type"`
		Kind       *string `json:"kind"`
	}
	const want = "expected an EventBridge scheduled event or a coordinator timer payload"
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return "", fmt.Errorf("coordinator: the event is not a JSON object: %s", want)
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		return "", fmt.Errorf("coordinator: the event is not valid JSON (%v): %s", err, want)
	}
	switch {
	case ev.Source == "aws.events" && ev.DetailType == "Scheduled Event":
		return EventTick, nil
	case ev.Kind != nil && ev.Source == "":
		if k := *ev.Kind; k != "death" && k != "warmup" {
			return "", fmt.Errorf("coordinator: timer payload with unknown kind %q (known: death, warmup)", k)
		}
		return EventTimer, nil
	default:
		return "", fmt.Errorf("coordinator: unrecognised event (source %q, detail-type %q): expected an EventBridge scheduled event "+
			`("source":"aws.events", "detail-type":"Scheduled Event") or a coordinator timer payload ({"kind":"death"|"warmup",...})`,
			clip(ev.Source), clip(ev.DetailType))
	}
}

func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}

// Handle serves one invocation: a scheduled event runs a tick, a timer firing runs
// OnTimer (which ignores a stale death timer), anything else is an error. After the
// tick it writes EMF metrics.
func (h *Handler) Handle(ctx context.Context, raw json.RawMessage) (Result, error) {
	kind, err := Classify(raw)
	if err != nil {
		h.deps.Log.Error("invocation refused", "err", err)
		return Result{}, err
	}
	lc, ok := lambdacontext.FromContext(ctx)
	if !ok || lc.InvokedFunctionArn == "" {
		return Result{}, errors.New("coordinator: no Lambda context with the function's ARN (the Scheduler timers target it)")
	}
	c, err := h.coordinator(lc.InvokedFunctionArn)
	if err != nil {
		return Result{}, err
	}

	start := time.Now()
	var rep coordinator.Report
	if kind == EventTick {
		rep, err = c.Tick(ctx)
	} else {
		rep, err = c.OnTimer(ctx, raw)
	}
	rep.Coordinator = c.ID
	h.emit(ctx, rep, time.Since(start), err)
	res := Result{Event: kind, Coordinator: c.ID, Leader: rep.Leader, Term: rep.Term, Campaign: rep.Campaign,
		WarmingUp: rep.WarmingUp, Members: rep.Members, Moved: rep.Moved, Assigned: rep.Assigned, Deleted: rep.Deleted,
		Skipped: rep.Skipped, PendingLeft: rep.PendingLeft, Incomplete: rep.Incomplete, Ignored: rep.Ignored,
		Stale: rep.Stale, ListError: rep.ListError}
	if err != nil {
		// The invocation fails (Lambda's Errors metric, its alarm) and is not retried:
		// the stack sets no async retries, as the next minute's tick repairs whatever part
		// was not applied (ticks are idempotent) and also declares the deaths a lost timer
		// firing would have.
		h.deps.Log.Error("coordinator "+kind+" failed", "coordinator", c.ID, "term", rep.Term, "err", err)
		return res, fmt.Errorf("coordinator %s: %w", kind, err)
	}
	h.deps.Log.Debug("coordinator "+kind, "result", res)
	return res, nil
}

// coordinator returns this environment's coordinator for the function at arn, made at
// its first invocation: its timers target arn (the function's own ARN comes from the
// invocation; putting it in the function's environment would make the function depend
// on itself), it campaigns as Candidate(function name, instance), and its caches last as
// long as the environment.
func (h *Handler) coordinator(arn string) (*coordinator.Coordinator, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.coords[arn]; ok {
		h.id = c.ID
		return c, nil
	}
	t, err := scheduler.New(scheduler.Config{Client: h.deps.Scheduler, Group: h.cfg.ScheduleGroup, TargetARN: arn,
		RoleARN: h.cfg.SchedulerRoleARN, DLQARN: h.cfg.TimerDLQARN, Clock: h.deps.Clock, Log: h.deps.Log})
	if err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	group := functionName(arn)
	c := &coordinator.Coordinator{ID: election.Candidate(group, h.instance), Group: group, Store: h.deps.Store, Timer: t,
		Clock: h.deps.Clock, Config: h.cfg.Coordinator, Log: h.deps.Log, List: h.deps.List}
	h.coords[arn] = c
	h.id = c.ID
	return c, nil
}

// functionName is the name in a function ARN (arn:aws:lambda:region:account:function:
// name[:qualifier]): every version and alias of the function is one group.
func functionName(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) >= 7 && parts[5] == "function" {
		return parts[6]
	}
	return arn
}

// emit writes the tick's metrics (meter.Tick).
func (h *Handler) emit(ctx context.Context, rep coordinator.Report, took time.Duration, tickErr error) {
	samples, err := meter.Tick(ctx, h.deps.Store, rep, took, tickErr, h.deps.Clock.Now())
	if err != nil {
		h.deps.Log.Warn("metrics", "err", err)
	}
	if err := h.emf.Record(samples...); err != nil {
		h.deps.Log.Warn("metrics", "err", err)
	}
	if err := h.emf.Flush(); err != nil {
		h.deps.Log.Warn("metrics: flush", "err", err)
	}
}

// StepDown ends this environment's lease early when Lambda shuts it down, so the next
// environment leads at once instead of after the lease. Best effort: Lambda gives the
// shutdown phase about half a second.
func (h *Handler) StepDown(ctx context.Context) {
	h.mu.Lock()
	id := h.id
	h.mu.Unlock()
	if id == "" {
		return
	}
	el := election.Elector{Store: h.deps.Store, ID: id}
	if err := el.StepDown(ctx, h.deps.Clock.Now()); err != nil {
		h.deps.Log.Warn("step down", "coordinator", id, "err", err)
	}
}
