package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsefs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awselasticloadbalancingv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
)

// Namespace and dimensions of the fleet's metrics (shared/metrics: Namespace, DimFleet,
// DimState). Repeated here rather than imported so the CDK app does not link the domain.
const (
	metricNamespace = "MirrorFleet"
	dimFleet        = "Fleet"
	dimState        = "State"
	mirrorRoot      = "/mnt/mirrors"
	// Local scratch of the read-only containers: the worker's alive file, git's
	// temporary files, the server's pack cache.
	tmpDir       = "/tmp"
	aliveFile    = "/tmp/mirrorfleet/alive"
	packCacheDir = "/var/cache/mirrorfleet"
	servePort    = 8080
)

// Stack is mirrorfleet on AWS: the resources below, in the order of the architecture.
type Stack struct {
	Stack awscdk.Stack
	props Props

	Table         awsdynamodb.Table
	TimerDLQ      awssqs.Queue
	ScheduleGroup awsscheduler.CfnScheduleGroup
	SchedulerRole awsiam.Role
	Coordinator   awslambda.Function
	TickRule      awsevents.Rule
	API           awslambda.Function
	HTTPAPI       awsapigatewayv2.HttpApi
	Vpc           awsec2.IVpc
	FileSystem    awsefs.FileSystem
	AccessPoint   awsefs.AccessPoint
	Cluster       awsecs.Cluster
	Image         awsecs.ContainerImage
	Service       awsecs.FargateService // the Spot workers
	Fallback      awsecs.FargateService // their on-demand twin; nil WithoutFallback
	Serve         *Serving              // nil WithoutServing
	AlarmTopic    awssns.Topic
	Dashboard     awscloudwatch.Dashboard

	// CloneBaseURL is what the API tells clients to clone from ("" WithoutServing).
	CloneBaseURL string
	// Placeholders lists the assets replaced by a placeholder (AllowPlaceholders only).
	Placeholders []string

	liveWorkers awscloudwatch.IMetric // joining + active workers, as the coordinator reports them
}

// Serving is the git server behind its load balancer.
type Serving struct {
	LoadBalancer awselasticloadbalancingv2.ApplicationLoadBalancer
	TargetGroup  awselasticloadbalancingv2.ApplicationTargetGroup
	Service      awsecs.FargateService
	AccessLogs   awss3.Bucket // nil without serveAccessLogs
}

// NewStack builds the stack, or says why the props cannot be deployed.
func NewStack(scope constructs.Construct, id string, props Props) (*Stack, error) {
	props = props.Defaults()
	if err := props.Check(); err != nil {
		return nil, err
	}
	sp := props.StackProps
	if sp.Description == nil {
		sp.Description = jsii.String("mirrorfleet: git mirror fleet (coordinator, API, Fargate workers and git server on EFS)")
	}
	s := &Stack{Stack: awscdk.NewStack(scope, &id, &sp), props: props}
	if s.props.Fleet == "" {
		s.props.Fleet = id
	}
	s.table()
	s.timers()
	if err := s.coordinator(); err != nil {
		return nil, err
	}
	s.network()
	s.mirrorsFileSystem()
	if err := s.containerImage(); err != nil {
		return nil, err
	}
	s.cluster()
	s.workers()
	if !s.props.WithoutServing {
		s.serving()
	}
	if err := s.api(); err != nil {
		return nil, err
	}
	s.alarms()
	s.dashboard()
	s.nagSuppressions()
	return s, nil
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

// envOf turns a deployenv environment into CDK's, in a stable order.
func envOf(m map[string]string) *map[string]*string {
	out := make(map[string]*string, len(m))
	for k, v := range m {
		out[k] = jsii.String(v)
	}
	return &out
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

// tableReadActions are the reads alone: the git server lists the repos for its index.
var tableReadActions = []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:DescribeTable"}

func (s *Stack) grantTable(g awsiam.IGrantable, actions []string) {
	g.GrantPrincipal().AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
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

// Coordinator invocation settings (DESIGN.md §4): one tick at a time, and no retries of
// a failed tick or timer firing — the next minute's tick repairs what a failed one left
// (ticks are idempotent) and declares any death a lost firing would have; a tick that
// waited longer than the rule's period is superseded by the next.
const (
	coordinatorRetries     = 0
	coordinatorMaxEventAge = 2 * time.Minute
	tickPeriod             = time.Minute
	tickMaxEventAge        = time.Minute
)

// coordinator: the Lambda on the minute rule and the Scheduler timers.
func (s *Stack) coordinator() error {
	role := s.lambdaRole("CoordinatorRole")
	logs := s.logGroup("CoordinatorLogs")
	code, err := s.lambdaCode("coordinator")
	if err != nil {
		return err
	}
	warmup := s.props.Warmup
	if s.props.NoWarmup {
		warmup = 0 // deployenv writes it as none
	}
	env := deployenv.Coordinator{
		Common:           deployenv.Common{Table: *s.Table.TableName(), Fleet: s.props.Fleet},
		ScheduleGroup:    *s.ScheduleGroup.Ref(),
		SchedulerRoleARN: *s.SchedulerRole.RoleArn(),
		TimerDLQARN:      *s.TimerDLQ.QueueArn(),
		Grace:            s.props.Grace,
		Warmup:           warmup,
		List:             s.props.List,
	}.Env()
	var reserved *float64
	if s.props.CoordinatorConcurrency > 0 {
		reserved = jsii.Number(float64(s.props.CoordinatorConcurrency))
	}
	fp := functionProps(code, role, logs, 512, 50*time.Second, "mirrorfleet coordinator: minute tick and Scheduler timers", env)
	fp.ReservedConcurrentExecutions = reserved
	fp.RetryAttempts = jsii.Number(coordinatorRetries)
	fp.MaxEventAge = awscdk.Duration_Seconds(jsii.Number(coordinatorMaxEventAge.Seconds()))
	s.Coordinator = awslambda.NewFunction(s.Stack, jsii.String("Coordinator"), fp)
	s.logWrite(role, logs)
	s.grantTable(role, tableActions)
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
	s.TickRule = awsevents.NewRule(s.Stack, jsii.String("Tick"), &awsevents.RuleProps{
		Description: jsii.String("mirrorfleet coordinator tick"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Seconds(jsii.Number(tickPeriod.Seconds()))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(s.Coordinator, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(coordinatorRetries),
			MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(tickMaxEventAge.Seconds())),
		})},
	})
	return nil
}

// api: the HTTP API Lambda behind API Gateway, IAM authorization on every route.
func (s *Stack) api() error {
	role := s.lambdaRole("ApiRole")
	logs := s.logGroup("ApiLogs")
	code, err := s.lambdaCode("api")
	if err != nil {
		return err
	}
	env := deployenv.API{
		Common:       deployenv.Common{Table: *s.Table.TableName(), Fleet: s.props.Fleet},
		PublicReads:  s.props.PublicReads,
		CloneBaseURL: s.CloneBaseURL,
		List:         s.props.List,
	}.Env()
	s.API = awslambda.NewFunction(s.Stack, jsii.String("Api"),
		functionProps(code, role, logs, 256, 15*time.Second, "mirrorfleet HTTP API", env))
	s.logWrite(role, logs)
	s.grantTable(role, tableActions)

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
	return nil
}

// accessLog implements IAccessLogSettings: JSON access logs with the caller identity.
type accessLog struct {
	dest awsapigatewayv2.IAccessLogDestination
}

func (a *accessLog) Destination() awsapigatewayv2.IAccessLogDestination { return a.dest }

func (a *accessLog) Format() awsapigateway.AccessLogFormat {
	return awsapigateway.AccessLogFormat_Custom(jsii.String(`{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","userArn":"$context.identity.userArn","requestTime":"$context.requestTime","method":"$context.httpMethod","path":"$context.path","status":"$context.status","latency":"$context.responseLatency","error":"$context.error.message"}`))
}

// functionProps are a Go function's: provided.al2023 on arm64, a binary named bootstrap.
func functionProps(code awslambda.Code, role awsiam.IRole, logs awslogs.ILogGroup, memoryMB int, timeout time.Duration,
	description string, env map[string]string) *awslambda.FunctionProps {
	return &awslambda.FunctionProps{
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         code,
		Role:         role,
		LogGroup:     logs,
		MemorySize:   jsii.Number(float64(memoryMB)),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(timeout.Seconds())),
		Description:  jsii.String(description),
		Environment:  envOf(env),
	}
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

// lambdaCode is build/<name>.zip (`make build`). A missing zip is an error — a deploy
// would otherwise create functions that run nothing — unless placeholders are allowed
// (synth and tests), which get a bootstrap that exits with a message.
func (s *Stack) lambdaCode(name string) (awslambda.Code, error) {
	zip := filepath.Join(s.props.LambdaAssetDir, name+".zip")
	if _, err := os.Stat(zip); err == nil {
		return awslambda.Code_FromAsset(jsii.String(zip), nil), nil
	}
	if !s.props.AllowPlaceholders {
		return nil, fmt.Errorf("infra: %s is missing: run `make build` (or `make deploy`, which builds) before deploying", zip)
	}
	dir, err := os.MkdirTemp("", "mirrorfleet-placeholder-"+name+"-")
	if err != nil {
		return nil, err
	}
	script := "#!/bin/sh\necho 'placeholder: run make build before deploying' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte(script), 0o755); err != nil {
		return nil, err
	}
	s.Placeholders = append(s.Placeholders, zip)
	awscdk.Annotations_Of(s.Stack).AddWarningV2(jsii.String("mirrorfleet:placeholder-"+name),
		jsii.String(zip+" is missing: using a placeholder bootstrap (allowPlaceholders); this stack must not be deployed"))
	return awslambda.Code_FromAsset(jsii.String(dir), nil), nil
}

// network: a new VPC over two AZs, or an existing one by id. By default the tasks sit
// in public subnets with a public IP each and security groups that admit nothing (no
// NAT gateway: at a small fleet's size it would cost more than everything else), and
// DynamoDB is reached through a gateway endpoint, which is free. privateNetwork puts
// them in private subnets behind one NAT gateway instead.
func (s *Stack) network() {
	if s.props.VpcID != "" {
		s.Vpc = awsec2.Vpc_FromLookup(s.Stack, jsii.String("Vpc"), &awsec2.VpcLookupOptions{VpcId: jsii.String(s.props.VpcID)})
		return
	}
	subnets := []*awsec2.SubnetConfiguration{
		{Name: jsii.String("public"), SubnetType: awsec2.SubnetType_PUBLIC, CidrMask: jsii.Number(22)},
	}
	nats := 0
	if s.props.PrivateNetwork {
		nats = 1
		subnets = append(subnets, &awsec2.SubnetConfiguration{Name: jsii.String("tasks"),
			SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS, CidrMask: jsii.Number(20)})
	}
	vpc := awsec2.NewVpc(s.Stack, jsii.String("Vpc"), &awsec2.VpcProps{
		MaxAzs:              jsii.Number(2),
		NatGateways:         jsii.Number(float64(nats)),
		SubnetConfiguration: &subnets,
	})
	vpc.AddGatewayEndpoint(jsii.String("DynamoDBEndpoint"), &awsec2.GatewayVpcEndpointOptions{
		Service: awsec2.GatewayVpcEndpointAwsService_DYNAMODB(),
	})
	vpc.AddFlowLog(jsii.String("FlowLog"), &awsec2.FlowLogOptions{
		Destination: awsec2.FlowLogDestination_ToCloudWatchLogs(s.logGroup("VpcFlowLogs"), nil),
		TrafficType: awsec2.FlowLogTrafficType_REJECT,
	})
	s.Vpc = vpc
}

// taskSubnets are where the tasks (and the file system's mount targets) go.
func (s *Stack) taskSubnets() *awsec2.SubnetSelection {
	if s.props.PrivateNetwork {
		return &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS}
	}
	return &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PUBLIC}
}

// mirrorsFileSystem: EFS for /mnt/mirrors, encrypted, Elastic throughput; files move to
// Infrequent Access after 7 days without access and to Archive after 90, and stay there
// when read (a mirror's packs are read by fetches and clones but rarely for long; a
// read from IA costs $0.01/GB, moving the file back would cost Standard storage). One
// access point owned by the image's nonroot user.
func (s *Stack) mirrorsFileSystem() {
	s.FileSystem = awsefs.NewFileSystem(s.Stack, jsii.String("Mirrors"), &awsefs.FileSystemProps{
		Vpc:                       s.Vpc,
		VpcSubnets:                s.taskSubnets(),
		Encrypted:                 jsii.Bool(true),
		LifecyclePolicy:           awsefs.LifecyclePolicy_AFTER_7_DAYS,
		TransitionToArchivePolicy: awsefs.LifecyclePolicy_AFTER_90_DAYS,
		PerformanceMode:           awsefs.PerformanceMode_GENERAL_PURPOSE,
		ThroughputMode:            awsefs.ThroughputMode_ELASTIC,
		EnableAutomaticBackups:    jsii.Bool(false),
		RemovalPolicy:             s.removal(),
	})
	// A file system policy replaces EFS's default "any client may mount": access then
	// needs an IAM allow (the task roles, via the access point), over TLS only.
	s.FileSystem.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite", "elasticfilesystem:ClientRootAccess"),
		Conditions: &map[string]interface{}{"Bool": map[string]interface{}{"aws:SecureTransport": "false"}},
	}))
	uid := jsii.String(deployenv.ImageUID)
	s.AccessPoint = s.FileSystem.AddAccessPoint(jsii.String("MirrorsAccessPoint"), &awsefs.AccessPointOptions{
		Path:      jsii.String("/mirrors"),
		PosixUser: &awsefs.PosixUser{Uid: uid, Gid: uid},
		CreateAcl: &awsefs.Acl{OwnerUid: uid, OwnerGid: uid, Permissions: jsii.String("750")},
	})
}

// grantMount lets a task role mount the mirrors through the access point; write adds
// ClientWrite (the workers), without it the mount is read-only at EFS itself.
func (s *Stack) grantMount(role awsiam.IRole, write bool) {
	actions := []string{"elasticfilesystem:ClientMount"}
	if write {
		actions = append(actions, "elasticfilesystem:ClientWrite")
	}
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(slices.Clip(actions)...),
		Resources: &[]*string{s.FileSystem.FileSystemArn()},
		Conditions: &map[string]interface{}{
			"StringEquals": map[string]interface{}{"elasticfilesystem:AccessPointArn": s.AccessPoint.AccessPointArn()},
		},
	}))
}
