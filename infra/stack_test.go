package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/mirrorfleet/mirrorfleet/infra/budget"
	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
)

// One synth per test binary for the default stack (jsii start-up and synth take
// seconds): the stack, its template and the cdk-nag annotations are shared by every
// test. A few tests synthesize a variant of their own.
var (
	stack    *Stack
	template assertions.Template
	tmpl     tpl // the template as JSON, for checks assertions cannot express
)

// tpl is a synthesized template as JSON.
type tpl map[string]any

func TestMain(m *testing.M) {
	os.Setenv("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
	os.Setenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
	code := func() int {
		// No jsii.Close(): it races with the runtime's own child-process watcher (go test
		// -race reports it, and it prints "waitid: no child processes"); the node child
		// exits when this process closes its pipes.
		out, err := os.MkdirTemp("", "mirrorfleet-cdk-")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(out)
		// No build/ zips and no image here: placeholders, explicitly allowed, as `make
		// synth` does. Otherwise the defaults, as `cdk deploy` without context gives them.
		stack, template, tmpl, err = synthStack(out, "MirrorFleetTest", Props{
			LambdaAssetDir:    filepath.Join(out, "no-build"),
			AllowPlaceholders: true,
			DeletionGuard:     true,
			AlarmEmail:        "ops@example.com",
		}, true)
		if err != nil {
			panic(err)
		}
		return m.Run()
	}()
	os.Exit(code)
}

// synthStack synthesizes one stack into dir, with cdk-nag's AwsSolutions pack if nag.
func synthStack(dir, id string, p Props, nag bool) (*Stack, assertions.Template, tpl, error) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(dir)})
	if nag {
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	}
	s, err := NewStack(app, id, p)
	if err != nil {
		return nil, nil, nil, err
	}
	at := assertions.Template_FromStack(s.Stack, nil)
	var t tpl
	b, err := json.Marshal(at.ToJSON())
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	return s, at, t, err
}

// variant synthesizes a stack with p (placeholders allowed) for one test.
func variant(t *testing.T, id string, p Props, nag bool) (*Stack, assertions.Template, tpl) {
	t.Helper()
	dir := t.TempDir()
	p.AllowPlaceholders = true
	p.LambdaAssetDir = filepath.Join(dir, "no-build")
	if p.AlarmEmail == "" && !p.NoAlarmEmail {
		p.AlarmEmail = "ops@example.com"
	}
	s, at, tp, err := synthStack(dir, id, p, nag)
	if err != nil {
		t.Fatal(err)
	}
	return s, at, tp
}

func (t tpl) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range t["Resources"].(map[string]any) {
		r := r.(map[string]any)
		if r["Type"] == typ {
			out[id] = r
		}
	}
	return out
}

func resourcesOf(typ string) map[string]map[string]any { return tmpl.resources(typ) }

func props(r map[string]any) map[string]any { return r["Properties"].(map[string]any) }

// one returns the single resource of typ, failing otherwise.
func (t tpl) one(tt *testing.T, typ string) (string, map[string]any) {
	tt.Helper()
	rs := t.resources(typ)
	if len(rs) != 1 {
		tt.Fatalf("%d %s resources, want 1", len(rs), typ)
	}
	for id, r := range rs {
		return id, r
	}
	return "", nil
}

func logicalID(c interface{ Node() constructs.Node }) string { return logicalIDIn(stack, c) }

func logicalIDIn(s *Stack, c interface{ Node() constructs.Node }) string {
	if e, ok := c.(awscdk.CfnElement); ok {
		return *s.Stack.GetLogicalId(e)
	}
	return *s.Stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

func obj(kv ...any) *map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return &m
}

func like(kv ...any) assertions.Matcher { return assertions.Match_ObjectLike(obj(kv...)) }

func arrayWith(v ...any) assertions.Matcher { return assertions.Match_ArrayWith(&v) }

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func ref(id string) map[string]any          { return map[string]any{"Ref": id} }
func getAtt(id, attr string) map[string]any { return map[string]any{"Fn::GetAtt": []any{id, attr}} }

func TestResourceCounts(t *testing.T) {
	for typ, n := range map[string]float64{
		"AWS::DynamoDB::Table":                      1,
		"AWS::Lambda::Function":                     2,
		"AWS::Lambda::EventInvokeConfig":            1, // the coordinator's
		"AWS::Events::Rule":                         1,
		"AWS::Scheduler::ScheduleGroup":             1,
		"AWS::SQS::Queue":                           1,
		"AWS::ApiGatewayV2::Api":                    1,
		"AWS::ApiGatewayV2::Stage":                  1,
		"AWS::EC2::VPC":                             1,
		"AWS::EC2::NatGateway":                      0,
		"AWS::EC2::VPCEndpoint":                     1,
		"AWS::EFS::FileSystem":                      1,
		"AWS::EFS::AccessPoint":                     1,
		"AWS::ECS::Cluster":                         1,
		"AWS::ECS::Service":                         2, // Spot workers and their on-demand twin; the git server runs in their tasks
		"AWS::ECS::TaskDefinition":                  1,
		"AWS::ElasticLoadBalancingV2::LoadBalancer": 1,
		"AWS::ElasticLoadBalancingV2::TargetGroup":  1,
		"AWS::ElasticLoadBalancingV2::Listener":     1,
		"AWS::CloudFront::Distribution":             1,
		// Nine operator alarms, two for the staleness scaling, two for the fallback.
		"AWS::CloudWatch::Alarm":     13,
		"AWS::CloudWatch::Dashboard": 1,
		"AWS::SNS::Topic":            1,
		"AWS::SNS::TopicPolicy":      1,
		"AWS::SNS::Subscription":     1,
		"AWS::Logs::LogGroup":        6,
		"AWS::S3::Bucket":            0,
		"AWS::Events::EventBus":      1,
	} {
		template.ResourceCountIs(jsii.String(typ), jsii.Number(n))
	}
	if len(stack.Placeholders) != 4 {
		t.Errorf("placeholders = %v, want both zips, the image and CloudFront's prefix list (no build dir, no workerImage, "+
			"no account and region in the test)", stack.Placeholders)
	}
}

// The functions' environment is the contract's (deployenv) for the stack's settings,
// each reference wired to the right resource.
func TestLambdaEnvironmentIsTheContract(t *testing.T) {
	template.AllResourcesProperties(jsii.String("AWS::Lambda::Function"), obj(
		"Runtime", "provided.al2023",
		"Architectures", []any{"arm64"},
		"Handler", "bootstrap",
	))
	fns := resourcesOf("AWS::Lambda::Function")
	envOf := func(fn interface{ Node() constructs.Node }) map[string]any {
		return props(fns[logicalID(fn)])["Environment"].(map[string]any)["Variables"].(map[string]any)
	}
	table := ref(logicalID(stack.Table))
	want := map[string]any{
		deployenv.Table:            table,
		deployenv.Fleet:            "MirrorFleetTest",
		deployenv.ScheduleGroup:    ref(logicalID(stack.ScheduleGroup)),
		deployenv.SchedulerRoleARN: getAtt(logicalID(stack.SchedulerRole), "Arn"),
		deployenv.TimerDLQARN:      getAtt(logicalID(stack.TimerDLQ), "Arn"),
		deployenv.Grace:            "10m0s",
		deployenv.Warmup:           "10m0s",
	}
	if got := envOf(stack.Coordinator); js(got) != js(want) {
		t.Errorf("coordinator environment\n got %s\nwant %s", js(got), js(want))
	}
	wantAPI := map[string]any{
		deployenv.Table:        table,
		deployenv.Fleet:        "MirrorFleetTest",
		deployenv.PublicReads:  "false",
		deployenv.CloneBaseURL: map[string]any{"Fn::Join": []any{"", []any{"https://", getAtt(logicalID(stack.Serve.Distribution), "DomainName")}}},
		// The webhook secret's ARN, never its value.
		deployenv.WebhookSecretARN: ref(logicalID(stack.WebhookSecret.(interface{ Node() constructs.Node }))),
	}
	if got := envOf(stack.API); js(got) != js(wantAPI) {
		t.Errorf("API environment\n got %s\nwant %s", js(got), js(wantAPI))
	}
	template.HasResourceProperties(jsii.String("AWS::Events::Rule"), obj(
		"ScheduleExpression", "rate(1 minute)",
		"Targets", arrayWith(like("Arn", getAtt(logicalID(stack.Coordinator), "Arn"))),
	))
}

// No reserved concurrency by default (a new account's quota refuses any; the lease
// keeps one leader), and neither Lambda nor EventBridge retries a failed tick or firing:
// the next minute's tick repairs it.
func TestCoordinatorInvocation(t *testing.T) {
	fns := resourcesOf("AWS::Lambda::Function")
	if rc := props(fns[logicalID(stack.Coordinator)])["ReservedConcurrentExecutions"]; rc != nil {
		t.Errorf("coordinator reserved concurrency %v, want none by default", rc)
	}
	if rc := props(fns[logicalID(stack.API)])["ReservedConcurrentExecutions"]; rc != nil {
		t.Errorf("API reserved concurrency %v, want none", rc)
	}
	template.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), obj(
		"FunctionName", ref(logicalID(stack.Coordinator)),
		"MaximumRetryAttempts", 0,
		"MaximumEventAgeInSeconds", 120,
	))
	template.HasResourceProperties(jsii.String("AWS::Events::Rule"), obj(
		"Targets", arrayWith(like("RetryPolicy", obj("MaximumRetryAttempts", 0, "MaximumEventAgeInSeconds", 60))),
	))

	// A reservation when asked for, still without retries.
	s, _, tp := variant(t, "Reserved", Props{CoordinatorConcurrency: 1, WithoutServing: true}, false)
	if rc := props(tp.resources("AWS::Lambda::Function")[logicalIDIn(s, s.Coordinator)])["ReservedConcurrentExecutions"]; rc != 1.0 {
		t.Errorf("coordinatorConcurrency=1: reserved %v", rc)
	}
	if len(tp.resources("AWS::Lambda::EventInvokeConfig")) != 1 {
		t.Error("coordinatorConcurrency=1 dropped the async retry settings")
	}
	// A new account's concurrency quota (10) refuses any reservation: synth says what to request.
	if !warned(s, "quota must be at least 11") {
		t.Error("coordinatorConcurrency=1 synthesized without saying what quota it needs")
	}
}

// warned reports whether synth warned about s with a message containing text.
func warned(s *Stack, text string) bool {
	for _, m := range *assertions.Annotations_FromStack(s.Stack).FindWarning(jsii.String("*"), assertions.Match_AnyValue()) {
		if strings.Contains(js(m.Entry.Data), text) {
			return true
		}
	}
	return false
}

func TestTable(t *testing.T) {
	var gsis []any
	for _, g := range indexes {
		gsis = append(gsis, like(
			"IndexName", g[0],
			"KeySchema", []any{obj("AttributeName", g[1], "KeyType", "HASH"), obj("AttributeName", g[2], "KeyType", "RANGE")},
			"Projection", obj("ProjectionType", "KEYS_ONLY"),
		))
	}
	template.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), obj(
		"KeySchema", []any{obj("AttributeName", "pk", "KeyType", "HASH"), obj("AttributeName", "sk", "KeyType", "RANGE")},
		"BillingMode", "PAY_PER_REQUEST",
		"PointInTimeRecoverySpecification", obj("PointInTimeRecoveryEnabled", true),
		"SSESpecification", obj("SSEEnabled", true),
		"TimeToLiveSpecification", obj("AttributeName", "expire_at", "Enabled", true),
		"DeletionProtectionEnabled", true,
		"GlobalSecondaryIndexes", arrayWith(gsis...),
	))
	template.HasResource(jsii.String("AWS::DynamoDB::Table"), obj("DeletionPolicy", "Retain"))
}

// TestHTTPAPIIAMOnEveryRoute: every route needs IAM but exactly one, the forges'
// webhooks (their signature is the authentication), which the stage throttles on its own.
func TestHTTPAPIIAMOnEveryRoute(t *testing.T) {
	routes := resourcesOf("AWS::ApiGatewayV2::Route")
	if len(routes) == 0 {
		t.Fatal("no routes")
	}
	public := 0
	for id, r := range routes {
		p := props(r)
		if p["RouteKey"] == HookRoute {
			public++
			if p["AuthorizationType"] != "NONE" {
				t.Errorf("hook route %s: AuthorizationType %v, want NONE", id, p["AuthorizationType"])
			}
			continue
		}
		if p["AuthorizationType"] != "AWS_IAM" {
			t.Errorf("route %s (%v): AuthorizationType %v, want AWS_IAM", id, p["RouteKey"], p["AuthorizationType"])
		}
	}
	if public != 1 {
		t.Errorf("%d routes %q, want exactly one", public, HookRoute)
	}
	template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), obj(
		"StageName", "$default",
		"AccessLogSettings", like("DestinationArn", assertions.Match_AnyValue()),
		"DefaultRouteSettings", like("ThrottlingRateLimit", 50, "ThrottlingBurstLimit", 100),
		"RouteSettings", obj(HookRoute, obj("ThrottlingRateLimit", 100, "ThrottlingBurstLimit", 200)),
	))
	// The stage names the route in its settings: it must be created after it.
	for id, r := range resourcesOf("AWS::ApiGatewayV2::Stage") {
		deps := fmt.Sprint(r["DependsOn"])
		for rid, rt := range routes {
			if props(rt)["RouteKey"] == HookRoute && !strings.Contains(deps, rid) {
				t.Errorf("stage %s does not depend on the hook route %s (DependsOn %s)", id, rid, deps)
			}
		}
	}
}

// TestWebhookSecret: the API Lambda gets the webhooks' secret as an ARN in its
// environment, never a value; the secret's value is generated by Secrets Manager (not in
// the template); the function may read that secret and no other.
func TestWebhookSecret(t *testing.T) {
	secretID, sec := tmpl.one(t, "AWS::SecretsManager::Secret")
	gen, ok := props(sec)["GenerateSecretString"].(map[string]any)
	if !ok || props(sec)["SecretString"] != nil {
		t.Fatalf("secret %v: want a generated value and no SecretString", props(sec))
	}
	if gen["ExcludePunctuation"] != true {
		t.Errorf("generated secret %v: want no punctuation (pasted into forge settings)", gen)
	}
	vars := props(resourcesOf("AWS::Lambda::Function")[logicalID(stack.API)])["Environment"].(map[string]any)["Variables"].(map[string]any)
	if got := fmt.Sprint(vars[deployenv.WebhookSecretARN]); got != fmt.Sprint(map[string]any{"Ref": secretID}) {
		t.Errorf("%s = %s, want the secret's ARN (Ref %s)", deployenv.WebhookSecretARN, got, secretID)
	}
	for name := range vars {
		if strings.Contains(strings.ToUpper(name), "SECRET") && name != deployenv.WebhookSecretARN {
			t.Errorf("the API Lambda has %s in its environment", name)
		}
	}
	role := props(resourcesOf("AWS::Lambda::Function")[logicalID(stack.API)])["Role"]
	found := false
	for _, st := range statements() {
		for _, s := range st {
			acts := fmt.Sprint(s["Action"])
			if !strings.Contains(acts, "secretsmanager:") {
				continue
			}
			if fmt.Sprint(s["Resource"]) != fmt.Sprint(map[string]any{"Ref": secretID}) {
				t.Errorf("a secretsmanager grant on %v, want only the webhook secret", s["Resource"])
			}
			if strings.Contains(acts, "secretsmanager:GetSecretValue") {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no statement lets the API role (%v) read the webhook secret", role)
	}
}

// With webhooks=false there is no public route, no secret and no secret variable; with
// webhookSecretArn the stack uses that secret and creates none.
func TestWebhookVariants(t *testing.T) {
	s, _, tp := variant(t, "MirrorFleetNoHooks", Props{WithoutWebhooks: true, WithoutServing: true}, false)
	for _, r := range tp.resources("AWS::ApiGatewayV2::Route") {
		if p := props(r); p["AuthorizationType"] != "AWS_IAM" {
			t.Errorf("without webhooks, route %v has %v", p["RouteKey"], p["AuthorizationType"])
		}
	}
	if n := len(tp.resources("AWS::SecretsManager::Secret")); n != 0 {
		t.Errorf("without webhooks: %d secrets", n)
	}
	vars := props(tp.resources("AWS::Lambda::Function")[logicalIDIn(s, s.API)])["Environment"].(map[string]any)["Variables"].(map[string]any)
	if _, ok := vars[deployenv.WebhookSecretARN]; ok {
		t.Error("without webhooks the API is given a secret ARN")
	}

	arn := "arn:aws:secretsmanager:eu-west-1:123456789012:secret:forge-hooks-AbC123"
	s, _, tp = variant(t, "MirrorFleetOwnSecret", Props{WebhookSecretARN: arn, WithoutServing: true}, false)
	if n := len(tp.resources("AWS::SecretsManager::Secret")); n != 0 {
		t.Errorf("with webhookSecretArn: %d secrets created", n)
	}
	vars = props(tp.resources("AWS::Lambda::Function")[logicalIDIn(s, s.API)])["Environment"].(map[string]any)["Variables"].(map[string]any)
	if vars[deployenv.WebhookSecretARN] != arn {
		t.Errorf("%s = %v, want %s", deployenv.WebhookSecretARN, vars[deployenv.WebhookSecretARN], arn)
	}
	if !strings.Contains(fmt.Sprint(tp.statements()), arn) {
		t.Error("no grant on the given secret")
	}
	if _, err := NewStack(awscdk.NewApp(nil), "BadSecret", Props{WebhookSecretARN: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:forge-hooks",
		AllowPlaceholders: true, AlarmEmail: "ops@example.com", LambdaAssetDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "webhookSecretArn") {
		t.Errorf("a partial secret ARN: %v", err)
	}
}

// taskDef returns the task definition of the service with logical id svc.
func (t tpl) taskDef(tt *testing.T, svc string) map[string]any {
	tt.Helper()
	id := props(t.resources("AWS::ECS::Service")[svc])["TaskDefinition"].(map[string]any)["Ref"].(string)
	return props(t.resources("AWS::ECS::TaskDefinition")[id])
}

func container(td map[string]any) map[string]any {
	return td["ContainerDefinitions"].([]any)[0].(map[string]any)
}

func envVars(c map[string]any) map[string]any {
	out := map[string]any{}
	for _, e := range c["Environment"].([]any) {
		e := e.(map[string]any)
		out[e["Name"].(string)] = e["Value"]
	}
	return out
}

func TestWorkers(t *testing.T) {
	spot, twin := logicalID(stack.Service), logicalID(stack.Fallback)
	td := tmpl.taskDef(t, spot)
	if td["Cpu"] != "256" || td["Memory"] != "2048" || js(td["RuntimePlatform"]) != js(map[string]any{"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"}) {
		t.Errorf("worker task %v CPU / %v MiB on %v, want 256 / 2048 on ARM64", td["Cpu"], td["Memory"], td["RuntimePlatform"])
	}
	if js(tmpl.taskDef(t, twin)) != js(td) {
		t.Error("the on-demand twin runs another task definition")
	}
	c := container(td)
	// The budget is 60% of the worker container's 1,536 MiB: the git server has 512 of
	// the task's 2,048.
	want := deployenv.Worker{Common: deployenv.Common{Fleet: "MirrorFleetTest"}, MirrorRoot: "/mnt/mirrors", Fetchers: 10, MemoryBudget: "921M",
		Drain: 20 * time.Second, DiskUsage: deployenv.DiskUsageElastic, AliveFile: "/tmp/mirrorfleet/alive",
		ScrubEvery: DefaultScrubEvery, ScrubChanged: true, PollBudget: budget.Default().PollsPerDay}.Env()
	want[deployenv.Table], want[deployenv.EventBus] = "", ""
	got := envVars(c)
	for k, v := range want {
		if k != deployenv.Table && k != deployenv.EventBus && got[k] != v {
			t.Errorf("worker %s = %v, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) || js(got[deployenv.Table]) != js(ref(logicalID(stack.Table))) ||
		js(got[deployenv.EventBus]) != js(ref(logicalID(stack.EventBus))) {
		t.Errorf("worker environment %s, want the contract's %v", js(got), want)
	}
	if js(c["Command"]) != `["worker"]` || c["User"] != "65532:65532" || c["ReadonlyRootFilesystem"] != true ||
		c["Memory"] != 1536.0 || c["Essential"] != nil && c["Essential"] != true {
		t.Errorf("worker container command %v user %v read-only root %v", c["Command"], c["User"], c["ReadonlyRootFilesystem"])
	}
	hc := c["HealthCheck"].(map[string]any)
	if js(hc["Command"]) != js([]string{"CMD", deployenv.ImageBinary, "healthcheck", "--file", "/tmp/mirrorfleet/alive", "--max-age", "2m"}) {
		t.Errorf("worker health check %v", hc["Command"])
	}
	if js(c["MountPoints"]) != js([]any{
		map[string]any{"ContainerPath": "/mnt/mirrors", "ReadOnly": false, "SourceVolume": "mirrors"},
		map[string]any{"ContainerPath": "/tmp", "ReadOnly": false, "SourceVolume": "tmp"},
	}) {
		t.Errorf("worker mounts %v", c["MountPoints"])
	}
	template.HasResourceProperties(jsii.String("AWS::ECS::TaskDefinition"), obj(
		"Volumes", arrayWith(like("Name", "mirrors", "EFSVolumeConfiguration", like(
			"TransitEncryption", "ENABLED",
			"AuthorizationConfig", obj("AccessPointId", ref(logicalID(stack.AccessPoint)), "IAM", "ENABLED"),
		))),
	))

	svcs := resourcesOf("AWS::ECS::Service")
	for id, want := range map[string]struct {
		provider string
		desired  float64
	}{spot: {fargateSpot, 1}, twin: {fargateOnDemand, 0}} {
		p := props(svcs[id])
		if js(p["CapacityProviderStrategy"]) != js([]any{map[string]any{"CapacityProvider": want.provider, "Weight": 1}}) ||
			p["DesiredCount"] != want.desired || p["LaunchType"] != nil {
			t.Errorf("service %s: strategy %v desired %v, want %s × %v", id, p["CapacityProviderStrategy"], p["DesiredCount"], want.provider, want.desired)
		}
		net := p["NetworkConfiguration"].(map[string]any)["AwsvpcConfiguration"].(map[string]any)
		if net["AssignPublicIp"] != "ENABLED" || !strings.Contains(js(net["Subnets"]), "public") {
			t.Errorf("service %s network %v, want public subnets with a public IP", id, net)
		}
	}
	template.HasResourceProperties(jsii.String("AWS::ECS::Cluster"), obj(
		"ClusterSettings", []any{obj("Name", "containerInsights", "Value", "disabled")}))
	template.HasResourceProperties(jsii.String("AWS::ECS::ClusterCapacityProviderAssociations"), obj(
		"CapacityProviders", arrayWith(fargateOnDemand, fargateSpot)))
}

// The on-demand twin starts as many workers as the fleet is short of its floor
// (minLiveWorkers, or its repos' bare need at the budget), up to maxWorkers, and stops as
// many as it is over: a Spot outage at 1M leaves the fleet polling at its budget.
func TestOnDemandFallback(t *testing.T) {
	twin := logicalID(stack.Fallback)
	maxWorkers := budget.Default().MaxWorkers()
	var target string
	for id, r := range resourcesOf("AWS::ApplicationAutoScaling::ScalableTarget") {
		if strings.Contains(js(props(r)["ResourceId"]), twin) {
			target = id
			if p := props(r); p["MinCapacity"] != 0.0 || p["MaxCapacity"] != float64(maxWorkers) {
				t.Errorf("fallback scales %v..%v, want 0..%d (maxWorkers)", p["MinCapacity"], p["MaxCapacity"], maxWorkers)
			}
		}
	}
	if target == "" {
		t.Fatal("the on-demand twin does not scale")
	}
	// adjustments by shortfall: each step's interval, offset by its alarm's threshold.
	got := map[float64]float64{}
	var expr string
	for id, r := range resourcesOf("AWS::ApplicationAutoScaling::ScalingPolicy") {
		if js(props(r)["ScalingTargetId"]) != js(ref(target)) {
			continue
		}
		var threshold float64
		for _, a := range resourcesOf("AWS::CloudWatch::Alarm") {
			if ap := props(a); strings.Contains(js(ap["AlarmActions"]), id) {
				threshold = ap["Threshold"].(float64)
				for _, m := range list(ap["Metrics"]) {
					if e, ok := m.(map[string]any)["Expression"].(string); ok {
						expr = e
					}
				}
			}
		}
		for _, st := range list(props(r)["StepScalingPolicyConfiguration"].(map[string]any)["StepAdjustments"]) {
			st := st.(map[string]any)
			at := threshold // the step's lower bound, or its upper one below the threshold
			if lo, ok := st["MetricIntervalLowerBound"].(float64); ok && lo >= 0 {
				at += lo
			} else if hi, ok := st["MetricIntervalUpperBound"].(float64); ok {
				at += hi
			}
			got[at] = st["ScalingAdjustment"].(float64)
		}
	}
	// Short by 1 (from 0.5) starts one, by 2 two, by maxWorkers or more maxWorkers; over
	// by 1 (to -0.5) stops one, by maxWorkers or more maxWorkers.
	m := float64(maxWorkers)
	for at, want := range map[float64]float64{0.5: 1, 1.5: 2, m - 0.5: m, -0.5: -1, -1.5: -2, 0.5 - m: -m} {
		if got[at] != want {
			t.Errorf("shortfall step at %v: %v, want %v (all: %v)", at, got[at], want, got)
		}
	}
	// The shortfall: the floor or the repos' bare need, less the live workers.
	k := budget.Default().BareWorkersPerRepo()
	for _, part := range []string{fmt.Sprintf("CEIL(%.6g * (FILL(ok, 0) + FILL(failing, 0)))", k), "> 1,", "- (FILL(active, 0) + FILL(joining, 0))"} {
		if !strings.Contains(expr, part) {
			t.Errorf("fallback on %q, want it to contain %q", expr, part)
		}
	}
	if need := math.Ceil(k * 1_000_000); need < m*3/4 || need > m {
		t.Errorf("at 1M repos the twin keeps %v workers, want near the %v the budget sizes, no more", need, m)
	}
}

func TestMirrorsFileSystem(t *testing.T) {
	template.HasResourceProperties(jsii.String("AWS::EFS::FileSystem"), obj(
		"Encrypted", true,
		"ThroughputMode", "elastic",
		"LifecyclePolicies", []any{obj("TransitionToIA", "AFTER_1_DAY"), obj("TransitionToArchive", "AFTER_90_DAYS")},
		"FileSystemPolicy", like("Statement", arrayWith(like(
			"Effect", "Deny",
			"Condition", obj("Bool", obj("aws:SecureTransport", "false")),
		))),
	))
	template.HasResourceProperties(jsii.String("AWS::EFS::AccessPoint"), obj(
		"PosixUser", obj("Uid", "65532", "Gid", "65532"),
		"RootDirectory", like("Path", "/mirrors"),
	))
}

// Every service waits for the mount targets: a first deploy's tasks would otherwise
// fail to mount the file system and the deploy roll back.
func TestServicesDependOnMountTargets(t *testing.T) {
	var targets []string
	for id := range resourcesOf("AWS::EFS::MountTarget") {
		targets = append(targets, id)
	}
	if len(targets) != 2 {
		t.Fatalf("%d mount targets, want one per AZ", len(targets))
	}
	for id, r := range resourcesOf("AWS::ECS::Service") {
		deps, _ := r["DependsOn"].([]any)
		for _, mt := range targets {
			if !slices.Contains(deps, any(mt)) {
				t.Errorf("service %s does not depend on mount target %s (depends on %v)", id, mt, deps)
			}
		}
	}
}

// What `cdk destroy` keeps (deletionProtection, the default): the table and the file
// system are RETAIN, and the table refuses deletion.
func TestDestroyKeepsTheTableAndTheFileSystem(t *testing.T) {
	for _, typ := range []string{"AWS::DynamoDB::Table", "AWS::EFS::FileSystem"} {
		_, r := tmpl.one(t, typ)
		if r["DeletionPolicy"] != "Retain" || r["UpdateReplacePolicy"] != "Retain" {
			t.Errorf("%s: deletion %v, replace %v, want Retain", typ, r["DeletionPolicy"], r["UpdateReplacePolicy"])
		}
	}
	_, tr := tmpl.one(t, "AWS::DynamoDB::Table")
	if props(tr)["DeletionProtectionEnabled"] != true {
		t.Error("the table is not deletion-protected")
	}
	// Without the guard both go with the stack.
	_, _, tp := variant(t, "Unguarded", Props{WithoutServing: true}, false)
	for _, typ := range []string{"AWS::DynamoDB::Table", "AWS::EFS::FileSystem"} {
		if _, r := tp.one(t, typ); r["DeletionPolicy"] != "Delete" {
			t.Errorf("deletionProtection=false: %s deletion %v, want Delete", typ, r["DeletionPolicy"])
		}
	}
}

// A redeploy after `cdk destroy` imports what it retained (-c tableName=… -c
// fileSystemId=…): no new table or file system; new mount targets in this stack's
// subnets, a new access point and security group on the retained file system; the tasks
// and functions use them, and the services wait for the new mount targets.
func TestRedeployImportsTheRetainedTableAndFileSystem(t *testing.T) {
	const table, fsID = "MirrorFleet-Table1A2B3C4D-ABCDEF123456", "fs-0123456789abcdef0"
	s, _, tp := variant(t, "Redeployed", Props{ExistingTable: table, ExistingFileSystem: fsID, DeletionGuard: true}, false)
	conforms(t, "redeploy on retained resources", tp)
	for _, typ := range []string{"AWS::DynamoDB::Table", "AWS::EFS::FileSystem"} {
		if n := len(tp.resources(typ)); n != 0 {
			t.Errorf("%d %s created, want the retained one imported", n, typ)
		}
	}
	targets := tp.resources("AWS::EFS::MountTarget")
	if len(targets) != 2 {
		t.Fatalf("%d mount targets, want one per task subnet", len(targets))
	}
	var ids []any
	for id, r := range targets {
		ids = append(ids, id)
		if p := props(r); p["FileSystemId"] != fsID || !strings.Contains(js(p["SecurityGroups"]), "MirrorsSG") {
			t.Errorf("mount target %s: %v", id, p)
		}
	}
	if _, ap := tp.one(t, "AWS::EFS::AccessPoint"); props(ap)["FileSystemId"] != fsID {
		t.Errorf("access point on %v, want %s", props(ap)["FileSystemId"], fsID)
	}
	for id, r := range tp.resources("AWS::ECS::Service") {
		for _, mt := range ids {
			if !slices.Contains(list(r["DependsOn"]), mt) {
				t.Errorf("service %s does not wait for mount target %v", id, mt)
			}
		}
	}
	for id, r := range tp.resources("AWS::ECS::TaskDefinition") {
		if !strings.Contains(js(props(r)["Volumes"]), `"FilesystemId":"`+fsID+`"`) {
			t.Errorf("task %s does not mount %s: %s", id, fsID, js(props(r)["Volumes"]))
		}
		if !strings.Contains(js(container(props(r))["Environment"]), `"Value":"`+table+`"`) {
			t.Errorf("task %s is not told the table %s", id, table)
		}
	}
	// NFS into the new security group from the tasks.
	ingress := 0
	for _, r := range tp.resources("AWS::EC2::SecurityGroupIngress") {
		if p := props(r); p["FromPort"] == 2049.0 && strings.Contains(js(p["GroupId"]), "MirrorsSG") {
			ingress++
		}
	}
	if ingress != 1 {
		t.Errorf("%d NFS ingress rules on the mirrors' security group, want the workers' (the git server runs in their tasks)", ingress)
	}
	granted := false
	for _, st := range tp.roleStatements(logicalIDIn(s, s.Coordinator.Role())) {
		if strings.Contains(js(st["Resource"]), ":table/"+table) {
			granted = true
		}
	}
	if !granted {
		t.Errorf("the coordinator is not granted the table %s", table)
	}
	if _, err := NewStack(awscdk.NewApp(nil), "BadIDs", Props{ExistingTable: "x", ExistingFileSystem: "vol-1", AlarmEmail: "a@b.c",
		AllowPlaceholders: true}); err == nil || !strings.Contains(err.Error(), "fileSystemId") || !strings.Contains(err.Error(), "tableName") {
		t.Errorf("malformed ids: %v", err)
	}
}

// Public subnets, no NAT gateway, DynamoDB through a gateway endpoint; nothing admits
// traffic but the file system (NFS from the tasks), the worker tasks' git server (its
// port, from the load balancer) and the load balancer (HTTP from CloudFront).
func TestNetwork(t *testing.T) {
	template.HasResourceProperties(jsii.String("AWS::EC2::VPCEndpoint"), obj(
		"VpcEndpointType", "Gateway",
		"ServiceName", like("Fn::Join", arrayWith(arrayWith(".dynamodb"))),
	))
	for id, r := range resourcesOf("AWS::EC2::Subnet") {
		if props(r)["MapPublicIpOnLaunch"] != true {
			t.Errorf("subnet %s is not public: the default network has no private subnets", id)
		}
	}
	ingress := resourcesOf("AWS::EC2::SecurityGroupIngress")
	if len(ingress) != 3 {
		t.Errorf("%d SecurityGroupIngress resources, want 3 (NFS from the worker tasks, 8080 from the load balancer, "+
			"HTTP from CloudFront)", len(ingress))
	}
	lbSG := logicalID((*stack.Serve.LoadBalancer.Connections().SecurityGroups())[0])
	for id, r := range ingress {
		p := props(r)
		if p["CidrIp"] != nil || p["CidrIpv6"] != nil {
			t.Errorf("ingress %s = %v from a network", id, p)
		}
		if p["SourcePrefixListId"] != nil {
			if js(p["GroupId"]) != js(getAtt(lbSG, "GroupId")) || p["FromPort"] != 80.0 || p["ToPort"] != 80.0 {
				t.Errorf("ingress %s = %v, want HTTP into the load balancer from CloudFront", id, p)
			}
			continue
		}
		if p["SourceSecurityGroupId"] == nil || (p["FromPort"] != 2049.0 && p["FromPort"] != float64(servePort)) {
			t.Errorf("ingress %s = %v, want NFS or the server port from a security group", id, p)
		}
	}
	for id, r := range resourcesOf("AWS::EC2::SecurityGroup") {
		if in, _ := props(r)["SecurityGroupIngress"].([]any); len(in) > 0 {
			t.Errorf("security group %s has inline ingress %v", id, in)
		}
	}

	// privateNetwork brings the NAT gateway back and takes the public IPs away.
	_, at, tp := variant(t, "Private", Props{PrivateNetwork: true, WithoutServing: true}, false)
	conforms(t, "private network", tp)
	at.ResourceCountIs(jsii.String("AWS::EC2::NatGateway"), jsii.Number(1))
	for id, r := range tp.resources("AWS::ECS::Service") {
		net := props(r)["NetworkConfiguration"].(map[string]any)["AwsvpcConfiguration"].(map[string]any)
		if net["AssignPublicIp"] != "DISABLED" || !strings.Contains(js(net["Subnets"]), "tasks") {
			t.Errorf("privateNetwork: service %s network %v", id, net)
		}
	}
}

// statements returns every IAM policy statement with the logical id of its policy.
func (t tpl) statements() map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for id, r := range t.resources("AWS::IAM::Policy") {
		doc := props(r)["PolicyDocument"].(map[string]any)
		for _, st := range doc["Statement"].([]any) {
			out[id] = append(out[id], st.(map[string]any))
		}
	}
	return out
}

func statements() map[string][]map[string]any { return tmpl.statements() }

func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// roleStatements are the statements of the policies attached to role.
func (t tpl) roleStatements(role string) []map[string]any {
	var out []map[string]any
	sts := t.statements()
	for id, r := range t.resources("AWS::IAM::Policy") {
		for _, ro := range list(props(r)["Roles"]) {
			if js(ro) == js(ref(role)) {
				out = append(out, sts[id]...)
			}
		}
	}
	return out
}

func TestSchedulerRoleInvokesOnlyCoordinator(t *testing.T) {
	coord := logicalID(stack.Coordinator)
	found := false
	for _, st := range tmpl.roleStatements(logicalID(stack.SchedulerRole)) {
		for _, a := range list(st["Action"]) {
			switch {
			case a == "lambda:InvokeFunction":
				found = true
				res := list(st["Resource"])
				if len(res) != 1 || js(res[0]) != js(getAtt(coord, "Arn")) {
					t.Errorf("scheduler role may invoke %v, want only the coordinator", res)
				}
			case strings.HasPrefix(a.(string), "sqs:"):
				if js(st["Resource"]) != js(getAtt(logicalID(stack.TimerDLQ), "Arn")) {
					t.Errorf("scheduler role %s on %v, want the DLQ only", a, st["Resource"])
				}
			default:
				t.Errorf("scheduler role has unexpected action %v", a)
			}
		}
	}
	if !found {
		t.Error("scheduler role cannot invoke the coordinator")
	}
	template.HasResourceProperties(jsii.String("AWS::IAM::Role"), obj(
		"AssumeRolePolicyDocument", like("Statement", arrayWith(like(
			"Principal", obj("Service", "scheduler.amazonaws.com"),
		))),
	))
}

// The stack creates the workers' event bus, and only the worker task role may put
// events, on that bus only.
func TestEventBus(t *testing.T) {
	bus := logicalID(stack.EventBus)
	template.HasResourceProperties(jsii.String("AWS::Events::EventBus"), obj("Name", "MirrorFleetTest-mirrorfleet"))
	workerRole := taskRole(t, logicalID(stack.Service))
	grants := 0
	for id, r := range resourcesOf("AWS::IAM::Policy") {
		for _, st := range tmpl.statements()[id] {
			for _, a := range list(st["Action"]) {
				if !strings.HasPrefix(a.(string), "events:") {
					continue
				}
				if a != "events:PutEvents" || js(st["Resource"]) != js(getAtt(bus, "Arn")) || st["Effect"] != "Allow" {
					t.Errorf("policy %s: %v on %v", id, a, js(st["Resource"]))
				}
				if js(list(props(r)["Roles"])) != js([]any{ref(workerRole)}) {
					t.Errorf("policy %s grants %v to %v, want the worker task role only", id, a, js(props(r)["Roles"]))
				}
				grants++
			}
		}
	}
	if grants != 1 {
		t.Errorf("%d events: grants, want 1 (PutEvents to the workers)", grants)
	}
}

// taskRole is the logical id of the task role of a service's task definition.
func taskRole(t *testing.T, svc string) string {
	t.Helper()
	r := tmpl.taskDef(t, svc)["TaskRoleArn"].(map[string]any)["Fn::GetAtt"].([]any)
	return r[0].(string)
}

func TestNoWildcardActionsOnTable(t *testing.T) {
	table := logicalID(stack.Table)
	n := 0
	for id, sts := range statements() {
		for _, st := range sts {
			for _, a := range list(st["Action"]) {
				if a == "*" || strings.HasSuffix(a.(string), ":*") {
					t.Errorf("policy %s: wildcard action %v", id, a)
				}
			}
			b := js(st["Resource"])
			if !strings.Contains(b, table) {
				continue
			}
			n++
			if strings.Contains(b, "*") {
				t.Errorf("policy %s: wildcard table resource %s", id, b)
			}
			for _, a := range list(st["Action"]) {
				if !slices.Contains(tableActions, a.(string)) {
					t.Errorf("policy %s: table action %v not in the store's list", id, a)
				}
			}
		}
	}
	if n != 3 {
		t.Errorf("%d statements on the table, want 3 (coordinator, API, worker tasks: the git server runs in them)", n)
	}
}

// policyAllows evaluates the statements of a resource policy for one request, as IAM
// does for what these policies use: an explicit Deny wins, then an Allow is needed.
// Conditions: Bool, StringEquals and ArnLike (with * wildcards) on the request's keys.
// Intrinsic values are rendered with the pseudo parameters of pseudo.
func policyAllows(sts []any, service, action string, request map[string]string) bool {
	allowed := false
	for _, s := range sts {
		st := s.(map[string]any)
		if !principalMatches(st["Principal"], service) || !slices.Contains(list(st["Action"]), any(action)) {
			continue
		}
		if !conditionsHold(st["Condition"], request) {
			continue
		}
		if st["Effect"] == "Deny" {
			return false
		}
		allowed = true
	}
	return allowed
}

func principalMatches(p any, service string) bool {
	switch p := p.(type) {
	case string:
		return p == "*"
	case map[string]any:
		return slices.Contains(list(p["Service"]), any(service)) || p["AWS"] == "*"
	}
	return false
}

var pseudo = map[string]string{"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}

func render(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		if r, ok := v["Ref"].(string); ok {
			return pseudo[r]
		}
		if j, ok := v["Fn::Join"].([]any); ok {
			var parts []string
			for _, p := range j[1].([]any) {
				parts = append(parts, render(p))
			}
			return strings.Join(parts, j[0].(string))
		}
	}
	return fmt.Sprint(v)
}

func conditionsHold(c any, request map[string]string) bool {
	cond, _ := c.(map[string]any)
	for op, kv := range cond {
		for key, want := range kv.(map[string]any) {
			got, w := request[key], render(want)
			var ok bool
			switch op {
			case "Bool", "StringEquals":
				ok = got == w
			case "ArnLike":
				ok = globMatch(w, got)
			}
			if !ok {
				return false
			}
		}
	}
	return true
}

func globMatch(pattern, s string) bool {
	pre, post, star := strings.Cut(pattern, "*")
	if !star {
		return pattern == s
	}
	return strings.HasPrefix(s, pre) && strings.HasSuffix(s, post) && len(s) >= len(pre)+len(post)
}

// CloudWatch alarms can publish to the alarm topic: its policy must allow them, not
// only deny plain HTTP (a topic policy replaces SNS's default one).
func TestAlarmTopicAcceptsCloudWatch(t *testing.T) {
	_, tp := tmpl.one(t, "AWS::SNS::TopicPolicy")
	sts := props(tp)["PolicyDocument"].(map[string]any)["Statement"].([]any)
	alarm := map[string]string{"aws:SecureTransport": "true", "aws:SourceAccount": "123456789012",
		"aws:SourceArn": "arn:aws:cloudwatch:us-east-1:123456789012:alarm:MirrorFleetTest-NoTickAlarm-1A2B3C"}
	if !policyAllows(sts, "cloudwatch.amazonaws.com", "sns:Publish", alarm) {
		t.Errorf("CloudWatch cannot publish to the alarm topic: %s", js(sts))
	}
	// The checker itself: the Deny-only policy enforceSSL alone makes would fail it, and
	// neither another account's alarm nor plain HTTP gets through.
	if policyAllows(sts[:1], "cloudwatch.amazonaws.com", "sns:Publish", alarm) {
		t.Error("a Deny-only topic policy passes the check")
	}
	for key, v := range map[string]string{"aws:SourceAccount": "999999999999", "aws:SecureTransport": "false"} {
		r := maps(alarm)
		r[key] = v
		if policyAllows(sts, "cloudwatch.amazonaws.com", "sns:Publish", r) {
			t.Errorf("publish allowed with %s=%s", key, v)
		}
	}
	// The key the topic is encrypted with lets CloudWatch encrypt.
	_, key := tmpl.one(t, "AWS::KMS::Key")
	ks := props(key)["KeyPolicy"].(map[string]any)["Statement"].([]any)
	if !policyAllows(ks, "cloudwatch.amazonaws.com", "kms:GenerateDataKey*", map[string]string{}) ||
		!policyAllows(ks, "cloudwatch.amazonaws.com", "kms:Decrypt", map[string]string{}) {
		t.Errorf("CloudWatch cannot use the alarm key: %s", js(ks))
	}
}

func maps(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// alarmsByID are the operator alarms (those notifying the topic) by logical id prefix.
func operatorAlarms(t *testing.T) map[string]map[string]any {
	t.Helper()
	topic := js([]any{ref(logicalID(stack.AlarmTopic))})
	out := map[string]map[string]any{}
	for id, r := range resourcesOf("AWS::CloudWatch::Alarm") {
		p := props(r)
		if js(p["AlarmActions"]) == topic && js(p["OKActions"]) == topic {
			out[id] = p
		}
	}
	return out
}

func alarm(t *testing.T, prefix string) map[string]any {
	t.Helper()
	for id, p := range operatorAlarms(t) {
		if strings.HasPrefix(id, prefix) {
			return p
		}
	}
	t.Fatalf("no alarm %s notifies the topic", prefix)
	return nil
}

func TestAlarms(t *testing.T) {
	if n := len(operatorAlarms(t)); n != 9 {
		t.Errorf("%d alarms notify the alarm topic, want 9", n)
	}
	// An empty new fleet reports no staleness, no fetches, no worker states before its
	// first tick: no alarm takes missing data for a breach.
	for id, p := range operatorAlarms(t) {
		if p["TreatMissingData"] != "notBreaching" {
			t.Errorf("%s treats missing data as %v, want notBreaching", id, p["TreatMissingData"])
		}
	}
	// A failed tick is not a tick (the coordinator does not count it), but every run
	// reports its duration: a minute with runs and no tick breaches.
	if p := alarm(t, "NoTickAlarm"); p["Metrics"].([]any)[0].(map[string]any)["Expression"] != "IF(runs > 0 AND FILL(ticks, 0) < 1, 1, 0)" ||
		!strings.Contains(js(p["Metrics"]), `"MetricName":"TickDuration"`) || !strings.Contains(js(p["Metrics"]), `"Stat":"SampleCount"`) ||
		p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || p["EvaluationPeriods"] != 5.0 {
		t.Errorf("no-tick alarm %v", p)
	}
	// The stale-repos threshold follows from the poll budget: twice what a fleet at its
	// budget shows (its dormant repos' revisit, infra/budget).
	b := budget.Default()
	if p := alarm(t, "StaleReposAlarm"); p["MetricName"] != "StalenessMax" || p["Threshold"] != b.StaleAfter().Seconds() ||
		b.StaleAfter() != 2*b.TailStaleness() {
		t.Errorf("stale alarm %v, want threshold %v", p, b.StaleAfter().Seconds())
	}
	// Live workers are active or joining: quiet during the first start's warm-up.
	if p := alarm(t, "LiveWorkersAlarm"); !strings.Contains(js(p["Metrics"]), "FILL(active, 0) + FILL(joining, 0)") ||
		!strings.Contains(js(p["Metrics"]), `"Value":"joining"`) || p["Threshold"] != 1.0 {
		t.Errorf("live workers alarm %v", p)
	}
	// The alarms on a service are created once it runs: a first deploy does not page
	// while its tasks start.
	deps := map[string]string{"LiveWorkersAlarm": logicalID(stack.Service), "StaleReposAlarm": logicalID(stack.Service),
		"ServeHealthyAlarm": logicalID(stack.Serve.Service), "NoTickAlarm": logicalID(stack.TickRule)}
	for id, r := range resourcesOf("AWS::CloudWatch::Alarm") {
		for prefix, svc := range deps {
			if strings.HasPrefix(id, prefix) && !slices.Contains(list(r["DependsOn"]), any(svc)) {
				t.Errorf("%s depends on %v, want %s among them", id, r["DependsOn"], svc)
			}
		}
	}
	for prefix, fn := range map[string]string{"CoordinatorErrorsAlarm": logicalID(stack.Coordinator), "ApiErrorsAlarm": logicalID(stack.API)} {
		p := alarm(t, prefix)
		if p["Namespace"] != "AWS/Lambda" || p["MetricName"] != "Errors" || js(p["Dimensions"]) != js([]any{map[string]any{"Name": "FunctionName", "Value": ref(fn)}}) {
			t.Errorf("%s: %v", prefix, p)
		}
	}
	if p := alarm(t, "ServeHealthyAlarm"); p["MetricName"] != "HealthyHostCount" {
		t.Errorf("serve healthy alarm %v", p)
	}
	if p := alarm(t, "FetchFailureRatioAlarm"); !strings.Contains(js(p["Metrics"]), "failed / (ok + failed)") {
		t.Errorf("fetch failure alarm %v", p)
	}
	if p := alarm(t, "TimerDLQAlarm"); p["MetricName"] != "ApproximateNumberOfMessagesVisible" || p["Threshold"] != 0.0 {
		t.Errorf("DLQ alarm %v", p)
	}
	template.AllResourcesProperties(jsii.String("AWS::Logs::LogGroup"), obj("RetentionInDays", 30))
	template.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), obj("Protocol", "email", "Endpoint", "ops@example.com"))
}

// The alarms must reach someone: a stack without alarmEmail is refused, and the explicit
// opt-out synthesizes with a warning and no subscription.
func TestAlarmEmailRequired(t *testing.T) {
	dir := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(dir)})
	_, err := NewStack(app, "Nobody", Props{AllowPlaceholders: true, LambdaAssetDir: filepath.Join(dir, "none"), WithoutServing: true})
	if err == nil || !strings.Contains(err.Error(), "alarmEmail is required") || !strings.Contains(err.Error(), "alarmEmail=none") {
		t.Errorf("no alarmEmail: %v, want a refusal naming the opt-out", err)
	}
	s, at, tp := variant(t, "OptedOut", Props{NoAlarmEmail: true, WithoutServing: true}, false)
	if n := len(tp.resources("AWS::SNS::Subscription")); n != 0 {
		t.Errorf("alarmEmail=none: %d subscriptions", n)
	}
	if !warned(s, "alarmEmail=none") {
		t.Error("alarmEmail=none synthesized without a warning")
	}
	at.HasOutput(jsii.String("AlarmTopicArn"), obj("Value", ref(logicalIDIn(s, s.AlarmTopic))))
	c, err := PropsFromContext(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"alarmEmail": "none"}}).Node())
	if err != nil || !c.NoAlarmEmail || c.AlarmEmail != "" {
		t.Errorf("alarmEmail=none from context: %+v, %v", c, err)
	}
}

func TestDashboard(t *testing.T) {
	b := js(resourcesOf("AWS::CloudWatch::Dashboard"))
	names := []string{"Ticks", "TickDuration", "LeaderTerm", "ReposMoved", "WorkersByState", "ReposByState",
		"StalenessP50", "StalenessP99", "StalenessMax", "FetchSuccesses", "FetchFailures", "Polls", "PollsFound", "FetchDuration", "BytesFetched", "QueueDepth",
		"Errors", "Throttles", "ConsumedWriteCapacityUnits", "StorageBytes", "MeteredIOBytes",
		"CPUUtilization", "MemoryUtilization", "RequestCount", "HTTPCode_Target_5XX_Count", "HealthyHostCount"}
	names = append(append(append(append(append(append(names, servingMetrics...), maintenanceMetrics...), eventMetrics...), memoryMetrics...), hookMetrics...), gitMetrics...)
	for _, name := range names {
		if !strings.Contains(b, `\"`+name+`\"`) && !strings.Contains(b, `MetricName=\\\"`+name+`\\\"`) {
			t.Errorf("dashboard lacks %s", name)
		}
	}
	// DynamoDB publishes ThrottledRequests per operation only: a metric without the
	// Operation dimension stays empty, a SEARCH over the dimension finds them all.
	if !strings.Contains(b, `{AWS/DynamoDB,Operation,TableName} MetricName=\\\"ThrottledRequests\\\" TableName=\\\"`) {
		t.Errorf("the throttles widget does not search ThrottledRequests by operation: %s", b)
	}
	if strings.Contains(b, `\"AWS/DynamoDB\",\"ThrottledRequests\"`) {
		t.Error("the dashboard graphs ThrottledRequests without its Operation dimension")
	}
}

// TestWorkersScaleOnStaleness: the Spot workers scale between workerCount and
// maxWorkers — what 1M repos, 80% on one host, need under the per-host limit — on the
// p99 staleness the coordinator merges from the heartbeats, with steps from the poll
// budget: a fleet at its budget sits between scale-in and scale-out.
func TestWorkersScaleOnStaleness(t *testing.T) {
	b := budget.Default()
	template.HasResourceProperties(jsii.String("AWS::ApplicationAutoScaling::ScalableTarget"), obj(
		"MinCapacity", 1, "MaxCapacity", b.MaxWorkers(), "ScalableDimension", "ecs:service:DesiredCount"))
	if b.MaxWorkers() != 3 {
		t.Errorf("budget maxWorkers %d", b.MaxWorkers())
	}
	found := false
	for _, r := range resourcesOf("AWS::CloudWatch::Alarm") {
		p := props(r)
		if p["MetricName"] == "StalenessP99" && p["Namespace"] == "MirrorFleet" {
			found = true
		}
	}
	if !found {
		t.Fatal("no alarm drives scaling on MirrorFleet/StalenessP99")
	}
	var steps []any
	for _, r := range resourcesOf("AWS::ApplicationAutoScaling::ScalingPolicy") {
		if p := props(r); strings.Contains(js(p), "ScaleOnStaleness") {
			steps = list(p["StepScalingPolicyConfiguration"].(map[string]any)["StepAdjustments"])
		}
	}
	// CDK writes the steps relative to the alarm's threshold; the thresholds are the
	// budget's.
	bounds := js(resourcesOf("AWS::CloudWatch::Alarm"))
	for _, d := range []time.Duration{b.ScaleInBelow(), b.ScaleOutAbove(), b.StaleAfter()} {
		// As JSON writes a number: 1157760, not Go's %v 1.15776e+06.
		if !strings.Contains(bounds, `"Threshold":`+strconv.FormatFloat(d.Seconds(), 'f', -1, 64)) {
			t.Errorf("no scaling alarm at %v (%v s)", d, d.Seconds())
		}
	}
	if len(steps) == 0 {
		t.Error("no staleness scaling steps")
	}
	if tail := b.TailStaleness(); !(b.ScaleInBelow() < tail && tail < b.ScaleOutAbove() && b.ScaleOutAbove() < b.StaleAfter()) {
		t.Errorf("a fleet at its budget (%v) is not between scale-in %v and scale-out %v below the alarm %v",
			tail, b.ScaleInBelow(), b.ScaleOutAbove(), b.StaleAfter())
	}
}

// By default the git server is a second container of every worker task (ADR 27): the
// load balancer's targets are the Spot workers' and their on-demand twin's tasks, the
// server has its own memory, reads the mirrors read-only and is restarted in place.
func TestServing(t *testing.T) {
	lb, tg := logicalID(stack.Serve.LoadBalancer), logicalID(stack.Serve.TargetGroup)
	template.HasResourceProperties(jsii.String("AWS::ElasticLoadBalancingV2::LoadBalancer"), obj(
		"Scheme", "internet-facing", "Type", "application"))
	template.HasResourceProperties(jsii.String("AWS::ElasticLoadBalancingV2::Listener"), obj(
		"LoadBalancerArn", ref(lb), "Port", 80, "Protocol", "HTTP",
		"DefaultActions", []any{obj("TargetGroupArn", ref(tg), "Type", "forward")}))
	template.HasResourceProperties(jsii.String("AWS::ElasticLoadBalancingV2::TargetGroup"), obj(
		"Port", servePort, "Protocol", "HTTP", "TargetType", "ip", "HealthCheckPath", "/healthz"))

	if stack.Serve.Separate || stack.Serve.Service != stack.Service {
		t.Error("the git server is not the workers' by default")
	}
	for _, svc := range []string{logicalID(stack.Service), logicalID(stack.Fallback)} {
		p := props(resourcesOf("AWS::ECS::Service")[svc])
		if js(p["LoadBalancers"]) != js([]any{map[string]any{"ContainerName": "serve", "ContainerPort": servePort, "TargetGroupArn": ref(tg)}}) {
			t.Errorf("worker service %s load balancers %s, want its git server container", svc, js(p["LoadBalancers"]))
		}
	}
	td := tmpl.taskDef(t, logicalID(stack.Service))
	cs := td["ContainerDefinitions"].([]any)
	if len(cs) != 2 {
		t.Fatalf("worker task containers %s", js(cs))
	}
	c := cs[1].(map[string]any)
	env := envVars(c)
	want := deployenv.Serve{Common: deployenv.Common{Fleet: "MirrorFleetTest"}, MirrorRoot: "/mnt/mirrors", Listen: ":8080",
		PackCacheDir: "/var/cache/mirrorfleet", PackCacheBytes: "10G", QueueWait: serveQueueWait}.Env()
	for k, v := range want {
		if env[k] != v {
			t.Errorf("git server %s = %v, want %q", k, env[k], v)
		}
	}
	// The load balancer's network is trusted for X-Forwarded-For (the VPC's CIDR), and
	// CloudFront's origin-facing servers in front of it.
	trusted := map[string]any{"Fn::Join": []any{"", []any{getAtt(logicalID(stack.Vpc), "CidrBlock"), "," + deployenv.TrustedCloudFront}}}
	if len(env) != len(want)+2 || js(env[deployenv.Table]) != js(ref(logicalID(stack.Table))) ||
		js(env[deployenv.TrustedProxy]) != js(trusted) {
		t.Errorf("git server environment %s", js(env))
	}
	// Its own 512 MiB of the task's 2,048; an exit does not stop the worker: ECS
	// restarts the container in place.
	if js(c["Command"]) != `["serve"]` || c["ReadonlyRootFilesystem"] != true || c["Memory"] != 512.0 || c["Essential"] != false ||
		js(c["RestartPolicy"]) != `{"Enabled":true}` || !strings.Contains(js(c["HealthCheck"]), `"--url","http://127.0.0.1:8080/healthz"`) ||
		js(c["PortMappings"]) != js([]any{map[string]any{"ContainerPort": servePort, "Protocol": "tcp"}}) {
		t.Errorf("git server container %s", js(c))
	}
	if !strings.Contains(js(c["MountPoints"]), `{"ContainerPath":"/mnt/mirrors","ReadOnly":true,"SourceVolume":"mirrors"}`) ||
		!strings.Contains(js(c["MountPoints"]), `"SourceVolume":"packcache"`) {
		t.Errorf("git server mounts %v, want the mirrors read-only and the pack cache", c["MountPoints"])
	}
	// No scaling of its own: serving capacity follows the workers.
	for id, r := range resourcesOf("AWS::ApplicationAutoScaling::ScalingPolicy") {
		if _, ok := props(r)["TargetTrackingScalingPolicyConfiguration"]; ok {
			t.Errorf("target tracking policy %s without a git server service", id)
		}
	}

	// The clone base URL: the distribution's, an output, and the API's.
	base := map[string]any{"Fn::Join": []any{"", []any{"https://", getAtt(logicalID(stack.Serve.Distribution), "DomainName")}}}
	template.HasOutput(jsii.String("CloneBaseUrl"), obj("Value", base))

	// The settings of a service of its own want one; the worker keeps enough memory.
	for p, want := range map[*Props]string{
		{ServeMin: 2, ServeOnDemand: 1}:     "serveMin, serveOnDemand apply to a git server service of its own",
		{ServeMemory: 1536}:                 "leaves the worker 512 MiB",
		{ServeSeparate: true, ServeMin: 2}:  "",
		{WithoutServing: true, ServeMin: 2}: "",
	} {
		p.AlarmEmail, p.AllowPlaceholders = "a@b.c", true
		err := p.Defaults().Check()
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%+v: %v, want %q", *p, err, want)
		}
	}
}

// serveSeparate: the git server as a service of its own — its own task, a role that
// only reads, Spot with on-demand tasks as asked, scaled on CPU and requests — here with
// a certificate (HTTPS on 443, HTTP redirected, the clone base URL on the domain) and
// access logs to a bucket; cdk-nag clean too.
func TestServingSeparateHTTPSAndAccessLogs(t *testing.T) {
	const cert = "arn:aws:acm:us-east-1:123456789012:certificate/0d7f9c1e-1111-2222-3333-444455556666"
	s, at, tp := variant(t, "Https", Props{WithoutCDN: true, CertificateARN: cert, DomainName: "git.example.org", ServeAccessLogs: true,
		ServeSeparate: true, ServeMin: 2, ServeOnDemand: 1, StackProps: awscdk.StackProps{Env: &awscdk.Environment{
			Account: jsii.String("123456789012"), Region: jsii.String("us-east-1")}}}, true)
	conforms(t, "HTTPS with access logs", tp)
	at.HasResourceProperties(jsii.String("AWS::ElasticLoadBalancingV2::Listener"), obj(
		"Port", 443, "Protocol", "HTTPS", "Certificates", []any{obj("CertificateArn", cert)},
		"DefaultActions", []any{like("Type", "forward")}))
	at.HasResourceProperties(jsii.String("AWS::ElasticLoadBalancingV2::Listener"), obj(
		"Port", 80, "DefaultActions", []any{like("Type", "redirect", "RedirectConfig", like("Protocol", "HTTPS", "Port", "443"))}))
	at.HasOutput(jsii.String("CloneBaseUrl"), obj("Value", "https://git.example.org"))
	api := props(tp.resources("AWS::Lambda::Function")[logicalIDIn(s, s.API)])
	if v := api["Environment"].(map[string]any)["Variables"].(map[string]any)[deployenv.CloneBaseURL]; v != "https://git.example.org" {
		t.Errorf("API clone base URL %v", v)
	}
	at.ResourceCountIs(jsii.String("AWS::S3::Bucket"), jsii.Number(1))
	at.HasResourceProperties(jsii.String("AWS::ElasticLoadBalancingV2::LoadBalancer"), obj(
		"LoadBalancerAttributes", arrayWith(obj("Key", "access_logs.s3.enabled", "Value", "true"))))

	at.ResourceCountIs(jsii.String("AWS::ECS::Service"), jsii.Number(3))
	svc := logicalIDIn(s, s.Serve.Service)
	tg := logicalIDIn(s, s.Serve.TargetGroup)
	p := props(tp.resources("AWS::ECS::Service")[svc])
	if !s.Serve.Separate || js(p["LoadBalancers"]) != js([]any{map[string]any{"ContainerName": "serve", "ContainerPort": servePort, "TargetGroupArn": ref(tg)}}) ||
		!strings.Contains(js(p["CapacityProviderStrategy"]), `{"Base":1,"CapacityProvider":"FARGATE","Weight":0}`) {
		t.Errorf("git server service %s", js(p))
	}
	for id, r := range tp.resources("AWS::ECS::Service") {
		if id != svc && props(r)["LoadBalancers"] != nil {
			t.Errorf("service %s behind the load balancer too", id)
		}
	}
	td := tp.taskDef(t, svc)
	if td["Cpu"] != "256" || td["Memory"] != "1024" || !strings.Contains(js(td["RuntimePlatform"]), "ARM64") {
		t.Errorf("git server task %v / %v on %v", td["Cpu"], td["Memory"], td["RuntimePlatform"])
	}
	if w := container(tp.taskDef(t, logicalIDIn(s, s.Service))); len(tp.taskDef(t, logicalIDIn(s, s.Service))["ContainerDefinitions"].([]any)) != 1 ||
		envVars(w)[deployenv.MemoryBudget] != "1228M" {
		t.Errorf("worker task with a separate git server: %s", js(w))
	}
	c := container(td)
	if js(c["Command"]) != `["serve"]` || c["ReadonlyRootFilesystem"] != true ||
		!strings.Contains(js(c["MountPoints"]), `{"ContainerPath":"/mnt/mirrors","ReadOnly":true,"SourceVolume":"mirrors"}`) {
		t.Errorf("git server container %s", js(c))
	}
	// Read-only at EFS too, and reads only on the table.
	role := td["TaskRoleArn"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
	var actions []string
	for _, st := range tp.roleStatements(role) {
		for _, a := range list(st["Action"]) {
			actions = append(actions, a.(string))
		}
	}
	if want := append(slices.Clone(tableReadActions), "elasticfilesystem:ClientMount"); !sameSet(actions, want) {
		t.Errorf("git server may %v, want %v", actions, want)
	}
	// Scaling on CPU and on requests per task.
	var metrics []string
	for _, r := range tp.resources("AWS::ApplicationAutoScaling::ScalingPolicy") {
		if c, ok := props(r)["TargetTrackingScalingPolicyConfiguration"].(map[string]any); ok {
			metrics = append(metrics, c["PredefinedMetricSpecification"].(map[string]any)["PredefinedMetricType"].(string))
		}
	}
	slices.Sort(metrics)
	if js(metrics) != `["ALBRequestCountPerTarget","ECSServiceAverageCPUUtilization"]` {
		t.Errorf("git server scales on %v", metrics)
	}
	at.HasResourceProperties(jsii.String("AWS::ApplicationAutoScaling::ScalableTarget"), obj(
		"MinCapacity", 2, "MaxCapacity", 4, "ResourceId", like("Fn::Join", arrayWith(arrayWith(getAtt(svc, "Name"))))))
	nagClean(t, s)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// serving=false: no load balancer, no git server, no clone base URL anywhere.
func TestServingOff(t *testing.T) {
	s, at, tp := variant(t, "NoServe", Props{WithoutServing: true}, false)
	conforms(t, "serving off", tp)
	at.ResourceCountIs(jsii.String("AWS::ElasticLoadBalancingV2::LoadBalancer"), jsii.Number(0))
	at.ResourceCountIs(jsii.String("AWS::ECS::Service"), jsii.Number(2))
	if _, ok := tp["Outputs"].(map[string]any)["CloneBaseUrl"]; ok {
		t.Error("CloneBaseUrl output without serving")
	}
	if strings.Contains(js(props(tp.resources("AWS::Lambda::Function")[logicalIDIn(s, s.API)])), deployenv.CloneBaseURL) {
		t.Error("the API has a clone base URL without serving")
	}
}

// The list sync is configured through the stack: its variables on the coordinator and
// the API; a zero warm-up is written as the coordinator reads it.
func TestListSyncAndWarmupThroughContext(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{
		"listRepo": "https://git.example.org/mirrors/list.git", "listBranch": "main", "listPath": "a.txt,b",
		"listInterval": "5m", "listPurgeThreshold": "2.5%", "warmup": "0s", "serving": "false",
	}})
	p, err := PropsFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	s, _, tp := variant(t, "List", p, false)
	conforms(t, "list sync", tp)
	fns := tp.resources("AWS::Lambda::Function")
	want := map[string]string{deployenv.ListRepo: "https://git.example.org/mirrors/list.git", deployenv.ListBranch: "main",
		deployenv.ListPath: "a.txt,b", deployenv.ListInterval: "5m0s", deployenv.ListPurgeThreshold: "2.5"}
	for _, fn := range []interface{ Node() constructs.Node }{s.Coordinator, s.API} {
		vars := props(fns[logicalIDIn(s, fn)])["Environment"].(map[string]any)["Variables"].(map[string]any)
		for k, v := range want {
			if vars[k] != v {
				t.Errorf("%s: %s = %v, want %q", logicalIDIn(s, fn), k, vars[k], v)
			}
		}
	}
	if w := props(fns[logicalIDIn(s, s.Coordinator)])["Environment"].(map[string]any)["Variables"].(map[string]any)[deployenv.Warmup]; w != deployenv.NoWarmup {
		t.Errorf("warmup=0s written as %v, want %q", w, deployenv.NoWarmup)
	}
}

func TestPropsFromContext(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{
		"workerCount": 3, "workerCpu": "2048", "grace": "5m", "warmup": "none",
		"vpcId": "vpc-123", "alarmEmail": "a@b.c", "deletionProtection": "false", "privateNetwork": "true",
		"serving": "false", "onDemandFallback": "false", "coordinatorConcurrency": "none", "workerImage": "example.org/mf:1",
		"maintainEvery": "12h", "scrubEvery": "720h", "pollsPerDay": "4", "tableName": "T-1", "fileSystemId": "fs-12345678",
		"storageBudgetGiB": "50000", "hookRate": 250, "cdn": "false", "allowPlainHttp": "true", "serveDomain": "git.example.org",
		"diskQuota": "60T",
	}})
	p, err := PropsFromContext(app.Node())
	if err != nil || p.WorkerCount != 3 || p.WorkerCPU != 2048 || p.Grace.String() != "5m0s" || !p.NoWarmup ||
		p.MaintainEvery.String() != "12h0m0s" || p.ScrubEvery.String() != "720h0m0s" ||
		p.VpcID != "vpc-123" || p.AlarmEmail != "a@b.c" || p.DeletionGuard || !p.PrivateNetwork || !p.WithoutServing ||
		!p.WithoutFallback || p.CoordinatorConcurrency != -1 || p.WorkerImage != "example.org/mf:1" || p.PollsPerDay != 4 ||
		p.ExistingTable != "T-1" || p.ExistingFileSystem != "fs-12345678" || p.StorageBudgetGiB != 50000 || p.HookRate != 250 ||
		!p.WithoutCDN || !p.AllowPlainHTTP || p.DomainName != "git.example.org" || p.DiskQuota != "60T" {
		t.Errorf("props = %+v, %v", p, err)
	}
	// Eight times the budget: eight times the polls of a million repos, an eighth of the
	// staleness.
	if d := p.Defaults(); d.MaxWorkers != 24 || d.StaleAfter != budget.Default().StaleAfter()/8 || d.HookBurst != 500 {
		t.Errorf("pollsPerDay=4: maxWorkers %d, staleAfter %v; hookBurst %d", d.MaxWorkers, d.StaleAfter, d.HookBurst)
	}
	d0, err := PropsFromContext(awscdk.NewApp(nil).Node())
	d := d0.Defaults()
	if err != nil || d.WorkerCount != 1 || d.MaxWorkers != 3 || d.WorkerCPU != 256 || d.WorkerMemory != 2048 || d.Fetchers != 10 ||
		d.Grace.String() != "10m0s" || d.Warmup.String() != "10m0s" || d.NoWarmup || d.MinLive != 1 || !d.DeletionGuard ||
		d.DiskQuota != "" || d.StorageBudgetGiB != 1024 || d.NoStorageAlarm || d.HookRate != 100 || d.HookBurst != 200 ||
		d.WithoutCDN || d.AllowPlainHTTP || d.WithoutServing || d.WithoutFallback || d.PrivateNetwork || d.CoordinatorConcurrency != 0 ||
		d.PollsPerDay != 0.5 || d.StaleAfter != budget.Default().StaleAfter() || d.ScrubAll || d.ScrubEvery != 2*365*24*time.Hour ||
		d.ServeSeparate || d.ServeMemory != DefaultServeContainerMemory || d.ServeMin != 0 || d.ServeMax != 0 || d.ServeCPU != 0 {
		t.Errorf("defaults = %+v, %v", d, err)
	}
	bad := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"workerCount": "two", "serving": "maybe", "grace": "long", "pollsPerDay": "often",
		"storageBudgetGiB": "-3", "hookRate": "fast", "hookBurst": "0", "cdn": "yes please", "allowPlainHttp": "sure",
		"domainName": "a.example.org", "serveDomain": "b.example.org"}})
	_, err = PropsFromContext(bad.Node())
	for _, key := range []string{"workerCount", "serving", "grace", "pollsPerDay", "storageBudgetGiB", "hookRate", "hookBurst", "cdn",
		"allowPlainHttp", "serveDomain"} {
		if err == nil || !strings.Contains(err.Error(), key+"=") {
			t.Errorf("bad context: %v, want %s named", err, key)
		}
	}
	if none, err := PropsFromContext(awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"storageBudgetGiB": "none"}}).Node()); err != nil ||
		!none.NoStorageAlarm || none.Defaults().StorageBudgetGiB != 0 {
		t.Errorf("storageBudgetGiB=none: %+v, %v", none, err)
	}
}

// A deploy must not ship placeholders: without build/*.zip or an image the stack
// refuses, unless placeholders are allowed (synth, tests). A prebuilt image in ECR is
// pulled with permissions on its repository only.
func TestAssetsOrPlaceholders(t *testing.T) {
	dir := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(dir)})
	const image = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/mirrorfleet@sha256:4b8d2f0e4c3a1b2c3d4e5f60718293a4b5c6d7e8f90112233445566778899aab"
	_, err := NewStack(app, "NoBuild", Props{LambdaAssetDir: filepath.Join(dir, "none"), WorkerImage: image, AlarmEmail: "ops@example.com"})
	if err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("no zips: err %v, want a refusal naming make build", err)
	}
	build := filepath.Join(dir, "build")
	if err := os.MkdirAll(build, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, z := range []string{"coordinator.zip", "api.zip"} {
		if err := os.WriteFile(filepath.Join(build, z), []byte("PK\x05\x06"+strings.Repeat("\x00", 18)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err = NewStack(app, "NoImage", Props{LambdaAssetDir: build, AlarmEmail: "ops@example.com"})
	if err == nil || !strings.Contains(err.Error(), "workerImage") {
		t.Errorf("no image: err %v, want a refusal naming workerImage", err)
	}
	s, err := NewStack(app, "Built", Props{LambdaAssetDir: build, WorkerImage: image, WithoutServing: true, AlarmEmail: "ops@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Placeholders) != 0 {
		t.Errorf("placeholders %v with every asset present", s.Placeholders)
	}
	var tp tpl
	if err := json.Unmarshal([]byte(js(assertions.Template_FromStack(s.Stack, nil).ToJSON())), &tp); err != nil {
		t.Fatal(err)
	}
	td := tp.resources("AWS::ECS::TaskDefinition")
	for _, r := range td {
		img := js(container(props(r))["Image"])
		if !strings.Contains(img, "123456789012.dkr.ecr.eu-west-1.") || !strings.Contains(img, "/mirrorfleet@sha256:4b8d2f0e") {
			t.Errorf("task image %s, want the ECR image by digest", img)
		}
	}
	pulls := false
	for _, sts := range tp.statements() {
		for _, st := range sts {
			if slices.Contains(list(st["Action"]), any("ecr:BatchGetImage")) {
				pulls = true
				if !strings.Contains(js(st["Resource"]), ":ecr:eu-west-1:123456789012:repository/mirrorfleet") {
					t.Errorf("image pull on %s, want the image's repository", js(st["Resource"]))
				}
			}
		}
	}
	if !pulls {
		t.Error("no execution role may pull the image")
	}
	if _, err := NewStack(app, "Tagless", Props{LambdaAssetDir: build, WorkerImage: "123456789012.dkr.ecr.eu-west-1.amazonaws.com/mirrorfleet", AlarmEmail: "ops@example.com"}); err == nil {
		t.Error("an ECR reference without tag or digest was accepted")
	}
	if _, err := NewStack(app, "BadServe", Props{LambdaAssetDir: build, WorkerImage: image, CertificateARN: "arn:aws:acm:x", AlarmEmail: "ops@example.com"}); err == nil ||
		!strings.Contains(err.Error(), "needs domainName") || !strings.Contains(err.Error(), "not an ACM certificate") {
		t.Errorf("a malformed certificate without domainName: %v", err)
	}
	// A deploy has an account and a region: CloudFront's prefix list is looked up (the
	// CLI answers the lookup), not a placeholder.
	withEnv := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	s, err = NewStack(withEnv, "Deployed", Props{LambdaAssetDir: build, WorkerImage: image, AlarmEmail: "ops@example.com",
		StackProps: awscdk.StackProps{Env: &awscdk.Environment{Account: jsii.String("123456789012"), Region: jsii.String("eu-west-1")}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Placeholders) != 0 {
		t.Errorf("placeholders %v in a stack with an account and a region", s.Placeholders)
	}
	var lookups []string
	for _, m := range *withEnv.Synth(nil).Manifest().Missing {
		lookups = append(lookups, *m.Key)
	}
	if !slices.ContainsFunc(lookups, func(k string) bool {
		return strings.Contains(k, "region=eu-west-1") && strings.Contains(k, "EC2$:$:PrefixList") &&
			strings.Contains(k, "com.amazonaws.global.cloudfront.origin-facing")
	}) {
		t.Errorf("context lookups %v, want CloudFront's origin-facing prefix list in eu-west-1", lookups)
	}
}

// TestPublicReads: with publicReads the GET routes skip IAM, every other method keeps it,
// and the API Lambda is told to serve reads without an identity.
func TestPublicReads(t *testing.T) {
	s, _, tp := variant(t, "MirrorFleetPublic", Props{PublicReads: true, WithoutServing: true, CORSOrigins: []string{"https://status.example.org"},
		CaseInsensitiveHosts: []string{"git.example.org"}}, false)
	auth := map[string]any{}
	for _, r := range tp.resources("AWS::ApiGatewayV2::Route") {
		p := props(r)
		auth[p["RouteKey"].(string)] = p["AuthorizationType"]
	}
	want := map[string]any{"GET /": "NONE", "GET /{proxy+}": "NONE", "ANY /": "AWS_IAM", "ANY /{proxy+}": "AWS_IAM"}
	for k, v := range want {
		if auth[k] != v {
			t.Errorf("route %q authorization %v, want %v (all: %v)", k, auth[k], v, auth)
		}
	}
	vars := props(tp.resources("AWS::Lambda::Function")[logicalIDIn(s, s.API)])["Environment"].(map[string]any)["Variables"].(map[string]any)
	if vars[deployenv.PublicReads] != "true" {
		t.Error("the API Lambda is not told MIRRORFLEET_PUBLIC_READS=true")
	}
	if vars[deployenv.CORSOrigin] != "https://status.example.org" {
		t.Errorf("the API Lambda's CORS origins: %v", vars[deployenv.CORSOrigin])
	}
	for name, fn := range map[string]awslambda.Function{"API": s.API, "coordinator": s.Coordinator} {
		vars := props(tp.resources("AWS::Lambda::Function")[logicalIDIn(s, fn)])["Environment"].(map[string]any)["Variables"].(map[string]any)
		if vars[deployenv.CaseInsensitiveHosts] != "git.example.org" {
			t.Errorf("the %s Lambda's case-insensitive hosts: %v", name, vars[deployenv.CaseInsensitiveHosts])
		}
	}
}

// cdk.json's context, which the CLI passes on every run, states the defaults: it must
// not differ from them.
func TestCdkJSONStatesTheDefaults(t *testing.T) {
	b, err := os.ReadFile("cdk.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct{ Context map[string]any }
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	p, err := PropsFromContext(awscdk.NewApp(&awscdk.AppProps{Context: &cfg.Context}).Node())
	if err != nil {
		t.Fatal(err)
	}
	d, _ := PropsFromContext(awscdk.NewApp(nil).Node())
	if got, want := fmt.Sprintf("%+v", p.Defaults()), fmt.Sprintf("%+v", d.Defaults()); got != want {
		t.Errorf("cdk.json context gives\n%s\nthe defaults are\n%s", got, want)
	}
	// The poll budget is the one setting the fleet's size follows: cdk.json states
	// nothing derived from it, so a pollsPerDay given with -c moves maxWorkers and
	// staleAfter along.
	cfg.Context["pollsPerDay"] = 4.0
	p4, err := PropsFromContext(awscdk.NewApp(&awscdk.AppProps{Context: &cfg.Context}).Node())
	if err != nil {
		t.Fatal(err)
	}
	b4 := budget.Default()
	b4.PollsPerDay = 4
	if d4 := p4.Defaults(); d4.MaxWorkers != b4.MaxWorkers() || d4.StaleAfter != b4.StaleAfter() || d4.MaxWorkers == d.Defaults().MaxWorkers {
		t.Errorf("cdk.json with pollsPerDay 4: maxWorkers %d, staleAfter %v; the budget sizes %d, %v", d4.MaxWorkers, d4.StaleAfter, b4.MaxWorkers(), b4.StaleAfter())
	}
}

// TestFeedsOnTheWorkers (ADR 28): the workers are told the feeds, their period and the
// tokens' secret by its ARN (never a token), and their task role may read that secret
// and no other; a GitHub feed without the secret, or a partial ARN, is refused.
func TestFeedsOnTheWorkers(t *testing.T) {
	arn := "arn:aws:secretsmanager:eu-west-1:123456789012:secret:forge-tokens-XyZ789"
	feeds := []string{"github=https://github.com", "gitlab=https://gitlab.com/gnome"}
	s, _, tp := variant(t, "MirrorFleetFeeds", Props{Feeds: feeds, FeedEvery: 10 * time.Minute, ForgeTokensARN: arn, WithoutServing: true}, false)
	env := envVars(container(tp.taskDef(t, logicalIDIn(s, s.Service))))
	want := map[string]any{deployenv.Feeds: strings.Join(feeds, ","), deployenv.FeedEvery: "10m0s", deployenv.ForgeTokensARN: arn}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("worker %s = %v, want %v", k, env[k], v)
		}
	}
	found := false
	for _, st := range tp.statements() {
		for _, s := range st {
			if strings.Contains(fmt.Sprint(s["Action"]), "secretsmanager:GetSecretValue") && fmt.Sprint(s["Resource"]) == arn {
				found = true
			}
		}
	}
	if !found {
		t.Error("no grant to read the tokens' secret")
	}
	app := awscdk.NewApp(nil)
	for name, p := range map[string]Props{
		"github without secret": {Feeds: []string{"github=https://github.com"}},
		"partial ARN":           {Feeds: []string{"gitlab=https://gitlab.com"}, ForgeTokensARN: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:tokens"},
		"unknown kind":          {Feeds: []string{"svn=https://x.org"}},
	} {
		p.AllowPlaceholders, p.AlarmEmail, p.LambdaAssetDir = true, "ops@example.com", t.TempDir()
		if _, err := NewStack(app, "Bad"+strings.ReplaceAll(name, " ", ""), p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
