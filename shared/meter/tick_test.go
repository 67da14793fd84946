package meter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
)

func TestTick(t *testing.T) {
	ctx := t.Context()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "fleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"https://example.com/a.git", "https://example.com/b.git"} {
		if _, _, err := st.CreateRepo(ctx, store.Repo{ID: store.RepoID(u), URL: u, State: store.RepoPending}); err != nil {
			t.Fatal(err)
		}
	}
	pending := func(ss []metrics.Sample) (float64, bool) {
		for _, s := range ss {
			if s.Name == metrics.ReposByState && s.Dims[metrics.DimState] == string(store.RepoPending) {
				return s.Value, true
			}
		}
		return 0, false
	}
	has := func(ss []metrics.Sample, name string) bool {
		for _, s := range ss {
			if s.Name == name {
				return true
			}
		}
		return false
	}

	leader := coordinator.Report{Leader: true, Term: 2}
	ss, err := Tick(ctx, st, leader, time.Second, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := pending(ss); !ok || n != 2 {
		t.Errorf("a leader's tick: pending %v (%v), want 2", n, ok)
	}
	if !has(ss, metrics.Ticks) {
		t.Errorf("a leader's tick is not counted: %v", ss)
	}

	// A follower, or a leader's ignored firing, reports no fleet-wide figures.
	for _, rep := range []coordinator.Report{{}, {Leader: true, Ignored: "worker w1 is gone"}} {
		ss, err := Tick(ctx, st, rep, time.Second, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := pending(ss); ok {
			t.Errorf("%+v: repo counts reported", rep)
		}
	}

	// A store that cannot be read: the report's samples all the same, and the error.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ss, err = Tick(ctx, st, leader, time.Second, nil, time.Now())
	if err == nil {
		t.Error("closed store: no error")
	}
	if _, ok := pending(ss); ok || !has(ss, metrics.Ticks) {
		t.Errorf("closed store: samples %v", ss)
	}
}
