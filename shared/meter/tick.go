package meter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// TickStore is what Tick reads besides the tick's report.
type TickStore interface {
	CountRepos(ctx context.Context) (map[store.RepoState]int, error)
	ListWorkers(ctx context.Context) ([]store.Worker, error)
}

// Tick is the samples of one coordinator tick: the tick's report (a failed tick is not
// counted in Ticks, see metrics.FromReport) and, when a leader ticked, the fleet-wide
// figures. Only a leader reports those, so two coordinators never report conflicting
// ones: repo counts are two reads (counters); staleness is merged at now from the
// summaries the workers send with their heartbeats, one query of the workers at any
// fleet size. A read that fails leaves its figures out and is in the error; the samples
// that could be had are returned all the same.
func Tick(ctx context.Context, st TickStore, rep coordinator.Report, took time.Duration, tickErr error, now time.Time) ([]metrics.Sample, error) {
	samples := metrics.FromReport(rep, took, tickErr)
	if !rep.Leader || rep.Ignored != "" {
		return samples, nil
	}
	var errs []error
	if counts, err := st.CountRepos(ctx); err != nil {
		errs = append(errs, fmt.Errorf("count repos: %w", err))
	} else {
		samples = append(samples, metrics.ReposByStateSamples(counts)...)
	}
	if ws, err := st.ListWorkers(ctx); err != nil {
		errs = append(errs, fmt.Errorf("staleness: %w", err))
	} else {
		samples = append(samples, metrics.MergeStaleness(now, ws).Samples()...)
	}
	return samples, errors.Join(errs...)
}
