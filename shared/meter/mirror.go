// Package meter turns what the fleet does into metrics samples, the same way in the
// local fleet and on AWS: each fetch and maintenance run (Mirror) and each coordinator
// tick (Tick). It depends on no runtime: the sink is the caller's (Prometheus locally,
// CloudWatch EMF on AWS).
package meter

import (
	"context"
	"fmt"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// Sink takes samples: metrics.Prometheus and metrics.EMF are both one.
type Sink interface {
	Record(...metrics.Sample) error
}

// Mirror reports every fetch (outcome, wall time, bytes) to Sink. A fetch refused
// because another process holds the repo's lock did not fetch anything and is not
// reported.
type Mirror struct {
	worker.Mirrorer
	Sink Sink
}

// Maintain runs the maintenance of the wrapped Mirrorer (which must be a
// worker.Maintainer) and reports it. A run that was skipped, found the mirror
// unchanged (no git run) or found it busy did nothing and is not reported.
func (m Mirror) Maintain(ctx context.Context, t fetch.Target, req fetch.MaintainRequest) (fetch.Maintenance, error) {
	mt, ok := m.Mirrorer.(worker.Maintainer)
	if !ok {
		return fetch.Maintenance{}, fmt.Errorf("%T cannot maintain mirrors", m.Mirrorer)
	}
	start := time.Now()
	res, err := mt.Maintain(ctx, t, req)
	if res.Skipped || res.Unchanged || fetch.KindOf(err) == fetch.KindBusy {
		return res, err
	}
	_ = m.Sink.Record(metrics.Maintenance(time.Since(start), res.Recloned)...)
	return res, err
}

// Sync runs the fetch and reports it.
func (m Mirror) Sync(ctx context.Context, t fetch.Target) (fetch.Result, error) {
	start := time.Now()
	res, err := m.Mirrorer.Sync(ctx, t)
	if err != nil && fetch.KindOf(err) == fetch.KindBusy {
		return res, err
	}
	// metrics.Fetch builds valid samples only: Record has nothing to refuse.
	_ = m.Sink.Record(metrics.Fetch(err == nil, time.Since(start), res.BytesReceived)...)
	return res, err
}

// Polls returns the worker's Polled callback reporting to sink (the polls metric, by
// upstream host).
func Polls(sink Sink) func(host string) {
	return func(host string) { _ = sink.Record(metrics.Poll(host)) }
}

// PollsFound returns the worker's PollFound callback reporting to sink (the polls that
// found something new, by upstream host).
func PollsFound(sink Sink) func(host string) {
	return func(host string) { _ = sink.Record(metrics.PollFound(host)) }
}

// Hooks returns the worker's HookFound callback reporting to sink (the hook metrics).
func Hooks(sink Sink) func(host string, f worker.HookFind) {
	names := map[worker.HookFind]string{worker.HookAnnounced: metrics.HookPushesAnnounced,
		worker.HookLost: metrics.HookPushesLost, worker.HookOutside: metrics.HookPushesOutside}
	return func(host string, f worker.HookFind) {
		if name, ok := names[f]; ok {
			_ = sink.Record(metrics.HookPush(host, name))
		}
	}
}
