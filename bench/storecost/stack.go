package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/infra/stackfacts"
	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// stackInputs are the bill's inputs that come from the template the CDK app
// synthesizes: what the stack provisions, not what someone remembers it provisions.
type stackInputs struct {
	Context  string // the CDK context the template was synthesized with
	Workers  stackfacts.Service
	Fallback *stackfacts.Service // the workers' on-demand twin
	// Serving: some task runs the git server; Serve is its service when it has one of
	// its own (serveSeparate), nil when it runs in the worker tasks or not at all.
	Serving  bool
	Serve    *stackfacts.Service
	Fetchers float64
	// TickSeconds is the coordinator rule's period; LambdaMB its memory.
	TickSeconds, LambdaMB float64
	NATGateways           int
	LoadBalancers         []stackfacts.LoadBalancer
	Alarms, AlarmMetrics  int
	Dashboards            int
	CustomMetrics         float64 // series: Metrics' Series summed
	Metrics               []customMetric
	ContainerInsights     bool
	FlowLogs              int
	DynamoDBEndpoint      bool
	FS                    stackfacts.FileSystem
	Buckets               int
	KMSKeys               int
	Secrets               int
	// ScrubDays is the workers' scrub period (MIRRORFLEET_SCRUB_EVERY, or the worker's
	// default); StaleAfterSeconds the stale-repos alarm's threshold.
	ScrubDays, StaleAfterSeconds float64
	// PollBudget is the workers' MIRRORFLEET_POLL_BUDGET (polls per repo per day; 0:
	// none set).
	PollBudget float64
	// ScrubChangedOnly: the workers scrub a mirror only if it changed since its last
	// scrub. MaintainDays: how often each mirror is considered for maintenance
	// (MIRRORFLEET_MAINTAIN_EVERY, or the worker's default).
	ScrubChangedOnly bool
	MaintainDays     float64
	// EventBuses and Distributions: the stack's EventBridge buses and CloudFront
	// distributions.
	EventBuses, Distributions int
}

// stateCounts is how many values the State dimension takes per metric (every known
// state is reported, zeros included: shared/metrics).
var stateCounts = map[string]int{
	metrics.WorkersByState: len([]store.WorkerState{store.WorkerJoining, store.WorkerActive, store.WorkerSuspect, store.WorkerDead, store.WorkerDraining}),
	metrics.ReposByState: len([]store.RepoState{store.RepoPending, store.RepoCloning, store.RepoOK, store.RepoFailing, store.RepoGone,
		store.RepoOverflow, store.RepoDeleting}),
}

// customMetric is one name the dashboard graphs and its series (one per value of its
// extra dimension).
type customMetric struct {
	Name   string
	Series float64
}

// servedMetrics are the metrics only the git server emits: a stack without one has no
// such metric to bill.
var servedMetrics = []string{metrics.ServeRequests, metrics.ServeBytes, metrics.ServeRejected, metrics.PackCacheHits,
	metrics.PackCacheMisses, metrics.PackGenerationSeconds}

// serveRequests is the custom metric the git server emits with a dimension of its own:
// one per status class.
const serveRequests = metrics.ServeRequests

// stackInputsFrom reads a template's facts. Custom metrics are counted from the names
// the dashboard graphs — one per name, times the values of its extra dimension — and
// every metric the code defines must be among them, else the bill would miss it.
func stackInputsFrom(f stackfacts.Facts, context string, statusClasses float64) (stackInputs, error) {
	st := stackInputs{Context: context, NATGateways: f.NATGateways, LoadBalancers: f.LoadBalancers, Alarms: f.Alarms,
		AlarmMetrics: f.AlarmMetrics, Dashboards: f.Dashboards, ContainerInsights: f.ContainerInsights, FlowLogs: len(f.FlowLogs),
		DynamoDBEndpoint: f.HasGatewayEndpoint("dynamodb"), TickSeconds: f.TickSeconds, Buckets: f.Buckets, KMSKeys: f.KMSKeys, Secrets: f.Secrets,
		StaleAfterSeconds: f.StaleAfterSeconds, Serving: f.Serving(), EventBuses: f.EventBuses, Distributions: len(f.Distributions)}
	var errs []error
	for _, s := range f.ServicesRunning("worker") {
		switch {
		case s.Desired > 0 && st.Workers.ID == "":
			st.Workers = s
		case s.Desired == 0 && st.Fallback == nil:
			st.Fallback = &s
		default:
			errs = append(errs, fmt.Errorf("a worker service too many: %s", s.ID))
		}
	}
	if st.Workers.ID == "" {
		errs = append(errs, errors.New("no worker service"))
	}
	if serve := f.ServicesRunning("serve"); len(serve) == 1 {
		st.Serve = &serve[0]
	} else if len(serve) > 1 {
		errs = append(errs, fmt.Errorf("%d git server services", len(serve)))
	}
	fetchers, err := strconv.Atoi(st.Workers.Env[deployenv.Fetchers])
	if err != nil {
		errs = append(errs, fmt.Errorf("the worker's %s: %w", deployenv.Fetchers, err))
	}
	st.Fetchers = float64(fetchers)
	// periodDays is the worker's setting key in days, def where the template leaves it.
	periodDays := func(key string, def time.Duration) float64 {
		d := def
		if v := st.Workers.Env[key]; v != "" {
			var err error
			if d, err = time.ParseDuration(v); err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("the worker's %s %q: not a period", key, v))
				d = def
			}
		}
		return d.Hours() / 24
	}
	st.MaintainDays = periodDays(deployenv.MaintainEvery, worker.DefaultConfig().MaintainEvery)
	st.ScrubDays = periodDays(deployenv.ScrubEvery, worker.DefaultConfig().ScrubEvery)
	st.ScrubChangedOnly = st.Workers.Env[deployenv.ScrubChanged] == "true"
	if v := st.Workers.Env[deployenv.PollBudget]; v != "" {
		b, err := strconv.ParseFloat(v, 64)
		if err != nil || b <= 0 {
			errs = append(errs, fmt.Errorf("the worker's %s %q: not a number of polls a day", deployenv.PollBudget, v))
		}
		st.PollBudget = b
	}
	if l, ok := f.TickLambda(); ok {
		st.LambdaMB = float64(l.MemoryMB)
	} else {
		errs = append(errs, errors.New("no Lambda on a rate rule (the coordinator)"))
	}
	if len(f.FileSystems) != 1 {
		errs = append(errs, fmt.Errorf("%d file systems, want the mirrors'", len(f.FileSystems)))
	} else {
		st.FS = f.FileSystems[0]
	}
	for _, d := range metrics.Defs() {
		if !st.Serving && slices.Contains(servedMetrics, d.Name) {
			continue // no git server, nothing emits it
		}
		if !slices.Contains(f.DashboardMetrics, d.Name) {
			errs = append(errs, fmt.Errorf("the dashboard does not graph %s: the bill would not count it", d.Name))
		}
	}
	for _, name := range f.DashboardMetrics {
		n := 1.0
		if c, ok := stateCounts[name]; ok {
			n = float64(c)
		}
		if name == serveRequests {
			n = statusClasses
		}
		st.CustomMetrics += n
		st.Metrics = append(st.Metrics, customMetric{Name: name, Series: n})
	}
	if err := errors.Join(errs...); err != nil {
		return st, fmt.Errorf("template (%s): %w", context, err)
	}
	return st, nil
}

// summary is what the bill records of the stack.
func (st stackInputs) summary() results.StoreCostStack {
	s := results.StoreCostStack{Context: st.Context, WorkerVCPU: vcpu(st.Workers), WorkerGB: gb(st.Workers),
		WorkerMin: st.Workers.MinTasks, WorkerMax: st.Workers.MaxTasks, Fetchers: int(st.Fetchers), OnDemandTwin: st.Fallback != nil,
		PublicTaskIPs: st.Workers.PublicIP, NATGateways: st.NATGateways, LoadBalancers: len(st.LoadBalancers),
		LBPublicIPs: st.lbPublicIPs(), DynamoEndpoint: st.DynamoDBEndpoint, Alarms: st.Alarms, AlarmMetrics: st.AlarmMetrics,
		Dashboards: st.Dashboards, CustomMetrics: int(st.CustomMetrics), Insights: st.ContainerInsights,
		EFSIADays: st.FS.IAAfterDays, EFSArchiveDays: st.FS.ArchiveAfterDays, TickSeconds: st.TickSeconds, LambdaMB: int(st.LambdaMB),
		EFSBackOnRead: st.FS.BackToStandardOnRead, ScrubDays: st.ScrubDays, KMSKeys: st.KMSKeys, StaleAfterH: st.StaleAfterSeconds / 3600,
		ServeInWorkers: st.Serving && st.Serve == nil, PollBudget: st.PollBudget, EventBuses: st.EventBuses, Distributions: st.Distributions}
	_, spot := st.Workers.Split(1)
	s.WorkerSpot = spot == 1
	if st.Serve != nil {
		s.ServeTasks, s.ServeVCPU, s.ServeGB = st.Serve.MinTasks, vcpu(*st.Serve), gb(*st.Serve)
		_, spot := st.Serve.Split(1)
		s.ServeSpot = spot == 1
	}
	return s
}

func (st stackInputs) lbPublicIPs() int {
	n := 0
	for _, lb := range st.LoadBalancers {
		if lb.InternetFacing {
			n += lb.Subnets
		}
	}
	return n
}

func vcpu(s stackfacts.Service) float64 { return float64(s.CPU) / 1024 }
func gb(s stackfacts.Service) float64   { return float64(s.MemoryMiB) / 1024 }

// synthesize runs the CDK app (go run ./infra, as `make synth` does, placeholders
// allowed: nothing is deployed) with context and returns the template.
func synthesize(ctx context.Context, root string, context map[string]string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "storecost-synth-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// No alarm subscriber (it costs nothing either way), said explicitly as a deploy must.
	c := map[string]string{"allowPlaceholders": "true", "alarmEmail": "none"}
	for k, v := range context {
		c[k] = v
	}
	cj, _ := json.Marshal(c)
	cmd := exec.CommandContext(ctx, "go", "run", "./infra")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CDK_OUTDIR="+dir, "CDK_CONTEXT_JSON="+string(cj),
		"JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1", "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("synth %s: %w\n%s", cj, err, out)
	}
	return os.ReadFile(filepath.Join(dir, "MirrorFleet.template.json"))
}

// repoRoot is the directory holding go.mod, upward from the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
	}
}

// contextString writes a context as -c flags.
func contextString(c map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range c {
			if !yield(k) {
				return
			}
		}
	}) {
		parts = append(parts, "-c "+k+"="+c[k])
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, " ")
}
