package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// One synth per test binary (jsii start-up and synth take seconds): the stack, its
// template and the cdk-nag annotations are shared by every test.
var (
	stack    *Stack
	template assertions.Template
	tmpl     map[string]any // the template as JSON, for checks assertions cannot express
)

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
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out)})
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
		// No build/ zips here: exercise the placeholder path, as on a fresh checkout.
		stack = NewStack(app, "MirrorFleetTest", Props{
			LambdaAssetDir: filepath.Join(out, "no-build"),
			DeletionGuard:  true,
			AlarmEmail:     "ops@example.com",
		})
		template = assertions.Template_FromStack(stack.Stack, nil)
		b, err := json.Marshal(template.ToJSON())
		if err != nil {
			panic(err)
		}
		if err := json.Unmarshal(b, &tmpl); err != nil {
			panic(err)
		}
		return m.Run()
	}()
	os.Exit(code)
}

func resourcesOf(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tmpl["Resources"].(map[string]any) {
		r := r.(map[string]any)
		if r["Type"] == typ {
			out[id] = r
		}
	}
	return out
}

func logicalID(c interface{ Node() constructs.Node }) string {
	if e, ok := c.(awscdk.CfnElement); ok {
		return *stack.Stack.GetLogicalId(e)
	}
	return *stack.Stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
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

func TestResourceCounts(t *testing.T) {
	for typ, n := range map[string]float64{
		"AWS::DynamoDB::Table":          1,
		"AWS::Lambda::Function":         2,
		"AWS::Events::Rule":             1,
		"AWS::Scheduler::ScheduleGroup": 1,
		"AWS::SQS::Queue":               1,
		"AWS::ApiGatewayV2::Api":        1,
		"AWS::ApiGatewayV2::Stage":      1,
		"AWS::EC2::VPC":                 1,
		"AWS::EFS::FileSystem":          1,
		"AWS::EFS::AccessPoint":         1,
		"AWS::ECS::Cluster":             1,
		"AWS::ECS::Service":             1,
		"AWS::CloudWatch::Alarm":        7, // five operator alarms + the two of the scaling policy
		"AWS::CloudWatch::Dashboard":    1,
		"AWS::SNS::Topic":               1,
		"AWS::SNS::Subscription":        1,
		"AWS::Logs::LogGroup":           5,
	} {
		template.ResourceCountIs(jsii.String(typ), jsii.Number(n))
	}
	if len(stack.Placeholders) != 2 {
		t.Errorf("placeholders = %v, want both zips (no build dir in the test)", stack.Placeholders)
	}
}

func TestLambdasArm64AL2023(t *testing.T) {
	template.AllResourcesProperties(jsii.String("AWS::Lambda::Function"), obj(
		"Runtime", "provided.al2023",
		"Architectures", []any{"arm64"},
		"Handler", "bootstrap",
	))
	template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), obj(
		"Environment", like("Variables", like(
			"MIRRORFLEET_TABLE", assertions.Match_AnyValue(),
			"MIRRORFLEET_SCHEDULE_GROUP", obj("Ref", logicalID(stack.ScheduleGroup)),
			"MIRRORFLEET_SCHEDULER_ROLE_ARN", assertions.Match_AnyValue(),
			"MIRRORFLEET_TIMER_DLQ_ARN", assertions.Match_AnyValue(),
		)),
	))
	template.HasResourceProperties(jsii.String("AWS::Events::Rule"), obj(
		"ScheduleExpression", "rate(1 minute)",
		"Targets", arrayWith(like("Arn", obj("Fn::GetAtt", []any{logicalID(stack.Coordinator), "Arn"}))),
	))
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

func TestHTTPAPIIAMOnEveryRoute(t *testing.T) {
	routes := resourcesOf("AWS::ApiGatewayV2::Route")
	if len(routes) == 0 {
		t.Fatal("no routes")
	}
	for id, r := range routes {
		p := r["Properties"].(map[string]any)
		if p["AuthorizationType"] != "AWS_IAM" {
			t.Errorf("route %s (%v): AuthorizationType %v, want AWS_IAM", id, p["RouteKey"], p["AuthorizationType"])
		}
	}
	template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), obj(
		"StageName", "$default",
		"AccessLogSettings", like("DestinationArn", assertions.Match_AnyValue()),
		"DefaultRouteSettings", like("ThrottlingRateLimit", 50, "ThrottlingBurstLimit", 100),
	))
}

func TestWorkersOnEFS(t *testing.T) {
	template.HasResourceProperties(jsii.String("AWS::EFS::FileSystem"), obj(
		"Encrypted", true,
		"LifecyclePolicies", arrayWith(obj("TransitionToIA", "AFTER_30_DAYS")),
		"FileSystemPolicy", like("Statement", arrayWith(like(
			"Effect", "Deny",
			"Condition", obj("Bool", obj("aws:SecureTransport", "false")),
		))),
	))
	template.HasResourceProperties(jsii.String("AWS::EFS::AccessPoint"), obj(
		"PosixUser", obj("Uid", "65532", "Gid", "65532"),
		"RootDirectory", like("Path", "/mirrors"),
	))
	template.HasResourceProperties(jsii.String("AWS::ECS::TaskDefinition"), obj(
		"RequiresCompatibilities", []any{"FARGATE"},
		"RuntimePlatform", obj("CpuArchitecture", "ARM64", "OperatingSystemFamily", "LINUX"),
		"Volumes", arrayWith(like("Name", "mirrors", "EFSVolumeConfiguration", like(
			"TransitEncryption", "ENABLED",
			"AuthorizationConfig", obj("AccessPointId", obj("Ref", logicalID(stack.AccessPoint)), "IAM", "ENABLED"),
		))),
		"ContainerDefinitions", arrayWith(like(
			"User", "65532:65532",
			"Environment", arrayWith(obj("Name", "MIRRORFLEET_DISK_QUOTA", "Value", "500G"), obj("Name", "MIRRORFLEET_MIRROR_ROOT", "Value", "/mnt/mirrors")),
			"MountPoints", arrayWith(like("ContainerPath", "/mnt/mirrors", "SourceVolume", "mirrors")),
		)),
	))
	template.HasResourceProperties(jsii.String("AWS::ECS::Service"), obj(
		"LaunchType", "FARGATE",
		"DesiredCount", 2,
	))
	// NFS into the file system's security group only from the workers' group.
	ingress := resourcesOf("AWS::EC2::SecurityGroupIngress")
	if len(ingress) != 1 {
		t.Fatalf("%d SecurityGroupIngress resources, want 1 (NFS from the workers)", len(ingress))
	}
	for id, r := range ingress {
		p := r["Properties"].(map[string]any)
		if p["FromPort"] != 2049.0 || p["SourceSecurityGroupId"] == nil || p["CidrIp"] != nil {
			t.Errorf("ingress %s = %v, want 2049 from a security group", id, p)
		}
	}
	for id, r := range resourcesOf("AWS::EC2::SecurityGroup") {
		if in := r["Properties"].(map[string]any)["SecurityGroupIngress"]; in != nil {
			t.Errorf("security group %s has inline ingress %v", id, in)
		}
	}
}

// statements returns every IAM policy statement with the logical id of its policy.
func statements() map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for id, r := range resourcesOf("AWS::IAM::Policy") {
		doc := r["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)
		for _, st := range doc["Statement"].([]any) {
			out[id] = append(out[id], st.(map[string]any))
		}
	}
	return out
}

func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

func TestSchedulerRoleInvokesOnlyCoordinator(t *testing.T) {
	role := logicalID(stack.SchedulerRole)
	coord := logicalID(stack.Coordinator)
	found := false
	for id, r := range resourcesOf("AWS::IAM::Policy") {
		p := r["Properties"].(map[string]any)
		attached := false
		for _, ro := range list(p["Roles"]) {
			if m, ok := ro.(map[string]any); ok && m["Ref"] == role {
				attached = true
			}
		}
		if !attached {
			continue
		}
		for _, st := range statements()[id] {
			for _, a := range list(st["Action"]) {
				switch {
				case a == "lambda:InvokeFunction":
					found = true
					res := list(st["Resource"])
					want := map[string]any{"Fn::GetAtt": []any{coord, "Arn"}}
					if len(res) != 1 || fmt.Sprint(res[0]) != fmt.Sprint(want) {
						t.Errorf("scheduler role may invoke %v, want only the coordinator", res)
					}
				case strings.HasPrefix(a.(string), "sqs:"):
					if fmt.Sprint(st["Resource"]) != fmt.Sprint(map[string]any{"Fn::GetAtt": []any{logicalID(stack.TimerDLQ), "Arn"}}) {
						t.Errorf("scheduler role %s on %v, want the DLQ only", a, st["Resource"])
					}
				default:
					t.Errorf("scheduler role has unexpected action %v", a)
				}
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
			b, _ := json.Marshal(st["Resource"])
			if !strings.Contains(string(b), table) {
				continue
			}
			n++
			if strings.Contains(string(b), "*") {
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
		t.Errorf("%d statements on the table, want 3 (coordinator, API, worker)", n)
	}
}

func TestAlarmsAndDashboard(t *testing.T) {
	for _, m := range []string{"Ticks", "WorkersByState", "StalenessMax"} {
		template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), obj(
			"MetricName", m, "Namespace", "MirrorFleet",
			"Dimensions", arrayWith(obj("Name", "Fleet", "Value", "MirrorFleetTest")),
		))
	}
	template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), obj(
		"Metrics", arrayWith(like("Expression", assertions.Match_StringLikeRegexp(jsii.String("failed / \\(ok \\+ failed\\)")))),
	))
	template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), obj(
		"MetricName", "ApproximateNumberOfMessagesVisible", "Threshold", 0,
	))
	// The five operator alarms notify the topic; the other two drive the worker scaling.
	toTopic := 0
	topic := logicalID(stack.AlarmTopic)
	for _, r := range resourcesOf("AWS::CloudWatch::Alarm") {
		acts, _ := json.Marshal(r["Properties"].(map[string]any)["AlarmActions"])
		if string(acts) == `[{"Ref":"`+topic+`"}]` {
			toTopic++
		}
	}
	if toTopic != 5 {
		t.Errorf("%d alarms notify the alarm topic, want 5", toTopic)
	}
	template.AllResourcesProperties(jsii.String("AWS::Logs::LogGroup"), obj("RetentionInDays", 30))
	template.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), obj("Protocol", "email", "Endpoint", "ops@example.com"))
	b, _ := json.Marshal(resourcesOf("AWS::CloudWatch::Dashboard"))
	for _, name := range []string{"Ticks", "TickDuration", "LeaderTerm", "ReposMoved", "WorkersByState", "ReposByState",
		"StalenessP50", "StalenessP99", "StalenessMax", "FetchSuccesses", "FetchFailures", "FetchDuration", "BytesFetched", "QueueDepth",
		"Errors", "Throttles", "ConsumedWriteCapacityUnits", "ThrottledRequests", "StorageBytes", "MeteredIOBytes"} {
		if !strings.Contains(string(b), `\"`+name+`\"`) && !strings.Contains(string(b), name) {
			t.Errorf("dashboard lacks %s", name)
		}
	}
}

func TestPropsFromContext(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{
		"workerCount": 3, "workerCpu": "2048", "grace": "5m", "warmup": "0s",
		"vpcId": "vpc-123", "alarmEmail": "a@b.c", "deletionProtection": "false",
	}})
	p := PropsFromContext(app.Node())
	if p.WorkerCount != 3 || p.WorkerCPU != 2048 || p.Grace.String() != "5m0s" || p.Warmup != 0 ||
		p.VpcID != "vpc-123" || p.AlarmEmail != "a@b.c" || p.DeletionGuard {
		t.Errorf("props = %+v", p)
	}
	d := PropsFromContext(awscdk.NewApp(nil).Node()).Defaults()
	if d.WorkerCount != 2 || d.Fetchers != 10 || d.Grace.String() != "10m0s" || d.Warmup.String() != "10m0s" ||
		d.MinLive != 2 || !d.DeletionGuard || d.DiskQuota != "500G" {
		t.Errorf("defaults = %+v", d)
	}
}

// TestPublicReads: with publicReads the GET routes skip IAM, every other method keeps it,
// and the API Lambda is told to serve reads without an identity.
func TestPublicReads(t *testing.T) {
	out := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out)})
	s := NewStack(app, "MirrorFleetPublic", Props{LambdaAssetDir: filepath.Join(out, "no-build"), PublicReads: true})
	var tp map[string]any
	b, _ := json.Marshal(assertions.Template_FromStack(s.Stack, nil).ToJSON())
	if err := json.Unmarshal(b, &tp); err != nil {
		t.Fatal(err)
	}
	auth := map[string]any{}
	envOK := false
	for _, r := range tp["Resources"].(map[string]any) {
		res := r.(map[string]any)
		p, _ := res["Properties"].(map[string]any)
		switch res["Type"] {
		case "AWS::ApiGatewayV2::Route":
			auth[p["RouteKey"].(string)] = p["AuthorizationType"]
		case "AWS::Lambda::Function":
			if env, ok := p["Environment"].(map[string]any); ok {
				if vars, ok := env["Variables"].(map[string]any); ok && vars["MIRRORFLEET_PUBLIC_READS"] == "true" {
					envOK = true
				}
			}
		}
	}
	want := map[string]any{"GET /": "NONE", "GET /{proxy+}": "NONE", "ANY /": "AWS_IAM", "ANY /{proxy+}": "AWS_IAM"}
	for k, v := range want {
		if auth[k] != v {
			t.Errorf("route %q authorization %v, want %v (all: %v)", k, auth[k], v, auth)
		}
	}
	if !envOK {
		t.Error("the API Lambda is not told MIRRORFLEET_PUBLIC_READS=true")
	}
}

// TestWorkersScaleOnStaleness: the worker service scales between workerCount and
// maxWorkers on the p99 staleness the coordinator publishes.
func TestWorkersScaleOnStaleness(t *testing.T) {
	template.HasResourceProperties(jsii.String("AWS::ApplicationAutoScaling::ScalableTarget"), obj(
		"MinCapacity", 2, "MaxCapacity", 8, "ScalableDimension", "ecs:service:DesiredCount"))
	found := false
	for _, r := range resourcesOf("AWS::CloudWatch::Alarm") {
		p := r["Properties"].(map[string]any)
		if p["MetricName"] == "StalenessP99" && p["Namespace"] == "MirrorFleet" {
			found = true
		}
	}
	if !found {
		t.Fatal("no alarm drives scaling on MirrorFleet/StalenessP99")
	}
	if n := len(resourcesOf("AWS::ApplicationAutoScaling::ScalingPolicy")); n < 2 {
		t.Fatalf("%d scaling policies, want scale-out and scale-in", n)
	}
}
