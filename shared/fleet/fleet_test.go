package fleet_test

// In-process tests of the local fleet with real git: the bbolt store is
// single-process, so these run fleet.Start in the test and read f.Store directly.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/logtest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
)

const (
	token     = "fleet-test-token"
	heartbeat = 200 * time.Millisecond
	grace     = 3 * time.Second
)

// running is a started fleet that the test stops (or that cleanup stops).
type running struct {
	*fleet.Fleet
	once    sync.Once
	stopErr error
}

func (r *running) stop() error {
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r.stopErr = r.Fleet.Stop(ctx)
	})
	return r.stopErr
}

// start runs a fleet of 3 workers on data with short heartbeat, tick and grace.
func start(t *testing.T, data string, warmup time.Duration, logs io.Writer) *running {
	t.Helper()
	return startWith(t, logs, func(c *fleet.Config) { c.Data, c.Warmup = data, warmup })
}

// startWith is start with the configuration changed by mod.
func startWith(t *testing.T, logs io.Writer, mod func(*fleet.Config)) *running {
	t.Helper()
	// Every upstream of a test is on the one local git server: no per-host politeness
	// (tested on its own), or polls would queue behind the host's budget.
	cfg := fleet.Config{
		Listen: "127.0.0.1:0", Workers: 3, Fetchers: 4, Token: token, AllowPrivateHosts: true,
		Tick: heartbeat, Heartbeat: heartbeat, Grace: grace, MinInterval: time.Second,
		HostConcurrency: -1, HostRate: -1,
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	mod(&cfg)
	f, err := fleet.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("fleet.Start: %v", err)
	}
	r := &running{Fleet: f}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("cleanup: Stop: %v", err)
		}
	})
	return r
}

// waitRing waits until all n workers are in the ring. Repos added before that go to
// the workers that joined first and move again a tick later; a move while the old
// owner is still fetching the repo stalls it for the worker's 30 s busy retry (see
// TestBusyMirrorIsRetriedWithinMinInterval), so the tests that are not about that
// add their repos once the ring is complete.
func waitRing(t *testing.T, f *running, n int) {
	t.Helper()
	eventually(t, f, 10*time.Second, "all workers in the ring", func() string {
		rg, err := f.Store.GetRing(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(rg.Members) != n {
			return fmt.Sprintf("ring version %d has %d members", rg.Version, len(rg.Members))
		}
		return ""
	})
}

// dumpOnFailure prints the fleet's log if the test failed. Registered before start, so
// it runs after the fleet has stopped.
func dumpOnFailure(t *testing.T) *logtest.Buffer {
	logs := &logtest.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("fleet log:\n%s", logs.String())
		}
	})
	return logs
}

// addRepos adds urls with one bulk POST /v1/repos and returns their ids, in order.
func addRepos(t *testing.T, f *running, urls ...string) []string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"urls": urls})
	req, _ := http.NewRequest(http.MethodPost, "http://"+f.Addr()+"/v1/repos", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Results []struct{ ID, Status string }
		Created int
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("bulk add: %s, %v", resp.Status, err)
	}
	var ids []string
	for i, r := range out.Results {
		if r.Status != "created" {
			t.Fatalf("bulk add of %s: %s", urls[i], r.Status)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

func allRepos(t *testing.T, st storetest.Store) map[string]store.Repo {
	t.Helper()
	out := map[string]store.Repo{}
	cursor := ""
	for {
		page, next, err := st.ListRepos(context.Background(), cursor, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			out[r.ID] = r
		}
		if next == "" {
			return out
		}
		cursor = next
	}
}

func workers(t *testing.T, st storetest.Store) map[string]store.Worker {
	t.Helper()
	ws, err := st.ListWorkers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.Worker{}
	for _, w := range ws {
		out[w.ID] = w
	}
	return out
}

// eventually polls cond every 100ms until it returns "" (done), failing with its last
// answer and the store's state at the deadline.
func eventually(t *testing.T, f *running, within time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s\n%s", what, within, why, dumpStore(t, f.Store))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dumpStore describes the store's repos, workers and outboxes for a failure message.
func dumpStore(t *testing.T, st storetest.Store) string {
	var b strings.Builder
	repos := allRepos(t, st)
	ids := slices.Sorted(maps.Keys(repos))
	fmt.Fprintln(&b, "store: repos")
	for _, id := range ids {
		r := repos[id]
		fmt.Fprintf(&b, "  %s %s %-8s owner=%s epoch=%d sync=%v last_fetch=%s last_success=%s err=%q\n", id, r.URL, r.State, r.Owner,
			r.OwnerEpoch, r.SyncRequested, r.LastFetchAt.Format("15:04:05.000"), r.LastSuccessAt.Format("15:04:05.000"), r.LastError)
	}
	ws := workers(t, st)
	fmt.Fprintln(&b, "store: workers")
	for _, id := range slices.Sorted(maps.Keys(ws)) {
		w := ws[id]
		fmt.Fprintf(&b, "  %s slot=%d %s hb=%s ack=%d head=%d trimmed=%d\n", id, w.Slot, w.State, w.HeartbeatAt.Format("15:04:05.000"), w.AckSeq, w.OutboxHead, w.TrimmedTo)
		entries, err := st.ReadOutbox(context.Background(), id, 0, 1000)
		if err != nil {
			fmt.Fprintf(&b, "    outbox: %v\n", err)
		}
		for _, e := range entries {
			fmt.Fprintf(&b, "    #%d %s %s epoch=%d prio=%g\n", e.Seq, e.Op, e.RepoID, e.Epoch, e.Priority)
		}
	}
	return b.String()
}

// upstreams is the test's upstream repos by repo id.
type upstreams map[string]*gittest.Repo

// waitMirrored waits until every repo of ups is ok in the store and its mirror's refs
// equal the upstream's exactly.
func waitMirrored(t *testing.T, f *running, ups upstreams, within time.Duration) {
	t.Helper()
	want := map[string]string{}
	for id, up := range ups {
		want[id] = up.Refs(t)
	}
	matched := map[string]bool{}
	eventually(t, f, within, "mirrors equal upstream", func() string {
		repos := allRepos(t, f.Store)
		var bad []string
		for id, up := range ups {
			r := repos[id]
			if r.State != store.RepoOK {
				bad = append(bad, fmt.Sprintf("%s is %s (%s)", up.Name, r.State, r.LastError))
				continue
			}
			if matched[id] {
				continue
			}
			dir, err := f.Mirror.Path(fetch.Target{ID: id, URL: r.URL})
			if err != nil {
				t.Fatal(err)
			}
			if !f.Mirror.Exists(fetch.Target{ID: id, URL: r.URL}) || gittest.RefsOf(t, dir) != want[id] {
				bad = append(bad, up.Name+" refs differ")
				continue
			}
			matched[id] = true
		}
		return strings.Join(bad, "; ")
	})
}

func newUpstreams(t *testing.T, srv *gittest.Server, prefix string, n int) []*gittest.Repo {
	t.Helper()
	var out []*gittest.Repo
	for i := range n {
		up := srv.NewRepo(t, fmt.Sprintf("%s/r%02d", prefix, i))
		up.Commit(t, "init", map[string][]byte{"README": []byte(fmt.Sprintf("repo %d\n", i))})
		if i%3 == 0 {
			up.Tag(t, "v1", "")
			up.Branch(t, "dev", "")
		}
		out = append(out, up)
	}
	return out
}

func addUpstreams(t *testing.T, f *running, ups []*gittest.Repo) upstreams {
	t.Helper()
	var urls []string
	for _, up := range ups {
		urls = append(urls, up.URL())
	}
	out := upstreams{}
	for i, id := range addRepos(t, f, urls...) {
		out[id] = ups[i]
	}
	return out
}

// mirrorOne adds one upstream repo named prefix/r00 and waits until its mirror equals
// it; it returns the repo's id.
func mirrorOne(t *testing.T, f *running, srv *gittest.Server, prefix string) string {
	t.Helper()
	ups := addUpstreams(t, f, newUpstreams(t, srv, prefix, 1))
	waitMirrored(t, f, ups, 30*time.Second)
	return onlyID(ups)
}

// onlyID is the id of a single-repo ups.
func onlyID(ups upstreams) string {
	for id := range ups {
		return id
	}
	return ""
}

// accepted sends an authorized method request to the fleet's path with no body and
// fails unless it is answered 202 (DELETE /v1/repos/{id}, POST .../sync).
func accepted(t *testing.T, f *running, method, path string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+f.Addr()+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%s %s: %s", method, path, resp.Status)
	}
}

// TestKilledWorkerReposMoveAfterGrace kills a worker abruptly (no goodbye): its repos
// stay with it until the grace is over, then move to the survivors, whose mirrors
// follow upstream from then on.
func TestKilledWorkerReposMoveAfterGrace(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	srv := gittest.NewServer(t)
	logs := dumpOnFailure(t)
	f := start(t, t.TempDir(), coordinator.NoWarmup, logs)
	waitRing(t, f, 3)
	ups := addUpstreams(t, f, newUpstreams(t, srv, "kill", 12))
	t.Logf("%v: upstreams added", time.Since(begin))
	waitMirrored(t, f, ups, 30*time.Second)

	// The victim is the worker that owns the most repos.
	ids := f.WorkerIDs()
	owned := map[string][]string{}
	for id, r := range allRepos(t, f.Store) {
		owned[r.Owner] = append(owned[r.Owner], id)
	}
	victim := 0
	for i, w := range ids {
		if len(owned[w]) > len(owned[ids[victim]]) {
			victim = i
		}
	}
	victimID := ids[victim]
	theirs := owned[victimID]
	survivors := slices.Delete(slices.Clone(ids), victim, victim+1)
	if len(theirs) == 0 || len(theirs) == len(ups) {
		t.Fatalf("ownership %v: want the victim to own some but not all repos", owned)
	}
	t.Logf("killing %s, owner of %d of %d repos; survivors %v", victimID, len(theirs), len(ups), survivors)

	t.Logf("%v: all mirrored; killing", time.Since(begin))
	f.KillWorker(victim)
	lastHB := workers(t, f.Store)[victimID].HeartbeatAt
	graceEnd := lastHB.Add(grace)

	// Before the grace ends its repos stay put (the worker turns suspect, nothing moves).
	sawSuspect := false
	for {
		repos := allRepos(t, f.Store)
		w := workers(t, f.Store)[victimID]
		now := time.Now() // after the reads: they saw the store before now
		if !now.Before(graceEnd) {
			break
		}
		if w.HeartbeatAt != lastHB {
			t.Fatalf("a killed worker heartbeated: %v after %v", w.HeartbeatAt, lastHB)
		}
		sawSuspect = sawSuspect || w.State == store.WorkerSuspect
		if w.State != store.WorkerActive && w.State != store.WorkerSuspect {
			t.Fatalf("%v before the grace ended (%v left): victim is %s", now.Sub(lastHB), graceEnd.Sub(now), w.State)
		}
		for _, id := range theirs {
			if r := repos[id]; r.Owner != victimID {
				t.Fatalf("%v before the grace ended: repo %s moved from %s to %s", graceEnd.Sub(now), ups[id].Name, victimID, r.Owner)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !sawSuspect {
		t.Errorf("the killed worker never turned suspect before the grace ended")
	}

	// After the grace: dead, and every repo it had is with a survivor.
	eventually(t, f, 15*time.Second, "the victim's repos move to the survivors", func() string {
		if w := workers(t, f.Store)[victimID]; w.State != store.WorkerDead {
			return "victim is " + string(w.State)
		}
		repos := allRepos(t, f.Store)
		for _, id := range theirs {
			if !slices.Contains(survivors, repos[id].Owner) {
				return fmt.Sprintf("repo %s owned by %q", ups[id].Name, repos[id].Owner)
			}
		}
		return ""
	})
	for id, r := range allRepos(t, f.Store) {
		if !slices.Contains(survivors, r.Owner) {
			t.Fatalf("repo %s owned by %q, not a survivor", ups[id].Name, r.Owner)
		}
	}

	t.Logf("%v: moved", time.Since(begin))
	// The survivors keep the mirrors following upstream, the moved ones included: a new
	// commit in each moved repo and in two others, and a force-push in one moved repo.
	changed := slices.Clone(theirs)
	for id := range ups {
		if len(changed) < len(theirs)+2 && !slices.Contains(changed, id) {
			changed = append(changed, id)
		}
	}
	for _, id := range changed {
		ups[id].Commit(t, "after the kill", map[string][]byte{"later.txt": []byte(ups[id].Name + "\n")})
	}
	ups[theirs[0]].Rewrite(t, "main", 1, "rewritten after the kill", nil)
	waitMirrored(t, f, ups, 30*time.Second)
	t.Logf("%v: followed", time.Since(begin))
}

// TestStopThenRestart stops a fleet cleanly (its workers pause) and restarts it on the
// same data directory: no second warm-up (a one-hour warm-up is configured and would
// block every assignment), the ring carries on, the same workers resume their repos
// (nothing moves), and new repos are assigned at once.
func TestStopThenRestart(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	logs := dumpOnFailure(t)
	data := t.TempDir()
	f1 := start(t, data, coordinator.NoWarmup, logs)
	waitRing(t, f1, 3)
	ups := addUpstreams(t, f1, newUpstreams(t, srv, "restart", 6))
	waitMirrored(t, f1, ups, 30*time.Second)
	ring1, err := f1.Store.GetRing(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	oldWorkers := f1.WorkerIDs()

	begin := time.Now()
	if err := f1.stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("Stop took %v", took)
	}

	// The store as Stop left it: every worker paused (its record as it was, so the next
	// start resumes it), every repo ok.
	st, err := bolt.Open(filepath.Join(data, "mirrorfleet.db"))
	if err != nil {
		t.Fatalf("reopen store after Stop: %v", err)
	}
	ws := workers(t, st)
	if len(ws) != 3 {
		t.Errorf("%d worker records after Stop, want 3: %v", len(ws), ws)
	}
	for id, w := range ws {
		if w.State != store.WorkerActive {
			t.Errorf("worker %s is %s after a clean Stop, want active (paused, to be resumed)", id, w.State)
		}
	}
	before := allRepos(t, st)
	for id, r := range before {
		if r.State != store.RepoOK {
			t.Errorf("repo %s is %s after Stop", ups[id].Name, r.State)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart with a one-hour warm-up: none happens, as the ring exists.
	f2 := start(t, data, time.Hour, logs)
	eventually(t, f2, 20*time.Second, "repos resume on the same workers", func() string {
		ids := f2.WorkerIDs()
		var bad []string
		for id, r := range allRepos(t, f2.Store) {
			if r.State != store.RepoOK {
				t.Fatalf("repo %s went %s after the restart (was ok)", ups[id].Name, r.State)
			}
			if !slices.Contains(ids, r.Owner) {
				bad = append(bad, fmt.Sprintf("%s owned by %q", ups[id].Name, r.Owner))
			}
		}
		sort.Strings(bad)
		return strings.Join(bad, "; ")
	})
	// The same names, and nothing moved: every repo keeps its owner and owner epoch.
	if got := f2.WorkerIDs(); !slices.Equal(got, oldWorkers) {
		t.Errorf("after a clean restart the workers are %v, want %v resumed", got, oldWorkers)
	}
	for id, r := range allRepos(t, f2.Store) {
		if b, ok := before[id]; ok && (r.Owner != b.Owner || r.OwnerEpoch != b.OwnerEpoch) {
			t.Errorf("repo %s: owner %s epoch %d before the restart, %s epoch %d after", ups[id].Name, b.Owner, b.OwnerEpoch, r.Owner, r.OwnerEpoch)
		}
	}
	ring2, err := f2.Store.GetRing(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ring2.Version < ring1.Version || !ring2.WarmupUntil.Equal(ring1.WarmupUntil) {
		t.Errorf("ring restarted: version %d -> %d, warm-up until %v -> %v", ring1.Version, ring2.Version, ring1.WarmupUntil, ring2.WarmupUntil)
	}

	// New repos are assigned and cloned at once, and the old ones keep following upstream.
	more := addUpstreams(t, f2, newUpstreams(t, srv, "after-restart", 2))
	for id, up := range more {
		ups[id] = up
	}
	for _, up := range ups {
		up.Commit(t, "after restart", nil)
	}
	// 45 s, a bound for a busy machine: the resumed workers move nothing
	// (TestCleanRestartMovesNoRepo), so this takes a few seconds.
	waitMirrored(t, f2, ups, 45*time.Second)
	if err := f2.stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// crash stops f as a crash would for its workers: they are killed (no goodbye, their
// records stay live) before the process goes away.
func crash(t *testing.T, f *running) {
	t.Helper()
	for i := range f.WorkerIDs() {
		f.KillWorker(i)
	}
	if err := f.stop(); err != nil {
		t.Fatalf("Stop after killing the workers: %v", err)
	}
}

// resumesAfterCrash crashes f and restarts on data: the workers resume their records
// (same ids), and every repo keeps its owner, its owner epoch (nothing moved) and its
// ok state, and follows upstream.
func resumesAfterCrash(t *testing.T, f *running, data string, ups upstreams, logs *logtest.Buffer) *running {
	t.Helper()
	ids := f.WorkerIDs()
	before := allRepos(t, f.Store)
	crash(t, f)
	f2 := start(t, data, coordinator.NoWarmup, logs)
	eventually(t, f2, 10*time.Second, "workers joined", func() string {
		if got := f2.WorkerIDs(); slices.Contains(got, "") {
			return fmt.Sprintf("worker ids %q", got)
		}
		return ""
	})
	if got := f2.WorkerIDs(); !slices.Equal(got, ids) {
		t.Fatalf("after a crash the workers joined as %v, want their records %v resumed", got, ids)
	}
	for _, up := range ups {
		up.Commit(t, "after the crash", nil)
	}
	waitMirrored(t, f2, ups, 20*time.Second)
	for id, r := range allRepos(t, f2.Store) {
		if b := before[id]; r.Owner != b.Owner || r.OwnerEpoch != b.OwnerEpoch || r.State != store.RepoOK {
			t.Errorf("repo %s: owner %s epoch %d %s before the crash, %s epoch %d %s after", ups[id].Name,
				b.Owner, b.OwnerEpoch, b.State, r.Owner, r.OwnerEpoch, r.State)
		}
	}
	return f2
}

// TestCrashRestartResumes restarts a fleet whose workers died without a goodbye: the
// new workers resume the old records, so nothing moves and no grace is waited out.
func TestCrashRestartResumes(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	logs := dumpOnFailure(t)
	data := t.TempDir()
	f := start(t, data, coordinator.NoWarmup, logs)
	waitRing(t, f, 3)
	ups := addUpstreams(t, f, newUpstreams(t, srv, "crash", 6))
	waitMirrored(t, f, ups, 30*time.Second)
	resumesAfterCrash(t, f, data, ups, logs)
}

// TestCrashRestartAfterCleanRestartResumes is TestCrashRestartResumes once the fleet
// has been restarted cleanly before: the resumed records must be resumed after a crash
// too.
func TestCrashRestartAfterCleanRestartResumes(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	logs := dumpOnFailure(t)
	data := t.TempDir()
	f1 := start(t, data, coordinator.NoWarmup, logs)
	waitRing(t, f1, 3)
	ups := addUpstreams(t, f1, newUpstreams(t, srv, "crash2", 6))
	waitMirrored(t, f1, ups, 30*time.Second)
	if err := f1.stop(); err != nil {
		t.Fatal(err)
	}
	f2 := start(t, data, coordinator.NoWarmup, logs)
	eventually(t, f2, 45*time.Second, "repos on the resumed workers", func() string {
		for id, r := range allRepos(t, f2.Store) {
			if r.State != store.RepoOK || !slices.Contains(f2.WorkerIDs(), r.Owner) {
				return fmt.Sprintf("%s is %s with %q", ups[id].Name, r.State, r.Owner)
			}
		}
		return ""
	})
	resumesAfterCrash(t, f2, data, ups, logs)
}

// TestBusyMirrorIsRetriedWithinMinInterval: a poll that finds the mirror locked by
// another sync (a repo that just moved while its previous owner still fetches it; a
// second process on the same mirrors) must be retried about MinInterval later, not
// after the worker's default BusyRetry of 30 s, which the local fleet never lowers.
func TestBusyMirrorIsRetriedWithinMinInterval(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	logs := dumpOnFailure(t)
	f := start(t, t.TempDir(), coordinator.NoWarmup, logs)
	waitRing(t, f, 3)
	ups := addUpstreams(t, f, newUpstreams(t, srv, "busy", 1))
	waitMirrored(t, f, ups, 30*time.Second)

	// Hold the mirror's lock (as another sync would) across a few polls.
	id := onlyID(ups)
	r, err := f.Store.GetRepo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := f.Mirror.Path(fetch.Target{ID: id, URL: r.URL})
	if err != nil {
		t.Fatal(err)
	}
	lockPath, err := f.Mirror.LockPath(fetch.Target{ID: id, URL: r.URL})
	if err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("flock: %v", err)
	}
	ups[id].Commit(t, "while busy", nil)
	// Setup, not an assertion: let the owner's polls (every second) find the lock held.
	time.Sleep(3 * time.Second)
	if got := gittest.RefsOf(t, dir); got == ups[id].Refs(t) {
		t.Fatal("the mirror was fetched while its lock was held")
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	waitMirrored(t, f, ups, 5*time.Second)
}

// TestCleanRestartMovesNoRepo: a clean stop pauses the workers, so the restarted fleet
// resumes them under the same ids and no repo moves (no owner epoch changes), even
// though the coordinator's first tick may run before every worker has joined.
func TestCleanRestartMovesNoRepo(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	logs := dumpOnFailure(t)
	data := t.TempDir()
	f1 := start(t, data, coordinator.NoWarmup, logs)
	waitRing(t, f1, 3)
	ups := addUpstreams(t, f1, newUpstreams(t, srv, "once", 9))
	waitMirrored(t, f1, ups, 30*time.Second)
	before := allRepos(t, f1.Store)
	if err := f1.stop(); err != nil {
		t.Fatal(err)
	}
	f2 := start(t, data, coordinator.NoWarmup, logs)
	waitRing(t, f2, 3)
	for _, up := range ups {
		up.Commit(t, "after the restart", nil)
	}
	waitMirrored(t, f2, ups, 20*time.Second)
	for id, r := range allRepos(t, f2.Store) {
		if b := before[id]; r.Owner != b.Owner || r.OwnerEpoch != b.OwnerEpoch {
			t.Errorf("repo %s: owner %s epoch %d -> %s epoch %d across a clean restart, want no move", ups[id].Name, b.Owner, b.OwnerEpoch, r.Owner, r.OwnerEpoch)
		}
	}
}

// TestDeleteOfBusyRepoTrashesItsMirror: a repo deleted while its owner is fetching it
// must still have its mirror trashed once the fetch is over. Today the worker tries
// Trash once when it applies the purge entry; the busy lock makes it fail, the failure
// is only logged, and as the repo record is already gone nobody ever trashes the
// mirror: it stays in <data>/mirrors for good.
func TestDeleteOfBusyRepoTrashesItsMirror(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	logs := dumpOnFailure(t)
	f := start(t, t.TempDir(), coordinator.NoWarmup, logs)
	waitRing(t, f, 3)
	id := mirrorOne(t, f, srv, "purge")
	r, err := f.Store.GetRepo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := f.Mirror.Path(fetch.Target{ID: id, URL: r.URL})
	if err != nil {
		t.Fatal(err)
	}
	lockPath, err := f.Mirror.LockPath(fetch.Target{ID: id, URL: r.URL})
	if err != nil {
		t.Fatal(err)
	}

	// The lock held as by a fetch in flight while the delete goes through.
	lock, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("flock: %v", err)
	}
	accepted(t, f, http.MethodDelete, "/v1/repos/"+id)
	eventually(t, f, 10*time.Second, "the owner applies the purge", func() string {
		if _, err := f.Store.GetRepo(context.Background(), id); err == nil {
			return "repo still in the store"
		}
		w := workers(t, f.Store)[r.Owner]
		if w.AckSeq < w.OutboxHead {
			return fmt.Sprintf("owner %s acked %d of %d", w.ID, w.AckSeq, w.OutboxHead)
		}
		return ""
	})
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	eventually(t, f, 10*time.Second, "the mirror leaves <data>/mirrors", func() string {
		if _, err := os.Stat(dir); err == nil {
			return dir + " still exists"
		}
		return ""
	})
}

// The fleet maintains (and serves) mirrors with git: without it, Start fails and says
// what to install, before it opens anything.
func TestStartNeedsGit(t *testing.T) {
	t.Setenv(gitcmd.EnvGit, "/nonexistent/git")
	data := t.TempDir()
	_, err := fleet.Start(context.Background(), fleet.Config{Data: data, Listen: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "git not found") || !strings.Contains(err.Error(), "install") {
		t.Fatalf("Start without git: %v", err)
	}
	if entries, _ := os.ReadDir(data); len(entries) != 0 {
		t.Fatalf("Start without git left %v in the data directory", entries)
	}
}
