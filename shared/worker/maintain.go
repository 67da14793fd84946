package worker

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// Maintainer maintains mirrors (repack, commit-graph, connectivity check; a corrupt
// mirror is re-cloned) under the mirror's lock. A worker whose Mirrorer is also a
// Maintainer maintains the repos it owns (docs/adr/0011-maintenance-in-the-worker.md).
type Maintainer interface {
	Maintain(ctx context.Context, t fetch.Target, req fetch.MaintainRequest) (fetch.Maintenance, error)
}

// maintPhase is where in every interval a repo's maintenance slot starts: a hash of
// its id, so the fleet's repos come due spread evenly over the interval and never
// together, whichever worker owns them.
func maintPhase(id string, every time.Duration) time.Duration {
	return time.Duration(idHash("maintenance/", id) % uint64(every))
}

// idHash is a uniform 64-bit number from a repo id, one per purpose (salt), so that
// what is spread by id (maintenance slots, a bulk add's clones) is spread evenly
// whatever the ids look like.
func idHash(salt, id string) uint64 {
	sum := sha256.Sum256([]byte(salt + id))
	return binary.BigEndian.Uint64(sum[:8])
}

// slotStart is the start of the repo's maintenance slot that contains now: slots are
// every long and begin at phase past a multiple of every.
func slotStart(now time.Time, phase, every time.Duration) time.Time {
	return now.Add(-phase).Truncate(every).Add(phase)
}

// scrubSince is the start of r's current scrub slot: its mirror gets a full run
// (bitmap, connectivity check) at its first maintenance after it, so the fleet's
// scrubs are spread evenly over ScrubEvery by id, like the maintenance slots.
func (c Config) scrubSince(now time.Time, id string) time.Time {
	every := max(c.ScrubEvery, time.Second)
	return slotStart(now, time.Duration(idHash("scrub/", id)%uint64(every)), every)
}

// maintDue says whether r's mirror is due for maintenance at now, and with what
// request. A repo is due once per slot; sooner when its pack count reached the
// threshold (at most once per gap) or a fetch found the mirror corrupt (at once, with
// a full run). Since makes the mirror skip the run if another worker (its previous
// owner) did it already; the mirror itself skips git when nothing changed. A mirror
// whose refs are those its last maintenance saw (nothing fetched into it since) is not
// due at its slot unless a scrub period began since that run: it is as that run left
// it, so not even its fingerprint is read (on EFS every file operation is billed).
func (c Config) maintDue(now time.Time, r *repoEntry) (bool, fetch.MaintainRequest) {
	if r.corrupt {
		return true, fetch.MaintainRequest{Fsck: true}
	}
	scrub := c.scrubSince(now, r.Rec.ID)
	if c.MaintainPacks > 0 && r.packs >= c.MaintainPacks && now.Sub(r.maintAt) >= c.MaintainGap {
		return true, fetch.MaintainRequest{Since: now.Add(-c.MaintainGap), ScrubSince: scrub, ScrubChangedOnly: c.ScrubChangedOnly}
	}
	if s := slotStart(now, r.phase, c.MaintainEvery); s.After(r.maintSlot) {
		if r.maintRefs != "" && r.maintRefs == r.Rec.RefsDigest && !scrub.After(r.maintAt) {
			return false, fetch.MaintainRequest{}
		}
		return true, fetch.MaintainRequest{Since: s, ScrubSince: scrub, ScrubChangedOnly: c.ScrubChangedOnly}
	}
	return false, fetch.MaintainRequest{}
}

// maintJob is one due maintenance.
type maintJob struct {
	target fetch.Target
	req    fetch.MaintainRequest
	slot   time.Time
	refs   string // the repo's refs digest when the job was made
}

// MaintainOnce maintains, one after the other, the owned mirrors that are due, and
// returns how many ran git (skipped and unchanged ones not counted). A mirror busy with a fetch stays
// due for the next call. Nothing runs without a Maintainer or with MaintainEvery < 0.
func (w *Worker) MaintainOnce(ctx context.Context) int {
	if w.maint == nil || w.cfg.MaintainEvery < 0 {
		return 0
	}
	now := w.clock.Now()
	var jobs []maintJob
	w.mu.Lock()
	for id, r := range w.repos {
		if r.Phase != Queued {
			continue
		}
		if due, req := w.cfg.maintDue(now, r); due {
			jobs = append(jobs, maintJob{target: fetch.Target{ID: id, URL: r.Rec.URL}, req: req,
				slot: slotStart(now, r.phase, w.cfg.MaintainEvery), refs: r.Rec.RefsDigest})
		}
	}
	w.mu.Unlock()

	ran := 0
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		res, err := w.maint.Maintain(ctx, j.target, j.req)
		if fetch.KindOf(err) == fetch.KindBusy {
			continue // a fetch holds it: next time
		}
		done := w.clock.Now()
		w.mu.Lock()
		if r, ok := w.repos[j.target.ID]; ok {
			// Handled for this slot either way: a failure is logged and counted, and
			// retried at the next slot, not every minute.
			r.maintSlot, r.maintAt, r.corrupt = j.slot, done, false
			if err == nil && !res.Skipped {
				r.packs = res.PacksAfter
			}
			r.maintRefs = ""
			if err == nil {
				r.maintRefs = j.refs // what the mirror held when it was maintained
			}
		}
		w.mu.Unlock()
		if err != nil {
			w.maintFails.Failed(done, j.target.ID, j.target.URL, hostOf(j.target.URL), string(fetch.KindOf(err)), err)
		} else {
			w.maintFails.Succeeded(done, j.target.ID, j.target.URL, hostOf(j.target.URL))
		}
		switch {
		case err != nil:
			w.stats.maintFailures.Add(1)
		case res.Unchanged:
			w.stats.maintUnchanged.Add(1)
		case !res.Skipped:
			ran++
			w.stats.maintained.Add(1)
			if res.Recloned {
				w.stats.recloned.Add(1)
			}
		}
	}
	return ran
}

// MaxPacks is the largest pack count among the owned mirrors as last seen (after a
// fetch that wrote, or a maintenance): what MirrorPacks reports.
func (w *Worker) MaxPacks() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range w.repos {
		if r.Held() {
			n = max(n, r.packs)
		}
	}
	return n
}

func (w *Worker) pokeMaintenance() {
	select {
	case w.maintWake <- struct{}{}:
	default:
	}
}
