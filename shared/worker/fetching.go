// Fetching: the queue's next job, the fetch itself and its report.

package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Job is one fetch handed to a fetcher.
type Job struct {
	Target   fetch.Target
	Owner    string
	Epoch    int64
	Priority float64
}

// Next pops the next repo to fetch at now, if one is eligible and the rate allows. A
// repo whose upstream host is closed (hosts.go) waits on the host instead. A worker whose
// lease ran out (no heartbeat accepted for Lease) starts nothing: the coordinator may be
// about to give its repos to others.
func (w *Worker) Next(now time.Time) (Job, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.joined || !w.leasedLocked(now) || !w.allowLocked(now) {
		return Job{}, false
	}
	w.hosts.release(now, w.requeueLocked)
	for {
		id, prio, ok := w.queue.Pop(now)
		if !ok {
			return Job{}, false
		}
		r, ok := w.repos[id]
		if !ok || r.dropped {
			continue
		}
		if !w.hosts.admit(r.host, now) {
			w.parkSeq++
			w.hosts.park(r.host, id, prio, w.parkSeq, now)
			continue
		}
		r.inFlight = true
		w.inFlight++
		if w.cfg.Rate > 0 {
			w.tokens--
		}
		return Job{Target: fetch.Target{ID: id, URL: r.rec.URL}, Owner: w.id, Epoch: r.rec.OwnerEpoch, Priority: prio}, true
	}
}

// leasedLocked reports whether the lease from the last accepted heartbeat holds at now.
func (w *Worker) leasedLocked(now time.Time) bool { return now.Sub(w.leaseAt) < w.cfg.Lease }

// Leased reports whether the worker may start fetches (its lease holds).
func (w *Worker) Leased() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.joined && w.leasedLocked(w.clock.Now())
}

// allowLocked is a token bucket over the worker's fetch starts.
func (w *Worker) allowLocked(now time.Time) bool {
	if w.cfg.Rate <= 0 {
		return true
	}
	burst := math.Max(1, w.cfg.Rate)
	if w.tokensAt.IsZero() {
		w.tokens = burst
	} else {
		w.tokens = math.Min(burst, w.tokens+now.Sub(w.tokensAt).Seconds()*w.cfg.Rate)
	}
	w.tokensAt = now
	return w.tokens >= 1
}

// Do runs one job: the disk guard, the fetch, the bookkeeping.
//
// The disk guard runs before every fetch, not only before a clone: above the threshold
// an uncloned repo is handed back (another worker may have room) and a mirrored one is
// not fetched (a disk_full error on the repo, no failure counted); below it, the fetch
// may add at most its share of the room left under the threshold (the room divided by
// the fetchers, which may all be filling it at once).
func (w *Worker) Do(ctx context.Context, j Job) {
	cloned := w.mirror.Exists(j.Target)
	if w.disk != nil {
		if used, total, err := w.disk.Usage(ctx); err == nil && total > 0 {
			room := int64(w.cfg.DiskThreshold*float64(total)) - used
			share := room / int64(w.cfg.Fetchers)
			if share <= 0 {
				full := fmt.Sprintf("disk %.0f%% full on %s (threshold %.0f%%)", 100*float64(used)/float64(total), j.Owner, 100*w.cfg.DiskThreshold)
				if !cloned {
					w.handBack(ctx, j, full)
					return
				}
				w.finish(ctx, j, cloned, fetch.Result{}, fetch.Errorf(fetch.KindDiskFull, "%s: fetch skipped", full))
				return
			}
			j.Target.MaxBytes = share
		}
	}
	w.stats.fetches.Add(1)
	res, err := w.mirror.Sync(ctx, j.Target)
	w.finish(ctx, j, cloned, res, err)
}

// RunOnce takes the next eligible job and runs it synchronously; false if none was due.
func (w *Worker) RunOnce(ctx context.Context) bool {
	j, ok := w.Next(w.clock.Now())
	if !ok {
		return false
	}
	w.Do(ctx, j)
	return true
}

func (w *Worker) handBack(ctx context.Context, j Job, reason string) {
	w.mu.Lock()
	if r, ok := w.repos[j.Target.ID]; ok {
		r.inFlight = false
		w.inFlight--
		delete(w.repos, j.Target.ID)
	}
	w.hosts.done(hostOf(j.Target.URL), w.clock.Now(), w.requeueLocked)
	w.mu.Unlock()
	w.stats.handedBack.Add(1)
	if err := w.store.HandBack(ctx, j.Target.ID, j.Owner, j.Epoch, reason); err != nil && !errors.Is(err, store.ErrConflict) {
		w.log.Warn("hand back", "repo", j.Target.ID, "err", err)
	}
	w.log.Info("handed back (disk guard)", "repo", j.Target.ID, "reason", reason)
}

// finish updates the repo after a fetch, decides its next turn and writes the record
// only when something worth storing happened (invariant 6).
func (w *Worker) finish(ctx context.Context, j Job, wasCloned bool, res fetch.Result, ferr error) {
	now := w.clock.Now()
	kind := fetch.KindOf(ferr)
	host := hostOf(j.Target.URL)
	w.mu.Lock()
	if ferr != nil && kind == fetch.KindRateLimited {
		// The whole host asked us to slow down, not just this repo.
		w.hosts.pauseHost(host, now, fetch.RetryAfterOf(ferr))
	}
	w.hosts.done(host, now, w.requeueLocked)
	r, ok := w.repos[j.Target.ID]
	if !ok {
		w.mu.Unlock()
		return
	}
	r.inFlight = false
	w.inFlight--
	if r.dropped {
		delete(w.repos, j.Target.ID)
		w.mu.Unlock()
		return
	}
	rec := &r.rec
	prev := *rec
	write := r.unwritten
	maintNow := false
	notBefore := now.Add(max(w.cfg.MinInterval, 0))
	switch {
	case ferr == nil:
		// The poll covers the time since the last success (failed polls in between are
		// part of it); a first clone brings the history instead.
		poll := priority.Poll{Now: now, Changed: res.Changed, Commits: commitTimes(res.Commits)}
		if wasCloned && !res.Cloned && !prev.LastSuccessAt.IsZero() {
			poll.Prev = prev.LastSuccessAt
		} else {
			poll.Since, poll.FromRoot, poll.LastCommitAt = res.HistorySince, res.HistoryFromRoot, res.LastCommitAt
			if poll.LastCommitAt.IsZero() {
				// Refs unchanged: the mirror read no commit; the record has the time.
				poll.LastCommitAt = prev.LastCommitAt
			}
		}
		w.scores.Add(w.prior, rec.Stats, poll)
		rec.Stats = priority.Fold(rec.Stats, poll, w.prior)
		rec.FetchFailCnt, rec.CloneFailCnt, rec.LastError = 0, 0, ""
		rec.LastFetchAt, rec.LastSuccessAt = now, now
		if res.Changed {
			rec.LastChangeAt = now
			w.stats.changed.Add(1)
		}
		if !res.LastCommitAt.IsZero() {
			rec.LastCommitAt = res.LastCommitAt
		}
		rec.SizeBytes = res.SizeBytes
		rec.State = store.RepoOK
		if res.Packs > 0 {
			r.packs = res.Packs
			maintNow = w.cfg.MaintainPacks > 0 && res.Packs >= w.cfg.MaintainPacks
		}
		write = write || res.Cloned || res.Changed || prev.State != store.RepoOK || prev.LastError != "" ||
			now.Sub(r.lastWritten) >= w.cfg.Checkpoint
	case kind == fetch.KindDiskFull:
		// Not the repo's fault: no failure is counted. The record says why the mirror is
		// not being refreshed (written once, not at every skipped poll).
		rec.LastError = ferr.Error()
		write = prev.LastError != rec.LastError
		notBefore = now.Add(max(w.cfg.MinInterval, w.cfg.BusyRetry))
	case kind == fetch.KindBusy:
		// Someone else is fetching it (its previous owner, just after a move): nothing to
		// record; look again soon, but no later than a normal poll would.
		notBefore = now.Add(min(w.cfg.BusyRetry, max(w.cfg.MinInterval, time.Second)))
	default:
		w.stats.failures.Add(1)
		rec.LastFetchAt = now
		rec.LastError = ferr.Error()
		fails := 0
		if wasCloned {
			rec.FetchFailCnt++
			fails = rec.FetchFailCnt
		} else {
			rec.CloneFailCnt++
			fails = rec.CloneFailCnt
		}
		backoff := min(time.Duration(float64(w.cfg.BackoffBase)*math.Pow(2, float64(fails-1))), w.cfg.BackoffMax)
		if kind == fetch.KindCorrupt && wasCloned {
			r.corrupt, maintNow = true, true // checked, and re-cloned if need be, by maintenance
		}
		switch {
		case kind == fetch.KindNotFound:
			rec.State = store.RepoGone // the mirror is kept; checked again on the cooldown
			backoff = w.cfg.FailCooldown
		case fails >= w.cfg.FailAfter:
			rec.State = store.RepoFailing
			backoff = w.cfg.FailCooldown
		case !wasCloned:
			// No mirror yet: the repo is not mirrored at all, which its state says at
			// once (with the error); retries keep their back-off.
			rec.State = store.RepoFailing
		}
		if ra := fetch.RetryAfterOf(ferr); ra > backoff {
			backoff = ra
		}
		notBefore = now.Add(max(backoff, w.cfg.MinInterval, 0))
		write = true
	}
	cloned := wasCloned || (ferr == nil)
	rec.Priority = w.cfg.Policy.Next(priority.Input{Old: j.Priority, Cloned: cloned, CloneFailCnt: rec.CloneFailCnt,
		FetchFailCnt: rec.FetchFailCnt, LastCommitAt: rec.LastCommitAt, Changed: ferr == nil && res.Changed,
		Stats: rec.Stats, Prior: w.prior, Now: now})
	if r.syncAgain && kind != fetch.KindBusy {
		// A sync was asked for while this fetch ran: fetch again, now.
		r.syncAgain = false
		w.queue.PushFront(j.Target.ID)
	} else {
		w.queue.Push(j.Target.ID, rec.Priority, notBefore)
	}
	// No-change polls change the stats but write nothing (invariant 6): they reach the
	// store with the next change or checkpoint, which carries them all.
	report := store.FetchReport{State: rec.State, Priority: rec.Priority, LastFetchAt: rec.LastFetchAt,
		LastSuccessAt: rec.LastSuccessAt, LastChangeAt: rec.LastChangeAt, LastCommitAt: rec.LastCommitAt,
		CloneFailCnt: rec.CloneFailCnt, FetchFailCnt: rec.FetchFailCnt, SizeBytes: rec.SizeBytes, LastError: rec.LastError,
		Stats: rec.Stats}
	w.mu.Unlock()
	if maintNow {
		w.pokeMaintenance()
	}

	if ferr != nil && kind != fetch.KindBusy {
		w.log.Warn("fetch failed", "repo", j.Target.ID, "url", j.Target.URL, "kind", kind, "err", ferr)
	}
	if write {
		w.report(ctx, j, report, now)
	}
}

// report writes a fetch report and counts it only once it landed. A report refused
// because the epoch moved while we still own the repo (a sync request during the fetch
// bumps it) is written again at the current epoch; one refused because the repo went
// elsewhere is dropped. A report that could not be written at all is left for the next
// fetch of the repo to write.
func (w *Worker) report(ctx context.Context, j Job, rep store.FetchReport, now time.Time) {
	epoch := j.Epoch
	landed := false
	for attempt := 0; attempt < 3; attempt++ {
		err := w.store.ReportFetch(ctx, j.Target.ID, j.Owner, epoch, rep)
		if err == nil {
			landed = true
			break
		}
		if !errors.Is(err, store.ErrConflict) {
			w.log.Warn("report fetch", "repo", j.Target.ID, "err", err)
			break
		}
		cur, gerr := w.store.GetRepo(ctx, j.Target.ID)
		if gerr != nil || cur.Owner != j.Owner || cur.State == store.RepoDeleting || cur.OwnerEpoch == epoch {
			// Not ours any more (moved, deleted): the outbox says what next.
			w.log.Debug("fetch report fenced off", "repo", j.Target.ID, "epoch", epoch)
			w.stats.lost.Add(1)
			w.markWritten(j.Target.ID, now, true)
			return
		}
		epoch = cur.OwnerEpoch // still ours at a newer epoch: the report is ours to write
	}
	if landed {
		w.stats.reports.Add(1)
	}
	w.markWritten(j.Target.ID, now, landed)
}

// markWritten records whether the report of the fetch at now landed.
func (w *Worker) markWritten(id string, now time.Time, landed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.repos[id]
	if !ok {
		return
	}
	r.unwritten = !landed
	if landed {
		r.lastWritten = now
	}
}

// commitTimes are the times the policy reads from the commits a sync brought.
func commitTimes(cs []fetch.Commit) []time.Time {
	out := make([]time.Time, len(cs))
	for i, c := range cs {
		out[i] = c.Time()
	}
	return out
}
