package cloud

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/secrets"
)

func getter(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestCoordinatorConfig(t *testing.T) {
	good := map[string]string{
		EnvTable:            "mirrorfleet",
		EnvScheduleGroup:    "mirrorfleet-timers",
		EnvSchedulerRoleARN: "arn:aws:iam::123456789012:role/mirrorfleet-scheduler",
	}
	c, err := coordinatorConfigFrom(getter(good))
	if err != nil {
		t.Fatal(err)
	}
	d := coordinator.DefaultConfig()
	if c.Fleet != DefaultFleet || c.Coordinator.Grace != d.Grace || c.Coordinator.Warmup != d.Warmup ||
		c.Coordinator.SuspectAfter != d.SuspectAfter || c.TimerDLQARN != "" || c.List.Enabled() {
		t.Errorf("defaults: %+v", c)
	}

	set := map[string]string{EnvGrace: "5m", EnvWarmup: "0s", EnvSuspectAfter: "20s", EnvFleet: "prod",
		EnvTimerDLQARN: "arn:aws:sqs:us-east-1:123456789012:timers-dlq", EnvLease: "2m"}
	for k, v := range good {
		set[k] = v
	}
	c, err = coordinatorConfigFrom(getter(set))
	if err != nil {
		t.Fatal(err)
	}
	if c.Coordinator.Grace != 5*time.Minute || c.Coordinator.Warmup != coordinator.NoWarmup ||
		c.Coordinator.SuspectAfter != 20*time.Second || c.Fleet != "prod" || c.Coordinator.Lease != 2*time.Minute ||
		c.TimerDLQARN != set[EnvTimerDLQARN] {
		t.Errorf("set: %+v", c)
	}

	// Everything wrong at once: one error naming each variable.
	_, err = coordinatorConfigFrom(getter(map[string]string{
		EnvScheduleGroup: "bad group!", EnvSchedulerRoleARN: "mirrorfleet-scheduler", EnvTimerDLQARN: "queue",
		EnvGrace: "ten minutes", EnvSuspectAfter: "-1s", EnvLease: "10s", EnvLogLevel: "loud",
	}))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{EnvTable + " is not set", EnvScheduleGroup, EnvSchedulerRoleARN + `="mirrorfleet-scheduler": not an ARN`,
		EnvTimerDLQARN, EnvGrace + `="ten minutes": not a duration`, EnvSuspectAfter + `="-1s": must be greater than zero`,
		EnvLease, EnvLogLevel} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	_, err = coordinatorConfigFrom(getter(map[string]string{EnvTable: "t", EnvScheduleGroup: "g",
		EnvSchedulerRoleARN: good[EnvSchedulerRoleARN], EnvGrace: "20s", EnvSuspectAfter: "30s"}))
	if err == nil || !strings.Contains(err.Error(), "must be shorter than") {
		t.Errorf("suspect after the grace: %v", err)
	}
}

func TestCoordinatorConfigListSync(t *testing.T) {
	t.Setenv("MIRRORFLEET_LIST_REPO", "https://git.example.org/mirrors/list.git")
	t.Setenv("MIRRORFLEET_LIST_INTERVAL", "5m")
	c, err := coordinatorConfigFrom(getter(map[string]string{EnvTable: "t12", EnvScheduleGroup: "g",
		EnvSchedulerRoleARN: "arn:aws:iam::123456789012:role/r"}))
	if err != nil || !c.List.Enabled() || c.List.Interval != 5*time.Minute {
		t.Fatalf("list config %+v, %v", c.List, err)
	}
	t.Setenv("MIRRORFLEET_LIST_INTERVAL", "often")
	if _, err := CoordinatorConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "MIRRORFLEET_LIST_INTERVAL") {
		t.Errorf("bad list interval: %v", err)
	}
}

func TestWorkerConfig(t *testing.T) {
	ctx := t.Context()
	c, err := workerConfigFrom(ctx, getter(map[string]string{EnvTable: "mirrorfleet"}))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if c.MirrorRoot != DefaultMirrorRoot || c.Fetchers != 10 || c.Heartbeat != 10*time.Second || c.Drain != DefaultDrain ||
		c.DiskQuota != 0 || c.AllowPrivateHosts || c.WorkerIDSource != "hostname" || c.PriorityPolicy != "bayes" ||
		c.MaintainEvery != 24*time.Hour || c.MaintainPacks != 16 || c.ScrubEvery != 90*24*time.Hour || c.PollBudget != 0 || c.ScrubChanged ||
		!strings.HasSuffix(c.WorkerID, fmt.Sprintf("-%d", os.Getpid())) || host == "" {
		t.Errorf("defaults: %+v", c)
	}

	c, err = workerConfigFrom(ctx, getter(map[string]string{EnvTable: "mirrorfleet", EnvMirrorRoot: "/srv/mirrors",
		EnvFetchers: "4", EnvHeartbeat: "500ms", EnvMinInterval: "1m", EnvDiskQuota: "500G",
		EnvAllowPrivateHosts: "1", EnvWorkerID: "w-1", EnvDrain: "15s", EnvPolicy: "cbrt",
		EnvMaintainEvery: "6h", EnvMaintainPacks: "8", EnvScrubEvery: "720h", EnvPollBudget: "0.5", EnvScrubChanged: "true"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.MirrorRoot != "/srv/mirrors" || c.Fetchers != 4 || c.Heartbeat != 500*time.Millisecond || c.MinInterval != time.Minute ||
		c.DiskQuota != 500<<30 || !c.AllowPrivateHosts || c.WorkerID != "w-1" || c.WorkerIDSource != "env" || c.Drain != 15*time.Second ||
		c.PriorityPolicy != "cbrt" || c.MaintainEvery != 6*time.Hour || c.MaintainPacks != 8 || c.ScrubEvery != 720*time.Hour ||
		c.PollBudget != 0.5 || !c.ScrubChanged {
		t.Errorf("set: %+v", c)
	}

	_, err = workerConfigFrom(ctx, getter(map[string]string{EnvMirrorRoot: "mirrors", EnvFetchers: "ten",
		EnvHeartbeat: "1ms", EnvDiskQuota: "-5", EnvAllowPrivateHosts: "maybe", EnvWorkerID: "../etc", EnvPolicy: "fifo",
		EnvDiskUsage: "du", EnvAliveFile: "alive", EnvPollBudget: "-2"}))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{EnvTable + " is not set", EnvMirrorRoot + `="mirrors": must be an absolute path`,
		EnvFetchers + `="ten": not an integer`, EnvHeartbeat, EnvDiskQuota, EnvAllowPrivateHosts, EnvWorkerID,
		EnvPolicy + `="fifo": unknown policy`, EnvDiskUsage + `="du"`, EnvAliveFile + `="alive"`, EnvPollBudget + `="-2"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// Without MIRRORFLEET_WORKER_ID the worker is named after its ECS task; if the metadata
// endpoint does not answer in time, after the host.
func TestWorkerIDFromECSMetadata(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v4/abc/task" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"Cluster":"arn:aws:ecs:us-east-1:123456789012:cluster/mirrors",
			"TaskARN":"arn:aws:ecs:us-east-1:123456789012:task/mirrors/0123456789abcdef0123456789abcdef",
			"Family":"mirrorfleet-worker","Revision":"7"}`)
	}))
	defer srv.Close()
	c, err := workerConfigFrom(t.Context(), getter(map[string]string{EnvTable: "t12", EnvECSMetadata: srv.URL + "/v4/abc"}))
	if err != nil || c.WorkerID != "0123456789abcdef0123456789abcdef" || c.WorkerIDSource != "ecs-metadata" {
		t.Fatalf("%+v, %v", c, err)
	}

	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer stuck.Close()
	start := time.Now()
	c, err = workerConfigFrom(t.Context(), getter(map[string]string{EnvTable: "t12", EnvECSMetadata: stuck.URL}))
	if err != nil || !strings.HasPrefix(c.WorkerIDSource, "hostname (ECS task metadata unusable") {
		t.Fatalf("%+v, %v", c, err)
	}
	if took := time.Since(start); took > ecsMetadataTimeout+time.Second {
		t.Errorf("metadata timeout took %s", took)
	}
}

func TestAPIConfig(t *testing.T) {
	c, err := apiConfigFrom(getter(map[string]string{EnvTable: "mirrorfleet", EnvAPIBasePath: "/prod",
		EnvCloneBaseURL: "https://git.example.org/"}))
	if err != nil || c.Table != "mirrorfleet" || c.BasePath != "/prod" || c.AllowPrivateHosts || c.CloneBaseURL != "https://git.example.org" {
		t.Fatalf("%+v, %v", c, err)
	}
	_, err = apiConfigFrom(getter(map[string]string{EnvAPIBasePath: "prod", EnvCloneBaseURL: "git.example.org"}))
	if err == nil || !strings.Contains(err.Error(), EnvTable) || !strings.Contains(err.Error(), EnvAPIBasePath) ||
		!strings.Contains(err.Error(), EnvCloneBaseURL) {
		t.Errorf("err %v", err)
	}
	c, err = apiConfigFrom(getter(map[string]string{EnvTable: "t", EnvCloneBaseURL: "https://git.example.org/"}))
	if err != nil || c.CloneBaseURL != "https://git.example.org" {
		t.Errorf("clone base URL: %q, %v", c.CloneBaseURL, err)
	}
	for _, bad := range []string{"git.example.org", "ftp://x", "https://u:p@x", "https://x/?q"} {
		if _, err := apiConfigFrom(getter(map[string]string{EnvTable: "t", EnvCloneBaseURL: bad})); err == nil || !strings.Contains(err.Error(), EnvCloneBaseURL) {
			t.Errorf("clone base URL %q accepted (%v)", bad, err)
		}
	}
	// The webhook secret's cache time: the documented default, a duration, nothing else.
	if c.WebhookSecretTTL != secrets.DefaultTTL || secrets.DefaultTTL != 5*time.Minute {
		t.Errorf("webhook secret TTL %s by default, want 5m", c.WebhookSecretTTL)
	}
	if c, err := apiConfigFrom(getter(map[string]string{EnvTable: "t", EnvWebhookSecretTTL: "30s"})); err != nil || c.WebhookSecretTTL != 30*time.Second {
		t.Errorf("webhook secret TTL 30s: %s, %v", c.WebhookSecretTTL, err)
	}
	for _, bad := range []string{"5", "0s", "-1m"} {
		if _, err := apiConfigFrom(getter(map[string]string{EnvTable: "t", EnvWebhookSecretTTL: bad})); err == nil || !strings.Contains(err.Error(), EnvWebhookSecretTTL) {
			t.Errorf("webhook secret TTL %q accepted (%v)", bad, err)
		}
	}
	for _, bad := range []string{"status.example.org", "https://x/page", "ftp://x"} {
		if _, err := apiConfigFrom(getter(map[string]string{EnvTable: "t", EnvCORSOrigin: bad})); err == nil || !strings.Contains(err.Error(), EnvCORSOrigin) {
			t.Errorf("CORS origin %q accepted (%v)", bad, err)
		}
	}
}

// setEnv puts a deployment's environment into the process's, as Lambda and ECS do.
func setEnv(t *testing.T, env map[string]string) {
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// What the stack writes (deployenv) is what the binaries read back: every setting
// survives the trip, a zero warm-up included.
func TestDeployEnvRoundTrip(t *testing.T) {
	const role, dlq = "arn:aws:iam::123456789012:role/sched", "arn:aws:sqs:us-east-1:123456789012:dlq"
	pct := 12.5
	list := deployenv.List{Repo: "https://git.example.org/lists.git", Branch: "main", Paths: []string{"a.txt", "dir"},
		Interval: 5 * time.Minute, PurgeThreshold: &pct, Dir: "/tmp/list"}
	for _, warm := range []time.Duration{0, 90 * time.Second} {
		c := deployenv.Coordinator{Common: deployenv.Common{Table: "t12", Fleet: "prod", LogLevel: "debug"},
			ScheduleGroup: "prod-timers", SchedulerRoleARN: role, TimerDLQARN: dlq, Grace: 7 * time.Minute, Warmup: warm, List: list}
		t.Run("coordinator warmup "+warm.String(), func(t *testing.T) {
			setEnv(t, c.Env())
			got, err := CoordinatorConfigFromEnv()
			if err != nil {
				t.Fatal(err)
			}
			wantWarm := warm
			if warm == 0 {
				wantWarm = coordinator.NoWarmup
			}
			if got.Table != "t12" || got.Fleet != "prod" || got.LogLevel.String() != "DEBUG" || got.ScheduleGroup != "prod-timers" ||
				got.SchedulerRoleARN != role || got.TimerDLQARN != dlq || got.Coordinator.Grace != 7*time.Minute ||
				got.Coordinator.Warmup != wantWarm || got.List.Repo != list.Repo || got.List.Branch != "main" ||
				strings.Join(got.List.Paths, ",") != "a.txt,dir" || got.List.Interval != 5*time.Minute ||
				got.List.PurgeThreshold != 12.5 || got.List.Dir != "/tmp/list" {
				t.Errorf("read back %+v", got)
			}
		})
	}
	t.Run("api", func(t *testing.T) {
		setEnv(t, deployenv.API{Common: deployenv.Common{Table: "t12"}, PublicReads: true,
			CloneBaseURL: "http://mf-123.us-east-1.elb.amazonaws.com", List: list, WebhookSecretTTL: 90 * time.Second,
			CORSOrigins: []string{"https://status.example.org", "http://localhost:3000"}}.Env())
		got, err := APIConfigFromEnv()
		if err != nil || got.Table != "t12" || !got.PublicReads || got.CloneBaseURL != "http://mf-123.us-east-1.elb.amazonaws.com" ||
			got.List.Repo != list.Repo || got.WebhookSecretTTL != 90*time.Second ||
			strings.Join(got.CORSOrigins, " ") != "https://status.example.org http://localhost:3000" {
			t.Errorf("read back %+v, %v", got, err)
		}
	})
	t.Run("worker", func(t *testing.T) {
		setEnv(t, deployenv.Worker{Common: deployenv.Common{Table: "t12", Fleet: "prod", CaseInsensitiveHosts: []string{"git.example.org", "forge.example.com"}}, MirrorRoot: "/mnt/mirrors",
			Fetchers: 7, Drain: 25 * time.Second, DiskQuota: "500G", DiskUsage: deployenv.DiskUsageStatfs,
			AliveFile: "/tmp/mirrorfleet/alive", EventBus: "prod-mirrorfleet"}.Env())
		t.Setenv(EnvWorkerID, "w-1")
		got, err := WorkerConfigFromEnv(t.Context())
		if err != nil || got.Table != "t12" || got.Fleet != "prod" || got.MirrorRoot != "/mnt/mirrors" || got.Fetchers != 7 ||
			got.Drain != 25*time.Second || got.DiskQuota != 500<<30 || !got.DiskStatfs || got.AliveFile != "/tmp/mirrorfleet/alive" ||
			got.EventBus != "prod-mirrorfleet" || strings.Join(got.CaseInsensitiveHosts, ",") != "git.example.org,forge.example.com" {
			t.Errorf("read back %+v, %v", got, err)
		}
	})
	// EFS as the stack deploys it: elastic, no quota: the disk guard has no total.
	t.Run("worker on EFS", func(t *testing.T) {
		setEnv(t, deployenv.Worker{Common: deployenv.Common{Table: "t12"}, MirrorRoot: "/mnt/mirrors",
			DiskUsage: deployenv.DiskUsageElastic}.Env())
		t.Setenv(EnvWorkerID, "w-1")
		got, err := WorkerConfigFromEnv(t.Context())
		if err != nil || !got.DiskElastic || got.DiskStatfs || got.DiskQuota != 0 {
			t.Fatalf("read back %+v, %v", got, err)
		}
		if d := got.Disk(); !d.Elastic || d.Quota != 0 || d.Path != "/mnt/mirrors" {
			t.Errorf("disk %+v", d)
		}
	})
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1073741824": 1 << 30, "512M": 512 << 20, "500G": 500 << 30,
		"2TiB": 2 << 40, "1.5k": 1536, "10 GB": 10 << 30, "7B": 7} {
		if got, err := ParseBytes(in); got != want || err != nil {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "lots", "5iB", "1e3", "5P", "99999999999T"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q): no error", in)
		}
	}
}

// The SDK's default configuration reaches DynamoDB Local through AWS_ENDPOINT_URL, as a
// worker process does.
func TestNewDynamoStoreHonoursAWSEndpointURL(t *testing.T) {
	ep := os.Getenv("MIRRORFLEET_DYNAMODB_ENDPOINT")
	if ep == "" {
		t.Skip("DynamoDB Local not running: set MIRRORFLEET_DYNAMODB_ENDPOINT (make test starts it)")
	}
	t.Setenv("AWS_ENDPOINT_URL", ep)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	st, err := NewDynamoStore(t.Context(), "", fmt.Sprintf("mf_cloud_%d", time.Now().UnixNano()%1e12))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = st.DeleteTable(ctx)
	}()
	if _, err := st.GetElection(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestMissingRegionIsAClearError(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_PROFILE", "")
	if _, err := LoadAWSConfig(t.Context()); err == nil || !strings.Contains(err.Error(), "AWS_REGION is not set") {
		t.Errorf("err %v", err)
	}
}

// The worker maintains mirrors with git: without it, it does not start, and says why.
func TestRunWorkerNeedsGit(t *testing.T) {
	t.Setenv(gitcmd.EnvGit, "/nonexistent/git")
	err := RunWorker(t.Context(), WorkerConfig{Table: "t12", MirrorRoot: t.TempDir(), PriorityPolicy: "rate"})
	if err == nil || !strings.Contains(err.Error(), "git not found") || !strings.Contains(err.Error(), gitcmd.EnvGit) {
		t.Errorf("err %v", err)
	}
}

func TestRunWorkerNeedsTheMirrorRoot(t *testing.T) {
	err := RunWorker(t.Context(), WorkerConfig{Table: "t12", MirrorRoot: "/nonexistent/mirrors"})
	if err == nil || !strings.Contains(err.Error(), EnvMirrorRoot) || !strings.Contains(err.Error(), "EFS") {
		t.Errorf("err %v", err)
	}
}

func TestWorkerConfigLimits(t *testing.T) {
	ctx := t.Context()
	c, err := workerConfigFrom(ctx, getter(map[string]string{EnvTable: "mirrorfleet"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Fetch.MaxPackBytes != 8<<30 || c.Fetch.MaxRefs != 500_000 || c.HostConcurrency != 4 || c.HostRate != 2 || c.HostPause != time.Minute {
		t.Errorf("defaults: %+v, host %d %v %v", c.Fetch, c.HostConcurrency, c.HostRate, c.HostPause)
	}
	c, err = workerConfigFrom(ctx, getter(map[string]string{EnvTable: "mirrorfleet",
		EnvMaxRefBytes: "16M", EnvMaxRefs: "1000", EnvMaxPackBytes: "2G", EnvMaxPackObjects: "5000000",
		EnvMaxObjectBytes: "100M", EnvMinRate: "10K", EnvRateWindow: "30s",
		EnvMaxPackBytesFor: "https://github.com/torvalds/linux=20G, https://chromium.googlesource.com/=64G",
		EnvHostConcurrency: "-1", EnvHostRate: "0.5", EnvHostPause: "5m"}))
	if err != nil {
		t.Fatal(err)
	}
	f := c.Fetch
	if f.MaxRefBytes != 16<<20 || f.MaxRefs != 1000 || f.MaxPackBytes != 2<<30 || f.MaxPackObjects != 5_000_000 ||
		f.MaxObjectBytes != 100<<20 || f.MinRate != 10<<10 || f.RateWindow != 30*time.Second ||
		f.PackBytesFor["https://github.com/torvalds/linux"] != 20<<30 || f.PackBytesFor["https://chromium.googlesource.com/"] != 64<<30 ||
		c.HostConcurrency != -1 || c.HostRate != 0.5 || c.HostPause != 5*time.Minute {
		t.Errorf("set: %+v, host %d %v %v", f, c.HostConcurrency, c.HostRate, c.HostPause)
	}
	_, err = workerConfigFrom(ctx, getter(map[string]string{EnvTable: "mirrorfleet",
		EnvMaxPackBytes: "lots", EnvMaxPackBytesFor: "github.com/x=1G", EnvHostRate: "fast", EnvRateWindow: "-1s"}))
	for _, want := range []string{EnvMaxPackBytes, EnvMaxPackBytesFor, EnvHostRate, EnvRateWindow} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %s: %v", want, err)
		}
	}
}

func TestParseHookSecrets(t *testing.T) {
	s, err := ParseHookSecrets("  plain-secret\n")
	if err != nil || s.Secret != "plain-secret" || len(s.SecretFor) != 0 {
		t.Fatalf("plain: %+v %v", s, err)
	}
	s, err = ParseHookSecrets(`{"secret":"all","secret_for":{"GitLab.Example.org":"gl"}}`)
	if err != nil || s.Secret != "all" || s.SecretFor["gitlab.example.org"] != "gl" {
		t.Fatalf("JSON: %+v %v", s, err)
	}
	for _, bad := range []string{`{"secret":"a","hosts":{}}`, `{"secret_for":{"https://x.org":"s"}}`, `{"secret_for":{"x.org":""}}`, `{"secret":`} {
		if _, err := ParseHookSecrets(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
