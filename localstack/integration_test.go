//go:build integration

// Package localstack is the LocalStack integration tier: the coordinator and two worker
// processes against AWS endpoints at AWS_ENDPOINT_URL (LocalStack's DynamoDB and
// Scheduler). Run it with `make localstack-test`, which starts LocalStack and creates the
// table and schedule group. LocalStack's Scheduler stores schedules but never fires them,
// so the suite reads the armed death timer and invokes the timeout path itself.
package localstack

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/timer/scheduler"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

func TestFleetOnLocalStack(t *testing.T) {
	if os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Skip("AWS_ENDPOINT_URL is not set: run `make localstack-test`")
	}
	ctx := context.Background()
	table := os.Getenv("MIRRORFLEET_TABLE")
	group := os.Getenv("MIRRORFLEET_SCHEDULE_GROUP")
	st, err := cloud.NewDynamoStore(ctx, "", table)
	if err != nil {
		t.Fatal(err)
	}
	awsCfg, err := cloud.LoadAWSConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := scheduler.New(scheduler.Config{Client: cloud.NewSchedulerClient(awsCfg), Group: group,
		TargetARN: "arn:aws:lambda:us-east-1:000000000000:function:coordinator",
		RoleARN:   "arn:aws:iam::000000000000:role/scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	co := &coordinator.Coordinator{ID: "it", Store: st, Timer: tm, Clock: clock.Real{},
		Config: coordinator.Config{Warmup: coordinator.NoWarmup, Grace: 5 * time.Second, SuspectAfter: 2 * time.Second}}

	srv := gittest.NewServer(t)
	var ups []*gittest.Repo
	for i := range 6 {
		r := srv.NewRepo(t, fmt.Sprintf("r%d", i))
		r.Commit(t, "first", map[string][]byte{"README": []byte(fmt.Sprint(i))})
		ups = append(ups, r)
	}
	policy := urlpolicy.Policy{AllowPrivateHosts: true}
	for _, u := range ups {
		if res := api.AddRepo(ctx, st, policy, u.URL(), store.SourceAPI, time.Now()); res.Err != nil {
			t.Fatal(res.Err)
		}
	}

	bin := filepath.Join(t.TempDir(), "mirrorfleet")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/mirrorfleet").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	root := t.TempDir()
	start := func(id string) *exec.Cmd {
		cmd := exec.Command(bin, "worker")
		cmd.Env = append(os.Environ(), "MIRRORFLEET_WORKER_ID="+id, "MIRRORFLEET_MIRROR_ROOT="+root,
			"MIRRORFLEET_HEARTBEAT=500ms", "MIRRORFLEET_MIN_INTERVAL=1s", "MIRRORFLEET_ALLOW_PRIVATE_HOSTS=1")
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				t.Logf("%s: %s", id, sc.Text())
			}
		}()
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	w1, _ := start("it-w1"), start("it-w2")

	m, err := mirror.New(mirror.Config{Root: root, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mirrored := func() string {
		for _, u := range ups {
			dir, err := m.Path(fetchTarget(u))
			if err != nil {
				return err.Error()
			}
			if _, err := os.Stat(dir); err != nil || gittest.RefsOf(t, dir) != u.Refs(t) {
				return "not mirrored yet: " + u.Name
			}
		}
		return ""
	}
	until := func(what string, within time.Duration, cond func() string) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			if _, err := co.Tick(ctx); err != nil {
				t.Logf("tick: %v", err)
			}
			why := cond()
			if why == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s", what, why)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	until("all repos mirrored", 90*time.Second, mirrored)

	// SIGKILL one worker; after the grace its repos move to the survivor.
	w1.Process.Signal(syscall.SIGKILL)
	w1.Wait()
	until("the killed worker's death timer armed", 30*time.Second, func() string {
		if _, ok, err := tm.Get(ctx, "death-it-w1"); err != nil || !ok {
			return fmt.Sprintf("no death timer yet (%v)", err)
		}
		return ""
	})
	time.Sleep(5 * time.Second)
	f, _, err := tm.Get(ctx, "death-it-w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := co.OnTimer(ctx, f.Payload); err != nil { // LocalStack never fires it
		t.Fatal(err)
	}
	until("repos owned by the survivor", 30*time.Second, func() string {
		rs, _, err := st.ListRepos(ctx, "", 100)
		if err != nil {
			return err.Error()
		}
		for _, r := range rs {
			if r.Owner != "it-w2" {
				return fmt.Sprintf("%s owned by %q", r.URL, r.Owner)
			}
		}
		return ""
	})
	for _, u := range ups {
		u.Commit(t, "second", map[string][]byte{"NEW": []byte("after the kill")})
	}
	until("the survivor follows new commits", 90*time.Second, mirrored)
}

func fetchTarget(u *gittest.Repo) fetch.Target {
	norm, _ := urlpolicy.Policy{AllowPrivateHosts: true}.Normalize(u.URL())
	return fetch.Target{ID: store.RepoID(norm), URL: norm}
}
