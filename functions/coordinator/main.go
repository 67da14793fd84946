// Command coordinator is the coordinator Lambda (docs/architecture.md, Coordinator): an EventBridge rule
// invokes it every minute for a tick, and EventBridge Scheduler invokes it when one of
// its timers (a worker's death, the end of the warm-up) fires. Build it for
// provided.al2023 on arm64 as a binary named bootstrap, with -tags lambda.norpc.
// Its environment is documented in functions/README.md.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/listsync"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

func main() {
	cfg, err := cloud.CoordinatorConfigFromEnv()
	log := cloud.NewLogger(cfg.LogLevel)
	if err != nil {
		// Exiting during init makes Lambda report Runtime.ExitError with this message in
		// the function's log, on the first invocation after a bad deploy.
		log.Error(err.Error())
		os.Exit(1)
	}
	slog.SetDefault(log)
	h, err := newHandlerFromEnv(context.Background(), cfg, log)
	if err != nil {
		log.Error("coordinator init", "err", err)
		os.Exit(1)
	}
	lambda.StartWithOptions(h.Handle, lambda.WithEnableSIGTERM(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		defer cancel()
		h.StepDown(ctx)
	}))
}

// newHandlerFromEnv builds the AWS collaborators once per execution environment; warm
// invocations reuse the clients and the store's ring cache.
func newHandlerFromEnv(ctx context.Context, cfg cloud.CoordinatorConfig, log *slog.Logger) (*Handler, error) {
	awsCfg, err := cloud.LoadAWSConfig(ctx)
	if err != nil {
		return nil, err
	}
	st, err := dynamo.New(ctx, dynamo.Config{Client: cloud.NewDynamoClient(awsCfg, ""), Table: cfg.Table, Log: log})
	if err != nil {
		return nil, err
	}
	if _, err := st.CheckSchema(ctx); err != nil {
		return nil, err
	}
	list, err := newListSyncer(cfg, st, log)
	if err != nil {
		return nil, err
	}
	return NewHandler(cfg, Deps{Store: st, Scheduler: cloud.NewSchedulerClient(awsCfg), Clock: clock.Real{},
		Log: log, Metrics: os.Stdout, List: list})
}

// newListSyncer returns the list sync, or nil when no list repository is configured
// (MIRRORFLEET_LIST_REPO unset): the ticks then skip it.
func newListSyncer(cfg cloud.CoordinatorConfig, st listsync.Store, log *slog.Logger) (coordinator.ListSyncer, error) {
	if !cfg.List.Enabled() {
		return nil, nil
	}
	s, err := listsync.New(cfg.List, listsync.Options{Store: st,
		Policy: urlpolicy.Policy{AllowPrivateHosts: cfg.AllowPrivateHosts, CaseInsensitiveHosts: cfg.CaseInsensitiveHosts}, Log: log})
	if err != nil {
		return nil, err
	}
	return s, nil
}
