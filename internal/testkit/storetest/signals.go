package storetest

import (
	"fmt"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Signals (ADR 21): hints to a worker, beside the durable sync request.

func getSignals(t *testing.T, s Store, worker string) store.Signals {
	t.Helper()
	sig, err := s.GetSignals(t.Context(), worker)
	noErr(t, err, "GetSignals("+worker+")")
	return sig
}

func normSignals(s store.Signals) store.Signals {
	if len(s.Hook) == 0 {
		s.Hook = nil
	}
	if len(s.OwnerHook) == 0 {
		s.OwnerHook = nil
	}
	if len(s.Sync) == 0 {
		s.Sync = nil
	}
	return s
}

func testSignals(t *testing.T, s Store) {
	ctx := t.Context()
	if got := getSignals(t, s, "w-a"); !got.Empty() {
		t.Fatalf("signals of a worker never signalled: %+v, want none", got)
	}
	// No worker record is needed: the writer does not check (a hint for a worker that
	// is gone costs nothing).
	noErr(t, s.AddSignals(ctx, "w-a", store.Signals{Hook: []string{"r2", "r1"}}), "AddSignals")
	noErr(t, s.AddSignals(ctx, "w-a", store.Signals{Hook: []string{"r1"}, Sync: []string{"r3", "r3"}}), "AddSignals again")
	noErr(t, s.AddSignals(ctx, "w-a", store.Signals{OwnerHook: []string{"r5", "r1"}}), "AddSignals of owner-level hooks")
	noErr(t, s.AddSignals(ctx, "w-b", store.Signals{Sync: []string{"r9"}}), "AddSignals to another worker")
	noErr(t, s.AddSignals(ctx, "w-a", store.Signals{}), "AddSignals of nothing")
	equal(t, "w-a's signals", getSignals(t, s, "w-a"), store.Signals{Hook: []string{"r1", "r2"}, OwnerHook: []string{"r1", "r5"}, Sync: []string{"r3"}}, normSignals)
	equal(t, "w-b's signals", getSignals(t, s, "w-b"), store.Signals{Sync: []string{"r9"}}, normSignals)

	// The reader takes what it read; what was added since stays.
	taken := getSignals(t, s, "w-a")
	noErr(t, s.AddSignals(ctx, "w-a", store.Signals{Hook: []string{"r4"}}), "AddSignals after the read")
	noErr(t, s.RemoveSignals(ctx, "w-a", taken), "RemoveSignals")
	equal(t, "w-a's signals after the take", getSignals(t, s, "w-a"), store.Signals{Hook: []string{"r4"}}, normSignals)
	noErr(t, s.AddSignals(ctx, "w-a", store.Signals{OwnerHook: []string{"r6"}}), "AddSignals of an owner-level hook")
	equal(t, "w-a's signals with an owner-level hook", getSignals(t, s, "w-a"), store.Signals{Hook: []string{"r4"}, OwnerHook: []string{"r6"}}, normSignals)
	noErr(t, s.RemoveSignals(ctx, "w-a", store.Signals{Hook: []string{"r4", "r-absent"}, OwnerHook: []string{"r6"}, Sync: []string{"r-absent"}}), "RemoveSignals with absent ids")
	if got := getSignals(t, s, "w-a"); !got.Empty() {
		t.Fatalf("signals after taking all: %+v, want none", got)
	}
	// Removing from a worker that has no signals, or never had, is no error and creates nothing.
	noErr(t, s.RemoveSignals(ctx, "w-a", store.Signals{Hook: []string{"r1"}}), "RemoveSignals of an emptied set")
	noErr(t, s.RemoveSignals(ctx, "w-z", store.Signals{Hook: []string{"r1"}}), "RemoveSignals of a worker never signalled")
	if got := getSignals(t, s, "w-z"); !got.Empty() {
		t.Fatalf("signals of w-z: %+v, want none", got)
	}
	equal(t, "w-b's signals at the end", getSignals(t, s, "w-b"), store.Signals{Sync: []string{"r9"}}, normSignals)

	// Signals are not part of the fleet's state: they change no snapshot.
	before := snap(t, s)
	noErr(t, s.AddSignals(ctx, "w-c", store.Signals{Hook: []string{"r1"}}), "AddSignals")
	wantUnchanged(t, "AddSignals", before, s)

	// Bounds: an empty worker id and an oversized batch are refused.
	if err := s.AddSignals(ctx, "", store.Signals{Hook: []string{"r1"}}); err == nil {
		t.Error("AddSignals for an empty worker id succeeded")
	}
	many := make([]string, store.MaxSignalIDs+1)
	for i := range many {
		many[i] = fmt.Sprintf("r%05d", i)
	}
	if err := s.AddSignals(ctx, "w-a", store.Signals{Hook: many}); err == nil {
		t.Errorf("AddSignals of %d ids succeeded, want refused past %d", len(many), store.MaxSignalIDs)
	}
}

// Concurrent writers never lose each other's ids (the API Lambda's writes race).
func testSignalsRace(t *testing.T, s Store) {
	const n = 16
	errs := race(n, func(i int) error {
		return s.AddSignals(t.Context(), "w-a", store.Signals{Hook: []string{fmt.Sprintf("r%02d", i)}})
	})
	for i, err := range errs {
		noErr(t, err, fmt.Sprintf("AddSignals %d", i))
	}
	if got := getSignals(t, s, "w-a"); len(got.Hook) != n {
		t.Fatalf("after %d concurrent adds: %d ids %v", n, len(got.Hook), got.Hook)
	}
}
