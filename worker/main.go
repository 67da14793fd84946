// Command worker is a fetch worker on its own (docs/architecture.md, Worker), the same process as
// `mirrorfleet worker`, which the ECS tasks run: it reads its configuration from the
// environment (worker/README.md), joins the fleet in the DynamoDB table, and keeps its
// share of the mirrors under /mnt/mirrors (EFS) fresh until it is stopped.
//
// Stopping: ECS sends SIGTERM and, after the task's stop timeout (30 s by default),
// SIGKILL. On SIGTERM in-flight fetches get MIRRORFLEET_DRAIN (20 s) to finish, are then
// abandoned (a cut fetch leaves the previous mirror intact), and the worker leaves the
// fleet so its repos move at the next coordinator tick. A second SIGTERM or Ctrl-C exits
// at once.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	go func() {
		<-ctx.Done()
		stop() // restore the default action: a second signal ends the process at once
	}()
	cfg, err := cloud.WorkerConfigFromEnv(ctx)
	if err != nil {
		cloud.NewLogger(0).Error(err.Error())
		os.Exit(2)
	}
	if err := cloud.RunWorker(ctx, cfg); err != nil {
		cloud.NewLogger(0).Error("worker failed", "err", err)
		os.Exit(1)
	}
}
