package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
)

// localFleet is a local fleet mirroring n repositories that git http-backend serves
// from a temp dir, every one of them mirrored when startFleet returns.
type localFleet struct {
	f      *fleet.Fleet
	srv    *gittest.Server
	served string    // the upstream repositories' directory
	t0     time.Time // the first commit's time; pushes commit later
	urls   []string  // upstream URLs, by index
	ids    []string  // repo ids, by index
	base   string    // the API's base URL
	stops  []func()
}

// startFleet creates n upstream repositories named prefix0000… with commits commits
// each, starts a fleet with cfg (its Data, Listen and Token are filled in), adds them
// through the API and waits until all are mirrored, for at most within.
func startFleet(ctx context.Context, prefix string, n, commits int, cfg fleet.Config, within time.Duration) (lf *localFleet, err error) {
	lf = &localFleet{}
	defer func() {
		if err != nil {
			lf.stop()
		}
	}()
	work, err := os.MkdirTemp("", "bench-events-"+prefix+"-")
	if err != nil {
		return nil, err
	}
	lf.stops = append(lf.stops, func() { os.RemoveAll(work) })
	lf.served = filepath.Join(work, "served")
	if err := os.MkdirAll(lf.served, 0o755); err != nil {
		return nil, err
	}
	srv, stop, err := gittest.Serve(lf.served)
	if err != nil {
		return nil, err
	}
	lf.srv = srv
	lf.stops = append(lf.stops, stop)
	lf.t0 = time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := range n {
		dir := lf.dir(prefix, i)
		if err := git(srv.Home, "", "init", "-q", "--bare", "-b", "main", dir); err != nil {
			return nil, err
		}
		if err := gittest.ImportCommits(srv.Home, dir, gittest.Commits{Branch: "main", N: commits, Start: lf.t0, Step: time.Minute}); err != nil {
			return nil, err
		}
		lf.urls = append(lf.urls, srv.URL+"/"+filepath.Base(dir))
	}
	cfg.Data, cfg.Listen, cfg.Token = filepath.Join(work, "data"), "127.0.0.1:0", benchToken
	if lf.f, err = fleet.Start(ctx, cfg); err != nil {
		return nil, err
	}
	lf.stops = append(lf.stops, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = lf.f.Stop(sctx)
	})
	lf.base = "http://" + lf.f.Addr()
	if lf.ids, err = addRepos(ctx, lf.base, lf.urls); err != nil {
		return nil, err
	}
	if err := waitOK(ctx, lf.f, n, within); err != nil {
		return nil, err
	}
	return lf, nil
}

// dir is the upstream repository of index i.
func (lf *localFleet) dir(prefix string, i int) string {
	return filepath.Join(lf.served, fmt.Sprintf("%s%04d.git", prefix, i))
}

// push commits once more on main of the upstream at dir (the p-th push of the run) and
// returns the new head.
func (lf *localFleet) push(dir string, p int) (string, error) {
	if err := gittest.ImportCommits(lf.srv.Home, dir, gittest.Commits{Branch: "main", N: 1, Start: lf.t0.Add(time.Duration(p+10) * time.Minute)}); err != nil {
		return "", err
	}
	return gitOut(lf.srv.Home, dir, "rev-parse", "refs/heads/main")
}

// stop stops the fleet and the upstream server and removes the temp dir, in that order.
func (lf *localFleet) stop() {
	for i := len(lf.stops) - 1; i >= 0; i-- {
		lf.stops[i]()
	}
	lf.stops = nil
}
