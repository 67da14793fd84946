package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapplicationautoscaling"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecrassets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsefs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Namespace and dimension of the fleet's metrics (shared/metrics: Namespace, DimFleet,
// DimState). Repeated here rather than imported so the CDK app does not link the domain.
const (
	metricNamespace = "MirrorFleet"
	dimFleet        = "Fleet"
	dimState        = "State"
	mirrorRoot      = "/mnt/mirrors"
	nonrootUID      = "65532" // distroless nonroot, worker/Dockerfile
)

// Props configures the stack. Zero values take the defaults of Defaults.
type Props struct {
	awscdk.StackProps

	Fleet         string        // Fleet dimension of the metrics; default: the stack name
	WorkerCount   int           // Fargate tasks (the autoscaling minimum)
	MaxWorkers    int           // autoscaling maximum; default 4 × WorkerCount
	WorkerCPU     int           // Fargate CPU units
	WorkerMemory  int           // MiB
	Fetchers      int           // MIRRORFLEET_FETCHERS
	Grace         time.Duration // MIRRORFLEET_GRACE
	Warmup        time.Duration // MIRRORFLEET_WARMUP
	MinLive       int           // alarm when fewer active workers; default WorkerCount
	StaleAfter    time.Duration // alarm when StalenessMax exceeds it
	VpcID         string        // existing VPC (needs env account/region); empty: new VPC
	PublicReads   bool          // GET routes without IAM auth (the API Lambda then serves reads to anyone)
	DiskQuota     string        // MIRRORFLEET_DISK_QUOTA (EFS reports exabytes free); default 500G
	AlarmEmail    string        // optional SNS email subscription
	DeletionGuard bool          // table deletion protection and RETAIN of stateful resources

	// RepoRoot is the repository root (go.mod): the worker's Docker build context and
	// where build/*.zip are read. Default: found upward from the working directory.
	RepoRoot string
	// LambdaAssetDir overrides the directory holding coordinator.zip and api.zip
	// (default RepoRoot/build). A missing zip is replaced by a placeholder asset (see
	// lambdaCode), so synth works without `make build`.
	LambdaAssetDir string
	// WorkerImage overrides the worker image (e.g. a registry image); nil: the
	// worker/Dockerfile asset.
	WorkerImage awsecs.ContainerImage
}

// Defaults fills the zero fields of p.
func (p Props) Defaults() Props {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&p.WorkerCount, 2)
	def(&p.WorkerCPU, 1024)
	def(&p.WorkerMemory, 2048)
	def(&p.Fetchers, 10)
	def(&p.MinLive, p.WorkerCount)
	def(&p.MaxWorkers, 4*p.WorkerCount)
	if p.Grace <= 0 {
		p.Grace = 10 * time.Minute
	}
	if p.Warmup < 0 {
		p.Warmup = 10 * time.Minute
	}
	if p.StaleAfter <= 0 {
		p.StaleAfter = 2 * time.Hour
	}
	if p.DiskQuota == "" {
		p.DiskQuota = "500G"
	}
	if p.RepoRoot == "" {
		p.RepoRoot = findRepoRoot()
	}
	if p.LambdaAssetDir == "" {
		p.LambdaAssetDir = filepath.Join(p.RepoRoot, "build")
	}
	return p
}

// PropsFromContext reads the props from CDK context (cdk.json or -c key=value).
func PropsFromContext(node constructs.Node) Props {
	var p Props
	p.Fleet = ctxString(node, "fleet")
	p.WorkerCount = ctxInt(node, "workerCount")
	p.MaxWorkers = ctxInt(node, "maxWorkers")
	p.WorkerCPU = ctxInt(node, "workerCpu")
	p.WorkerMemory = ctxInt(node, "workerMemory")
	p.Fetchers = ctxInt(node, "fetchers")
	p.MinLive = ctxInt(node, "minLiveWorkers")
	p.Grace = ctxDuration(node, "grace")
	p.Warmup = -1
	if s := ctxString(node, "warmup"); s != "" {
		p.Warmup = ctxDuration(node, "warmup")
	}
	p.StaleAfter = ctxDuration(node, "staleAfter")
	p.VpcID = ctxString(node, "vpcId")
	p.PublicReads = ctxString(node, "publicReads") == "true"
	p.AlarmEmail = ctxString(node, "alarmEmail")
	p.DiskQuota = ctxString(node, "diskQuota")
	p.DeletionGuard = ctxString(node, "deletionProtection") != "false"
	return p
}

func ctxString(node constructs.Node, key string) string {
	v := node.TryGetContext(jsii.String(key))
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func ctxInt(node constructs.Node, key string) int {
	s := ctxString(node, key)
	if s == "" {
		return 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(fmt.Sprintf("context %s=%q: not a number", key, s))
	}
	return int(f)
}

func ctxDuration(node constructs.Node, key string) time.Duration {
	s := ctxString(node, key)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(fmt.Sprintf("context %s=%q: %v", key, s, err))
	}
	return d
}

func findRepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			panic("infra: no go.mod above " + dir)
		}
	}
}

// Stack is mirrorfleet on AWS: the resources below, in the order of the architecture.
type Stack struct {
	Stack awscdk.Stack
	props Props

	Table         awsdynamodb.Table
	TimerDLQ      awssqs.Queue
	ScheduleGroup awsscheduler.CfnScheduleGroup
	SchedulerRole awsiam.Role
	Coordinator   awslambda.Function
	API           awslambda.Function
	HTTPAPI       awsapigatewayv2.HttpApi
	Vpc           awsec2.IVpc
	FileSystem    awsefs.FileSystem
	AccessPoint   awsefs.AccessPoint
	Cluster       awsecs.Cluster
	Service       awsecs.FargateService
	AlarmTopic    awssns.Topic
	Dashboard     awscloudwatch.Dashboard

	// Placeholders lists the Lambda zips replaced by a placeholder asset.
	Placeholders []string
}

// NewStack builds the stack.
func NewStack(scope constructs.Construct, id string, props Props) *Stack {
	props = props.Defaults()
	sp := props.StackProps
	if sp.Description == nil {
		sp.Description = jsii.String("mirrorfleet: git mirror fleet (coordinator, API, Fargate workers on EFS)")
	}
	s := &Stack{Stack: awscdk.NewStack(scope, &id, &sp), props: props}
	if s.props.Fleet == "" {
		s.props.Fleet = id
	}
	s.table()
	s.timers()
	s.coordinator()
	s.api()
	s.network()
	s.mirrorsFileSystem()
	s.workers()
	s.alarms()
	s.dashboard()
	s.nagSuppressions()
	return s
}

func (s *Stack) removal() awscdk.RemovalPolicy {
	if s.props.DeletionGuard {
		return awscdk.RemovalPolicy_RETAIN
	}
	return awscdk.RemovalPolicy_DESTROY
}

func (s *Stack) logGroup(id string) awslogs.LogGroup {
	return awslogs.NewLogGroup(s.Stack, &id, &awslogs.LogGroupProps{
		Retention:     awslogs.RetentionDays_ONE_MONTH,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
}

// table: the single DynamoDB table of docs/store-dynamodb.md.
func (s *Stack) table() {
	str := func(n string) *awsdynamodb.Attribute {
		return &awsdynamodb.Attribute{Name: jsii.String(n), Type: awsdynamodb.AttributeType_STRING}
	}
	s.Table = awsdynamodb.NewTable(s.Stack, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey:        str("pk"),
		SortKey:             str("sk"),
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Encryption:          awsdynamodb.TableEncryption_AWS_MANAGED,
		TimeToLiveAttribute: jsii.String("expire_at"),
		DeletionProtection:  jsii.Bool(s.props.DeletionGuard),
		RemovalPolicy:       s.removal(),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
	})
	for _, gsi := range indexes {
		s.Table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String(gsi[0]),
			PartitionKey:   str(gsi[1]),
			SortKey:        str(gsi[2]),
			ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
		})
	}
}

// indexes are the table's GSIs: name, partition key, sort key (all KEYS_ONLY).
var indexes = [][3]string{
	{"by_owner_pos", "g_owner", "g_pos"},
	{"needs_decision", "g_need", "id"},
	{"by_id", "g_all", "id"},
	{"stalest", "g_stale", "g_stale_sk"},
}

// tableResources are the table and each of its indexes by name: no wildcard.
func (s *Stack) tableResources() *[]*string {
	rs := []*string{s.Table.TableArn()}
	for _, gsi := range indexes {
		rs = append(rs, jsii.String(*s.Table.TableArn()+"/index/"+gsi[0]))
	}
	return &rs
}

// tableActions are the DynamoDB calls the store makes (docs/store-dynamodb.md,
// Operations); TransactWriteItems is authorised per item by these plus ConditionCheckItem.
var tableActions = []string{
	"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query",
	"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
	"dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem", "dynamodb:DescribeTable",
}

func (s *Stack) grantTable(g awsiam.IGrantable) {
	g.GrantPrincipal().AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(tableActions...),
		Resources: s.tableResources(),
	}))
}

// timers: the Scheduler group the coordinator's one-time schedules live in, the role
// Scheduler assumes (invoke the coordinator, nothing else; send to the DLQ), the DLQ.
func (s *Stack) timers() {
	s.TimerDLQ = awssqs.NewQueue(s.Stack, jsii.String("TimerDLQ"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	})
	s.ScheduleGroup = awsscheduler.NewCfnScheduleGroup(s.Stack, jsii.String("ScheduleGroup"), &awsscheduler.CfnScheduleGroupProps{
		Name: jsii.String(*s.Stack.StackName() + "-timers"),
	})
	s.SchedulerRole = awsiam.NewRole(s.Stack, jsii.String("SchedulerRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]interface{}{
				"StringEquals": map[string]interface{}{"aws:SourceAccount": s.Stack.Account()},
			},
		}),
		Description: jsii.String("EventBridge Scheduler: invoke the coordinator for death/warmup timers"),
	})
	s.TimerDLQ.GrantSendMessages(s.SchedulerRole)
}

// coordinator: the Lambda on the minute rule and the Scheduler timers.
func (s *Stack) coordinator() {
	role := s.lambdaRole("CoordinatorRole")
	logs := s.logGroup("CoordinatorLogs")
	s.Coordinator = awslambda.NewFunction(s.Stack, jsii.String("Coordinator"), &awslambda.FunctionProps{
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         s.lambdaCode("coordinator"),
		Role:         role,
		LogGroup:     logs,
		MemorySize:   jsii.Number(512),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(50)),
		Description:  jsii.String("mirrorfleet coordinator: minute tick and Scheduler timers"),
		Environment: &map[string]*string{
			"MIRRORFLEET_TABLE":              s.Table.TableName(),
			"MIRRORFLEET_SCHEDULE_GROUP":     s.ScheduleGroup.Ref(),
			"MIRRORFLEET_SCHEDULER_ROLE_ARN": s.SchedulerRole.RoleArn(),
			"MIRRORFLEET_TIMER_DLQ_ARN":      s.TimerDLQ.QueueArn(),
			"MIRRORFLEET_GRACE":              jsii.String(s.props.Grace.String()),
			"MIRRORFLEET_WARMUP":             jsii.String(s.props.Warmup.String()),
			"MIRRORFLEET_FLEET":              jsii.String(s.props.Fleet),
		},
	})
	s.logWrite(role, logs)
	s.grantTable(role)
	// Timers: one-time schedules in our group only, passing only the Scheduler role.
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("scheduler:CreateSchedule", "scheduler:UpdateSchedule",
			"scheduler:DeleteSchedule", "scheduler:GetSchedule"),
		Resources: jsii.Strings(fmt.Sprintf("arn:%s:scheduler:%s:%s:schedule/%s/*",
			*s.Stack.Partition(), *s.Stack.Region(), *s.Stack.Account(), *s.ScheduleGroup.Ref())),
	}))
	s.SchedulerRole.GrantPassRole(role)
	// The Scheduler role can invoke this one function and nothing else.
	s.SchedulerRole.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("lambda:InvokeFunction"),
		Resources: &[]*string{s.Coordinator.FunctionArn()},
	}))
	awsevents.NewRule(s.Stack, jsii.String("Tick"), &awsevents.RuleProps{
		Description: jsii.String("mirrorfleet coordinator tick"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(s.Coordinator, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(2),
			MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(2)),
		})},
	})
}

// api: the HTTP API Lambda behind API Gateway, IAM authorization on every route.
func (s *Stack) api() {
	role := s.lambdaRole("ApiRole")
	logs := s.logGroup("ApiLogs")
	s.API = awslambda.NewFunction(s.Stack, jsii.String("Api"), &awslambda.FunctionProps{
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         s.lambdaCode("api"),
		Role:         role,
		LogGroup:     logs,
		MemorySize:   jsii.Number(256),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(15)),
		Description:  jsii.String("mirrorfleet HTTP API"),
		Environment: &map[string]*string{
			"MIRRORFLEET_TABLE":        s.Table.TableName(),
			"MIRRORFLEET_PUBLIC_READS": jsii.String(strconv.FormatBool(s.props.PublicReads)),
		},
	})
	s.logWrite(role, logs)
	s.grantTable(role)

	s.HTTPAPI = awsapigatewayv2.NewHttpApi(s.Stack, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		Description:        jsii.String("mirrorfleet API (SigV4)"),
		DefaultAuthorizer:  awsapigatewayv2authorizers.NewHttpIamAuthorizer(),
		CreateDefaultStage: jsii.Bool(false),
	})
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("ApiIntegration"), s.API, nil)
	for _, path := range []string{"/", "/{proxy+}"} {
		s.HTTPAPI.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(path),
			Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_ANY},
			Integration: integration,
		})
		if s.props.PublicReads {
			// A method route outranks ANY: GETs skip IAM, every write keeps it.
			s.HTTPAPI.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
				Path:        jsii.String(path),
				Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_GET},
				Integration: integration,
				Authorizer:  awsapigatewayv2.NewHttpNoneAuthorizer(),
			})
		}
	}
	access := s.logGroup("ApiAccessLogs")
	awsapigatewayv2.NewHttpStage(s.Stack, jsii.String("ApiStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:           s.HTTPAPI,
		StageName:         jsii.String("$default"),
		AutoDeploy:        jsii.Bool(true),
		Throttle:          &awsapigatewayv2.ThrottleSettings{RateLimit: jsii.Number(50), BurstLimit: jsii.Number(100)},
		AccessLogSettings: &accessLog{dest: awsapigatewayv2.NewLogGroupLogDestination(access)},
	})
	awscdk.NewCfnOutput(s.Stack, jsii.String("ApiUrl"), &awscdk.CfnOutputProps{Value: s.HTTPAPI.ApiEndpoint()})
}

// accessLog implements IAccessLogSettings: JSON access logs with the caller identity.
type accessLog struct {
	dest awsapigatewayv2.IAccessLogDestination
}

func (a *accessLog) Destination() awsapigatewayv2.IAccessLogDestination { return a.dest }

func (a *accessLog) Format() awsapigateway.AccessLogFormat {
	return awsapigateway.AccessLogFormat_Custom(jsii.String(`{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","userArn":"$context.identity.userArn","requestTime":"$context.requestTime","method":"$context.httpMethod","path":"$context.path","status":"$context.status","latency":"$context.responseLatency","error":"$context.error.message"}`))
}

func (s *Stack) lambdaRole(id string) awsiam.Role {
	return awsiam.NewRole(s.Stack, &id, &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
	})
}

func (s *Stack) logWrite(role awsiam.Role, lg awslogs.LogGroup) {
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("logs:CreateLogStream", "logs:PutLogEvents"),
		Resources: &[]*string{lg.LogGroupArn()},
	}))
}

// lambdaCode is build/<name>.zip, or — when it is missing (no `make build` yet) — a
// placeholder directory with a bootstrap that exits, so synth and tests need no build.
func (s *Stack) lambdaCode(name string) awslambda.Code {
	zip := filepath.Join(s.props.LambdaAssetDir, name+".zip")
	if _, err := os.Stat(zip); err == nil {
		return awslambda.Code_FromAsset(jsii.String(zip), nil)
	}
	dir, err := os.MkdirTemp("", "mirrorfleet-placeholder-"+name+"-")
	if err != nil {
		panic(err)
	}
	script := "#!/bin/sh\necho 'placeholder: run make build before deploying' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte(script), 0o755); err != nil {
		panic(err)
	}
	s.Placeholders = append(s.Placeholders, zip)
	awscdk.Annotations_Of(s.Stack).AddWarningV2(jsii.String("mirrorfleet:placeholder-"+name),
		jsii.String(zip+" is missing: using a placeholder bootstrap; run `make build` before deploying"))
	return awslambda.Code_FromAsset(jsii.String(dir), nil)
}

// network: a new VPC (two AZs, one NAT for upstream fetches, flow logs), or an existing
// one by id.
func (s *Stack) network() {
	if s.props.VpcID != "" {
		s.Vpc = awsec2.Vpc_FromLookup(s.Stack, jsii.String("Vpc"), &awsec2.VpcLookupOptions{VpcId: jsii.String(s.props.VpcID)})
		return
	}
	vpc := awsec2.NewVpc(s.Stack, jsii.String("Vpc"), &awsec2.VpcProps{
		MaxAzs:      jsii.Number(2),
		NatGateways: jsii.Number(1),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{
			{Name: jsii.String("public"), SubnetType: awsec2.SubnetType_PUBLIC, CidrMask: jsii.Number(24)},
			{Name: jsii.String("workers"), SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS, CidrMask: jsii.Number(20)},
		},
	})
	vpc.AddFlowLog(jsii.String("FlowLog"), &awsec2.FlowLogOptions{
		Destination: awsec2.FlowLogDestination_ToCloudWatchLogs(s.logGroup("VpcFlowLogs"), nil),
		TrafficType: awsec2.FlowLogTrafficType_REJECT,
	})
	s.Vpc = vpc
}

// mirrorsFileSystem: EFS for /mnt/mirrors, encrypted, IA after 30 days, one access point
// owned by the image's nonroot user.
func (s *Stack) mirrorsFileSystem() {
	s.FileSystem = awsefs.NewFileSystem(s.Stack, jsii.String("Mirrors"), &awsefs.FileSystemProps{
		Vpc:                         s.Vpc,
		VpcSubnets:                  &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS},
		Encrypted:                   jsii.Bool(true),
		LifecyclePolicy:             awsefs.LifecyclePolicy_AFTER_30_DAYS,
		OutOfInfrequentAccessPolicy: awsefs.OutOfInfrequentAccessPolicy_AFTER_1_ACCESS,
		PerformanceMode:             awsefs.PerformanceMode_GENERAL_PURPOSE,
		ThroughputMode:              awsefs.ThroughputMode_ELASTIC,
		EnableAutomaticBackups:      jsii.Bool(false),
		RemovalPolicy:               s.removal(),
	})
	// A file system policy replaces EFS's default "any client may mount": access then
	// needs an IAM allow (the worker task role, via the access point), over TLS only.
	s.FileSystem.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite", "elasticfilesystem:ClientRootAccess"),
		Conditions: &map[string]interface{}{"Bool": map[string]interface{}{"aws:SecureTransport": "false"}},
	}))
	s.AccessPoint = s.FileSystem.AddAccessPoint(jsii.String("MirrorsAccessPoint"), &awsefs.AccessPointOptions{
		Path:      jsii.String("/mirrors"),
		PosixUser: &awsefs.PosixUser{Uid: jsii.String(nonrootUID), Gid: jsii.String(nonrootUID)},
		CreateAcl: &awsefs.Acl{OwnerUid: jsii.String(nonrootUID), OwnerGid: jsii.String(nonrootUID), Permissions: jsii.String("750")},
	})
}

// workers: ECS cluster and the Fargate ARM64 service of fetch workers on EFS.
func (s *Stack) workers() {
	s.Cluster = awsecs.NewCluster(s.Stack, jsii.String("Cluster"), &awsecs.ClusterProps{
		Vpc:                 s.Vpc,
		ContainerInsightsV2: awsecs.ContainerInsights_ENABLED,
	})
	task := awsecs.NewFargateTaskDefinition(s.Stack, jsii.String("WorkerTask"), &awsecs.FargateTaskDefinitionProps{
		Cpu:            jsii.Number(float64(s.props.WorkerCPU)),
		MemoryLimitMiB: jsii.Number(float64(s.props.WorkerMemory)),
		RuntimePlatform: &awsecs.RuntimePlatform{
			CpuArchitecture:       awsecs.CpuArchitecture_ARM64(),
			OperatingSystemFamily: awsecs.OperatingSystemFamily_LINUX(),
		},
		Volumes: &[]*awsecs.Volume{{
			Name: jsii.String("mirrors"),
			EfsVolumeConfiguration: &awsecs.EfsVolumeConfiguration{
				FileSystemId:      s.FileSystem.FileSystemId(),
				TransitEncryption: jsii.String("ENABLED"),
				AuthorizationConfig: &awsecs.AuthorizationConfig{
					AccessPointId: s.AccessPoint.AccessPointId(),
					Iam:           jsii.String("ENABLED"),
				},
			},
		}},
	})
	image := s.props.WorkerImage
	if image == nil {
		image = awsecs.ContainerImage_FromAsset(jsii.String(s.props.RepoRoot), &awsecs.AssetImageProps{
			File:       jsii.String("worker/Dockerfile"),
			Platform:   awsecrassets.Platform_LINUX_ARM64(),
			IgnoreMode: awscdk.IgnoreMode_DOCKER,
			// The build needs go.mod, go.sum and the packages ./worker imports.
			Exclude: jsii.Strings("*", "!go.mod", "!go.sum", "!worker", "!shared"),
		})
	}
	logs := s.logGroup("WorkerLogs")
	container := task.AddContainer(jsii.String("worker"), &awsecs.ContainerDefinitionOptions{
		Image:                  image,
		User:                   jsii.String(nonrootUID + ":" + nonrootUID),
		ReadonlyRootFilesystem: jsii.Bool(true),
		StopTimeout:            awscdk.Duration_Seconds(jsii.Number(30)),
		Logging:                awsecs.LogDrivers_AwsLogs(&awsecs.AwsLogDriverProps{StreamPrefix: jsii.String("worker"), LogGroup: logs}),
		Environment: &map[string]*string{
			"MIRRORFLEET_TABLE":       s.Table.TableName(),
			"MIRRORFLEET_MIRROR_ROOT": jsii.String(mirrorRoot),
			"MIRRORFLEET_FETCHERS":    jsii.String(strconv.Itoa(s.props.Fetchers)),
			"MIRRORFLEET_FLEET":       jsii.String(s.props.Fleet),
			"MIRRORFLEET_DRAIN":       jsii.String("20s"),
			"MIRRORFLEET_DISK_QUOTA":  jsii.String(s.props.DiskQuota),
		},
	})
	container.AddMountPoints(&awsecs.MountPoint{
		SourceVolume: jsii.String("mirrors"), ContainerPath: jsii.String(mirrorRoot), ReadOnly: jsii.Bool(false),
	})
	s.grantTable(task.TaskRole())
	// Mount and write through the access point only (IAM authorization on the volume).
	task.TaskRole().AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"),
		Resources: &[]*string{s.FileSystem.FileSystemArn()},
		Conditions: &map[string]interface{}{
			"StringEquals": map[string]interface{}{"elasticfilesystem:AccessPointArn": s.AccessPoint.AccessPointArn()},
		},
	}))

	sg := awsec2.NewSecurityGroup(s.Stack, jsii.String("WorkerSG"), &awsec2.SecurityGroupProps{
		Vpc:              s.Vpc,
		Description:      jsii.String("mirrorfleet workers: no ingress; egress for upstream git and AWS APIs"),
		AllowAllOutbound: jsii.Bool(true),
	})
	s.Service = awsecs.NewFargateService(s.Stack, jsii.String("Workers"), &awsecs.FargateServiceProps{
		Cluster:           s.Cluster,
		TaskDefinition:    task,
		DesiredCount:      jsii.Number(float64(s.props.WorkerCount)),
		SecurityGroups:    &[]awsec2.ISecurityGroup{sg},
		VpcSubnets:        &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS},
		AssignPublicIp:    jsii.Bool(false),
		MinHealthyPercent: jsii.Number(100),
		MaxHealthyPercent: jsii.Number(200),
		CircuitBreaker:    &awsecs.DeploymentCircuitBreaker{Rollback: jsii.Bool(true)},
		PlatformVersion:   awsecs.FargatePlatformVersion_LATEST,
	})
	// The file system's security group admits NFS from the workers only.
	s.FileSystem.Connections().AllowDefaultPortFrom(s.Service, jsii.String("NFS from mirrorfleet workers"))
	s.workerScaling()
}

// workerScaling grows the fleet when it falls behind — the 99th percentile of how long
// repos have gone without a successful fetch — and shrinks it when it is well ahead.
// New workers take their arcs at the next tick; leavers hand theirs over as they drain.
func (s *Stack) workerScaling() {
	scaling := s.Service.AutoScaleTaskCount(&awsapplicationautoscaling.EnableScalingProps{
		MinCapacity: jsii.Number(float64(s.props.WorkerCount)),
		MaxCapacity: jsii.Number(float64(max(s.props.MaxWorkers, s.props.WorkerCount))),
	})
	behind := s.props.StaleAfter.Seconds()
	scaling.ScaleOnMetric(jsii.String("ScaleOnStaleness"), &awsapplicationautoscaling.BasicStepScalingPolicyProps{
		Metric: s.metric("StalenessP99", "Maximum", 10*time.Minute, nil),
		ScalingSteps: &[]*awsapplicationautoscaling.ScalingInterval{
			{Upper: jsii.Number(behind / 4), Change: jsii.Number(-1)},
			{Lower: jsii.Number(behind / 2), Change: jsii.Number(1)},
			{Lower: jsii.Number(behind), Change: jsii.Number(2)},
		},
		AdjustmentType: awsapplicationautoscaling.AdjustmentType_CHANGE_IN_CAPACITY,
		Cooldown:       awscdk.Duration_Minutes(jsii.Number(15)),
	})
}

func (s *Stack) metric(name, stat string, period time.Duration, dims map[string]*string) awscloudwatch.Metric {
	d := map[string]*string{dimFleet: jsii.String(s.props.Fleet)}
	for k, v := range dims {
		d[k] = v
	}
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(metricNamespace),
		MetricName:    jsii.String(name),
		DimensionsMap: &d,
		Statistic:     jsii.String(stat),
		Period:        awscdk.Duration_Seconds(jsii.Number(period.Seconds())),
	})
}

// alarms: no tick, too few live workers, stale repos, fetch failure ratio, DLQ not empty;
// to an encrypted SNS topic with an optional email subscription.
func (s *Stack) alarms() {
	key := awskms.NewKey(s.Stack, jsii.String("AlarmKey"), &awskms.KeyProps{
		EnableKeyRotation: jsii.Bool(true),
		Description:       jsii.String("mirrorfleet alarm topic"),
		RemovalPolicy:     awscdk.RemovalPolicy_DESTROY,
	})
	key.GrantEncryptDecrypt(awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil))
	s.AlarmTopic = awssns.NewTopic(s.Stack, jsii.String("Alarms"), &awssns.TopicProps{
		MasterKey:  key,
		EnforceSSL: jsii.Bool(true),
	})
	if s.props.AlarmEmail != "" {
		s.AlarmTopic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(s.props.AlarmEmail), nil))
	}
	action := awscloudwatchactions.NewSnsAction(s.AlarmTopic)
	add := func(id string, p *awscloudwatch.AlarmProps) {
		a := awscloudwatch.NewAlarm(s.Stack, &id, p)
		a.AddAlarmAction(action)
		a.AddOkAction(action)
	}
	minute := time.Minute
	add("NoTickAlarm", &awscloudwatch.AlarmProps{
		AlarmDescription:   jsii.String("No coordinator tick for 5 minutes"),
		Metric:             s.metric("Ticks", "Sum", minute, nil),
		Threshold:          jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(5),
		TreatMissingData:   awscloudwatch.TreatMissingData_BREACHING,
	})
	add("LiveWorkersAlarm", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String(fmt.Sprintf("Fewer than %d active workers for 5 minutes", s.props.MinLive)),
		Metric: s.metric("WorkersByState", "Maximum", minute,
			map[string]*string{dimState: jsii.String("active")}),
		Threshold:          jsii.Number(float64(s.props.MinLive)),
		ComparisonOperator: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(5),
		TreatMissingData:   awscloudwatch.TreatMissingData_BREACHING,
	})
	add("StaleReposAlarm", &awscloudwatch.AlarmProps{
		AlarmDescription:   jsii.String(fmt.Sprintf("Some repo not fetched successfully for over %s", s.props.StaleAfter)),
		Metric:             s.metric("StalenessMax", "Maximum", 10*minute, nil),
		Threshold:          jsii.Number(s.props.StaleAfter.Seconds()),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(2),
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	add("FetchFailureRatioAlarm", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String("More than 20% of fetches failed over 15 minutes"),
		Metric: awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String("IF(ok + failed > 0, failed / (ok + failed), 0)"),
			Label:      jsii.String("fetch failure ratio"),
			Period:     awscdk.Duration_Minutes(jsii.Number(15)),
			UsingMetrics: &map[string]awscloudwatch.IMetric{
				"ok":     s.metric("FetchSuccesses", "Sum", 15*minute, nil),
				"failed": s.metric("FetchFailures", "Sum", 15*minute, nil),
			},
		}),
		Threshold:          jsii.Number(0.2),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(1),
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	add("TimerDLQAlarm", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String("Scheduler timer deliveries in the DLQ"),
		Metric: s.TimerDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Maximum"),
		}),
		Threshold:          jsii.Number(0),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(1),
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
}

// dashboard: the metric names of shared/metrics.
func (s *Stack) dashboard() {
	m := func(name, stat string) awscloudwatch.IMetric { return s.metric(name, stat, time.Minute, nil) }
	search := func(name, label string) awscloudwatch.IMetric {
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,%s,%s} MetricName="%s" %s="%s"', 'Maximum', 60)`,
				metricNamespace, dimFleet, dimState, name, dimFleet, s.props.Fleet)),
			Label:  jsii.String(label),
			Period: awscdk.Duration_Minutes(jsii.Number(1)),
		})
	}
	graph := func(title string, left ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &left, Width: jsii.Number(8), Height: jsii.Number(6),
		})
	}
	s.Dashboard = awscloudwatch.NewDashboard(s.Stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(s.props.Fleet + "-mirrorfleet"),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{
				graph("Coordinator ticks", m("Ticks", "Sum")),
				graph("Tick duration (s)", m("TickDuration", "Average"), m("TickDuration", "p99")),
				graph("Leader term / repos moved", m("LeaderTerm", "Maximum"), m("ReposMoved", "Sum")),
			},
			{
				graph("Workers by state", search("WorkersByState", "workers")),
				graph("Repos by state", search("ReposByState", "repos")),
				graph("Staleness (s)", m("StalenessP50", "Maximum"), m("StalenessP99", "Maximum"), m("StalenessMax", "Maximum")),
			},
			{
				graph("Fetches", m("FetchSuccesses", "Sum"), m("FetchFailures", "Sum")),
				graph("Fetch duration (s)", m("FetchDuration", "Average"), m("FetchDuration", "p99")),
				graph("Bytes fetched / queue depth", m("BytesFetched", "Sum"), m("QueueDepth", "Maximum")),
			},
			s.platformWidgets(graph),
		},
	})
}

// platformWidgets is the dashboard's platform row: the Lambdas, the table and the file
// system, from the services' own metrics.
func (s *Stack) platformWidgets(graph func(string, ...awscloudwatch.IMetric) awscloudwatch.IWidget) *[]awscloudwatch.IWidget {
	var lambda []awscloudwatch.IMetric
	for _, fn := range []awslambda.Function{s.Coordinator, s.API} {
		lambda = append(lambda, fn.MetricErrors(nil), fn.MetricThrottles(nil))
	}
	aws := func(ns, name, stat string, dims map[string]*string) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(ns), MetricName: jsii.String(name),
			DimensionsMap: &dims, Statistic: jsii.String(stat), Period: awscdk.Duration_Minutes(jsii.Number(5))})
	}
	table := map[string]*string{"TableName": s.Table.TableName()}
	fs := map[string]*string{"FileSystemId": s.FileSystem.FileSystemId()}
	return &[]awscloudwatch.IWidget{
		graph("Lambda errors / throttles", lambda...),
		graph("Lambda duration (ms)", s.Coordinator.MetricDuration(nil), s.API.MetricDuration(nil)),
		graph("DynamoDB capacity / throttles",
			aws("AWS/DynamoDB", "ConsumedReadCapacityUnits", "Sum", table),
			aws("AWS/DynamoDB", "ConsumedWriteCapacityUnits", "Sum", table),
			aws("AWS/DynamoDB", "ThrottledRequests", "Sum", table)),
		graph("EFS size (bytes) / throughput",
			aws("AWS/EFS", "StorageBytes", "Average", map[string]*string{"FileSystemId": s.FileSystem.FileSystemId(), "StorageClass": jsii.String("Total")}),
			aws("AWS/EFS", "MeteredIOBytes", "Sum", fs)),
	}
}
