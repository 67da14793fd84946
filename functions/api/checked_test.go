package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/cloudtest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
)

// TestSyncOfUnchangedRepoMovesLastCheckedOnAWS: on DynamoDB Local, a worker process
// (cloud.RunWorker, heartbeat every 10 s as deployed) mirrors a repo; `repos sync`
// through the API Lambda's handler makes the worker poll it again, finding nothing. The
// poll writes nothing to the repo record (invariant 6), yet the handler, which holds no
// worker, shows last_checked_at moved within 5 s of the request, read from the heartbeat
// the worker sends once a poll someone asked for is done; and
// tunasync.json's next_schedule_ts is the estimate from that heartbeat.
func TestSyncOfUnchangedRepoMovesLastCheckedOnAWS(t *testing.T) {
	st := dynamotest.Table(t, "mf_checked", dynamo.Config{})
	ep := dynamotest.Endpoint(t)
	srv := gittest.NewServer(t)
	up := srv.NewRepo(t, "aws/checked")
	up.Commit(t, "init", map[string][]byte{"a": []byte("1\n")})
	tg := storetest.AddPending(t, st, up.URL())
	id := tg.ID

	root := t.TempDir()
	stop := cloudtest.Go(t, "worker", func(ctx context.Context) error {
		return cloud.RunWorker(ctx, cloud.WorkerConfig{Table: st.Table(), MirrorRoot: root, Fetchers: 2,
			Heartbeat: 10 * time.Second, MinInterval: time.Hour, PriorityPolicy: "bayes", AllowPrivateHosts: true,
			WorkerID: "w-checked", Fleet: "test", MetricsInterval: time.Hour, DynamoDBEndpoint: ep,
			Metrics: io.Discard, Log: slog.New(slog.DiscardHandler)})
	})
	defer stop()
	// The coordinator ticks as often as the test polls: what is measured is the worker's
	// side, from the outbox entry to what the API shows.
	coord := cloudtest.Coordinator("c-checked", st)

	h := NewHandler(cloud.APIConfig{}, st, clock.Real{}, slog.New(slog.DiscardHandler), nil)
	lctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "req-checked"})
	call := func(method, path string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		resp, err := h(lctx, event(t, method, path, "", true))
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp
	}
	show := func() api.Repo {
		t.Helper()
		resp := call("GET", "/v1/repos/"+id)
		var r api.Repo
		if resp.StatusCode != 200 || json.Unmarshal([]byte(resp.Body), &r) != nil {
			t.Fatalf("GET /v1/repos/%s: %d %s", id, resp.StatusCode, resp.Body)
		}
		return r
	}
	until := func(within time.Duration, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v", what, within)
			}
			if _, err := coord.Tick(t.Context()); err != nil {
				t.Logf("tick: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	until(60*time.Second, "the repo is mirrored", func() bool { return show().State == store.RepoOK })
	before := show()
	stored, err := st.GetRepo(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if before.LastCheckedAt == nil {
		t.Fatalf("a mirrored repo has no last_checked_at: %+v", before)
	}

	if resp := call("POST", "/v1/repos/"+id+"/sync"); resp.StatusCode != 202 {
		t.Fatalf("sync: %d %s", resp.StatusCode, resp.Body)
	}
	// The request rings the owner through its signal item (ADR 21), so it polls within
	// about a second; the check must then show at once, not with the next heartbeat,
	// 10 s later.
	asked := time.Now()
	var after api.Repo
	until(30*time.Second, "last_checked_at moves after repos sync", func() bool {
		after = show()
		return after.LastCheckedAt != nil && after.LastCheckedAt.After(*before.LastCheckedAt)
	})
	seen := time.Now()
	t.Logf("sync asked → polled %v, polled → shown %v", after.LastCheckedAt.Sub(asked).Round(time.Millisecond), seen.Sub(*after.LastCheckedAt).Round(time.Millisecond))
	if lag := seen.Sub(asked); lag > 5*time.Second {
		t.Errorf("repos sync at %v showed in last_checked_at %v later, want within 5 s", asked, lag)
	}
	now, err := st.GetRepo(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !now.LastFetchAt.Equal(stored.LastFetchAt) {
		t.Errorf("the no-change poll wrote the repo: last_fetch_at %v, was %v", now.LastFetchAt, stored.LastFetchAt)
	}
	if after.NextPollAt == nil || after.NextPollAt.Before(*after.LastCheckedAt) {
		t.Errorf("next_poll_at %v, want an estimate after the last check %v", after.NextPollAt, after.LastCheckedAt)
	}

	resp := call("GET", "/tunasync.json")
	var jobs []api.TunasyncJob
	if err := json.Unmarshal([]byte(resp.Body), &jobs); err != nil || len(jobs) != 1 {
		t.Fatalf("tunasync.json: %v %s", err, resp.Body)
	}
	if jobs[0].LastEndedTS != after.LastCheckedAt.Unix() || jobs[0].NextScheduleTS < jobs[0].LastEndedTS {
		t.Errorf("tunasync job %+v, want last_ended_ts %d and a next_schedule_ts after it", jobs[0], after.LastCheckedAt.Unix())
	}
}
