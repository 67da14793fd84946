// Fetching: the queue's next job, the fetch itself and its report. The decisions are
// the step's (step.go); here the worker holds the lock, gathers what the step reads,
// and runs the I/O the step asks for.

package worker

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/membudget"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Job is one fetch handed to a fetcher.
type Job struct {
	Target   fetch.Target
	Owner    string
	Epoch    int64
	Priority float64
	Known    bool // the step knows the mirror's refs: Do looks at nothing first (Actions.Known)
	Poll     bool // the budget counts the fetch (Actions.Poll): a find is counted (Config.PollFound)
}

// Next pops the next repo to fetch at now, if one is eligible and the rates allow. A
// repo whose upstream host is closed (hosts.go) waits on the host instead; a poll
// waits while the poll budget is spent (budget.go), and the repos behind it with it. A
// worker whose lease ran out (no heartbeat accepted for Lease) starts nothing: the
// coordinator may be about to give its repos to others.
func (w *Worker) Next(now time.Time) (Job, bool) {
	j, polled, ok := w.next(now)
	if polled != "" && w.cfg.Polled != nil {
		w.cfg.Polled(polled)
	}
	return j, ok
}

// next is Next under the lock; polled is the host of a budgeted poll it started.
func (w *Worker) next(now time.Time) (j Job, polled string, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.joined || !w.leasedLocked(now) || !w.allowLocked(now) {
		return Job{}, "", false
	}
	w.hosts.release(now, w.requeueLocked)
	for {
		id, prio, ok := w.queue.Peek(now)
		if !ok {
			return Job{}, "", false
		}
		r := w.repos[id]
		if r != nil && r.Budgeted() && !w.budget.ready(now, len(w.repos)) {
			return Job{}, "", false
		}
		w.queue.Pop(now)
		if r == nil || r.Phase != Queued {
			continue
		}
		if !w.hosts.admit(r.host, now) {
			w.parkSeq++
			w.hosts.park(r.host, id, prio, w.parkSeq, now)
			continue
		}
		a := w.stepLocked(id, now, PollDue{Prio: prio})
		if !a.Fetch {
			continue
		}
		if a.Poll {
			w.budget.take()
			polled = r.host
		}
		w.inFlight++
		if w.cfg.Rate > 0 {
			w.tokens--
		}
		return Job{Target: fetch.Target{ID: id, URL: r.Rec.URL, Upstream: r.Rec.Upstream, RefsDigest: r.Rec.RefsDigest},
			Owner: w.id, Epoch: r.Rec.OwnerEpoch, Priority: prio, Known: a.Known, Poll: a.Poll}, polled, true
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

// Do runs one job: it tells the step what it finds (the mirror, the disk, the memory,
// the sync's outcome) and does what the step says at each turn. A job the step knows
// the mirror's refs of (Job.Known) looks at nothing before its sync, and the disk
// guard runs inside the sync, once it knows it writes (fetch.Target.Admit).
func (w *Worker) Do(ctx context.Context, j Job) {
	var c Checked
	if !j.Known {
		c.Cloned = w.mirror.Exists(j.Target)
		c.DiskUsed, c.DiskTotal = w.diskUsage(ctx)
	}
	a := w.step(ctx, j, c)
	if a.MaxBytes > 0 {
		j.Target.MaxBytes = a.MaxBytes
	}
	if a.GuardWrite && w.disk != nil {
		j.Target.Admit = func(ctx context.Context) (int64, error) {
			used, total := w.diskUsage(ctx)
			g := w.step(ctx, j, Admitting{DiskUsed: used, DiskTotal: total})
			return g.MaxBytes, g.Refuse
		}
	}
	fctx, mem := ctx, (*membudget.Fetch)(nil)
	if a.Admit != nil {
		c, f, err := w.cfg.Memory.Admit(ctx, a.Admit.Start, a.Admit.Base, a.Admit.PerObject)
		if err != nil {
			w.step(ctx, j, MemoryRefused{Err: err})
			return
		}
		fctx, mem = c, f
		a = w.step(ctx, j, MemoryAdmitted{})
	}
	if !a.Sync {
		if mem != nil {
			mem.Release()
		}
		return
	}
	w.stats.fetches.Add(1)
	res, err := w.mirror.Sync(fctx, j.Target)
	var need int64
	if mem != nil {
		mem.Release()
		need = mem.Need()
	}
	w.step(ctx, j, Fetched{Res: res, Err: err, Need: need})
}

// diskUsage is the disk's usage for the guard: 0, 0 (bounds nothing) without a disk
// or when it cannot be read.
func (w *Worker) diskUsage(ctx context.Context) (used, total int64) {
	if w.disk == nil {
		return 0, 0
	}
	used, total, err := w.disk.Usage(ctx)
	if err != nil {
		return 0, 0
	}
	return used, total
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

// step runs one step for j's repo and does what it asks outside the lock.
func (w *Worker) step(ctx context.Context, j Job, e Event) Actions {
	now := w.clock.Now()
	w.mu.Lock()
	a := w.stepLocked(j.Target.ID, now, e)
	var rep store.FetchReport
	if a.Write {
		rep = w.repos[j.Target.ID].Report()
	}
	w.mu.Unlock()
	host := hostOf(j.Target.URL)
	if a.Found != NoHookFind && w.cfg.HookFound != nil {
		w.cfg.HookFound(host, a.Found)
	}
	if j.Poll && a.Changed && w.cfg.PollFound != nil {
		w.cfg.PollFound(host)
	}
	if a.Maintain {
		w.pokeMaintenance()
	}
	if a.Beat {
		w.WakeHeartbeat()
	}
	if a.Warn != nil {
		w.fetchFails.Failed(now, j.Target.ID, j.Target.URL, host, string(fetch.KindOf(a.Warn)), a.Warn)
	} else if f, ok := e.(Fetched); ok && f.Err == nil && !a.Forget {
		w.fetchFails.Succeeded(now, j.Target.ID, j.Target.URL, host)
	}
	if a.HandBack != "" {
		w.stats.handedBack.Add(1)
		if err := w.store.HandBack(ctx, j.Target.ID, j.Owner, j.Epoch, a.HandBack); err != nil && !errors.Is(err, store.ErrConflict) {
			w.log.Warn("hand back", "repo", j.Target.ID, "err", err)
		}
		w.log.Info("handed back (disk guard)", "repo", j.Target.ID, "reason", a.HandBack)
	}
	// No-change polls change the stats but write nothing (invariant 6): they reach the
	// store with the next change or checkpoint, which carries them all.
	if a.Write {
		w.report(ctx, j, rep, now)
	}
	return a
}

// viewLocked is what the step reads of the worker for the repo at url at now.
func (w *Worker) viewLocked(now time.Time, url string) View {
	v := View{Now: now, Worker: w.id, Prior: w.prior, Front: w.queue.Min(), Owner: w.ownerHooksLocked(url)}
	v.FeedCovered = w.cfg.FeedCovered != nil && w.cfg.FeedCovered(url)
	if loss := w.hookLoss[hostOf(url)]; loss != nil {
		v.HookLoss = *loss
	}
	return v
}

// stepLocked runs the step for repo id at now, keeps the state it returns and applies
// what it asks of the worker's own state: the queue, the hosts, the counters, the
// scores. It returns the actions; the I/O ones are the caller's.
func (w *Worker) stepLocked(id string, now time.Time, e Event) Actions {
	r, held := w.repos[id]
	url := ""
	if held {
		url = r.Rec.URL
	} else if in, ok := e.(MovedIn); ok {
		url = in.Rec.URL
	}
	host := hostOf(url)
	if !held {
		r = &repoEntry{host: host}
	}
	a := Step(&w.cfg, w.viewLocked(now, url), &r.RepoState, e)
	switch {
	case a.Forget:
		delete(w.repos, id)
		w.fetchFails.Forget(id)
		w.maintFails.Forget(id)
	case !held && r.Phase != NotHeld:
		// The slot the repo is in now counts as done: a worker that starts, or takes over
		// repos, maintains each at its next slot, not all of them at once.
		every := max(w.cfg.MaintainEvery, time.Second)
		r.phase = maintPhase(id, every)
		r.maintSlot = slotStart(now, r.phase, every)
		w.repos[id] = r
	}
	if a.PauseHost {
		w.hosts.pauseHost(host, now, a.RetryAfter)
	}
	if a.EndFetch {
		w.inFlight--
		w.hosts.done(host, now, w.requeueLocked)
	}
	switch q := a.Queue; q.Op {
	case QueueAt:
		w.queue.Push(id, q.Prio, q.NotBefore)
	case QueueFront:
		w.hosts.unpark(id)
		w.queue.PushFront(id)
		w.poke()
	case QueueNew:
		w.queue.PushNew(id, q.Step)
	case QueueOut:
		w.dequeueLocked(id)
	}
	if a.Packs > 0 && r != nil {
		r.packs = a.Packs
	}
	if a.Corrupt && r != nil {
		r.corrupt = true
	}
	if a.Learn {
		w.scores.AddWith(w.prior, a.Learning.Evidence, a.Learning.Poll, nil)
	}
	if a.Found != NoHookFind || a.Maybe.Level.Maybe() {
		loss := w.hookLoss[host]
		if loss == nil {
			loss = &HookLoss{}
			w.hookLoss[host] = loss
		}
		loss.Count(a.Found)
		loss.CountMaybe(a.Maybe)
	}
	if a.OwnerFound {
		if o := w.ownerLocked(url); o != nil {
			o.FoundAt = now
		}
	}
	if a.Changed {
		w.stats.changed.Add(1)
	}
	if a.Failed {
		w.stats.failures.Add(1)
	}
	return a
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
			w.written(j.Target.ID, now, true)
			return
		}
		epoch = cur.OwnerEpoch // still ours at a newer epoch: the report is ours to write
	}
	if landed {
		w.stats.reports.Add(1)
	}
	w.written(j.Target.ID, now, landed)
}

// written tells the step whether the report of the fetch at at landed.
func (w *Worker) written(id string, at time.Time, landed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stepLocked(id, w.clock.Now(), Written{At: at, Landed: landed})
}
