package cloud

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/cloudtest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/eventbridgefake"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/events"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
)

// A worker process on DynamoDB Local puts an event on its bus (a fake EventBridge,
// through the SDK) for its first clone and for a push it then fetches.
func TestRunWorkerPutsEventsOnTheBus(t *testing.T) {
	st := dynamotest.Table(t, "mf_events", dynamo.Config{})
	ep := dynamotest.Endpoint(t)
	srv := gittest.NewServer(t)
	up := srv.NewRepo(t, "ev/aws")
	up.Commit(t, "init", map[string][]byte{"a": []byte("1\n")})
	tg := storetest.AddPending(t, st, up.URL())
	id := tg.ID
	fake := eventbridgefake.New("mf-bus")
	defer fake.Close()

	root := t.TempDir()
	stop := cloudtest.Go(t, "worker", func(ctx context.Context) error {
		return RunWorker(ctx, WorkerConfig{Table: st.Table(), MirrorRoot: root, Fetchers: 2, Heartbeat: 100 * time.Millisecond,
			MinInterval: time.Hour, PriorityPolicy: "bayes", AllowPrivateHosts: true, WorkerID: "w-events", Fleet: "test",
			MetricsInterval: time.Hour, DynamoDBEndpoint: ep, EventBus: "mf-bus", EventBridge: fake.Client(),
			Metrics: io.Discard, Log: slog.New(slog.DiscardHandler)})
	})
	defer stop()
	coord := cloudtest.Coordinator("c-events", st)
	waitEntries := func(n int) []eventbridgefake.Entry {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			if _, err := coord.Tick(t.Context()); err != nil {
				t.Logf("tick: %v", err)
			}
			if es := fake.Entries(); len(es) >= n {
				return es
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d entries on the bus, want %d", len(fake.Entries()), n)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	es := waitEntries(1)
	var ev events.Event
	if err := json.Unmarshal([]byte(es[0].Detail), &ev); err != nil || ev.RepoID != id || es[0].Bus != "mf-bus" ||
		es[0].Source != "mirrorfleet" || es[0].DetailType != "mirror.updated" {
		t.Fatalf("clone entry %+v (%v)", es[0], err)
	}
	old := up.Head(t)
	up.Commit(t, "two", map[string][]byte{"a": []byte("2\n")})
	if err := st.RequestSync(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	es = waitEntries(2)
	if err := json.Unmarshal([]byte(es[1].Detail), &ev); err != nil || len(ev.Refs) != 1 || ev.Refs[0].Old != old || ev.Refs[0].New != up.Head(t) {
		t.Fatalf("push entry %s (%v)", es[1].Detail, err)
	}
}
