package scheduler_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/schedulerfake"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"

	sched "github.com/mirrorfleet/mirrorfleet/shared/timer/scheduler"
)

// The coordinator with its Timer on (fake) Scheduler: a silent worker's death timer is
// armed as a schedule and, when the fake fires it, the payload reaches OnTimer, which
// declares the worker dead — or ignores the firing if the worker heartbeated since.
func TestCoordinatorDeathTimerThroughScheduler(t *testing.T) {
	for _, tc := range []struct {
		name        string
		heartbeatAt time.Duration // a heartbeat between arming and firing (0: none)
		want        store.WorkerState
	}{
		{"silent worker dies at the grace", 0, store.WorkerDead},
		{"firing ignored after a heartbeat", 5 * time.Minute, store.WorkerSuspect},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, schedulerfake.Options{DeliverTwice: true}, sched.Config{})
			st, err := bolt.OpenWith(filepath.Join(t.TempDir(), "fleet.db"), bolt.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			c := &coordinator.Coordinator{ID: "c1", Store: st, Timer: e.timer, Clock: e.clock,
				Config: coordinator.Config{Warmup: coordinator.NoWarmup, Grace: 10 * time.Minute, SuspectAfter: 30 * time.Second},
				Log:    slog.New(slog.DiscardHandler)}
			if _, err := st.ClaimSlot(ctx, store.Worker{ID: "w1", StartedAt: t0, HeartbeatAt: t0}, 64); err != nil {
				t.Fatal(err)
			}
			tick := func() {
				t.Helper()
				if _, err := c.Tick(ctx); err != nil {
					t.Fatal(err)
				}
			}
			tick() // w1 joins the ring
			for range 3 {
				e.clock.Advance(time.Minute)
				tick() // silent: suspect, death timer armed once (one schedule)
			}
			all := e.fake.Schedules()
			if len(all) != 1 || all[0].Name != "death-w1" || all[0].Expression != "at(2030-01-01T00:10:00)" {
				t.Fatalf("schedules %+v, want death-w1 at 00:10", all)
			}
			var p coordinator.TimerPayload
			if err := json.Unmarshal([]byte(all[0].Target.Input), &p); err != nil || p.Kind != "death" || p.Worker != "w1" || p.Beats != 1 {
				t.Fatalf("payload %s (%v)", all[0].Target.Input, err)
			}
			if tc.heartbeatAt > 0 {
				if _, err := st.Heartbeat(ctx, "w1", store.Heartbeat{At: t0.Add(tc.heartbeatAt)}); err != nil {
					t.Fatal(err)
				}
			}

			e.clock.Set(t0.Add(10 * time.Minute))
			var reports []coordinator.Report
			n, err := e.fake.FireDue(ctx, e.clock.Now(), func(ctx context.Context, d schedulerfake.Delivery) error {
				rep, err := c.OnTimer(ctx, d.Input)
				reports = append(reports, rep)
				return err
			})
			if err != nil || n != 2 {
				t.Fatalf("FireDue = %d, %v", n, err)
			}
			w, err := st.GetWorker(ctx, "w1")
			if err != nil {
				t.Fatal(err)
			}
			if w.State != tc.want {
				t.Errorf("w1 is %s after the firing, want %s (reports %+v)", w.State, tc.want, reports)
			}
			if tc.heartbeatAt > 0 && !strings.Contains(reports[0].Ignored, "heartbeated since") {
				t.Errorf("firing not ignored: %+v", reports[0])
			}
			if left := e.fake.Schedules(); len(left) != 0 {
				t.Errorf("schedules left after firing: %+v", left)
			}
		})
	}
}
