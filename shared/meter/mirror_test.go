package meter

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

type fakeMirror struct{ err error }

func (f fakeMirror) Sync(context.Context, fetch.Target) (fetch.Result, error) {
	return fetch.Result{BytesReceived: 100}, f.err
}
func (fakeMirror) Exists(fetch.Target) bool                  { return true }
func (fakeMirror) Trash(context.Context, fetch.Target) error { return nil }

type sink struct{ samples []metrics.Sample }

func (s *sink) Record(ss ...metrics.Sample) error { s.samples = append(s.samples, ss...); return nil }

func TestMirrorReportsFetches(t *testing.T) {
	count := func(err error) map[string]float64 {
		s := &sink{}
		if _, gotErr := (Mirror{Mirrorer: fakeMirror{err}, Sink: s}).Sync(t.Context(), fetch.Target{}); !errors.Is(gotErr, err) {
			t.Errorf("error %v not passed through", gotErr)
		}
		out := map[string]float64{}
		for _, x := range s.samples {
			out[x.Name] += x.Value
		}
		return out
	}
	if m := count(nil); m[metrics.FetchSuccesses] != 1 || m[metrics.FetchFailures] != 0 || m[metrics.BytesFetched] != 100 {
		t.Errorf("success: %v", m)
	}
	if m := count(fetch.Errorf(fetch.KindNetwork, "reset")); m[metrics.FetchFailures] != 1 || m[metrics.FetchSuccesses] != 0 {
		t.Errorf("failure: %v", m)
	}
	if m := count(fetch.Errorf(fetch.KindBusy, "locked")); len(m) != 0 {
		t.Errorf("busy counted as a fetch: %v", m)
	}
}

type fakeMaintainer struct {
	fakeMirror
	res fetch.Maintenance
}

func (f fakeMaintainer) Maintain(context.Context, fetch.Target, fetch.MaintainRequest) (fetch.Maintenance, error) {
	return f.res, f.err
}

func TestMirrorReportsMaintenance(t *testing.T) {
	count := func(mt fakeMaintainer) map[string]float64 {
		s := &sink{}
		if _, err := (Mirror{Mirrorer: mt, Sink: s}).Maintain(t.Context(), fetch.Target{}, fetch.MaintainRequest{}); !errors.Is(err, mt.err) {
			t.Errorf("error %v not passed through", err)
		}
		out := map[string]float64{}
		for _, x := range s.samples {
			out[x.Name] += x.Value
		}
		return out
	}
	if m := count(fakeMaintainer{res: fetch.Maintenance{PacksBefore: 9, PacksAfter: 2}}); m[metrics.MaintenanceRuns] != 1 || m[metrics.MirrorsRecloned] != 0 {
		t.Errorf("run: %v", m)
	}
	if m := count(fakeMaintainer{res: fetch.Maintenance{Recloned: true}}); m[metrics.MaintenanceRuns] != 1 || m[metrics.MirrorsRecloned] != 1 {
		t.Errorf("re-clone: %v", m)
	}
	if m := count(fakeMaintainer{res: fetch.Maintenance{Skipped: true}}); len(m) != 0 {
		t.Errorf("skipped counted: %v", m)
	}
	if m := count(fakeMaintainer{fakeMirror: fakeMirror{fetch.Errorf(fetch.KindBusy, "locked")}}); len(m) != 0 {
		t.Errorf("busy counted: %v", m)
	}
	if _, err := (Mirror{Mirrorer: fakeMirror{}, Sink: &sink{}}).Maintain(t.Context(), fetch.Target{}, fetch.MaintainRequest{}); err == nil {
		t.Error("a Mirrorer that cannot maintain: no error")
	}
}

// The worker's polls become the polls counter, and those that found something new the
// polls-found counter, by host.
func TestPollsReportedByHost(t *testing.T) {
	s := &sink{}
	polled, found := Polls(s), PollsFound(s)
	polled("github.com")
	polled("gitlab.com")
	found("gitlab.com")
	want := []metrics.Sample{metrics.Poll("github.com"), metrics.Poll("gitlab.com"), metrics.PollFound("gitlab.com")}
	if !reflect.DeepEqual(s.samples, want) {
		t.Errorf("samples %+v, want %+v", s.samples, want)
	}
}

// The worker's hook finds become the hook counters, by host; a fetch that counted
// nothing is not reported.
func TestHooksReportWhatTheFetchesFound(t *testing.T) {
	s := &sink{}
	found := Hooks(s)
	found("github.com", worker.HookAnnounced)
	found("github.com", worker.HookLost)
	found("gitlab.com", worker.HookOutside)
	found("gitlab.com", worker.NoHookFind)
	want := []metrics.Sample{metrics.HookPush("github.com", metrics.HookPushesAnnounced),
		metrics.HookPush("github.com", metrics.HookPushesLost), metrics.HookPush("gitlab.com", metrics.HookPushesOutside)}
	if !reflect.DeepEqual(s.samples, want) {
		t.Errorf("samples %+v, want %+v", s.samples, want)
	}
}
