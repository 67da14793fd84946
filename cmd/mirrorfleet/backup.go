package main

// mirrorfleet backup (client.go) copies a running fleet's store through GET /v1/backup;
// mirrorfleet restore puts such a copy in place of a stopped fleet's store.
// docs/operations.md has the whole procedure.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
)

// checkStoreFile checks a store copy: every page (bolt.Verify), then opening it as the
// fleet will on restore (which also checks its schema version).
func checkStoreFile(path string) error {
	if err := bolt.Verify(path); err != nil {
		return fmt.Errorf("the copy is not a whole store: %w", err)
	}
	st, err := bolt.Open(path)
	if err != nil {
		return fmt.Errorf("the copy does not open as a store: %w", err)
	}
	return st.Close()
}

const restoreUsage = `Usage: mirrorfleet restore [--data DIR] FILE
  put the store copy FILE (from 'mirrorfleet backup') in place of DIR/mirrorfleet.db.
  The fleet must be stopped: restore refuses while a fleet holds the store. The store it
  replaces is kept beside it as mirrorfleet.db.before-restore-<time>.

Flags:
`

// runRestore checks FILE page by page, takes the lock a running fleet holds on
// <data>/mirrorfleet.db (refusing if one does), keeps the current store aside and puts a
// copy of FILE in its place (temporary file, fsync, rename, directory fsync).
func runRestore(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", ".mirrorfleet", "the stopped fleet's data directory")
	fs.Usage = func() { fmt.Fprint(stderr, restoreUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"usage: mirrorfleet restore [--data DIR] FILE"}
	}
	src := fs.Arg(0)
	if err := bolt.Verify(src); err != nil {
		return fmt.Errorf("restore: %s is not a whole store copy: %w", src, err)
	}
	if err := os.MkdirAll(*data, 0o700); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	dst := filepath.Join(*data, "mirrorfleet.db")

	// Hold the store's lock (bbolt's flock) through the swap: a running fleet has it,
	// and a fleet starting meanwhile waits rather than opening a half-swapped store.
	old, err := os.OpenFile(dst, os.O_RDWR, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		old = nil
	case err != nil:
		return fmt.Errorf("restore: %w", err)
	default:
		defer old.Close()
		if err := unix.Flock(int(old.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			if errors.Is(err, unix.EWOULDBLOCK) {
				return fmt.Errorf("restore: a fleet is running on %s (it holds %s): stop it first, then restore", *data, dst)
			}
			return fmt.Errorf("restore: lock %s: %w", dst, err)
		}
	}

	n, tmp, err := copyBeside(src, *data)
	if err != nil {
		return fmt.Errorf("restore: copy %s: %w", src, err)
	}
	kept := ""
	if old != nil {
		kept = dst + ".before-restore-" + time.Now().UTC().Format("20060102T150405Z")
		if err := os.Rename(dst, kept); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("restore: keep the current store: %w", err)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore: %w", err)
	}
	if err := syncDir(*data); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	fmt.Fprintf(stdout, "restored %s into %s (%d bytes)\n", src, dst, n)
	if kept != "" {
		fmt.Fprintf(stdout, "the store it replaced is kept as %s\n", kept)
	}
	fmt.Fprintf(stdout, "start the fleet: mirrorfleet run --data %s\n", *data)
	return nil
}

// copyBeside copies src to a new temporary file in dir, mode 0600, synced; it returns
// the bytes copied and the file's path (removed on error).
func copyBeside(src, dir string) (int64, string, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, "", err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dir, ".mirrorfleet.db.restore-*")
	if err != nil {
		return 0, "", err
	}
	n, err := io.Copy(tmp, in)
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return 0, "", err
	}
	return n, tmp.Name(), nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
