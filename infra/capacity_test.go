package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/mirrorfleet/mirrorfleet/infra/stackfacts"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// The bill's largest fleet: 1,000,000 repos, 48.8 TB of mirrors (bench/results/storecost.json).
const millionReposBytes = 48_800_000_000_000

// sized is one stack for the tests of settings an operator sizes (synthesized once):
// a storage budget, a hook throttle and a disk quota of their own, through context.
var sized = sync.OnceValues(func() (tpl, error) {
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"storageBudgetGiB": "50000", "hookRate": "400", "diskQuota": "60T",
		"serving": "false"}})
	p, err := PropsFromContext(app.Node())
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mirrorfleet-sized-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p.AllowPlaceholders, p.AlarmEmail, p.LambdaAssetDir = true, "ops@example.com", filepath.Join(dir, "no-build")
	_, _, tp, err := synthStack(dir, "Sized", p, false)
	return tp, err
})

func sizedStack(t *testing.T) tpl {
	t.Helper()
	tp, err := sized()
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// efsStatfs is what EFS's statfs reports with used bytes on it: a size near 2^63 bytes.
func efsStatfs(used int64) func(string) (int64, int64, error) {
	return func(string) (int64, int64, error) { return 1<<63 - 1<<20, used, nil }
}

// guardAdmits runs the worker's disk guard with the configuration a worker reads from
// env, on an EFS holding used bytes: whether a fetch may go ahead, and its byte share.
func guardAdmits(t *testing.T, env map[string]string, used int64) (bool, int64) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv(cloud.EnvTable, "MirrorFleet-Table") // a reference in the template
	t.Setenv(cloud.EnvWorkerID, "w-1")
	cfg, err := cloud.WorkerConfigFromEnv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Disk()
	d.StatFS = efsStatfs(used)
	u, total, err := d.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	share, ok := worker.DiskShare(u, total, worker.DefaultConfig().DiskThreshold, cfg.Fetchers)
	return ok, share
}

// The default stack's workers, as the template configures them, fetch on with the
// mirrors of a 1,000,000-repo fleet on EFS: no fleet-wide stop, and each fetch keeps its
// own byte cap. The stack as it was (a 500G quota against EFS's used bytes) stopped at
// 425 GiB; an operator's diskQuota still stops the fleet where it says.
func TestDefaultStackHoldsAMillionRepos(t *testing.T) {
	f, err := stackfacts.Parse([]byte(js(tmpl)))
	if err != nil {
		t.Fatal(err)
	}
	env := f.ServicesRunning("worker")[0].Env
	if ok, share := guardAdmits(t, env, millionReposBytes); !ok || share != 0 {
		t.Errorf("the default workers at 48.8 TB: fetch %v with a byte share %d, want a fetch with the mirror's own caps", ok, share)
	}
	if ok, _ := guardAdmits(t, env, 1<<62); !ok {
		t.Error("the default workers stop fetching at 4 EiB used")
	}
	before := deployenv.Merge(env, map[string]string{deployenv.DiskQuota: "500G", deployenv.DiskUsage: deployenv.DiskUsageStatfs})
	if ok, _ := guardAdmits(t, before, 426<<30); ok {
		t.Error("the stack as it was (500G quota) admits a fetch at 426 GiB: the test would not see the stop")
	}
	// An operator's hard stop: the template passes diskQuota on, and the guard keeps it.
	fq, err := stackfacts.Parse([]byte(js(sizedStack(t))))
	if err != nil {
		t.Fatal(err)
	}
	qenv := fq.ServicesRunning("worker")[0].Env
	if qenv[deployenv.DiskQuota] != "60T" || qenv[deployenv.DiskUsage] != deployenv.DiskUsageElastic {
		t.Fatalf("diskQuota=60T: worker environment %v", qenv)
	}
	if ok, share := guardAdmits(t, qenv, millionReposBytes); !ok || share <= 0 {
		t.Errorf("a 60T quota at 48.8 TB: fetch %v, share %d", ok, share)
	}
	if ok, _ := guardAdmits(t, qenv, 57<<40); ok {
		t.Error("a 60T quota admits a fetch at 57 TiB (past 85%)")
	}
	for _, bad := range []string{"lots", "0", "-5G"} {
		p := Props{DiskQuota: bad, AlarmEmail: "a@b.c", AllowPlaceholders: true}
		if err := p.Defaults().Check(); err == nil || !strings.Contains(err.Error(), "diskQuota") {
			t.Errorf("diskQuota=%s: %v", bad, err)
		}
	}
}

// The storage alarm: the file system's size (every class) past the operator's budget,
// 1 TiB by default; none leaves it out.
func TestStorageBudgetAlarm(t *testing.T) {
	a := alarm(t, "StorageBudgetAlarm")
	if a["Namespace"] != "AWS/EFS" || a["MetricName"] != "StorageBytes" || a["Statistic"] != "Maximum" || a["Period"] != 3600.0 ||
		a["Threshold"] != float64(1<<40) || a["ComparisonOperator"] != "GreaterThanThreshold" || a["TreatMissingData"] != "notBreaching" ||
		js(a["Dimensions"]) != js([]any{map[string]any{"Name": "FileSystemId", "Value": ref(logicalID(stack.FileSystem))},
			map[string]any{"Name": "StorageClass", "Value": "Total"}}) {
		t.Errorf("storage alarm %s", js(a))
	}
	if !strings.Contains(js(a["AlarmActions"]), logicalID(stack.AlarmTopic)) {
		t.Errorf("storage alarm notifies %v", a["AlarmActions"])
	}
	found := false
	for id, r := range sizedStack(t).resources("AWS::CloudWatch::Alarm") {
		if strings.HasPrefix(id, "StorageBudgetAlarm") {
			found = props(r)["Threshold"] == 50000.0*(1<<30)
		}
	}
	if !found {
		t.Error("storageBudgetGiB=50000: no alarm at 50,000 GiB")
	}
	_, _, tp := variant(t, "NoBudget", Props{NoStorageAlarm: true, WithoutServing: true}, false)
	for id := range tp.resources("AWS::CloudWatch::Alarm") {
		if strings.HasPrefix(id, "StorageBudgetAlarm") {
			t.Error("storageBudgetGiB=none: the alarm is there")
		}
	}
}

// The public hook route's throttle: 100 a second, bursts of 200 by default (the
// budget's); hookRate and hookBurst set it, within API Gateway's account limits.
func TestHookThrottle(t *testing.T) {
	_, stage := sizedStack(t).one(t, "AWS::ApiGatewayV2::Stage")
	if got := js(props(stage)["RouteSettings"]); got != js(map[string]any{HookRoute: map[string]any{"ThrottlingBurstLimit": 800, "ThrottlingRateLimit": 400}}) {
		t.Errorf("hookRate=400: route settings %s", got)
	}
	for p, want := range map[*Props]string{
		{HookRate: 20000}:               "hookRate 20000",
		{HookRate: 300, HookBurst: 100}: "hookBurst 100",
		{HookBurst: 9000}:               "hookBurst 9000",
	} {
		p.AlarmEmail, p.AllowPlaceholders = "a@b.c", true
		if err := p.Defaults().Check(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", *p, err, want)
		}
	}
}
