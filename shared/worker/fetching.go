// Fetching: the queue's next job, the fetch itself and its report.

package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
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
		r.fetchedAt = now
		r.hookAsked, r.hookPending = r.hookPending, false
		r.asked, r.askPending = r.askPending, false
		w.inFlight++
		if w.cfg.Rate > 0 {
			w.tokens--
		}
		return Job{Target: fetch.Target{ID: id, URL: r.rec.URL, Upstream: r.rec.Upstream}, Owner: w.id, Epoch: r.rec.OwnerEpoch, Priority: prio}, true
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
			share, ok := DiskShare(used, total, w.cfg.DiskThreshold, w.cfg.Fetchers)
			if !ok {
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
	fctx, mem, err := w.admitMemory(ctx, j, cloned)
	if err != nil {
		// Shutting down while waiting for memory: the repo's turn comes again.
		w.finish(ctx, j, cloned, fetch.Result{}, fetch.Errorf(fetch.KindBusy, "waiting for memory: %v", err))
		return
	}
	w.stats.fetches.Add(1)
	res, err := w.mirror.Sync(fctx, j.Target)
	w.doneMemory(j, cloned, mem)
	w.finish(ctx, j, cloned, res, err)
}

// DiskShare is the disk guard's answer for one fetch on a file system of total bytes
// with used of them taken: the bytes the fetch may add (its share of the room left
// under the threshold, which all fetchers may be filling at once), or !ok when there
// is no room. A total of 0 (a file system with no size of its own and no quota: EFS)
// bounds nothing: ok, with no share (the mirror's own byte caps apply).
func DiskShare(used, total int64, threshold float64, fetchers int) (share int64, ok bool) {
	if total <= 0 {
		return 0, true
	}
	share = (int64(threshold*float64(total)) - used) / int64(max(fetchers, 1))
	return share, share > 0
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
	// Scored on what the repo was when polled: a covered repo's poll that finds a push
	// its hook missed unhooks it, and is no sample of its silences either.
	scored := Scored(w.pollStretchLocked(r, now), r.asked)
	find := NoHookFind
	if by := r.hook.HookedBy(w.ownerHooksLocked(r), now); by != NotHooked {
		// A hooked repo's fetch that brought something tells whether the host's hooks
		// announced it (one count per host in memory).
		loss := w.hookLoss[host]
		if loss == nil {
			loss = &HookLoss{}
			w.hookLoss[host] = loss
		}
		if ferr == nil && wasCloned && res.Changed {
			find = r.hook.Fetched(by, r.hookAsked, loss)
		}
	}
	o := decideFetch(w.cfg, w.prior, fetchFacts{Now: now, Rec: r.rec, OldPrio: j.Priority, WasCloned: wasCloned,
		Res: res, Err: ferr, Unwritten: r.unwritten, LastWritten: r.lastWritten, Stretch: w.pollStretchLocked(r, now)})
	if o.Poll != nil && scored {
		w.scores.Add(w.prior, r.rec.Stats, *o.Poll)
	}
	if o.Changed {
		w.stats.changed.Add(1)
	}
	if o.Failed {
		w.stats.failures.Add(1)
	}
	if o.Packs > 0 {
		r.packs = o.Packs
	}
	if o.Corrupt {
		r.corrupt = true
	}
	r.rec = o.Rec
	// A fetch someone asked for that writes nothing shows in the next heartbeat's
	// checks: beat now, so the API shows the poll at once (one beat per request, not
	// per poll).
	wakeBeat := r.wakeBeat && !o.Write && kind != fetch.KindBusy
	if kind != fetch.KindBusy {
		r.wakeBeat = false
	}
	if r.syncAgain && kind != fetch.KindBusy {
		// A sync was asked for while this fetch ran: fetch again, now.
		r.syncAgain = false
		w.queue.PushFront(j.Target.ID)
	} else {
		w.queue.Push(j.Target.ID, o.Rec.Priority, o.NotBefore)
	}
	// No-change polls change the stats but write nothing (invariant 6): they reach the
	// store with the next change or checkpoint, which carries them all.
	report := o.report()
	w.mu.Unlock()
	if find != NoHookFind && w.cfg.HookFound != nil {
		w.cfg.HookFound(host, find)
	}
	if o.Maintain {
		w.pokeMaintenance()
	}
	if wakeBeat {
		w.WakeHeartbeat()
	}

	if ferr != nil && kind != fetch.KindBusy {
		w.log.Warn("fetch failed", "repo", j.Target.ID, "url", j.Target.URL, "kind", kind, "err", ferr)
	}
	if o.Write {
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
