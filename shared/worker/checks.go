package worker

import (
	"cmp"
	"slices"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// latestChecks are the k latest polls of repos that their records do not show (a poll
// that found nothing is written only at the checkpoint, invariant 6), newest first: what
// a heartbeat carries so that a reader of the store alone, the API Lambda, shows each
// repo's last check. A repo whose last poll was written needs no entry: its record has
// it. One pass keeping the k newest in order: O(n) for n repos while few polls are new.
func latestChecks(repos map[string]*repoEntry, k int) []store.Check {
	if k <= 0 {
		return nil
	}
	newer := func(a, b store.Check) int { // newest first; ids break ties
		if c := b.At.Compare(a.At); c != 0 {
			return c
		}
		return cmp.Compare(a.RepoID, b.RepoID)
	}
	out := make([]store.Check, 0, k)
	for id, r := range repos {
		if !r.Held() || !r.Rec.LastFetchAt.After(r.LastWritten) {
			continue
		}
		c := store.Check{RepoID: id, At: r.Rec.LastFetchAt}
		if len(out) == k && newer(c, out[k-1]) >= 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(out, c, newer)
		if len(out) == k {
			out = out[:k-1]
		}
		out = slices.Insert(out, i, c)
	}
	return out
}
