package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo/dynamotest"
)

// dynamoReps are fewer than bbolt's, and k stops at 100: every store call is an HTTP
// round trip to a JVM sharing the same cores, and the whole DynamoDB part has about a
// minute. k = 1,000 there costs tens of seconds per sample and shows nothing bbolt's
// k = 1,000 does not.
var dynamoReps = reps{quiet: 50, changes: map[int]int{10: 10, 100: 5}, naive: 5, cycles: 1}

// dynamoBudget bounds the DynamoDB part on a loaded machine; what is done by then is kept.
const dynamoBudget = 90 * time.Second

// runDynamo measures the small grid on DynamoDB Local when make bench started one. It
// never fails the run: what went wrong is recorded as the reason it was skipped.
func runDynamo(ctx context.Context, log *slog.Logger, maxRepos int, seed uint64) *results.TickDynamo {
	ep := dynamoEndpoint()
	if ep == "" {
		log.Info("DynamoDB Local not running: skipping its grid", "env", dynamotest.EndpointEnv)
		return &results.TickDynamo{Skipped: dynamotest.EndpointEnv + " not set (make bench runs this under scripts/with-dynamodb-local.sh)"}
	}
	if maxRepos <= 0 {
		return &results.TickDynamo{Skipped: "disabled with -dynamo-max-repos 0"}
	}
	d := &results.TickDynamo{}
	ctx, cancel := context.WithTimeout(ctx, dynamoBudget)
	defer cancel()
	for _, n := range dynamoRepos {
		if n > maxRepos {
			continue
		}
		for _, w := range dynamoWorker {
			cell, err := dynamoCell(ctx, log, ep, n, w, seed, dynamoReps)
			if err != nil {
				if ctx.Err() != nil {
					err = fmt.Errorf("over its %s budget: %w", dynamoBudget, err)
				}
				log.Warn("DynamoDB Local grid stopped", "repos", n, "workers", w, "err", err)
				d.Skipped = fmt.Sprintf("stopped at %d repos, %d workers: %v", n, w, err)
				return d
			}
			d.Cells = append(d.Cells, cell)
		}
	}
	if len(d.Cells) == 0 {
		d.Skipped = fmt.Sprintf("no DynamoDB Local size at or under -dynamo-max-repos %d", maxRepos)
	}
	return d
}

func dynamoCell(ctx context.Context, log *slog.Logger, endpoint string, n, w int, seed uint64, r reps) (results.TickCell, error) {
	start := time.Now()
	st, err := dynamo.New(ctx, dynamo.Config{Client: dynamotest.Client(endpoint),
		Table: fmt.Sprintf("ticklatency_%d_%d_%d", n, w, time.Now().UnixNano()%1e9), Log: log})
	if err != nil {
		return results.TickCell{}, err
	}
	if err := st.CreateTable(ctx); err != nil {
		return results.TickCell{}, err
	}
	defer func() {
		// A fresh context: the table must go even if ctx is done.
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := st.DeleteTable(dctx); err != nil {
			log.Warn("delete table", "table", st.Table(), "err", err)
		}
	}()
	f := newFleet(st, seed)
	f.parallel = 8 // CreateRepo is one round trip each; DynamoDB takes them concurrently
	ticks, err := f.setup(ctx, n, w, true)
	if err != nil {
		return results.TickCell{}, err
	}
	log.Info("DynamoDB Local fleet settled", "repos", n, "workers", w, "ticks", ticks, "seconds", time.Since(start).Seconds())
	// Untimed rounds first: a JVM fresh from the setup is still compiling the paths the
	// measured ticks take, and the first size would pay for it.
	if _, _, err := changeTicks(ctx, f, min(100, n), 2); err != nil {
		return results.TickCell{}, fmt.Errorf("warm-up: %w", err)
	}
	return measureCell(ctx, log, f, n, w, r)
}
