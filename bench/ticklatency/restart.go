package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// restartCap bounds one restart measurement's catch-up (the goal is the heartbeat gap,
// not the catch-up's length).
const restartCap = 5 * time.Minute

// noMirrors is a Mirrorer that holds nothing: the restart measures the membership path.
type noMirrors struct{}

func (noMirrors) Sync(context.Context, fetch.Target) (fetch.Result, error) {
	return fetch.Result{}, nil
}
func (noMirrors) Exists(fetch.Target) bool                  { return false }
func (noMirrors) Trash(context.Context, fetch.Target) error { return nil }

// beatLog records when the store accepted each heartbeat (a claimed slot is one too).
type beatLog struct {
	storetest.Store
	at []time.Time
}

func (b *beatLog) ClaimSlot(ctx context.Context, w store.Worker, slots int) (store.Worker, error) {
	rec, err := b.Store.ClaimSlot(ctx, w, slots)
	if err == nil {
		b.at = append(b.at, time.Now())
	}
	return rec, err
}

func (b *beatLog) Heartbeat(ctx context.Context, id string, hb store.Heartbeat) (store.Worker, error) {
	rec, err := b.Store.Heartbeat(ctx, id, hb)
	if err == nil {
		b.at = append(b.at, time.Now())
	}
	return rec, err
}

// gaps returns the time from start to the first accepted heartbeat and the longest time
// between two, in seconds.
func (b *beatLog) gaps(start time.Time) (first, longest float64) {
	if len(b.at) == 0 {
		return 0, 0
	}
	first = b.at[0].Sub(start).Seconds()
	for i := 1; i < len(b.at); i++ {
		longest = max(longest, b.at[i].Sub(b.at[i-1]).Seconds())
	}
	return round(first), round(longest)
}

// restartBacklog registers worker w-restart on st, appends entries outbox entries to it
// (adds of repos that do not exist: a repo read each when replayed), then starts the
// worker process anew, on the real clock, and calls Heartbeat back to back until it acked
// them all, timing each call.
func restartBacklog(ctx context.Context, log *slog.Logger, st storetest.Store, name string, entries int) (results.RestartBacklog, error) {
	const id = "w-restart"
	res := results.RestartBacklog{Store: name, Entries: entries}
	cfg := worker.Config{ID: id}
	w0 := worker.New(cfg, st, noMirrors{}, nil, clock.Real{}, log)
	if err := w0.Heartbeat(ctx); err != nil {
		return res, fmt.Errorf("first run: %w", err)
	}
	el, err := st.GetElection(ctx)
	if err != nil {
		return res, err
	}
	if el, err = st.CASElection(ctx, el.Version, store.Election{Term: el.Term + 1, VotedFor: "bench"}); err != nil {
		return res, fmt.Errorf("take a term: %w", err)
	}
	start := time.Now()
	per := store.MaxApplyItems - 1
	for head := 0; head < entries; head += per {
		n := min(per, entries-head)
		es := make([]store.OutboxEntry, n)
		for i := range es {
			url := fmt.Sprintf("https://git.example.org/gone/r%d", head+i)
			es[i] = store.OutboxEntry{Op: store.OpAdd, RepoID: store.RepoID(url), URL: url, Epoch: 1}
		}
		if err := st.Apply(ctx, el.Term, []store.Mutation{store.AppendOutbox{Worker: id, ExpectHead: uint64(head), Entries: es}}); err != nil {
			return res, fmt.Errorf("append entries at %d: %w", head, err)
		}
	}
	log.Info("restart backlog written", "store", name, "entries", entries, "seconds", time.Since(start).Seconds())

	beats := &beatLog{Store: st}
	w := worker.New(cfg, beats, noMirrors{}, nil, clock.Real{}, log) // the restarted process
	res.HeartbeatS = worker.DefaultConfig().Heartbeat.Seconds()
	start = time.Now()
	for time.Since(start) < restartCap {
		t := time.Now()
		if err := w.Heartbeat(ctx); err != nil {
			return res, fmt.Errorf("heartbeat %d: %w", res.Heartbeats, err)
		}
		took := time.Since(t).Seconds()
		if res.Heartbeats == 0 {
			res.FirstCallS = round(took)
		}
		res.Heartbeats++
		res.LongestCallS = max(res.LongestCallS, round(took))
		rec, err := st.GetWorker(ctx, id)
		if err != nil {
			return res, err
		}
		res.Applied = int(rec.AckSeq)
		if rec.AckSeq >= uint64(entries) {
			// The ack of the last call reaches the store with the next heartbeat.
			if err := w.Heartbeat(ctx); err != nil {
				return res, err
			}
			res.CaughtUp = true
			break
		}
	}
	if rec, err := st.GetWorker(ctx, id); err == nil {
		res.Applied = int(rec.AckSeq)
		res.CaughtUp = rec.AckSeq >= uint64(entries)
	} else if !errors.Is(err, store.ErrNotFound) {
		return res, err
	}
	res.Seconds = round(time.Since(start).Seconds())
	res.NextHeartbeatS, res.LongestGapS = beats.gaps(start)
	if res.Seconds > 0 {
		res.EntriesPerSecond = round(float64(res.Applied) / res.Seconds)
	}
	log.Info("restart under a backlog", "store", name, "entries", entries, "heartbeats", res.Heartbeats,
		"longest_call_s", res.LongestCallS, "next_heartbeat_s", res.NextHeartbeatS, "longest_gap_s", res.LongestGapS, "applied", res.Applied, "caught_up", res.CaughtUp, "seconds", res.Seconds)
	return res, nil
}
