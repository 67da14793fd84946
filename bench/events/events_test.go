package main

import "testing"

// The sync pushes are spread evenly among the hook pushes, as many as asked.
func TestIsSyncSpreadsEvenly(t *testing.T) {
	for _, c := range []struct{ syncs, total int }{{50, 250}, {0, 10}, {10, 10}, {3, 7}} {
		n, last, gap := 0, -1, 0
		for p := range c.total {
			if isSync(p, c.syncs, c.total) {
				if last >= 0 {
					gap = max(gap, p-last)
				}
				n, last = n+1, p
			}
		}
		if n != c.syncs {
			t.Errorf("%d of %d: %d syncs", c.syncs, c.total, n)
		}
		if c.syncs > 0 && gap > (c.total+c.syncs-1)/c.syncs {
			t.Errorf("%d of %d: syncs %d pushes apart", c.syncs, c.total, gap)
		}
	}
}
