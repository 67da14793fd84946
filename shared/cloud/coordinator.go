package cloud

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/listsync"
	"github.com/mirrorfleet/mirrorfleet/shared/timer/scheduler"
)

// Environment variables of the coordinator Lambda (besides EnvTable, EnvFleet,
// EnvLogLevel, EnvAllowPrivateHosts and listsync's MIRRORFLEET_LIST_*).
const (
	EnvScheduleGroup     = "MIRRORFLEET_SCHEDULE_GROUP"      // Scheduler group of the timers (required)
	EnvSchedulerRoleARN  = "MIRRORFLEET_SCHEDULER_ROLE_ARN"  // role Scheduler assumes to invoke us (required)
	EnvTimerDLQARN       = "MIRRORFLEET_TIMER_DLQ_ARN"       // SQS queue for undeliverable firings (optional)
	EnvGrace             = "MIRRORFLEET_GRACE"               // silence before a worker's repos move
	EnvWarmup            = "MIRRORFLEET_WARMUP"              // first-start wait; 0 = none
	EnvSuspectAfter      = "MIRRORFLEET_SUSPECT_AFTER"       // silence before a worker is suspect
	EnvLease             = "MIRRORFLEET_LEASE"               // leadership lease; > the tick period
	EnvStalenessMaxRepos = "MIRRORFLEET_STALENESS_MAX_REPOS" // staleness metrics only up to this many repos; 0 = never
	EnvStalenessEvery    = "MIRRORFLEET_STALENESS_INTERVAL"  // and at most this often
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
	// Coordinator holds Grace, Warmup, SuspectAfter and Lease; the rest take the
	// package defaults.
	Coordinator coordinator.Config
	// Staleness percentiles need every repo's last success: a read per repo. They are
	// computed only while the fleet has at most StalenessMaxRepos repos (0: never), and
	// at most every StalenessEvery per Lambda environment.
	StalenessMaxRepos int
	StalenessEvery    time.Duration
	// List is the list sync (not Enabled when MIRRORFLEET_LIST_REPO is unset).
	List     listsync.Config
	LogLevel slog.Level
}

// Defaults of the coordinator's environment.
const (
	DefaultStalenessMaxRepos = 1000
	DefaultStalenessEvery    = 10 * time.Minute
)

// CoordinatorConfigFromEnv reads and validates the coordinator's environment. The error
// lists every variable at fault.
func CoordinatorConfigFromEnv() (CoordinatorConfig, error) {
	return coordinatorConfigFrom(os.Getenv)
}

func coordinatorConfigFrom(get func(string) string) (CoordinatorConfig, error) {
	e := newEnv(get)
	def := coordinator.DefaultConfig()
	c := CoordinatorConfig{
		Table:             e.required(EnvTable, "the DynamoDB table of the fleet's state"),
		ScheduleGroup:     e.required(EnvScheduleGroup, "the EventBridge Scheduler group the coordinator's timers live in"),
		SchedulerRoleARN:  e.required(EnvSchedulerRoleARN, "the IAM role EventBridge Scheduler assumes to invoke this function"),
		TimerDLQARN:       e.raw(EnvTimerDLQARN),
		Fleet:             e.str(EnvFleet, DefaultFleet),
		AllowPrivateHosts: e.boolean(EnvAllowPrivateHosts, false),
		StalenessMaxRepos: e.integer(EnvStalenessMaxRepos, DefaultStalenessMaxRepos, 0, 10_000_000),
		StalenessEvery:    e.duration(EnvStalenessEvery, DefaultStalenessEvery),
		LogLevel:          e.logLevel(),
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
	// Warm-up 0 means none (a fleet being rebuilt), unlike the other durations.
	if v := e.raw(EnvWarmup); v == "0" || v == "none" {
		cc.Warmup = coordinator.NoWarmup
	} else {
		cc.Warmup = e.duration(EnvWarmup, def.Warmup)
	}
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

// checkFleet: the fleet name becomes a CloudWatch dimension value (at most 1024
// characters, no control characters); 255 keeps dashboards readable.
func checkFleet(e *envReader, v string) {
	if len(v) > 255 || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		e.fail(EnvFleet, v, "must be at most 255 printable characters")
	}
}
