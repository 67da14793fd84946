package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
)

// dynamoReps are fewer than bbolt's, and k stops at 100: every store call is an HTTP
// round trip to a JVM sharing the same cores, and the whole DynamoDB part has about a
// minute. k = 1,000 there costs tens of seconds per sample and shows nothing bbolt's
// k = 1,000 does not.
var dynamoReps = reps{quiet: 50, changes: map[int]int{10: 10, 100: 5}, naive: 5, cycles: 1}

// dynamoRepsFor: at 100k repos a naive tick or full scan pages through every repo over
// HTTP (tens of seconds each), so fewer of them.
func dynamoRepsFor(repos int) reps {
	if repos >= 100000 {
		return reps{quiet: 30, changes: map[int]int{10: 5, 100: 3}, naive: 2, cycles: 1}
	}
	return dynamoReps
}

// dynamoBudget bounds the DynamoDB part on a loaded machine; what is done by then is kept.
// The 100k-repo cell's setup (100k creates, then their assignment) takes most of it.
const dynamoBudget = 40 * time.Minute

// runDynamo measures the small grid on DynamoDB Local when make bench started one, and
// returns each cell's setup as a bulk add. It never fails the run: what went wrong is
// recorded as the reason it was skipped.
func runDynamo(ctx context.Context, log *slog.Logger, maxRepos int, seed uint64) (*results.TickDynamo, []results.TickBulkAdd) {
	ep := dynamoEndpoint()
	if ep == "" {
		log.Info("DynamoDB Local not running: skipping its grid", "env", dynamotest.EndpointEnv)
		return &results.TickDynamo{Skipped: dynamotest.EndpointEnv + " not set (make bench runs this under scripts/with-dynamodb-local.sh)"}, nil
	}
	if maxRepos <= 0 {
		return &results.TickDynamo{Skipped: "disabled with -dynamo-max-repos 0"}, nil
	}
	d := &results.TickDynamo{}
	var bulks []results.TickBulkAdd
	ctx, cancel := context.WithTimeout(ctx, dynamoBudget)
	defer cancel()
	for _, nw := range dynamoCells {
		n, w := nw[0], nw[1]
		if n > maxRepos {
			continue
		}
		cell, bulk, err := dynamoCell(ctx, log, ep, n, w, seed, dynamoRepsFor(n))
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("over its %s budget: %w", dynamoBudget, err)
			}
			log.Warn("DynamoDB Local grid stopped", "repos", n, "workers", w, "err", err)
			d.Skipped = fmt.Sprintf("stopped at %d repos, %d workers: %v", n, w, err)
			return d, bulks
		}
		d.Cells = append(d.Cells, cell)
		bulks = append(bulks, bulk)
	}
	if len(d.Cells) == 0 {
		d.Skipped = fmt.Sprintf("no DynamoDB Local size at or under -dynamo-max-repos %d", maxRepos)
	}
	return d, bulks
}

func dynamoCell(ctx context.Context, log *slog.Logger, endpoint string, n, w int, seed uint64, r reps) (results.TickCell, results.TickBulkAdd, error) {
	start := time.Now()
	st, err := dynamo.New(ctx, dynamo.Config{Client: dynamotest.Client(endpoint),
		Table: fmt.Sprintf("ticklatency_%d_%d_%d", n, w, time.Now().UnixNano()%1e9), Log: log})
	if err != nil {
		return results.TickCell{}, results.TickBulkAdd{}, err
	}
	if err := st.CreateTable(ctx); err != nil {
		return results.TickCell{}, results.TickBulkAdd{}, err
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
	bulk, err := f.setup(ctx, n, w, true)
	bulk.Store = "DynamoDB Local"
	if err != nil {
		return results.TickCell{}, bulk, err
	}
	log.Info("DynamoDB Local fleet settled", "repos", n, "workers", w, "ticks", bulk.Ticks,
		"slowest_tick_ms", bulk.SlowestTickMs, "seconds", time.Since(start).Seconds())
	// Untimed rounds first: a JVM fresh from the setup is still compiling the paths the
	// measured ticks take, and the first size would pay for it.
	if _, _, err := changeTicks(ctx, f, min(100, n), 2); err != nil {
		return results.TickCell{}, bulk, fmt.Errorf("warm-up: %w", err)
	}
	cell, err := measureCell(ctx, log, f, n, w, r)
	return cell, bulk, err
}
