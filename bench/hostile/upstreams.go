package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/hostile"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// What each upstream attack does, for the report.
var attackWhat = map[hostile.Attack]string{
	hostile.EndlessRefs:   "a ref advertisement that never ends",
	hostile.EndlessPack:   "an honest pack header, then incompressible blobs without end",
	hostile.Trickle:       "its ref advertisement (and more refs) one byte every 50 ms",
	hostile.LyingCount:    "a pack header claiming 2^31−1 objects (side-band)",
	hostile.LyingCountRaw: "a pack header claiming 2^31−1 objects (no side-band)",
	hostile.LyingSize:     "one object declaring 2^40 bytes, holding a few",
	hostile.Bomb:          "a 4 GiB blob of zeros, about 4 MB compressed",
	hostile.DeltaBomb:     "a delta building 64 GiB from a 1 MiB base",
	hostile.RedirectLoop:  "every request redirected to itself",
	hostile.RateLimited:   "429 with Retry-After: 120 on every request",
}

// upstreams syncs each attack once with the default limits, but for a pack cap of
// 256 MiB (the default 8 GiB would only make the endless pack take longer to cut) and
// a 10 s rate window (the trickle is cut after one).
func upstreams(ctx context.Context) ([]results.HostileAttack, []results.HostileLimit, error) {
	up, err := hostile.Start()
	if err != nil {
		return nil, nil, err
	}
	defer up.Close()
	root, err := os.MkdirTemp("", "hostile-mirrors-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(root)
	lim := mirror.DefaultLimits()
	lim.MaxPackBytes, lim.RateWindow = 256<<20, 10*time.Second
	m, err := mirror.New(mirror.Config{Root: root, Client: urlpolicy.Policy{AllowPrivateHosts: true}.HTTPClient(0), Limits: lim})
	if err != nil {
		return nil, nil, err
	}
	defer m.Close()
	limits := []results.HostileLimit{
		limit("--max-ref-bytes", sizeOf(lim.MaxRefBytes)), limit("--max-refs", fmt.Sprint(lim.MaxRefs)),
		limit("--max-pack-bytes", sizeOf(lim.MaxPackBytes)+" (default 8G)"), limit("--max-pack-objects", fmt.Sprint(lim.MaxPackObjects)),
		limit("--max-object-bytes", sizeOf(lim.MaxObjectBytes)), limit("--min-rate", fmt.Sprintf("%d B/s", lim.MinRate)),
		limit("--rate-window", lim.RateWindow.String()+" (default 2m)"),
	}
	var out []results.HostileAttack
	for _, a := range hostile.Attacks {
		var err error
		secs, heap, rss := measure(func() {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			_, err = m.Sync(sctx, fetch.Target{ID: string(a), URL: up.RepoURL(a)})
		})
		r := results.HostileAttack{Name: string(a), What: attackWhat[a], Seconds: secs, HeapPeakMiB: heap, RSSPeakMiB: rss}
		if err != nil {
			r.Refused, r.Outcome, r.Detail = true, string(fetch.KindOf(err)), cut(err.Error(), 300)
		} else {
			r.Outcome = "synced (not refused)"
		}
		out = append(out, r)
	}
	return out, limits, nil
}

func sizeOf(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	}
	return fmt.Sprint(n)
}
