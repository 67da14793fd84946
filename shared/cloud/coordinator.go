package cloud

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
	"github.com/mirrorfleet/mirrorfleet/shared/listsync"
	"github.com/mirrorfleet/mirrorfleet/shared/timer/scheduler"
)

// Environment variables of the coordinator Lambda (besides EnvTable, EnvFleet,
// EnvLogLevel, EnvAllowPrivateHosts and listsync's MIRRORFLEET_LIST_*).
const (
	EnvScheduleGroup    = deployenv.ScheduleGroup    // Scheduler group of the timers (required)
	EnvSchedulerRoleARN = deployenv.SchedulerRoleARN // role Scheduler assumes to invoke us (required)
	EnvTimerDLQARN      = deployenv.TimerDLQARN      // SQS queue for undeliverable firings (optional)
	EnvGrace            = deployenv.Grace            // silence before a worker's repos move
	EnvWarmup           = deployenv.Warmup           // first-start wait; 0 = none
	EnvSuspectAfter     = deployenv.SuspectAfter     // silence before a worker is suspect
	EnvLease            = deployenv.Lease            // leadership lease; > the tick period
)

// CoordinatorConfig is the coordinator Lambda's configuration.
type CoordinatorConfig struct {
	Table            string
	ScheduleGroup    string
	SchedulerRoleARN string
	TimerDLQARN      string // "" = no dead-letter queue
	Fleet            string
	// AllowPrivateHosts applies to the list repository and the URLs in it.
	AllowPrivateHosts bool
	// CaseInsensitiveHosts: hosts, besides github.com and gitlab.com, whose repo paths
	// are case-insensitive (MIRRORFLEET_CASE_INSENSITIVE_HOSTS).
	CaseInsensitiveHosts []string
	// Coordinator holds Grace, Warmup, SuspectAfter and Lease; the rest take the
	// package defaults.
	Coordinator coordinator.Config
	// List is the list sync (not Enabled when MIRRORFLEET_LIST_REPO is unset).
	List     listsync.Config
	LogLevel slog.Level
}

// CoordinatorConfigFromEnv reads and validates the coordinator's environment. The error
// lists every variable at fault.
func CoordinatorConfigFromEnv() (CoordinatorConfig, error) {
	return coordinatorConfigFrom(os.Getenv)
}

func coordinatorConfigFrom(get func(string) string) (CoordinatorConfig, error) {
	e := newEnv(get)
	def := coordinator.DefaultConfig()
	c := CoordinatorConfig{
		Table:                e.required(EnvTable, "the DynamoDB table of the fleet's state"),
		ScheduleGroup:        e.required(EnvScheduleGroup, "the EventBridge Scheduler group the coordinator's timers live in"),
		SchedulerRoleARN:     e.required(EnvSchedulerRoleARN, "the IAM role EventBridge Scheduler assumes to invoke this function"),
		TimerDLQARN:          e.raw(EnvTimerDLQARN),
		Fleet:                e.str(EnvFleet, DefaultFleet),
		AllowPrivateHosts:    e.boolean(EnvAllowPrivateHosts, false),
		CaseInsensitiveHosts: e.hosts(EnvCaseInsensitiveHosts),
		LogLevel:             e.logLevel(),
	}
	checkFleet(e, c.Fleet)
	e.arn(EnvSchedulerRoleARN, c.SchedulerRoleARN)
	e.arn(EnvTimerDLQARN, c.TimerDLQARN)
	if c.ScheduleGroup != "" && !scheduler.ValidName(c.ScheduleGroup) {
		e.fail(EnvScheduleGroup, c.ScheduleGroup, "not a schedule group name (1 to 64 of [0-9a-zA-Z-_.])")
	}
	cc := coordinator.Config{
		Grace:        e.duration(EnvGrace, def.Grace),
		SuspectAfter: e.duration(EnvSuspectAfter, def.SuspectAfter),
		Lease:        e.duration(EnvLease, def.Lease),
	}
	cc.Warmup = warmup(e, def.Warmup)
	if cc.SuspectAfter >= cc.Grace {
		e.errs = append(e.errs, fmt.Errorf("%s (%s) must be shorter than %s (%s): a worker is suspect before it is declared dead",
			EnvSuspectAfter, cc.SuspectAfter, EnvGrace, cc.Grace))
	}
	if cc.Lease <= time.Minute {
		// The EventBridge rule ticks every minute: a lease that is not longer would lapse
		// between two ticks and every tick would be a take-over.
		e.errs = append(e.errs, fmt.Errorf("%s=%s: must be longer than 1m, the period of the scheduled tick", EnvLease, cc.Lease))
	}
	c.Coordinator = cc
	// The list sync reads its own MIRRORFLEET_LIST_* variables; unset, it stays off.
	list, err := listsync.ConfigFromEnv()
	if err != nil {
		e.errs = append(e.errs, err)
	}
	c.List = list
	if err := e.err("coordinator"); err != nil {
		return CoordinatorConfig{}, err
	}
	return c, nil
}

// warmup reads the first-start wait. Zero means none (a fleet being rebuilt), unlike
// the other durations: "0", "none" and any zero duration ("0s", "0m").
func warmup(e *envReader, def time.Duration) time.Duration {
	v := e.raw(EnvWarmup)
	if v == "" {
		return def
	}
	if v == deployenv.NoWarmup || v == "none" {
		return coordinator.NoWarmup
	}
	if d, err := time.ParseDuration(v); err == nil && d == 0 {
		return coordinator.NoWarmup
	}
	return e.duration(EnvWarmup, def)
}

// checkFleet: the fleet name becomes a CloudWatch dimension value (at most 1024
// characters, no control characters); 255 keeps dashboards readable.
func checkFleet(e *envReader, v string) {
	if len(v) > 255 || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		e.fail(EnvFleet, v, "must be at most 255 printable characters")
	}
}
