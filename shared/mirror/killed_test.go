package mirror

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// Environment of killedFetch, the fetch that TestKilledFetchLeavesNoTempPack runs in a
// process of its own (this test binary) and kills.
const (
	envKilledRoot = "MIRRORFLEET_TEST_KILLED_FETCH_ROOT"
	envKilledURL  = "MIRRORFLEET_TEST_KILLED_FETCH_URL"
)

// TestMain runs killedFetch, or stracedPolls (poll_test.go), when the test binary is
// started as it.
func TestMain(m *testing.M) {
	if root := os.Getenv(envKilledRoot); root != "" {
		killedFetch(root, os.Getenv(envKilledURL))
	}
	if spec := os.Getenv(pollHelperEnv); spec != "" {
		if err := stracedPolls(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// killedFetch syncs a mirror whose upstream stalls mid-pack until it is killed.
func killedFetch(root, url string) {
	m, err := New(Config{Root: root, Timeout: time.Hour})
	if err == nil {
		_, err = m.Sync(context.Background(), fetch.Target{ID: "big", URL: url})
	}
	fmt.Fprintf(os.Stderr, "the stalled fetch ended: %v\n", err)
	os.Exit(2)
}

// TestKilledFetchLeavesNoTempPack: a process killed (SIGKILL) while it fetches into an
// existing mirror leaves the pack it was writing in objects/pack/tmp_pack_*; the next
// start removes it, as it removes a killed clone's temp directory, so it neither stays
// nor counts in the mirror's size.
func TestKilledFetchLeavesNoTempPack(t *testing.T) {
	s := newGitServer(t)
	u := buildBasic(t, s, "x/big")
	root := t.TempDir()
	m := newTestMirrorer(t, Config{Root: root})
	tg := u.target("big")
	mustSync(t, m, tg)
	dir := mirrorDir(t, m, tg)
	sizeBefore, err := dirSize(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()

	u.commit(t, "big", map[string][]byte{"big.bin": randomBytes(t, 4<<20)})
	s.stallAfter.Store(256 << 10)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envKilledRoot+"="+root, envKilledURL+"="+tg.URL)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killGroup(cmd) })
	// Wait until the fetch has written part of the pack, then kill it.
	deadline := time.Now().Add(60 * time.Second)
	var partial int64
	for partial < 64<<10 {
		if time.Now().After(deadline) {
			killGroup(cmd)
			t.Fatalf("the fetch wrote no temp pack:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
		partial = 0
		for name := range m.packTemps(dir) {
			if fi, err := os.Stat(filepath.Join(dir, "objects", "pack", name)); err == nil && strings.HasPrefix(name, "tmp_pack_") {
				partial += fi.Size()
			}
		}
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(m.packTemps(dir)) == 0 {
		t.Fatal("the killed fetch left no temp pack: nothing to test")
	}

	// The next start.
	s.stallAfter.Store(0)
	m2 := newTestMirrorer(t, Config{Root: root})
	if tmps := m2.packTemps(dir); len(tmps) != 0 {
		t.Fatalf("temp pack files after a restart: %v", tmps)
	}
	if size, _ := dirSize(dir); size != sizeBefore {
		t.Fatalf("the mirror is %d bytes after the restart, %d before the killed fetch", size, sizeBefore)
	}
	if left, _ := filepath.Glob(filepath.Join(root, ".tmp", "*")); len(left) != 0 {
		t.Fatalf("left in the temp directory: %v", left)
	}
	if res := mustSync(t, m2, tg); !res.Changed {
		t.Fatal("the next sync found no change")
	}
	fsck(t, s.home, dir)
}
