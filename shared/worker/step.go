// The worker's decisions about one repo, as a state machine. Step takes what the
// worker holds of a repo (RepoState), what it reads of the worker besides (View) and
// one thing that happened (an Event), and returns the repo's next state and what the
// worker is to do (Actions). It does no I/O, reads no clock and keeps nothing between
// calls. The worker around it (the shell: fetching.go, membership.go, asks.go) holds
// the lock, runs the I/O the actions ask for and feeds each outcome back as the next
// event, as etcd's raft library leaves storage and network to its caller. The freshness
// benchmark drives the same Step, so no decision is written twice.
//
// A repo's cycle: MovedIn queues it; PollDue takes it from the queue (its turn, or an
// ask); Checked (the disk guard), then MemoryAdmitted or MemoryRefused, then Fetched
// end its fetch and queue it again (Admitting in between when the disk guard waits for
// the sync to know it writes); Asked and SyncRequested ask for a fetch at once;
// MovedOut lets it go, at once or when its fetch ends.

package worker

import (
	"fmt"
	"math"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/membudget"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Phase is where a repo is in the worker's cycle.
type Phase uint8

const (
	NotHeld  Phase = iota // the worker does not hold the repo: the zero RepoState
	Queued                // waiting for its turn, in the queue or parked on its host
	Fetching              // taken from the queue: its fetch runs
	Leaving               // moved out while its fetch ran: forgotten when it ends
)

// Want is why a fetch of a repo is wanted besides its turn. Asks made before a fetch
// starts coalesce into the strongest: a hook's outranks a plain ask.
type Want uint8

const (
	ByTurn Want = iota // nothing asked: the fetch is a poll
	ByAsk              // a user's sync, a feed's listing or the durable sync request
	ByHook             // a push webhook
)

// RepoState is what a worker holds of one repo.
type RepoState struct {
	Rec   store.Repo // the repo as last known: its history for the policy, the store's view
	Phase Phase
	// Pending is why a fetch not started yet is wanted; Answering is why the fetch in
	// flight is (ByTurn: it is a poll). An ask while a fetch runs stays pending behind
	// it, and one more fetch follows at once.
	Pending, Answering Want
	Prio               float64 // the priority the fetch in flight was taken at
	Cloned             bool    // a mirror existed when the fetch in flight began
	// Known: the fetch in flight began knowing the mirror's refs (Rec.RefsDigest), so
	// it looked at neither the mirror nor the disk first.
	Known bool
	Hook  HookState // its push webhooks
	// AskedBy is how the repo counted as hooked when the hook whose fetch is pending
	// came, if it may have been (Hooking.Maybe): that fetch counts for that level.
	AskedBy Hooking
	AskedAt time.Time // the latest ask (FetchNow); zero once a sync request matched it
	// PreemptedAt is when the poll a hook pre-empted was due (dueAt), while the fetch
	// the hook asked for is pending; zero when the repo's polls were not scored.
	PreemptedAt time.Time
	StartedAt   time.Time // when the latest fetch began
	LastWritten time.Time // when this worker last wrote the repo's record
	Unwritten   bool      // a report that should have landed did not: the next fetch writes
	// What its last first mirror and its last update came to need in memory.
	MemClone, MemUpdate int64
}

// Held reports whether the worker holds the repo (its fetch may still run after a
// move: that repo is not held).
func (r *RepoState) Held() bool { return r.Phase == Queued || r.Phase == Fetching }

// Knows reports whether the worker holds the repo at the owner epoch epoch or a later
// one: an outbox entry that assigns it at epoch is old news, and its record need not
// be read.
func (r *RepoState) Knows(epoch int64) bool { return r.Held() && r.Rec.OwnerEpoch >= epoch }

// Budgeted reports whether the fetch the repo's turn would start now is a poll the poll
// budget counts: not a first clone (no fetch has succeeded yet), not asked for.
func (r *RepoState) Budgeted() bool {
	return r.Phase == Queued && r.Pending == ByTurn && !r.Rec.LastSuccessAt.IsZero()
}

// Stretch is the factor on the repo's next poll step (PollStretch, the report's
// poll_stretch): FeedStretch while a feed covers it, StretchForLoss of its host's hook
// loss while it counts as hooked, by its own hooks or its owner's
// (HookState.HookedBy), StretchForLoss of the share its host's hooks missed of the
// repos at its level while it may be hooked (HookLoss.Missed), else 1.
func (r *RepoState) Stretch(v View) float64 {
	if v.FeedCovered {
		return FeedStretch
	}
	switch by := r.Hook.HookedBy(v.Owner, v.Now); {
	case by == HookedOwn || by == HookedOwner:
		return StretchForLoss(v.HookLoss.Share())
	case by.Maybe():
		return StretchForLoss(v.HookLoss.Missed(by))
	}
	return 1
}

// scored is whether the repo's polls are scored (priority.Scores): not while a signal
// covers it, whose quiet is the signal's doing. A repo that may be hooked is: it has
// shown no push since it was last known hooked, if ever, so its quiet is its own.
func (r *RepoState) scored(v View) bool {
	if v.FeedCovered {
		return false
	}
	by := r.Hook.HookedBy(v.Owner, v.Now)
	return by != HookedOwn && by != HookedOwner
}

// View is what the step reads of the worker besides the repo.
type View struct {
	Now         time.Time
	Worker      string          // the worker's id (the disk guard's message names it)
	Prior       *priority.Prior // what the worker learned of its repos' change rates
	Front       float64         // the queue's front (Queue.Min)
	FeedCovered bool            // a forge's change feed lists the repo
	Owner       *OwnerHooks     // its owner's hooks; nil: none within HookMemory
	HookLoss    HookLoss        // what its host's hooks announced and missed
}

// Event is something that happened to a repo: one of the types below.
type Event interface{ event() }

// MovedIn: the repo is assigned to the worker (an outbox entry or the owner index),
// with its record and the priority the assignment gives (at or below the queue's front:
// next in line).
type MovedIn struct {
	Rec  store.Repo
	Prio float64
}

// MovedOut: the repo is no longer the worker's (moved, deleted, or the worker rejoined).
type MovedOut struct{}

// Asked: a fetch is asked for at once (FetchNow): a push webhook, a feed's listing or a
// user's sync.
type Asked struct{ By Ask }

// SyncRequested: the durable sync request reached the worker through its outbox, with
// the owner epoch it carries.
type SyncRequested struct{ Epoch int64 }

// PollDue: the queue gave the repo its turn (or its ask) at priority Prio, and its host
// admitted a fetch.
type PollDue struct{ Prio float64 }

// Checked: the fetch's first look, whether a mirror exists and the disk's usage
// (DiskTotal 0: not measured, or a file system with no size of its own: DiskShare).
// After a PollDue that said Known, the shell looks at nothing and sends it empty.
type Checked struct {
	Cloned              bool
	DiskUsed, DiskTotal int64
}

// Admitting: a sync that began knowing the mirror's refs found that it will write (the
// upstream's refs differ), and the disk's usage now (fetch.Target.Admit).
type Admitting struct{ DiskUsed, DiskTotal int64 }

// MemoryAdmitted: the memory the fetch reserved was granted.
type MemoryAdmitted struct{}

// MemoryRefused: the fetch stopped waiting for memory (the worker is stopping).
type MemoryRefused struct{ Err error }

// Fetched: the sync ended, changed or unchanged (Res), or failed (Err, of a fetch.Kind).
// Need is what it came to need in memory (0: not measured).
type Fetched struct {
	Res  fetch.Result
	Err  error
	Need int64
}

// Written: the report of the fetch at At landed in the store, or did not.
type Written struct {
	At     time.Time
	Landed bool
}

func (MovedIn) event()        {}
func (MovedOut) event()       {}
func (Asked) event()          {}
func (SyncRequested) event()  {}
func (PollDue) event()        {}
func (Checked) event()        {}
func (Admitting) event()      {}
func (MemoryAdmitted) event() {}
func (MemoryRefused) event()  {}
func (Fetched) event()        {}
func (Written) event()        {}

// Actions is what the worker does after a step. The zero value: nothing.
type Actions struct {
	Taken bool // Asked: the ask is the worker's to answer (it holds the repo)

	Fetch bool // PollDue: start the fetch
	Poll  bool // PollDue: the fetch is a poll, which the poll budget counts
	// Known (PollDue): the worker knows the mirror's refs, so the fetch looks at
	// neither the mirror nor the disk first (an empty Checked), and a poll that finds
	// the same refs touches no file (DESIGN invariant 13).
	Known    bool
	MaxBytes int64      // Checked, Admitting: the most the fetch may add to the disk (0: no bound)
	Admit    *MemoryAsk // Checked: reserve memory, then MemoryAdmitted or MemoryRefused
	Sync     bool       // run the sync now
	// GuardWrite (Checked): the disk guard waits until the sync knows it writes: the
	// sync asks (fetch.Target.Admit) and Admitting answers.
	GuardWrite bool
	Refuse     error  // Admitting: the sync may not write (the disk is full); it fails with this
	HandBack   string // hand the repo back to the coordinator, for this reason
	EndFetch   bool   // the fetch is over: its slot and its host's are free

	// PauseHost: the host asked every fetch of it to wait (429/503), RetryAfter if it
	// said how long.
	PauseHost  bool
	RetryAfter time.Duration

	Queue    Queueing  // where the repo goes in the queue
	Write    bool      // write the repo's report (RepoState.Report) to the store
	Learn    bool      // the worker's hazard scores learn from Learning
	Learning Learning  //
	Beat     bool      // heartbeat now: an asked fetch wrote nothing the API would show
	Found    HookFind  // what the fetch tells of its host's hooks
	Maybe    MaybeFind // what it tells of the level the repo may have been hooked at
	// OwnerFound: a poll found a push of a repo none of whose owner's repos was hooked
	// (OwnerHooks.FoundAt).
	OwnerFound bool

	Changed, Failed bool  // counters
	Warn            error // the fetch failed: log it
	Maintain        bool  // the pack count calls for maintenance now
	Corrupt         bool  // the mirror is corrupt: maintenance checks it, re-cloning if need be
	Packs           int   // the pack count the fetch left (0: not reported)

	Forget bool // drop the repo's state
}

// MemoryAsk is a fetch's memory reservation (membudget.Pool.Admit).
type MemoryAsk struct{ Start, Base, PerObject int64 }

// Learning is a poll the worker's change-rate scores learn from
// (priority.Scores.AddWith), with what the repo's stats showed before it.
type Learning struct {
	Evidence priority.Evidence
	Poll     priority.Poll
}

// QueueOp is what happens to a repo's place in the queue.
type QueueOp uint8

const (
	QueueKeep  QueueOp = iota // nothing
	QueueAt                   // at Prio, not before NotBefore
	QueueFront                // next in line, out of its host's parking (Queue.PushFront)
	QueueNew                  // a repo with no mirror yet (Queue.PushNew, Step)
	QueueOut                  // out of the queue and off its host
)

// Queueing is a repo's next place in the queue.
type Queueing struct {
	Op        QueueOp
	Prio      float64
	NotBefore time.Time
	Step      float64
}

// AskCovers is how long after an ask (FetchNow) the durable sync request that goes with
// it (store.RequestSync, carried by the coordinator through the outbox) is taken as
// answered by a fetch that started after the ask. The outbox delivers it within a tick
// and a heartbeat; past this, the request is honoured again.
const AskCovers = 5 * time.Minute

// Step moves r to its state after e and returns what the worker is to do. It changes
// nothing but r (cfg is read only). The steps of a fetch, a poll's every step, fill in
// its result, zero, in place: Actions is large, and copies of it are a good share of a
// poll's cost.
func Step(cfg *Config, v View, r *RepoState, e Event) (a Actions) {
	switch e := e.(type) {
	case MovedIn:
		return movedIn(cfg, v, r, e)
	case MovedOut:
		return movedOut(r)
	case Asked:
		return asked(v, r, e.By)
	case SyncRequested:
		return syncRequested(v, r, e.Epoch)
	case PollDue:
		pollDue(v, r, e.Prio, &a)
		return a
	case Checked:
		checked(cfg, v, r, e, &a)
		return a
	case Admitting:
		return admitting(cfg, v, r, e)
	case MemoryAdmitted:
		return Actions{Sync: r.Phase == Fetching || r.Phase == Leaving}
	case MemoryRefused:
		// Nothing was fetched: the repo's turn comes again, as when its lock is busy.
		fetched(cfg, v, r, Fetched{Err: fetch.Errorf(fetch.KindBusy, "waiting for memory: %v", e.Err)}, &a)
		return a
	case Fetched:
		fetched(cfg, v, r, e, &a)
		return a
	case Written:
		if r.Phase != NotHeld {
			r.Unwritten = !e.Landed
			if e.Landed {
				r.LastWritten = e.At
			}
		}
		return Actions{}
	}
	panic("worker: unknown event")
}

// movedIn holds a repo assigned to the worker. One held already only takes the new
// epoch. A new one is queued by its priority: at the front when it is at or below the
// queue's (orphans, new repos), spread over a clone step when it has no mirror yet
// (Queue.PushNew). One moved back in while the fetch of its move out still runs is
// held afresh, and that fetch queues it when it ends.
func movedIn(cfg *Config, v View, r *RepoState, e MovedIn) Actions {
	switch r.Phase {
	case Queued, Fetching:
		r.Rec.OwnerEpoch = e.Rec.OwnerEpoch
		return Actions{}
	case Leaving:
		*r = RepoState{Rec: e.Rec, Phase: Fetching, LastWritten: e.Rec.LastFetchAt, Prio: r.Prio, Answering: r.Answering,
			Cloned: r.Cloned, Known: r.Known, StartedAt: r.StartedAt, MemClone: r.MemClone, MemUpdate: r.MemUpdate}
		return Actions{}
	}
	*r = RepoState{Rec: e.Rec, Phase: Queued, LastWritten: e.Rec.LastFetchAt}
	var q Queueing
	switch {
	case e.Prio <= v.Front && e.Rec.LastSuccessAt.IsZero():
		q = Queueing{Op: QueueNew, Step: CloneStep(cfg.Policy, v.Prior)}
	case e.Prio <= v.Front:
		q = Queueing{Op: QueueFront}
	default:
		q = Queueing{Op: QueueAt, Prio: e.Prio}
	}
	return Actions{Queue: q}
}

// movedOut lets a repo go: at once when it waits, when its fetch ends when one runs.
func movedOut(r *RepoState) Actions {
	switch r.Phase {
	case Queued:
		*r = RepoState{}
		return Actions{Queue: Queueing{Op: QueueOut}, Forget: true}
	case Fetching:
		r.Phase, r.Pending = Leaving, ByTurn
		return Actions{Queue: Queueing{Op: QueueOut}}
	}
	return Actions{}
}

// asked takes an ask for a fetch at once: the repo goes to the front of the queue, or,
// while a fetch of it runs (which may have started before the push), one more follows
// it. A hook records that the repo's forge sends webhooks, which stretches its polls.
func asked(v View, r *RepoState, by Ask) Actions {
	if !r.Held() {
		return Actions{}
	}
	r.AskedAt = v.Now
	want := ByAsk
	if by.hook() {
		if r.Pending == ByTurn {
			r.PreemptedAt = r.dueAt(v)
		}
		if by := r.Hook.HookedBy(v.Owner, v.Now); by.Maybe() {
			r.AskedBy = by
		}
		r.Hook, want = HookState{At: v.Now}, ByHook
	}
	a := ask(r, want)
	a.Taken = true
	return a
}

// dueAt is when the queue would have polled the repo, had no ask come, if its polls
// are scored (zero if not, or if it cannot tell): its last poll was taken at the
// front's priority Prio and queued at Rec.Priority, and the front has moved since at
// the pace it kept from that poll to now.
func (r *RepoState) dueAt(v View) time.Time {
	if r.Phase != Queued || !r.scored(v) || r.StartedAt.IsZero() || r.Rec.LastSuccessAt.IsZero() {
		return time.Time{}
	}
	moved, left := v.Front-r.Prio, r.Rec.Priority-v.Front
	if moved <= 0 || math.IsInf(left, 0) || math.IsNaN(left) {
		return time.Time{}
	}
	return v.Now.Add(time.Duration(float64(v.Now.Sub(r.StartedAt)) * max(left, 0) / moved))
}

func ask(r *RepoState, want Want) Actions {
	r.Pending = max(r.Pending, want)
	if r.Phase == Queued {
		return Actions{Queue: Queueing{Op: QueueFront}}
	}
	return Actions{}
}

// syncRequested takes the durable sync request. The ask that went with it (the API
// also asks the owner at once) is answered by a fetch that started at or after the
// ask, within AskCovers: such a request fetches nothing more.
func syncRequested(v View, r *RepoState, epoch int64) Actions {
	if !r.Held() {
		return Actions{}
	}
	r.Rec.OwnerEpoch = epoch
	answered := !r.AskedAt.IsZero() && !r.StartedAt.Before(r.AskedAt) && v.Now.Sub(r.AskedAt) <= AskCovers
	r.AskedAt = time.Time{}
	if answered {
		return Actions{}
	}
	return ask(r, ByAsk)
}

// pollDue starts the fetch of a repo the queue gave its turn: what was pending is what
// the fetch answers. A repo whose mirror's refs the worker knows (its RefsDigest, from
// its last sync or the store) is mirrored: its fetch needs no first look. Its actions
// go in a, zero.
func pollDue(v View, r *RepoState, prio float64, a *Actions) {
	if r.Phase != Queued {
		return // a queue entry of a repo no longer waiting
	}
	r.Known = r.Rec.RefsDigest != ""
	a.Fetch, a.Poll, a.Known = true, r.Budgeted(), r.Known
	r.Phase, r.Prio, r.Answering, r.Pending, r.StartedAt = Fetching, prio, r.Pending, ByTurn, v.Now
}

// checked is the disk guard, run before every fetch that writes, not only before a
// clone: above DiskThreshold an uncloned repo is handed back (another worker may have
// room) and a mirrored one is not fetched (a disk_full error on the repo, no failure
// counted); below it, the fetch may add at most its share of the room left under the
// threshold (the room divided by the fetchers, which may all be filling it at once).
// A fetch that began knowing the mirror's refs leaves the guard to Admitting, once the
// sync knows it writes: a no-change poll is none of its business. Then the fetch
// reserves what it is expected to need in memory (ADR 26): membudget.Start from the
// mirror's size and what its last fetch of the same kind came to need. Its actions go
// in a, zero.
func checked(cfg *Config, v View, r *RepoState, e Checked, a *Actions) {
	if r.Known {
		r.Cloned, a.GuardWrite = true, true
	} else {
		r.Cloned = e.Cloned
		share, full := diskGuard(cfg, v, e.DiskUsed, e.DiskTotal)
		if full != "" {
			if !e.Cloned {
				*r = RepoState{}
				*a = Actions{HandBack: full, EndFetch: true, Forget: true}
				return
			}
			fetched(cfg, v, r, Fetched{Err: fetch.Errorf(fetch.KindDiskFull, "%s: fetch skipped", full)}, a)
			return
		}
		a.MaxBytes = share
	}
	if cfg.Memory == nil {
		a.Sync = true
		return
	}
	size, prev, per := int64(0), r.MemClone, int64(membudget.PerObject) // a first mirror's pack is indexed from disk
	if r.Cloned {
		size, prev, per = r.Rec.SizeBytes, r.MemUpdate, membudget.PerObjectUpdate
	}
	a.Admit = &MemoryAsk{Start: membudget.Start(size, prev), Base: membudget.Start(size, 0), PerObject: per}
}

// admitting is the disk guard of a sync that began knowing the mirror's refs, asked
// once it knows it writes: the share of the room it may add, or its refusal, which the
// sync returns and Fetched takes as a skipped fetch (disk_full, no failure counted).
func admitting(cfg *Config, v View, r *RepoState, e Admitting) Actions {
	if r.Phase != Fetching && r.Phase != Leaving {
		return Actions{}
	}
	share, full := diskGuard(cfg, v, e.DiskUsed, e.DiskTotal)
	if full != "" {
		return Actions{Refuse: fetch.Errorf(fetch.KindDiskFull, "%s: fetch skipped", full)}
	}
	return Actions{MaxBytes: share}
}

// diskGuard is DiskShare for a fetch at the disk's usage: the bytes it may add (0: no
// bound), or why it may add none ("" when it may).
func diskGuard(cfg *Config, v View, used, total int64) (int64, string) {
	share, ok := DiskShare(used, total, cfg.DiskThreshold, cfg.Fetchers)
	if !ok {
		return 0, fmt.Sprintf("disk %.0f%% full on %s (threshold %.0f%%)", 100*float64(used)/float64(total), v.Worker, 100*cfg.DiskThreshold)
	}
	return share, ""
}

// fetched ends a fetch: what it found (fetchOutcome), what it tells of the host's hooks,
// whether the hazard scores learn from it, where the repo goes next, and whether the
// store hears of it.
//
// The order is the decision. Whether the poll is scored is decided on what the repo
// was when polled, before the hook accounting: a covered repo's poll that finds a push
// its hook missed unhooks the repo, and is no sample of its silences either. Its next
// step is stretched by what the repo is after it. Its actions go in a, zero.
func fetched(cfg *Config, v View, r *RepoState, e Fetched, a *Actions) {
	a.EndFetch = true
	kind := kindOf(e.Err)
	if kind == fetch.KindRateLimited {
		a.PauseHost, a.RetryAfter = true, fetch.RetryAfterOf(e.Err) // the whole host, not just this repo
	}
	if r.Phase != Fetching {
		*r, a.Forget = RepoState{}, true // moved out while it ran: the next owner goes on
		return
	}
	if e.Need > 0 {
		if r.Cloned {
			r.MemUpdate = e.Need
		} else {
			r.MemClone = e.Need
		}
	}
	busy := kind == fetch.KindBusy
	asked := r.Answering != ByTurn
	scored := !asked && r.scored(v)
	hookAsked := r.Answering == ByHook
	var hookedBefore Hooking // how it counted before the hook this fetch answers
	if hookAsked {
		hookedBefore, r.AskedBy = r.AskedBy, NotHooked
	}
	if by := r.Hook.HookedBy(v.Owner, v.Now); by != NotHooked && e.Err == nil && r.Cloned && e.Res.Changed {
		a.Found = r.Hook.Fetched(by, hookAsked)
		switch {
		case hookAsked && hookedBefore.Maybe():
			a.Maybe = MaybeFind{Level: hookedBefore, Announced: true}
		case !hookAsked && by.Maybe():
			a.Maybe = MaybeFind{Level: by}
			a.OwnerFound = by == MaybeUnknown
		}
	}
	// A hook's fetch of a repo whose polls are scored pre-empted the poll that would
	// have found its push: that poll is scored, over the time up to when it was due.
	// The ask, not the push, chose when it was due, so the score is not biased by the
	// push (a score at the hook's time would be).
	preempted := r.PreemptedAt
	r.PreemptedAt = time.Time{}
	if !hookAsked || e.Err != nil || !e.Res.Changed || !r.Cloned {
		preempted = time.Time{}
	}
	learns := scored || !preempted.IsZero()
	var before priority.Evidence // what the poll's score reads, read before the fold
	if learns {
		before = r.Rec.Stats.Evidence()
	}
	o := fetchOutcome(cfg, v.Prior, &fetchFacts{Now: v.Now, OldPrio: r.Prio, WasCloned: r.Cloned,
		Res: e.Res, Err: e.Err, Unwritten: r.Unwritten, LastWritten: r.LastWritten, Stretch: r.Stretch(v)}, &r.Rec)
	if o.Polled && !o.Poll.Prev.IsZero() && learns { // a first clone samples no interval
		a.Learn, a.Learning.Evidence, a.Learning.Poll = true, before, o.Poll
		if !preempted.IsZero() {
			a.Learning.Poll = priority.Poll{Prev: o.Poll.Prev, Now: maxTime(preempted, v.Now), Changed: true}
		}
	}
	a.Changed, a.Failed, a.Maintain, a.Corrupt, a.Packs = o.Changed, o.Failed, o.Maintain, o.Corrupt, o.Packs
	if e.Err != nil && !busy {
		a.Warn = e.Err
	}
	a.Write = o.Write
	switch {
	case busy:
		// Nothing was fetched (another process holds the mirror's lock): what asked
		// for the fetch is still to be answered, first in line once the lock may be free.
		r.Pending = max(r.Pending, r.Answering)
		a.Queue = Queueing{Op: QueueAt, Prio: r.Rec.Priority, NotBefore: o.NotBefore}
		if r.Pending != ByTurn {
			a.Queue.Prio = v.Front
		}
	case r.Pending != ByTurn:
		a.Queue = Queueing{Op: QueueFront} // asked for while it ran: fetch again, now
	default:
		a.Queue = Queueing{Op: QueueAt, Prio: r.Rec.Priority, NotBefore: o.NotBefore}
	}
	// An asked-for fetch that writes nothing shows in the next heartbeat's checks: beat
	// now, so the API shows the poll at once (one beat per ask, not per poll).
	a.Beat = asked && !busy && !o.Write
	r.Phase, r.Answering = Queued, ByTurn
}

// fetchFacts is what a fetch's outcome is decided from, besides the record.
type fetchFacts struct {
	Now       time.Time
	OldPrio   float64 // the priority it was popped at
	WasCloned bool    // a mirror existed before the fetch
	Res       fetch.Result
	Err       error
	// Unwritten: an earlier report did not land, so this one is written whatever it
	// says. LastWritten is when the worker last wrote the record.
	Unwritten   bool
	LastWritten time.Time
	// Stretch multiplies the next poll's step after a success (RepoState.Stretch: a
	// repo whose pushes a hook or a feed announces is polled as a fall-back); 0 or 1:
	// none.
	Stretch float64
}

// outcome is what a fetch's result means for the repo, besides its record.
type outcome struct {
	NotBefore time.Time // the repo is not fetched again before this
	Write     bool      // the record is worth a store write (invariant 6)
	// Poll is the successful poll the policy folded into the stats (Polled; not after a
	// failure): the worker's change-rate scores learn from it too.
	Poll     priority.Poll
	Polled   bool
	Changed  bool // a successful fetch that brought something
	Failed   bool // counted as the repo's failure
	Maintain bool // the pack count calls for maintenance now
	Corrupt  bool // the mirror is corrupt: maintenance checks it and re-clones if need be
	Packs    int  // the pack count the fetch left, when it reported one
}

// fetchOutcome takes the repo's record rec, as the worker knew it before the fetch, to
// its state after it: failure counts and back-off, its next priority (rec.Priority) and
// earliest poll, and whether the store hears of it. The record is changed in place, and
// the little read of it as it was is kept aside: copies of a record are a large share
// of a poll's cost.
func fetchOutcome(cfg *Config, prior *priority.Prior, f *fetchFacts, rec *store.Repo) outcome {
	now, ferr := f.Now, f.Err
	kind := kindOf(ferr)
	prev := struct {
		LastSuccessAt, LastCommitAt time.Time
		State                       store.RepoState
		LastError                   string
	}{rec.LastSuccessAt, rec.LastCommitAt, rec.State, rec.LastError}
	o := outcome{Write: f.Unwritten, NotBefore: now.Add(max(cfg.MinInterval, 0))}
	res := &f.Res
	switch {
	case ferr == nil:
		// The poll covers the time since the last success (failed polls in between are
		// part of it); a first clone brings the history instead.
		o.Poll, o.Polled = priority.Poll{Now: now, Changed: res.Changed, Commits: commitTimes(res.Commits)}, true
		poll := &o.Poll // built in place: a poll is large
		if f.WasCloned && !res.Cloned && !prev.LastSuccessAt.IsZero() {
			poll.Prev = prev.LastSuccessAt
		} else {
			poll.Since, poll.FromRoot, poll.LastCommitAt = res.HistorySince, res.HistoryFromRoot, res.LastCommitAt
			if poll.LastCommitAt.IsZero() {
				// Refs unchanged: the mirror read no commit; the record has the time.
				poll.LastCommitAt = prev.LastCommitAt
			}
		}
		fold(cfg.Policy, &rec.Stats, *poll, prior)
		rec.FetchFailCnt, rec.CloneFailCnt, rec.LastError = 0, 0, ""
		rec.LastFetchAt, rec.LastSuccessAt = now, now
		if res.Changed {
			rec.LastChangeAt = now
			o.Changed = true
		}
		if !res.LastCommitAt.IsZero() {
			rec.LastCommitAt = res.LastCommitAt
		}
		if res.SizeBytes > 0 || res.Changed {
			rec.SizeBytes = res.SizeBytes // else the poll touched no file: the size stands
		}
		if res.RefsDigest != "" {
			// In memory at once; in the store with the next report written anyway (a
			// change always writes one), never a write of its own (invariant 6).
			rec.RefsDigest = res.RefsDigest
		}
		rec.State = store.RepoOK
		if res.Packs > 0 {
			o.Packs = res.Packs
			o.Maintain = cfg.MaintainPacks > 0 && res.Packs >= cfg.MaintainPacks
		}
		o.Write = o.Write || res.Cloned || res.Changed || prev.State != store.RepoOK || prev.LastError != "" ||
			now.Sub(f.LastWritten) >= cfg.Checkpoint
	case kind == fetch.KindDiskFull:
		// Not the repo's fault: no failure is counted. The record says why the mirror is
		// not being refreshed (written once, not at every skipped poll).
		rec.LastError = ferr.Error()
		o.Write = prev.LastError != rec.LastError
		o.NotBefore = now.Add(max(cfg.MinInterval, cfg.BusyRetry))
	case kind == fetch.KindBusy:
		// Someone else is fetching it (its previous owner, just after a move): nothing to
		// record; look again soon, but no later than a normal poll would.
		o.NotBefore = now.Add(min(cfg.BusyRetry, max(cfg.MinInterval, time.Second)))
	default:
		o.Failed = true
		rec.LastFetchAt = now
		rec.LastError = ferr.Error()
		fails := 0
		if f.WasCloned {
			rec.FetchFailCnt++
			fails = rec.FetchFailCnt
		} else {
			rec.CloneFailCnt++
			fails = rec.CloneFailCnt
		}
		backoff := min(time.Duration(float64(cfg.BackoffBase)*math.Pow(2, float64(fails-1))), cfg.BackoffMax)
		if kind == fetch.KindCorrupt && f.WasCloned {
			o.Corrupt, o.Maintain = true, true // checked, and re-cloned if need be, by maintenance
		}
		if kind == fetch.KindCorrupt || kind == fetch.KindConflict {
			// The mirror is not what its refs' digest says (missing, damaged, another
			// repo's): the next fetch reads it as it is, and clones it if it is gone.
			rec.RefsDigest = ""
		}
		switch {
		case kind == fetch.KindNotFound:
			rec.State = store.RepoGone // the mirror is kept; checked again on the cooldown
			backoff = cfg.FailCooldown
		case fails >= cfg.FailAfter:
			rec.State = store.RepoFailing
			backoff = cfg.FailCooldown
		case !f.WasCloned:
			// No mirror yet: the repo is not mirrored at all, which its state says at
			// once (with the error); retries keep their back-off.
			rec.State = store.RepoFailing
		}
		if ra := fetch.RetryAfterOf(ferr); ra > backoff {
			backoff = ra
		}
		o.NotBefore = now.Add(max(backoff, cfg.MinInterval, 0))
		o.Write = true
	}
	cloned := f.WasCloned || (ferr == nil)
	rec.Priority = cfg.Policy.Next(priority.Input{Old: f.OldPrio, Cloned: cloned, CloneFailCnt: rec.CloneFailCnt,
		FetchFailCnt: rec.FetchFailCnt, LastCommitAt: rec.LastCommitAt, Changed: ferr == nil && res.Changed,
		Stats: rec.Stats, Prior: prior, Now: now})
	rec.PollStretch = 0
	if ferr == nil && f.Stretch > 1 && rec.Priority > f.OldPrio {
		rec.Priority = f.OldPrio + (rec.Priority-f.OldPrio)*f.Stretch
		rec.PollStretch = f.Stretch
	}
	return o
}

// Report is the store's view of the repo's record: what a fetch report writes.
func (r *RepoState) Report() store.FetchReport { return reportOf(&r.Rec) }

func reportOf(rec *store.Repo) store.FetchReport {
	return store.FetchReport{State: rec.State, Priority: rec.Priority, LastFetchAt: rec.LastFetchAt,
		LastSuccessAt: rec.LastSuccessAt, LastChangeAt: rec.LastChangeAt, LastCommitAt: rec.LastCommitAt,
		CloneFailCnt: rec.CloneFailCnt, FetchFailCnt: rec.FetchFailCnt, SizeBytes: rec.SizeBytes, LastError: rec.LastError,
		Stats: rec.Stats, PollStretch: rec.PollStretch, RefsDigest: rec.RefsDigest}
}

// kindOf is fetch.KindOf, "" for no error (and no allocation: a poll's error is nil).
func kindOf(err error) fetch.Kind {
	if err == nil {
		return ""
	}
	return fetch.KindOf(err)
}

// commitTimes are the times the policy reads from the commits a sync brought.
func commitTimes(cs []fetch.Commit) []time.Time {
	out := make([]time.Time, len(cs))
	for i, c := range cs {
		out[i] = c.Time()
	}
	return out
}

// fold adds a poll to a repo's stats, with the belief the policy reads (priority.Fold)
// or, for a policy that reads none, without it (priority.FoldEvidence): filtering a
// belief nobody reads would be paid at every poll. A policy that reads no stats at all
// (statsReader) gets none.
func fold(p priority.Policy, s *priority.Stats, poll priority.Poll, prior *priority.Prior) {
	if r, ok := p.(statsReader); ok && !r.ReadsStats() {
		return
	}
	if r, ok := p.(priority.BeliefReader); ok && r.ReadsBelief() {
		s.Fold(poll, prior)
	} else {
		s.FoldEvidence(poll, prior)
	}
}

// statsReader is a policy that may read nothing of a repo's stats
// (priority.Input.Stats): the freshness simulation's references, which know the
// upstream's pushes. Every policy a worker runs reads them.
type statsReader interface {
	ReadsStats() bool
}

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
