// Package cloudtest helps tests run the AWS-side processes (cloud.RunWorker and the
// coordinator) in process against DynamoDB Local.
package cloudtest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/timer"
)

// Go runs fn (a process such as cloud.RunWorker) in the background and returns its
// stop: cancel fn's context, wait for it, and fail the test if it returned an error.
// Defer the stop where the test's other resources should still be up while fn ends.
func Go(t testing.TB, name string, fn func(ctx context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Coordinator is a coordinator on st that ticks only when the test calls Tick: no
// warm-up, a minute's grace, local timers and the wall clock, logs discarded.
func Coordinator(id string, st coordinator.Store) *coordinator.Coordinator {
	return &coordinator.Coordinator{ID: id, Store: st, Timer: timer.NewLocal(), Clock: clock.Real{},
		Config: coordinator.Config{Warmup: coordinator.NoWarmup, Grace: time.Minute}, Log: slog.New(slog.DiscardHandler)}
}
