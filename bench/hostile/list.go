package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/election"
	"github.com/mirrorfleet/mirrorfleet/shared/listsync"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// list syncs a list repository whose repos.txt is `lines` bad lines (and two good
// ones): 2 bytes a line, a few kilobytes once compressed in git.
func list(ctx context.Context, lines int) (results.HostileList, error) {
	var r results.HostileList
	dir, err := os.MkdirTemp("", "hostile-list-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	work, served := filepath.Join(dir, "work"), filepath.Join(dir, "served")
	for _, d := range []string{work, served} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return r, err
		}
	}
	f, err := os.Create(filepath.Join(work, "repos.txt"))
	if err != nil {
		return r, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for range lines {
		w.WriteString("x\n")
	}
	w.WriteString("https://example.com/good/one\nhttps://example.com/good/two\n")
	if err := w.Flush(); err != nil {
		return r, err
	}
	f.Close()
	fi, _ := os.Stat(filepath.Join(work, "repos.txt"))
	r.Bytes, r.Lines = fi.Size(), lines+2
	git := func(dir string, args ...string) error {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir, cmd.Env = dir, gittest.Env(dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v\n%s", args, err, out)
		}
		return nil
	}
	if err := git(work, "init", "-q", "-b", "main"); err != nil {
		return r, err
	}
	if err := git(work, "add", "repos.txt"); err != nil {
		return r, err
	}
	if err := git(work, "commit", "-q", "-m", "a hostile list"); err != nil {
		return r, err
	}
	if err := git(dir, "clone", "-q", "--bare", work, filepath.Join(served, "list.git")); err != nil {
		return r, err
	}
	srv, stop, err := gittest.Serve(served)
	if err != nil {
		return r, err
	}
	defer stop()

	st, err := bolt.OpenWith(filepath.Join(dir, "fleet.db"), bolt.Options{NoSync: true})
	if err != nil {
		return r, err
	}
	defer st.Close()
	term, _, err := election.Elector{Store: st, ID: "bench"}.Campaign(ctx, clock.Real{}.Now())
	if err != nil {
		return r, err
	}
	cfg := listsync.Defaults()
	cfg.Repo, cfg.Dir = srv.URL+"/list.git", filepath.Join(dir, "clone")
	s, err := listsync.New(cfg, listsync.Options{Store: st, Policy: urlpolicy.Policy{AllowPrivateHosts: true}})
	if err != nil {
		return r, err
	}
	defer s.Close()
	var syncErr error
	r.Seconds, r.HeapPeakMiB, r.RSSPeakMiB = measure(func() { syncErr = s.SyncList(ctx, term) })
	if syncErr != nil {
		return r, syncErr
	}
	status, err := s.ListStatus(ctx)
	if err != nil {
		return r, err
	}
	r.BadLines, r.Kept, r.Applied = status.BadTotal, len(status.BadLines), status.Entries
	r.PackBytes = dirBytes(filepath.Join(served, "list.git", "objects"))
	return r, nil
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
