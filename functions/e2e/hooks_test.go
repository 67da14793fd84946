package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/functions/runtimeapi"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/cloudtest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/secretsfake"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// hookPushes is how many pushes the hook test times.
const hookPushes = 10

// AWSHookResultsEnv names a bench/results/events.json whose aws_hook section the hook
// test writes its figures into (unset: it only logs them).
const AWSHookResultsEnv = "MIRRORFLEET_AWS_HOOK_RESULTS"

// The AWS fast path end to end: the API bootstrap, with the environment the stack gives
// it (the webhook secret's ARN, read from the Secrets Manager fake at cold start), takes
// a signed GitHub push through API Gateway's public hook route and signals the repo's
// owner; the owner, a worker process on the same table (cloud.RunWorker, heartbeating
// every 10 s as on ECS), fetches the commit from a real git http-backend. No coordinator
// tick runs after the push, so the durable path (tick, outbox, heartbeat) cannot be what
// brought it. The figures are logged (no timing assertion).
func TestHookReachesTheOwningWorker(t *testing.T) {
	f := newFixture(t)
	srv := gittest.NewServer(t) // skips without git http-backend
	sm := secretsfake.New()
	t.Cleanup(sm.Close)
	const secret = "e2e-hook-secret"
	arn := sm.Put("MirrorFleet-webhook", secret)

	up := srv.NewRepo(t, "team/app")
	up.Commit(t, "init", map[string][]byte{"README": []byte("one\n")})
	target := storetest.AddPending(t, f.st, up.URL())

	root := t.TempDir()
	paths, err := mirror.New(mirror.Config{Root: root}) // before the worker: New clears <root>/.tmp
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { paths.Close() })
	dir, err := paths.Path(target)
	if err != nil {
		t.Fatal(err)
	}
	mirrored := func() bool {
		if _, err := os.Stat(dir); err != nil {
			return false
		}
		return gittest.RefsOf(t, dir) == up.Refs(t)
	}

	heartbeat := worker.DefaultConfig().Heartbeat
	stop := cloudtest.Go(t, "worker", func(ctx context.Context) error {
		return cloud.RunWorker(ctx, cloud.WorkerConfig{Table: f.st.Table(), MirrorRoot: root, Fetchers: 2, Heartbeat: heartbeat,
			MinInterval: time.Hour, PriorityPolicy: "bayes", AllowPrivateHosts: true, WorkerID: "w-hook", Fleet: "MirrorFleet",
			MetricsInterval: time.Hour, Drain: 2 * time.Second, DynamoDBEndpoint: f.endpoint, Metrics: io.Discard,
			Log: slog.New(slog.DiscardHandler)})
	})
	t.Cleanup(stop)

	// The coordinator bootstrap assigns the repo; the worker learns it at a heartbeat
	// and clones it.
	coord := f.start(t, "coordinator", f.coordinatorEnv())
	deadline := time.Now().Add(3*heartbeat + 30*time.Second)
	for !mirrored() {
		if time.Now().After(deadline) {
			rp, _ := f.st.GetRepo(t.Context(), target.ID)
			t.Fatalf("the repo was not mirrored: %+v", rp)
		}
		invoke(t, coord, runtimeapi.ScheduledEvent(time.Now(), ruleARN))
		time.Sleep(500 * time.Millisecond)
	}
	rp, err := f.st.GetRepo(t.Context(), target.ID)
	if err != nil || rp.Owner == "" {
		t.Fatalf("repo %+v (%v), want an owner", rp, err)
	}

	env := deployenv.API{Common: deployenv.Common{Table: f.st.Table(), Fleet: "MirrorFleet"}, WebhookSecretARN: arn}.Env()
	env[deployenv.AllowPrivateHosts] = "true" // the upstream is on 127.0.0.1
	env["AWS_ENDPOINT_URL_SECRETS_MANAGER"] = sm.URL()
	api := f.start(t, "api", env)
	call := func(ev []byte) runtimeapi.HTTPResponse {
		t.Helper()
		cctx, ccancel := context.WithTimeout(t.Context(), time.Minute)
		defer ccancel()
		res, err := api.Invoke(cctx, ev)
		if err != nil || res.Error != nil {
			t.Fatalf("api: %v %v", err, res.Error)
		}
		var r runtimeapi.HTTPResponse
		if err := json.Unmarshal(res.Payload, &r); err != nil {
			t.Fatalf("api answered %s", res.Payload)
		}
		return r
	}
	hook := func(delivery, key string) runtimeapi.HTTPResponse {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "after": up.Head(t),
			"repository": map[string]any{"clone_url": up.URL(), "html_url": up.URL()}})
		mac := hmac.New(sha256.New, []byte(key))
		mac.Write(body)
		return call(runtimeapi.HTTPEventWith("POST", "/v1/hooks/github", string(body), map[string]string{
			"X-GitHub-Event": "push", "X-GitHub-Delivery": delivery,
			"X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac.Sum(nil)),
		}, nil))
	}
	// waitMirrored is how long after start the mirror shows the upstream's refs.
	waitMirrored := func(start time.Time, what string) time.Duration {
		t.Helper()
		for !mirrored() {
			if time.Since(start) > 3*heartbeat {
				t.Fatalf("%s: the owner did not fetch the push within %s", what, 3*heartbeat)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Since(start)
	}

	// A forged delivery is refused, signals nothing and fetches nothing.
	up.Commit(t, "forged", map[string][]byte{"README": []byte("forged\n")})
	if r := hook("forged", "not-the-secret"); r.StatusCode != 401 {
		t.Fatalf("forged hook: %d %s", r.StatusCode, r.Body)
	}
	if sig, err := f.st.GetSignals(t.Context(), rp.Owner); err != nil || !sig.Empty() {
		t.Fatalf("signals after a forged hook: %+v %v", sig, err)
	}
	time.Sleep(2 * worker.SignalEvery)
	if mirrored() {
		t.Fatal("the mirror moved after a forged hook")
	}

	var took []time.Duration
	for i := range hookPushes {
		if i > 0 {
			up.Commit(t, fmt.Sprintf("push %d", i), map[string][]byte{"README": fmt.Appendf(nil, "%d\n", i)})
		}
		start := time.Now()
		if r := hook(fmt.Sprintf("delivery-%d", i), secret); r.StatusCode != 202 {
			t.Fatalf("signed hook: %d %s", r.StatusCode, r.Body)
		}
		took = append(took, waitMirrored(start, fmt.Sprintf("push %d", i)))
	}
	// repos sync through the API (signed) takes the same path, as a sync.
	up.Commit(t, "synced", map[string][]byte{"README": []byte("sync\n")})
	start := time.Now()
	if r := call(runtimeapi.HTTPEvent("POST", "/v1/repos/"+target.ID+"/sync", "", runtimeapi.Operator)); r.StatusCode != 202 {
		t.Fatalf("sync: %d %s", r.StatusCode, r.Body)
	}
	syncTook := waitMirrored(start, "sync")

	if sm.Calls() != 1 {
		t.Errorf("the API read the secret %d times, want once (at cold start, then cached)", sm.Calls())
	}
	slices.Sort(took)
	t.Logf("hook → fetched by the owning worker over %d pushes: min %s, median %s, max %s; sync → fetched %s; heartbeat %s",
		len(took), took[0].Round(time.Millisecond), took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond),
		syncTook.Round(time.Millisecond), heartbeat)
	if path := os.Getenv(AWSHookResultsEnv); path != "" {
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		var all []float64
		for _, d := range took {
			all = append(all, ms(d))
		}
		if err := writeSection(path, "aws_hook", map[string]any{
			"pushes": len(took), "hook_to_fetched_ms": all, "median_ms": ms(took[len(took)/2]), "max_ms": ms(took[len(took)-1]),
			"sync_to_fetched_ms": ms(syncTook), "heartbeat_ms": ms(heartbeat), "signal_every_ms": ms(worker.SignalEvery),
			"notes": []string{
				"functions/e2e TestHookReachesTheOwningWorker: the API Lambda bootstrap (through the in-process Lambda Runtime API) on DynamoDB Local, the secret from the Secrets Manager fake, one worker (cloud.RunWorker) fetching from git http-backend on 127.0.0.1",
				"from the hook's invocation to the mirror's refs equal to the upstream's (polled every 20 ms); no coordinator tick after the push",
			},
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// writeSection sets one top-level section of the JSON object in path, keeping the
// others and their order.
func writeSection(path, name string, v any) error {
	type section struct {
		key string
		val json.RawMessage
	}
	var secs []section
	if b, err := os.ReadFile(path); err == nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return fmt.Errorf("%s: not a JSON object", path)
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			secs = append(secs, section{tok.(string), raw})
		}
	} else if !os.IsNotExist(err) {
		return err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if i := slices.IndexFunc(secs, func(s section) bool { return s.key == name }); i >= 0 {
		secs[i].val = raw
	} else {
		secs = append(secs, section{name, raw})
	}
	var out bytes.Buffer
	out.WriteString("{")
	for i, s := range secs {
		if i > 0 {
			out.WriteString(",")
		}
		k, _ := json.Marshal(s.key)
		fmt.Fprintf(&out, "%s:%s", k, s.val)
	}
	out.WriteString("}")
	var ind bytes.Buffer
	if err := json.Indent(&ind, out.Bytes(), "", "  "); err != nil {
		return err
	}
	ind.WriteByte('\n')
	return os.WriteFile(path, ind.Bytes(), 0o644)
}
