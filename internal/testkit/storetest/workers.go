package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Worker membership, heartbeats and outboxes.

func testClaimSlot(t *testing.T, s Store) {
	ctx := t.Context()
	const maxSlots = 4
	a := store.Worker{ID: "w-a", Slot: 99, StartedAt: t0, HeartbeatAt: t0, DiskTotal: 1 << 40}
	got, err := s.ClaimSlot(ctx, a, maxSlots)
	noErr(t, err, "ClaimSlot(w-a)")
	a.Slot, a.State, a.Beats = 0, store.WorkerJoining, 1 // lowest slot; joining by default; registering is a beat
	equal(t, "claimed w-a", got, a, normWorker)
	equal(t, "stored w-a", getWorker(t, s, "w-a"), a, normWorker)

	b, err := s.ClaimSlot(ctx, store.Worker{ID: "w-b", State: store.WorkerActive}, maxSlots)
	noErr(t, err, "ClaimSlot(w-b)")
	if b.Slot != 1 || b.State != store.WorkerActive {
		t.Fatalf("w-b = slot %d state %s, want slot 1, given state kept", b.Slot, b.State)
	}

	_, err = s.ClaimSlot(ctx, store.Worker{ID: "w-a", DiskTotal: 7}, maxSlots)
	wantErr(t, err, store.ErrConflict, "ClaimSlot of an existing id")
	equal(t, "w-a after duplicate claim", getWorker(t, s, "w-a"), a, normWorker)

	for i, id := range []string{"w-c", "w-d"} { // the refused claim took no slot
		w, err := s.ClaimSlot(ctx, store.Worker{ID: id}, maxSlots)
		noErr(t, err, "ClaimSlot("+id+")")
		if w.Slot != 2+i {
			t.Fatalf("%s slot = %d, want %d", id, w.Slot, 2+i)
		}
	}
	_, err = s.ClaimSlot(ctx, store.Worker{ID: "w-e"}, maxSlots)
	wantErr(t, err, store.ErrNoSlot, "ClaimSlot when full")
	_, err = s.GetWorker(ctx, "w-e")
	wantErr(t, err, store.ErrNotFound, "GetWorker of a worker refused a slot")

	// Deleting a worker frees its slot for the next claim, lowest first.
	term := lead(t, s)
	mustApply(t, s, term, store.DeleteWorker{ID: "w-b"})
	e, err := s.ClaimSlot(ctx, store.Worker{ID: "w-e"}, maxSlots)
	noErr(t, err, "ClaimSlot after a delete")
	if e.Slot != 1 {
		t.Fatalf("w-e slot = %d, want the freed slot 1", e.Slot)
	}
	_, err = s.ClaimSlot(ctx, store.Worker{ID: "w-f"}, 2)
	wantErr(t, err, store.ErrNoSlot, "ClaimSlot below a smaller maxSlots")
	f, err := s.ClaimSlot(ctx, store.Worker{ID: "w-f"}, 8)
	noErr(t, err, "ClaimSlot with a larger maxSlots")
	if f.Slot != 4 {
		t.Fatalf("w-f slot = %d, want 4", f.Slot)
	}

	ws, err := s.ListWorkers(ctx)
	noErr(t, err, "ListWorkers")
	slots := map[string]int{}
	for _, w := range ws {
		slots[w.ID] = w.Slot
	}
	want := map[string]int{"w-a": 0, "w-e": 1, "w-c": 2, "w-d": 3, "w-f": 4}
	if fmt.Sprint(slots) != fmt.Sprint(want) || len(ws) != len(want) {
		t.Fatalf("ListWorkers slots = %v (%d records), want %v", slots, len(ws), want)
	}
}

func testClaimSlotRace(t *testing.T, s Store) {
	ctx := t.Context()
	const n, maxSlots = 32, 20
	slots := make([]int, n)
	errs := race(n, func(i int) error {
		w, err := s.ClaimSlot(ctx, store.Worker{ID: fmt.Sprintf("w-%02d", i)}, maxSlots)
		slots[i] = w.Slot
		return err
	})
	seen := map[int]int{}
	full := 0
	for i, err := range errs {
		switch {
		case err == nil:
			if slots[i] < 0 || slots[i] >= maxSlots {
				t.Fatalf("w-%02d got slot %d outside [0,%d)", i, slots[i], maxSlots)
			}
			if j, dup := seen[slots[i]]; dup {
				t.Fatalf("w-%02d and w-%02d both got slot %d", j, i, slots[i])
			}
			seen[slots[i]] = i
		case errors.Is(err, store.ErrNoSlot):
			full++
		default:
			t.Fatalf("w-%02d: %v", i, err)
		}
	}
	if len(seen) != maxSlots || full != n-maxSlots {
		t.Fatalf("%d claims won, %d got ErrNoSlot; want %d and %d", len(seen), full, maxSlots, n-maxSlots)
	}
	ws, err := s.ListWorkers(ctx)
	noErr(t, err, "ListWorkers")
	if len(ws) != maxSlots {
		t.Fatalf("ListWorkers has %d workers, want %d", len(ws), maxSlots)
	}
	for _, w := range ws {
		if i, ok := seen[w.Slot]; !ok || w.ID != fmt.Sprintf("w-%02d", i) {
			t.Fatalf("stored %s in slot %d, which its claim did not return", w.ID, w.Slot)
		}
	}
}

func testClaimSlotSameIDRace(t *testing.T, s Store) {
	ctx := t.Context()
	errs := race(16, func(i int) error {
		_, err := s.ClaimSlot(ctx, store.Worker{ID: "w-same", DiskTotal: int64(i)}, 64)
		return err
	})
	win := oneWinner(t, "ClaimSlot race on one id", errs, store.ErrConflict)
	w := getWorker(t, s, "w-same")
	if w.Slot != 0 || w.DiskTotal != int64(win) {
		t.Fatalf("w-same = %+v, want slot 0 from claim %d", w, win)
	}
	if other := claim(t, s, "w-other"); other.Slot != 1 {
		t.Fatalf("next slot = %d, want 1: refused claims must not hold slots", other.Slot)
	}
}

func testHeartbeat(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	claimed := claim(t, s, "w1")
	mustApply(t, s, term, store.AppendOutbox{Worker: "w1", Entries: []store.OutboxEntry{{Op: store.OpAdd}, {Op: store.OpAdd}}})

	// time.Now carries a monotonic reading, which no store keeps.
	// Staleness figures are kept to the millisecond.
	st := store.Staleness{Repos: 40, Never: 2, P50: 90 * time.Second, P99: 2*time.Hour + 5*time.Millisecond, Max: 26 * time.Hour}
	// The latest unwritten polls are kept to the millisecond, newest first, at most
	// store.MaxChecks of them.
	now := time.Now()
	var checks []store.Check
	for i := range store.MaxChecks + 5 {
		checks = append(checks, store.Check{RepoID: fmt.Sprintf("%016x", 0xabc000+i), At: now.Add(-time.Duration(i*1500) * time.Millisecond)})
	}
	hb := store.Heartbeat{At: now, DiskUsed: 10, DiskTotal: 100, Fetching: 2, QueueLen: 5, AckSeq: 3, Staleness: st,
		Checks: checks, FetchRate: 2.5}
	got, err := s.Heartbeat(ctx, "w1", hb)
	noErr(t, err, "Heartbeat")
	want := claimed
	want.HeartbeatAt, want.DiskUsed, want.DiskTotal, want.Fetching, want.QueueLen, want.AckSeq = hb.At, 10, 100, 2, 5, 3
	want.Staleness, want.Checks, want.FetchRate = st, checks[:store.MaxChecks], 2.5
	want.OutboxHead, want.Beats = 2, 2
	equal(t, "Heartbeat result", got, want, normWorker)
	equal(t, "stored after Heartbeat", getWorker(t, s, "w1"), want, normWorker)

	// The heartbeat count a caller saw works as a condition.
	mustApply(t, s, term, store.SetWorkerState{ID: "w1", State: store.WorkerActive, ExpectBeats: 2})
	want.State = store.WorkerActive

	// A late heartbeat with an older ack (or an older time: the worker's clock is its
	// own) updates the rest but not AckSeq, and counts.
	hb2 := store.Heartbeat{At: hb.At.Add(-time.Hour), DiskUsed: 20, DiskTotal: 100, Fetching: 0, QueueLen: 1, AckSeq: 1,
		Staleness: store.Staleness{Repos: 41, P50: time.Second, P99: time.Minute, Max: time.Hour}}
	got, err = s.Heartbeat(ctx, "w1", hb2)
	noErr(t, err, "Heartbeat with an older ack")
	// A heartbeat without checks clears them: they describe the last beat only.
	want.HeartbeatAt, want.DiskUsed, want.Fetching, want.QueueLen, want.Beats, want.Staleness = hb2.At, 20, 0, 1, 3, hb2.Staleness
	want.Checks, want.FetchRate = nil, 0
	equal(t, "Heartbeat with an older ack", got, want, normWorker)
	equal(t, "stored after older ack", getWorker(t, s, "w1"), want, normWorker)

	got, err = s.Heartbeat(ctx, "w1", store.Heartbeat{At: hb2.At.Add(time.Second), AckSeq: 7})
	noErr(t, err, "Heartbeat with a newer ack")
	if got.AckSeq != 7 || got.State != store.WorkerActive || got.Beats != 4 {
		t.Fatalf("after newer ack: AckSeq %d state %s beats %d, want 7 active 4", got.AckSeq, got.State, got.Beats)
	}

	noErr(t, s.Leave(ctx, "w1"), "Leave")
	got, err = s.Heartbeat(ctx, "w1", store.Heartbeat{At: hb2.At.Add(2 * time.Second), AckSeq: 7})
	noErr(t, err, "Heartbeat while draining")
	if got.State != store.WorkerDraining {
		t.Fatalf("Heartbeat changed state draining to %s", got.State)
	}

	_, err = s.Heartbeat(ctx, "w-none", hb)
	wantErr(t, err, store.ErrNotFound, "Heartbeat of an unknown worker")
	mustApply(t, s, term, store.DeleteWorker{ID: "w1"})
	_, err = s.Heartbeat(ctx, "w1", hb)
	wantErr(t, err, store.ErrNotFound, "Heartbeat of a deleted worker")
	_, err = s.GetWorker(ctx, "w1")
	wantErr(t, err, store.ErrNotFound, "GetWorker after a refused heartbeat")
}

func testLeave(t *testing.T, s Store) {
	ctx := t.Context()
	wantErr(t, s.Leave(ctx, "w-none"), store.ErrNotFound, "Leave of an unknown worker")
	claim(t, s, "w1")
	want := heartbeat(t, s, "w1", t0)
	noErr(t, s.Leave(ctx, "w1"), "Leave")
	want.State = store.WorkerDraining
	equal(t, "worker after Leave", getWorker(t, s, "w1"), want, normWorker)
}

func testSetWorkerState(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	claim(t, s, "w1")
	want := heartbeat(t, s, "w1", t0)
	if want.Beats != 2 {
		t.Fatalf("beats after a claim and a heartbeat = %d, want 2", want.Beats)
	}

	mustApply(t, s, term, store.SetWorkerState{ID: "w1", State: store.WorkerActive})
	want.State = store.WorkerActive
	equal(t, "after SetWorkerState", getWorker(t, s, "w1"), want, normWorker)

	// A suspect worker carries the coordinator's record of its silence.
	mustApply(t, s, term, store.SetWorkerState{ID: "w1", State: store.WorkerSuspect, ExpectBeats: 2, SilentSince: t0.Add(time.Minute)})
	want.State, want.SilentBeats, want.SilentSince = store.WorkerSuspect, 2, t0.Add(time.Minute)
	equal(t, "after SetWorkerState suspect", getWorker(t, s, "w1"), want, normWorker)

	// A heartbeat since cancels a decision taken on the older count, whatever the
	// heartbeat's own time says.
	want = heartbeat(t, s, "w1", t0.Add(-time.Hour))
	if want.State != store.WorkerSuspect || want.Beats != 3 || want.SilentBeats != 2 {
		t.Fatalf("after a heartbeat: %+v, want suspect, 3 beats, silent at 2", want)
	}
	err := s.Apply(ctx, term, []store.Mutation{store.SetWorkerState{ID: "w1", State: store.WorkerDead, ExpectBeats: 2}})
	wantErr(t, err, store.ErrConflict, "SetWorkerState on a stale heartbeat count")
	equal(t, "after refused SetWorkerState", getWorker(t, s, "w1"), want, normWorker)
	mustApply(t, s, term, store.SetWorkerState{ID: "w1", State: store.WorkerDead, ExpectBeats: 3})
	want.State, want.SilentBeats, want.SilentSince = store.WorkerDead, 0, time.Time{}
	equal(t, "after SetWorkerState on the current count (silence cleared)", getWorker(t, s, "w1"), want, normWorker)

	err = s.Apply(ctx, term, []store.Mutation{store.SetWorkerState{ID: "w-none", State: store.WorkerDead}})
	wantErr(t, err, store.ErrConflict, "SetWorkerState of an unknown worker")
	_, err = s.GetWorker(ctx, "w-none")
	wantErr(t, err, store.ErrNotFound, "SetWorkerState created a worker")
}

func testDeleteWorker(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	claim(t, s, "w1")
	claim(t, s, "w2")
	hb1 := heartbeat(t, s, "w1", t0)
	heartbeat(t, s, "w2", t0)
	add := []store.OutboxEntry{{Op: store.OpAdd, RepoID: "r1"}, {Op: store.OpAdd, RepoID: "r2"}, {Op: store.OpSync, RepoID: "r1"}}
	mustApply(t, s, term,
		store.AppendOutbox{Worker: "w1", Entries: add},
		store.AppendOutbox{Worker: "w2", Entries: add[:2]},
	)

	before := snap(t, s)
	for _, m := range []store.DeleteWorker{
		{ID: "w1", ExpectBeats: hb1.Beats - 1},
		{ID: "w-none"},
	} {
		wantErr(t, s.Apply(ctx, term, []store.Mutation{m}), store.ErrConflict, fmt.Sprintf("DeleteWorker %+v", m))
	}
	wantUnchanged(t, "refused DeleteWorker", before, s)

	mustApply(t, s, term, store.DeleteWorker{ID: "w1", ExpectBeats: hb1.Beats})
	_, err := s.GetWorker(ctx, "w1")
	wantErr(t, err, store.ErrNotFound, "GetWorker after DeleteWorker")
	if es, err := s.ReadOutbox(ctx, "w1", 0, 0); len(es) != 0 || (err != nil && !errors.Is(err, store.ErrNotFound)) {
		t.Fatalf("ReadOutbox of a deleted worker = %v, %v; want nothing", es, err)
	}
	if got := seqs(readOutbox(t, s, "w2", 0, 0)); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("w2 outbox after deleting w1 = %v, want [1 2]", got)
	}
	if w := claim(t, s, "w3"); w.Slot != 0 {
		t.Fatalf("w3 slot = %d, want w1's freed slot 0", w.Slot)
	}

	// A worker re-registering under the old id starts with an empty outbox.
	if w := claim(t, s, "w1"); w.Slot != 2 || w.OutboxHead != 0 {
		t.Fatalf("re-registered w1 = %+v, want slot 2 and head 0", w)
	}
	if es := readOutbox(t, s, "w1", 0, 0); len(es) != 0 {
		t.Fatalf("re-registered w1 sees old entries %v", seqs(es))
	}
	mustApply(t, s, term, store.AppendOutbox{Worker: "w1", Entries: add[:1]})
	if got := seqs(readOutbox(t, s, "w1", 0, 0)); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("re-registered w1 outbox = %v, want [1]", got)
	}

	mustApply(t, s, term, store.DeleteWorker{ID: "w2"}) // no heartbeat condition
	_, err = s.GetWorker(ctx, "w2")
	wantErr(t, err, store.ErrNotFound, "GetWorker after unconditional DeleteWorker")
}

func testOutbox(t *testing.T, s Store) {
	ctx := t.Context()
	term := lead(t, s)
	claim(t, s, "w1")
	claim(t, s, "w10") // its keys share a prefix with w1's
	first := []store.OutboxEntry{
		{Seq: 77, Op: store.OpAdd, RepoID: "r1", URL: "https://x/r1", Epoch: 1, Priority: 0.5},
		{Op: store.OpDel, RepoID: "r2", URL: "https://x/r2", Epoch: 3},
		{Op: store.OpSync, RepoID: "r3", URL: "https://x/r3", Epoch: 2, Priority: 0},
	}
	mustApply(t, s, term,
		store.AppendOutbox{Worker: "w1", ExpectHead: 0, Entries: first},
		store.AppendOutbox{Worker: "w10", ExpectHead: 0, Entries: first[:1]},
	)
	want := slices.Clone(first)
	for i := range want {
		want[i].Seq = uint64(i + 1) // the store numbers entries, whatever the caller passed
	}
	equal(t, "w1 outbox", readOutbox(t, s, "w1", 0, 0), want, normEntries)
	equal(t, "w10 outbox", readOutbox(t, s, "w10", 0, 0), want[:1], normEntries)
	if w := getWorker(t, s, "w1"); w.OutboxHead != 3 || w.TrimmedTo != 0 {
		t.Fatalf("w1 head %d trimmed %d, want 3 and 0", w.OutboxHead, w.TrimmedTo)
	}

	for _, c := range []struct {
		after uint64
		limit int
		want  []uint64
	}{
		{0, 0, []uint64{1, 2, 3}},
		{0, -1, []uint64{1, 2, 3}},
		{1, 0, []uint64{2, 3}},
		{0, 2, []uint64{1, 2}},
		{1, 1, []uint64{2}},
		{3, 0, nil},
		{100, 0, nil},
	} {
		if got := seqs(readOutbox(t, s, "w1", c.after, c.limit)); !slices.Equal(got, c.want) {
			t.Fatalf("ReadOutbox(w1, after %d, limit %d) = %v, want %v", c.after, c.limit, got, c.want)
		}
	}

	before := snap(t, s)
	for _, m := range []store.Mutation{
		store.AppendOutbox{Worker: "w1", ExpectHead: 0, Entries: first},
		store.AppendOutbox{Worker: "w1", ExpectHead: 4, Entries: first},
		store.AppendOutbox{Worker: "w-none", ExpectHead: 0, Entries: first},
		store.TrimOutbox{Worker: "w-none", Through: 1},
	} {
		wantErr(t, s.Apply(ctx, term, []store.Mutation{m}), store.ErrConflict, fmt.Sprintf("%T %+v", m, m))
	}
	wantUnchanged(t, "refused outbox writes", before, s)

	mustApply(t, s, term, store.AppendOutbox{Worker: "w1", ExpectHead: 3, Entries: []store.OutboxEntry{
		{Op: store.OpPurge, RepoID: "r4"}, {Op: store.OpAdd, RepoID: "r5"},
	}})
	if got := seqs(readOutbox(t, s, "w1", 0, 0)); !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("w1 outbox after second append = %v", got)
	}

	mustApply(t, s, term, store.TrimOutbox{Worker: "w1", Through: 2})
	if got := seqs(readOutbox(t, s, "w1", 0, 0)); !slices.Equal(got, []uint64{3, 4, 5}) {
		t.Fatalf("w1 outbox after trim through 2 = %v", got)
	}
	if got := seqs(readOutbox(t, s, "w1", 1, 2)); !slices.Equal(got, []uint64{3, 4}) {
		t.Fatalf("ReadOutbox(w1, after 1, limit 2) after trim = %v, want [3 4]", got)
	}
	if w := getWorker(t, s, "w1"); w.OutboxHead != 5 || w.TrimmedTo != 2 {
		t.Fatalf("w1 head %d trimmed %d, want 5 and 2", w.OutboxHead, w.TrimmedTo)
	}

	mustApply(t, s, term, store.TrimOutbox{Worker: "w1", Through: 1}) // never moves back
	if w := getWorker(t, s, "w1"); w.TrimmedTo != 2 {
		t.Fatalf("TrimmedTo after trimming through 1 = %d, want 2", w.TrimmedTo)
	}
	if got := seqs(readOutbox(t, s, "w1", 0, 0)); !slices.Equal(got, []uint64{3, 4, 5}) {
		t.Fatalf("w1 outbox after trim through 1 = %v", got)
	}

	mustApply(t, s, term, store.TrimOutbox{Worker: "w1", Through: 5})
	if es := readOutbox(t, s, "w1", 0, 0); len(es) != 0 {
		t.Fatalf("w1 outbox after trimming all = %v", seqs(es))
	}
	mustApply(t, s, term, store.AppendOutbox{Worker: "w1", ExpectHead: 5, Entries: first[:1]})
	got := readOutbox(t, s, "w1", 0, 0)
	want = []store.OutboxEntry{first[0]}
	want[0].Seq = 6
	equal(t, "w1 outbox after trim and append", got, want, normEntries)
	if w := getWorker(t, s, "w1"); w.OutboxHead != 6 || w.TrimmedTo != 5 {
		t.Fatalf("w1 head %d trimmed %d, want 6 and 5", w.OutboxHead, w.TrimmedTo)
	}

	if got := seqs(readOutbox(t, s, "w10", 0, 0)); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("w10 outbox after w1's trims = %v, want [1]", got)
	}

	// A bounded trim (a cut at the head that deletes few entries now) moves the trim
	// point at once: the entries it leaves below it are never read again.
	for head := uint64(6); head < 10; head++ {
		mustApply(t, s, term, store.AppendOutbox{Worker: "w1", ExpectHead: head, Entries: first[:1]})
	}
	mustApply(t, s, term, store.TrimOutbox{Worker: "w1", Through: 9, Max: 1})
	if w := getWorker(t, s, "w1"); w.OutboxHead != 10 || w.TrimmedTo != 9 {
		t.Fatalf("w1 head %d trimmed %d after a bounded cut, want 10 and 9", w.OutboxHead, w.TrimmedTo)
	}
	for _, after := range []uint64{0, 6, 9} {
		if got := seqs(readOutbox(t, s, "w1", after, 0)); !slices.Equal(got, []uint64{10}) {
			t.Fatalf("ReadOutbox(w1, after %d) after a bounded cut through 9 = %v, want [10]", after, got)
		}
	}
	mustApply(t, s, term, store.TrimOutbox{Worker: "w1", Through: 10, Max: 1})
	if es := readOutbox(t, s, "w1", 0, 0); len(es) != 0 {
		t.Fatalf("w1 outbox after a bounded trim of all = %v", seqs(es))
	}
}

// testWorkersVersion: every change of the membership moves the version, so a coordinator
// that saw it unchanged may keep its plan; heartbeats and outbox writes do not, so a
// live fleet's ticks can be quiet. A backend may say it keeps none.
func testWorkersVersion(t *testing.T, s Store) {
	ctx := t.Context()
	version := func(what string) uint64 {
		t.Helper()
		v, err := s.WorkersVersion(ctx)
		noErr(t, err, "WorkersVersion after "+what)
		return v
	}
	if _, err := s.WorkersVersion(ctx); errors.Is(err, errors.ErrUnsupported) {
		// Allowed by the contract: the coordinator then lists the workers every tick.
		t.Log("this backend keeps no workers version")
		return
	}
	last := version("nothing")
	seen := map[uint64]string{last: "an empty store"}
	moved := func(what string) {
		t.Helper()
		v := version(what)
		if prev, ok := seen[v]; ok {
			t.Fatalf("WorkersVersion after %s = %d, as after %s: the change would go unseen", what, v, prev)
		}
		seen[v], last = what, v
	}
	stayed := func(what string) {
		t.Helper()
		if v := version(what); v != last {
			t.Fatalf("WorkersVersion moved from %d to %d with %s, which changes no membership", last, v, what)
		}
	}

	claim(t, s, "w-a")
	moved("ClaimSlot")
	claim(t, s, "w-b")
	moved("a second ClaimSlot")
	heartbeat(t, s, "w-a", t0)
	stayed("Heartbeat")
	heartbeat(t, s, "w-a", t0.Add(time.Second))
	stayed("a second Heartbeat")
	noErr(t, s.Leave(ctx, "w-b"), "Leave")
	moved("Leave")
	term := lead(t, s)
	stayed("an election")
	mustApply(t, s, term, store.SetWorkerState{ID: "w-a", State: store.WorkerActive})
	moved("SetWorkerState")
	mustApply(t, s, term, store.SetWorkerState{ID: "w-a", State: store.WorkerActive})
	stayed("SetWorkerState to the state it has")
	w := getWorker(t, s, "w-a")
	mustApply(t, s, term, store.SetWorkerState{ID: "w-a", State: store.WorkerSuspect, ExpectBeats: w.Beats, SilentSince: t0})
	moved("SetWorkerState recording a silence")
	mustApply(t, s, term, store.AppendOutbox{Worker: "w-a", Entries: []store.OutboxEntry{
		{Op: store.OpAdd, RepoID: "r1", URL: "https://example.org/r1", Epoch: 1}}})
	stayed("AppendOutbox")
	mustApply(t, s, term, store.TrimOutbox{Worker: "w-a", Through: 1})
	stayed("TrimOutbox")
	mustApply(t, s, term, store.DeleteWorker{ID: "w-b"})
	moved("DeleteWorker")
	_, err := s.ClaimSlot(ctx, store.Worker{ID: "w-a"}, 8)
	wantErr(t, err, store.ErrConflict, "ClaimSlot of an existing id")
	stayed("a refused ClaimSlot")
}
