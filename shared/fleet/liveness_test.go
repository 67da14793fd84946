package fleet

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestHealthzFailsWhenTheCoordinatorStops: once the coordinator loop has not finished
// a tick for StaleAfter(Tick), /healthz's coordinator check fails and says so.
func TestHealthzFailsWhenTheCoordinatorStops(t *testing.T) {
	f, err := Start(context.Background(), Config{Data: t.TempDir(), Listen: "127.0.0.1:0", Workers: 1, Warmup: -1,
		Tick: 100 * time.Millisecond, Heartbeat: 100 * time.Millisecond, Token: "t", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := f.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	if err := f.coordinatorTurning(context.Background()); err != nil {
		t.Fatalf("a ticking coordinator: %v", err)
	}
	f.stopCoordinator()
	f.coordWG.Wait()
	time.Sleep(StaleAfter(100*time.Millisecond) + 100*time.Millisecond)
	err = f.coordinatorTurning(context.Background())
	if err == nil || !strings.Contains(err.Error(), "has not finished a tick") {
		t.Fatalf("a stopped coordinator: %v", err)
	}
	if err := f.workersTurning(context.Background()); err != nil {
		t.Fatalf("the workers still beat: %v", err)
	}
}
