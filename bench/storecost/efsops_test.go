package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/fstrace"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(efsOpEnv); spec != "" {
		if err := runEFSOp(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The EFS operation counts come from real work: a no-change poll with the digest
// meters nothing at all; every other operation meters what it must (a clone and a
// fetch write data and create files, maintenance locks and lists, a served clone
// reads), and the metered bytes are at least the minimums of the operations counted.
func TestEFSOpsFromSystemCalls(t *testing.T) {
	fstrace.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ops, packBytes, err := measureEFSOps(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), 2)
	if err != nil {
		t.Fatal(err)
	}
	if packBytes < 1<<20 {
		t.Errorf("the measured mirror's pack is %d bytes, want about 2 MiB", packBytes)
	}
	by := map[string]results.StoreCostEFSOp{}
	for _, op := range ops {
		t.Logf("%-24s meta %3d r %3d w, data %3d r (%d B) %3d w (%d B), metered %d KiB read %d KiB written, %d mappings; %v",
			op.Key, op.MetaReads, op.MetaWrites, op.DataReads, op.DataReadBytes, op.DataWrites, op.DataWriteBytes,
			op.MeteredReadBytes>>10, op.MeteredWriteBytes>>10, op.Mappings, op.Calls)
		by[op.Key] = op
		if op.MeteredReadBytes < int64(op.MetaReads)*efsMetaMin+int64(op.DataReads)*efsDataMin ||
			op.MeteredWriteBytes < int64(op.MetaWrites)*efsMetaMin+int64(op.DataWrites)*efsDataMin ||
			op.MeteredReadBytes < op.DataReadBytes || op.MeteredWriteBytes < op.DataWriteBytes {
			t.Errorf("%s: metered below the minimums: %+v", op.Key, op)
		}
	}
	for _, key := range []string{"first_clone", "poll_nochange", "poll_nochange_nodigest", "maintain_unchanged",
		"fetch_change", "maintain_changed", "scrub", "clone_served"} {
		if _, ok := by[key]; !ok {
			t.Fatalf("no %s among %+v", key, ops)
		}
	}
	if p := by["poll_nochange"]; p.MeteredReadBytes+p.MeteredWriteBytes != 0 || p.Paths != 0 {
		t.Errorf("a no-change poll metered %+v", p)
	}
	if p := by["poll_nochange_nodigest"]; p.MetaReads < 10 || p.MetaWrites == 0 {
		t.Errorf("a poll without the digest: %+v, want the refs read under the lock", p)
	}
	for _, key := range []string{"first_clone", "fetch_change"} {
		if op := by[key]; op.DataWrites == 0 || op.DataWriteBytes == 0 || op.MetaWrites < 3 {
			t.Errorf("%s writes nothing: %+v", key, op)
		}
	}
	if op := by["maintain_unchanged"]; op.MetaReads == 0 || op.DataWrites != 0 {
		t.Errorf("maintenance of an unchanged mirror: %+v, want reads only", op)
	}
	for _, key := range []string{"maintain_changed", "scrub"} {
		if op := by[key]; op.MetaWrites == 0 || op.DataWriteBytes == 0 {
			t.Errorf("%s writes nothing: %+v", key, op)
		}
	}
	if op := by["clone_served"]; op.MetaReads == 0 || op.DataWrites != 0 || op.Mappings+op.DataReads == 0 {
		t.Errorf("a clone served: %+v, want reads of the mirror and no write", op)
	}
}
