// Membership: joining, heartbeats, and the assignment learnt from the outbox or a full
// resync.

package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Join claims a slot and registers the worker. A live record under our id is a previous
// run of this same worker (a restart): it is resumed and the outbox replayed from the
// start. A dead or draining one is not ours any more: we take the next incarnation id.
func (w *Worker) Join(ctx context.Context) error {
	now := w.clock.Now()
	for attempt := 0; ; attempt++ {
		w.mu.Lock()
		w.incarnation++
		id := w.cfg.ID
		if w.incarnation > 1 {
			id = fmt.Sprintf("%s.%d", w.cfg.ID, w.incarnation)
		}
		w.mu.Unlock()
		rec, err := w.store.ClaimSlot(ctx, store.Worker{ID: id, StartedAt: now, HeartbeatAt: now, State: store.WorkerJoining}, w.cfg.MaxSlots)
		if errors.Is(err, store.ErrConflict) && attempt < 100 {
			old, gerr := w.store.GetWorker(ctx, id)
			if gerr != nil && !errors.Is(gerr, store.ErrNotFound) {
				return fmt.Errorf("join as %s: %w", id, gerr)
			}
			// Only a process that has not joined yet may resume a record (a restart after a
			// crash, under whatever incarnation it last ran as); one declared dead while
			// running must take a fresh identity.
			if gerr != nil || old.State == store.WorkerDead || old.State == store.WorkerDraining || w.everJoined {
				continue
			}
			rec = old
			w.log.Info("resuming worker record from a previous run", "as", id, "state", old.State)
		} else if err != nil {
			return fmt.Errorf("join as %s: %w", id, err)
		}
		w.mu.Lock()
		if !w.everJoined {
			w.joinedAt = now // NextPoll's fetch rate counts from here
		}
		w.id, w.joined, w.everJoined, w.ack = rec.ID, true, true, 0
		// Nothing is held after a join: the owner index says what is ours (a restart may
		// find a large outbox, whose entries that index already reflects cost a read, not
		// a repo read each), then the outbox from the trim point.
		w.resync = resyncState{on: true}
		w.leaseAt = now // the slot claim is the first heartbeat the store accepted
		w.dropAllLocked(now)
		w.mu.Unlock()
		w.log.Info("joined", "as", rec.ID, "slot", rec.Slot)
		return nil
	}
}

// dropAllLocked lets every repo go (MovedOut): a rejoined worker holds nothing until
// its owner index says what is its.
func (w *Worker) dropAllLocked(now time.Time) {
	for id := range w.repos {
		w.stepLocked(id, now, MovedOut{})
	}
}

// Heartbeat reports liveness and applies new outbox entries (joining first if needed).
func (w *Worker) Heartbeat(ctx context.Context) error {
	w.mu.Lock()
	joined := w.joined
	w.mu.Unlock()
	if !joined {
		if err := w.Join(ctx); err != nil {
			return err
		}
	}
	sent := w.clock.Now()
	w.fetchFails.Flush(sent)
	w.maintFails.Flush(sent)
	hb := store.Heartbeat{At: sent}
	if w.disk != nil {
		used, total, err := w.disk.Usage(ctx)
		if err == nil {
			hb.DiskUsed, hb.DiskTotal = used, total
		}
	}
	w.mu.Lock()
	id := w.id
	hb.AckSeq, hb.Fetching, hb.QueueLen = w.ack, w.inFlight, w.queueLenLocked()
	last := make([]time.Time, 0, len(w.repos))
	for _, r := range w.repos {
		if r.Held() {
			last = append(last, r.Rec.LastSuccessAt)
		}
	}
	hb.Checks = latestChecks(w.repos, store.MaxChecks)
	hb.FetchRate = w.fetchRateLocked(sent)
	w.forgetOwnersLocked(sent)
	w.mu.Unlock()
	// The staleness of the repos it owns: the coordinator merges the workers' summaries
	// into the fleet's without reading the repos.
	hb.Staleness = store.Staleness(metrics.ComputeStaleness(hb.At, last))

	rec, err := w.store.Heartbeat(ctx, id, hb)
	if errors.Is(err, store.ErrNotFound) || (err == nil && rec.State == store.WorkerDead) {
		// Declared dead while we were away: our repos have moved. Start over as a new
		// incarnation rather than fight the coordinator for them.
		w.log.Warn("worker was declared dead; rejoining", "was", id)
		w.mu.Lock()
		w.joined = false
		w.dropAllLocked(w.clock.Now())
		w.mu.Unlock()
		return w.Join(ctx)
	}
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	w.mu.Lock()
	w.leaseAt = sent // measured from when it was sent: the coordinator saw it no earlier
	w.mu.Unlock()
	// The outbox is read in slices: a restart under a backlog resyncs and replays over
	// several heartbeats rather than going silent until it is done.
	if err := w.syncOutbox(ctx, rec, sent.Add(w.cfg.Heartbeat/2)); err != nil {
		return err
	}
	w.retryTrash(ctx)
	w.learn()
	w.poke()
	return nil
}

// learn fits the prior again from the owned repos' stats when it is due (weekly, or
// while the repos with evidence grow by a quarter, as a new fleet's first clones do).
// The fit runs outside the lock; a worker with 10,000 repos fits in well under a second.
func (w *Worker) learn() {
	now := w.clock.Now()
	w.mu.Lock()
	var stats []priority.Stats
	for _, r := range w.repos {
		if r.Held() && r.Rec.Stats != (priority.Stats{}) {
			stats = append(stats, r.Rec.Stats)
		}
	}
	base, scores := w.prior, w.scores
	if w.fitting || !base.Due(now, len(stats)) {
		w.mu.Unlock()
		return
	}
	w.fitting = true
	w.mu.Unlock()

	p := priority.Fit(stats, base, now, &scores)
	w.mu.Lock()
	w.prior, w.fitting = p, false
	w.scores.Fade()
	w.mu.Unlock()
	w.log.Info("learned the prior of change rates", "repos", p.Repos,
		"dormant_share", p.Weights[0], "changes_per_month", p.Hazard*30, "mean_pushes_per_day", p.Mean())
}

// syncOutbox brings the local assignment up to the outbox: a full resync first when
// one is due (after a join, or when entries we never saw were trimmed), then the entries
// after the ack. It reads at most ReplaySlice records and stops reading at until; the
// rest waits for the next heartbeat, which carries on from where this one stopped (the
// ack advances with every page applied).
func (w *Worker) syncOutbox(ctx context.Context, rec store.Worker, until time.Time) error {
	budget := w.cfg.ReplaySlice
	more := func() bool { return budget > 0 && w.clock.Now().Before(until) }
	w.mu.Lock()
	ack := w.ack
	if ack < rec.TrimmedTo && !w.resync.on {
		w.resync = resyncState{on: true}
	}
	rs := w.resync.on
	w.mu.Unlock()
	if rs {
		done, err := w.resyncSlice(ctx, rec.TrimmedTo, &budget, more)
		if err != nil || !done {
			return err
		}
		ack = w.currentAck()
	}
	for more() {
		entries, err := w.store.ReadOutbox(ctx, rec.ID, ack, min(1000, budget))
		if err != nil {
			return fmt.Errorf("read outbox: %w", err)
		}
		if len(entries) == 0 {
			return nil
		}
		budget -= len(entries)
		if entries[0].Seq != ack+1 {
			// Entries we never saw were trimmed between the heartbeat and this read: the
			// next heartbeat resyncs in full.
			w.mu.Lock()
			w.resync = resyncState{on: true}
			w.mu.Unlock()
			return nil
		}
		for i, e := range entries {
			if i > 0 && !w.clock.Now().Before(until) {
				break // a page of repo reads can take seconds: stop within it
			}
			if superseded(entries[i+1:], e) {
				ack = e.Seq
				continue
			}
			if err := w.applyEntry(ctx, e); err != nil {
				w.setAck(ack)
				return err
			}
			ack = e.Seq
		}
		w.setAck(ack)
	}
	return nil
}

// superseded reports whether an add entry is undone or redone by a later one of the same
// page: its repo is not read, the later entry decides.
func superseded(later []store.OutboxEntry, e store.OutboxEntry) bool {
	if e.Op != store.OpAdd {
		return false
	}
	for _, l := range later {
		if l.RepoID == e.RepoID && l.Op != store.OpSync {
			return true
		}
	}
	return false
}

func (w *Worker) currentAck() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ack
}

func (w *Worker) setAck(ack uint64) {
	w.mu.Lock()
	w.ack = ack
	w.mu.Unlock()
}

// resyncState is a full resync under way: pages of the owner index read over one or
// more heartbeats. from is the trim point it began at: the outbox is replayed after it
// once the pass is complete.
type resyncState struct {
	on     bool
	from   uint64
	cursor string
	seen   map[string]bool
	begun  bool
}

// resyncSlice reads the owner index from where the last slice stopped while more allows
// (counting the records read off budget). Listed repos are held at once; once the pass
// is complete, held repos it did not list are dropped and the ack set to the trim point
// it began at (the entries after it are replayed: they are idempotent, and close the gap
// of an index that lags, as DynamoDB GSIs do). A trim past that point restarts the pass:
// an entry we never saw may have assigned a repo after its page was read.
func (w *Worker) resyncSlice(ctx context.Context, trimmedTo uint64, budget *int, more func() bool) (bool, error) {
	id := w.ID()
	w.mu.Lock()
	if !w.resync.begun || trimmedTo > w.resync.from {
		if !w.resync.begun {
			w.stats.fullResyncs.Add(1)
		}
		w.resync = resyncState{on: true, begun: true, from: max(w.ack, trimmedTo), seen: map[string]bool{}}
	}
	w.mu.Unlock()
	for more() {
		w.mu.Lock()
		cursor := w.resync.cursor
		w.mu.Unlock()
		page, next, err := w.store.ListReposByOwner(ctx, id, cursor, min(1000, *budget))
		if err != nil {
			return false, fmt.Errorf("full resync: %w", err)
		}
		*budget -= len(page)
		w.mu.Lock()
		now := w.clock.Now()
		for _, r := range page {
			w.stepLocked(r.ID, now, MovedIn{Rec: r, Prio: r.Priority})
			w.resync.seen[r.ID] = true
		}
		w.resync.cursor = next
		if next == "" {
			for rid := range w.repos {
				if !w.resync.seen[rid] {
					w.stepLocked(rid, now, MovedOut{})
				}
			}
			from := w.resync.from
			w.ack, w.resync = from, resyncState{}
			n := len(w.repos)
			w.mu.Unlock()
			w.log.Info("full resync", "as", id, "repos", n, "replay_from", from)
			return true, nil
		}
		w.mu.Unlock()
	}
	return false, nil
}

func (w *Worker) applyEntry(ctx context.Context, e store.OutboxEntry) error {
	switch e.Op {
	case store.OpAdd:
		w.mu.Lock()
		r := w.repos[e.RepoID]
		known := r != nil && r.Knows(e.Epoch)
		w.mu.Unlock()
		if known {
			return nil // old news: a resync listed it at this epoch or later
		}
		rec, err := w.store.GetRepo(ctx, e.RepoID)
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted since; a purge entry follows or already came
		}
		if err != nil {
			return fmt.Errorf("read repo %s: %w", e.RepoID, err)
		}
		rec.OwnerEpoch = e.Epoch
		w.mu.Lock()
		w.stepLocked(e.RepoID, w.clock.Now(), MovedIn{Rec: rec, Prio: e.Priority})
		w.mu.Unlock()
	case store.OpDel:
		w.mu.Lock()
		w.stepLocked(e.RepoID, w.clock.Now(), MovedOut{})
		w.mu.Unlock()
	case store.OpPurge:
		w.mu.Lock()
		w.stepLocked(e.RepoID, w.clock.Now(), MovedOut{})
		w.mu.Unlock()
		w.trash(ctx, fetch.Target{ID: e.RepoID, URL: e.URL})
		w.stats.purged.Add(1)
	case store.OpSync:
		w.mu.Lock()
		w.stepLocked(e.RepoID, w.clock.Now(), SyncRequested{Epoch: e.Epoch})
		w.mu.Unlock()
	}
	return nil
}

// trash moves a purged repo's mirror to the trash. If a fetch still holds it (busy), it
// is retried at every heartbeat: the repo record is gone, so nobody else would.
func (w *Worker) trash(ctx context.Context, t fetch.Target) {
	err := w.mirror.Trash(ctx, t)
	if err == nil {
		return
	}
	if fetch.KindOf(err) == fetch.KindBusy {
		w.mu.Lock()
		w.pendingTrash = append(w.pendingTrash, t)
		w.mu.Unlock()
		w.log.Info("purge: mirror busy; retrying at the next heartbeat", "repo", t.ID)
		return
	}
	w.log.Warn("purge: trash mirror", "repo", t.ID, "err", err)
}

func (w *Worker) retryTrash(ctx context.Context) {
	w.mu.Lock()
	todo := w.pendingTrash
	w.pendingTrash = nil
	w.mu.Unlock()
	for _, t := range todo {
		w.trash(ctx, t)
	}
}
