// Decisions: what a fetch's outcome means for the repo, as pure functions of what the
// worker knew, the fetch's result and the time. Fetching (fetching.go) does the I/O
// around them: the queue, the hosts, the store.

package worker

import (
	"math"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// fetchFacts is what a fetch's outcome is decided from.
type fetchFacts struct {
	Now       time.Time
	Rec       store.Repo // the repo as the worker knew it before the fetch
	OldPrio   float64    // the priority it was popped at
	WasCloned bool       // a mirror existed before the fetch
	Res       fetch.Result
	Err       error
	// Unwritten: an earlier report did not land, so this one is written whatever it
	// says. LastWritten is when the worker last wrote the record.
	Unwritten   bool
	LastWritten time.Time
	// Stretch multiplies the next poll's step after a success (pollStretch: a repo whose
	// pushes a hook or a feed announces is polled as a fall-back); 0 or 1: none.
	Stretch float64
}

// fetchOutcome is what the worker does after a fetch.
type fetchOutcome struct {
	Rec       store.Repo // the record after the fetch (Priority is the next turn's)
	NotBefore time.Time  // the repo is not fetched again before this
	Write     bool       // the record is worth a store write (invariant 6)
	// Poll is the successful poll the policy folded into the stats (nil after a
	// failure): the worker's change-rate scores learn from it too.
	Poll     *priority.Poll
	Changed  bool // a successful fetch that brought something
	Failed   bool // counted as the repo's failure
	Maintain bool // the pack count calls for maintenance now
	Corrupt  bool // the mirror is corrupt: maintenance checks it and re-clones if need be
	Packs    int  // the pack count the fetch left, when it reported one
}

// decideFetch is the pure decision after a fetch: the repo's new state, failure counts
// and back-off, its next priority and earliest poll, and whether the store hears of it.
func decideFetch(cfg Config, prior *priority.Prior, f fetchFacts) fetchOutcome {
	now, ferr := f.Now, f.Err
	kind := fetch.KindOf(ferr)
	prev := f.Rec
	rec := prev
	o := fetchOutcome{Write: f.Unwritten, NotBefore: now.Add(max(cfg.MinInterval, 0))}
	res := f.Res
	switch {
	case ferr == nil:
		// The poll covers the time since the last success (failed polls in between are
		// part of it); a first clone brings the history instead.
		poll := priority.Poll{Now: now, Changed: res.Changed, Commits: commitTimes(res.Commits)}
		if f.WasCloned && !res.Cloned && !prev.LastSuccessAt.IsZero() {
			poll.Prev = prev.LastSuccessAt
		} else {
			poll.Since, poll.FromRoot, poll.LastCommitAt = res.HistorySince, res.HistoryFromRoot, res.LastCommitAt
			if poll.LastCommitAt.IsZero() {
				// Refs unchanged: the mirror read no commit; the record has the time.
				poll.LastCommitAt = prev.LastCommitAt
			}
		}
		o.Poll = &poll
		rec.Stats = priority.Fold(rec.Stats, poll, prior)
		rec.FetchFailCnt, rec.CloneFailCnt, rec.LastError = 0, 0, ""
		rec.LastFetchAt, rec.LastSuccessAt = now, now
		if res.Changed {
			rec.LastChangeAt = now
			o.Changed = true
		}
		if !res.LastCommitAt.IsZero() {
			rec.LastCommitAt = res.LastCommitAt
		}
		rec.SizeBytes = res.SizeBytes
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
	o.Rec = rec
	return o
}

// report is the store's view of an outcome's record.
func (o fetchOutcome) report() store.FetchReport {
	rec := o.Rec
	return store.FetchReport{State: rec.State, Priority: rec.Priority, LastFetchAt: rec.LastFetchAt,
		LastSuccessAt: rec.LastSuccessAt, LastChangeAt: rec.LastChangeAt, LastCommitAt: rec.LastCommitAt,
		CloneFailCnt: rec.CloneFailCnt, FetchFailCnt: rec.FetchFailCnt, SizeBytes: rec.SizeBytes, LastError: rec.LastError,
		Stats: rec.Stats, PollStretch: rec.PollStretch}
}

// commitTimes are the times the policy reads from the commits a sync brought.
func commitTimes(cs []fetch.Commit) []time.Time {
	out := make([]time.Time, len(cs))
	for i, c := range cs {
		out[i] = c.Time()
	}
	return out
}
