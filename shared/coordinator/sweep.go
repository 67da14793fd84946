// Anti-entropy (invariant 12): a pass over every worker's repos, a slice a tick, that
// moves the repos the ring gives to another. Scans move what a membership change moves,
// but they read an index that may lag (DynamoDB GSIs): a repo missing from a scan's read
// would otherwise stay with its old owner for good. The sweep finds it within a period.

package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// sweepPace is the share of SweepPeriod a pass aims to take: the rest is a margin for
// ticks that had no reads left over, and for a fleet that grows during the pass.
const sweepPace = 0.75

// sweepSlice is the fewest repos a paced sweep reads at once: a small fleet is swept in
// a few slices over the period, not a repo a tick.
const sweepSlice = 100

// SweepQuota is how many repos the sweep reads this tick: what keeps a pass of sw.Size
// repos on course to finish within pace × period of its start, in slices of at least
// sweepSlice (0: nothing this tick). A pass past its course (the fleet grew) reads
// at least late a tick until it ends.
func SweepQuota(sw store.Sweep, now time.Time, period time.Duration, late int) int {
	if period <= 0 {
		return late
	}
	frac := min(max(now.Sub(sw.PassStart).Seconds(), 0)/(sweepPace*period.Seconds()), 1)
	due := int64(float64(sw.Size)*frac) - sw.Read
	if frac >= 1 {
		due = max(due, int64(late))
	}
	if due < max(min(sweepSlice, sw.Size), 1) {
		return 0
	}
	return int(due)
}

// nextOwner is the first of owners (sorted) after cur; "" once none is.
func nextOwner(owners []string, cur string) string {
	i, found := slices.BinarySearch(owners, cur)
	if found {
		i++
	}
	if i < len(owners) {
		return owners[i]
	}
	return ""
}

// sweepOwners are the ids of every worker record, sorted: every repo with an owner has
// one (a worker record is removed only once it owns nothing).
func sweepOwners(workers []store.Worker) []string {
	ids := make([]string, 0, len(workers))
	for _, w := range workers {
		ids = append(ids, w.ID)
	}
	slices.SortFunc(ids, strings.Compare)
	return ids
}

// SweepBehind reports whether a pass has run past its course (pace × period since it
// began): from then on no tick leaves its slice for later.
func SweepBehind(sw store.Sweep, now time.Time, period time.Duration) bool {
	return period <= 0 || !now.Before(sw.PassStart.Add(time.Duration(sweepPace*float64(period))))
}

// sweep reads the next slice of the pass and moves what the ring gives to another
// member, then records where it stopped. It runs after the tick's other repo work, with
// what the tick's budget leaves, so scans and pending repos never wait for it. A tick
// that worked a membership change's scans (moving) leaves its slice to the next tick
// while the pass is on course: the change's tick then reads what it moves, not the pace
// a gap between ticks (a grace, a coordinator restart) let build up, and the slice is
// read a tick later, the pass's end unmoved. Once the pass is behind it reads in every
// tick, so a fleet that changes at every tick is still swept within the period.
func (t *tickRun) sweep(p *Planner, workers []store.Worker, now time.Time, moving bool) error {
	if !p.Assigning() || t.b.spent() {
		return nil
	}
	sw, err := t.c.sweepState(t.ctx, t.term)
	if err != nil {
		return err
	}
	version := sw.Version
	if sw.PassStart.IsZero() {
		// A new pass: its pace is set from the repos there are now.
		counts, err := t.c.Store.CountRepos(t.ctx)
		if err != nil {
			return fmt.Errorf("count repos: %w", err)
		}
		total := int64(0)
		for _, n := range counts {
			total += int64(n)
		}
		sw.PassStart, sw.Size, sw.Read = now, max(total, sw.LastPass), 0
	}
	quota := SweepQuota(sw, now, t.cfg.SweepPeriod, t.cfg.ReadPage)
	if quota <= 0 || moving && !SweepBehind(sw, now, t.cfg.SweepPeriod) {
		t.c.sweep.sw = sw // a pass begun is kept (unwritten) until it first reads
		return nil
	}
	owners := sweepOwners(workers)
	if sw.Owner == "" {
		sw.Owner, sw.Cursor = nextOwner(owners, ""), ""
	}
	read := 0
	for sw.Owner != "" && read < quota && !t.b.spent() {
		limit := min(t.b.page(), quota-read)
		page, next, err := t.c.Store.ListReposByOwner(t.ctx, sw.Owner, sw.Cursor, limit)
		if err != nil {
			return fmt.Errorf("sweep repos of %s: %w", sw.Owner, err)
		}
		t.b.reads += len(page)
		t.rep.SweepRead += len(page)
		read += len(page)
		for _, r := range page {
			if t.b.late() {
				break
			}
			a, ok := p.Decide(r)
			if !ok {
				continue
			}
			if a.Assign != nil && a.Assign.Owner != r.Owner {
				t.rep.SweepFound++
			}
			if err := t.ap.add(t.ctx, a); err != nil {
				return err
			}
		}
		if t.b.cut == "deadline" {
			break // the page is read again next time: what moved has left it
		}
		if next != "" {
			sw.Cursor = next
			continue
		}
		sw.Owner, sw.Cursor = nextOwner(owners, sw.Owner), ""
	}
	if err := t.ap.flush(t.ctx); err != nil {
		return err
	}
	sw.Read += int64(read)
	sw.Found += int64(t.rep.SweepFound)
	sw.TickAt = now
	if sw.Owner == "" { // the pass is complete: the next one starts with the next tick
		sw.LastPass, sw.Read, sw.Passes, sw.PassStart, sw.Size = sw.Read, 0, sw.Passes+1, time.Time{}, 0
		t.rep.SweepPasses++
	}
	t.rep.SweepWrites++
	t.c.sweep = sweepCache{}
	if err := t.c.Store.Apply(t.ctx, t.term, []store.Mutation{store.PutSweep{Sweep: sw, ExpectVersion: version}}); err != nil {
		return fmt.Errorf("write sweep: %w", err)
	}
	sw.Version = version + 1
	t.c.sweep = sweepCache{ok: true, term: t.term, sw: sw}
	return nil
}

// sweepCache is the sweep record as this coordinator last wrote it under term: only the
// leader writes it, so while the term holds the store has what the cache has.
type sweepCache struct {
	ok   bool
	term int64
	sw   store.Sweep
}

func (c *Coordinator) sweepState(ctx context.Context, term int64) (store.Sweep, error) {
	if c.sweep.ok && c.sweep.term == term {
		return c.sweep.sw, nil
	}
	sw, err := c.Store.GetSweep(ctx)
	if err != nil {
		return store.Sweep{}, fmt.Errorf("read sweep: %w", err)
	}
	c.sweep = sweepCache{ok: true, term: term, sw: sw}
	return sw, nil
}
