package worker_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// countingSignals counts the signal store's calls and can fail the removal.
type countingSignals struct {
	worker.SignalStore
	gets, removes int
	failRemove    bool
}

func (c *countingSignals) GetSignals(ctx context.Context, w string) (store.Signals, error) {
	c.gets++
	return c.SignalStore.GetSignals(ctx, w)
}

func (c *countingSignals) RemoveSignals(ctx context.Context, w string, sig store.Signals) error {
	c.removes++
	if c.failRemove {
		return errors.New("throttled")
	}
	return c.SignalStore.RemoveSignals(ctx, w, sig)
}

// TestTakeSignals: an empty signal item costs one read and nothing else; a signal for an
// owned repo fetches it at once despite the minimum interval, once, and is taken out of
// the store; a signal for a repo the worker does not own is dropped (taken, not rung);
// another worker's signals stay.
func TestTakeSignals(t *testing.T) {
	f := newFixture(t, worker.Config{MinInterval: time.Hour})
	ctx := context.Background()
	cs := &countingSignals{SignalStore: f.st}
	f.w.RunOnce(ctx)
	if f.w.RunOnce(ctx) {
		t.Fatal("polled inside the minimum interval")
	}
	calls := f.m.calls

	if rung, dropped, err := f.w.TakeSignals(ctx, cs); err != nil || rung+dropped != 0 || cs.gets != 1 || cs.removes != 0 {
		t.Fatalf("empty: rung %d dropped %d err %v; %d reads %d removals, want one read and nothing else", rung, dropped, err, cs.gets, cs.removes)
	}

	if err := f.st.AddSignals(ctx, "w1", store.Signals{Hook: []string{f.id, "elsewhere"}}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.AddSignals(ctx, "w2", store.Signals{Sync: []string{f.id}}); err != nil {
		t.Fatal(err)
	}
	rung, dropped, err := f.w.TakeSignals(ctx, cs)
	if err != nil || rung != 1 || dropped != 1 {
		t.Fatalf("rung %d dropped %d err %v, want the owned repo rung and the other dropped", rung, dropped, err)
	}
	if !f.w.RunOnce(ctx) || f.m.calls != calls+1 {
		t.Fatal("the signalled repo was not fetched at once")
	}
	if f.w.RunOnce(ctx) {
		t.Fatal("one signal fetched twice")
	}
	if sig, _ := f.st.GetSignals(ctx, "w1"); !sig.Empty() {
		t.Fatalf("w1's signals after the take: %+v, want none", sig)
	}
	if sig, _ := f.st.GetSignals(ctx, "w2"); !slices.Equal(sig.Sync, []string{f.id}) {
		t.Fatalf("w2's signals: %+v, want them untouched", sig)
	}

	// A removal that fails still rings; the next read finds the signal again and rings
	// again, coalesced with the first.
	if err := f.st.AddSignals(ctx, "w1", store.Signals{Sync: []string{f.id}}); err != nil {
		t.Fatal(err)
	}
	cs.failRemove = true
	if rung, _, err := f.w.TakeSignals(ctx, cs); err == nil || rung != 1 {
		t.Fatalf("failed removal: rung %d err %v, want rung and the error", rung, err)
	}
	cs.failRemove = false
	if rung, _, err := f.w.TakeSignals(ctx, cs); err != nil || rung != 1 {
		t.Fatalf("after a failed removal: rung %d err %v", rung, err)
	}
	f.clk.Advance(10 * time.Second) // the host's politeness budget refills
	if !f.w.RunOnce(ctx) || f.w.RunOnce(ctx) {
		t.Fatal("two rings of one repo did not coalesce into one fetch")
	}
}

// TestRunSignalsStopsWithItsContext: the reader's loop ends when its context does.
func TestRunSignalsStopsWithItsContext(t *testing.T) {
	f := newFixture(t, worker.Config{MinInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.w.RunSignals(ctx, f.st, 10*time.Millisecond); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunSignals did not stop with its context")
	}
}
