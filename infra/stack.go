package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudfront"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsefs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awselasticloadbalancingv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
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

	Table         awsdynamodb.ITable
	TimerDLQ      awssqs.Queue
	ScheduleGroup awsscheduler.CfnScheduleGroup
	SchedulerRole awsiam.Role
	Coordinator   awslambda.Function
	TickRule      awsevents.Rule
	API           awslambda.Function
	HTTPAPI       awsapigatewayv2.HttpApi
	WebhookSecret awssecretsmanager.ISecret   // nil without webhooks
	HookRoutes    []awsapigatewayv2.HttpRoute // the public webhook route (none without webhooks)
	Vpc           awsec2.IVpc
	FileSystem    awsefs.IFileSystem
	AccessPoint   awsefs.AccessPoint
	mountTargets  constructs.IDependable // the services start once these exist
	Cluster       awsecs.Cluster
	Image         awsecs.ContainerImage
	Service       awsecs.FargateService // the Spot workers
	Fallback      awsecs.FargateService // their on-demand twin; nil WithoutFallback
	Serve         *Serving              // nil WithoutServing
	EventBus      awsevents.EventBus    // the workers' mirror.updated events
	AlarmTopic    awssns.Topic
	Dashboard     awscloudwatch.Dashboard

	// CloneBaseURL is what the API tells clients to clone from ("" WithoutServing).
	CloneBaseURL string
	// Placeholders lists the assets replaced by a placeholder (AllowPlaceholders only).
	Placeholders []string

	liveWorkers awscloudwatch.IMetric // joining + active workers, as the coordinator reports them
	workerSG    awsec2.SecurityGroup
}

// Serving is the git server behind its load balancer.
type Serving struct {
	LoadBalancer awselasticloadbalancingv2.ApplicationLoadBalancer
	TargetGroup  awselasticloadbalancingv2.ApplicationTargetGroup
	// Service runs the git server: the Spot workers' (and their twin's tasks serve too),
	// or with serveSeparate a service of its own (Separate).
	Service    awsecs.FargateService
	Separate   bool
	AccessLogs awss3.Bucket // nil without serveAccessLogs
	// Distribution is the CloudFront distribution in front of the load balancer; nil
	// with cdn=false.
	Distribution awscloudfront.Distribution
}

// common is what every component is told (deployenv.Common).
func (s *Stack) common() deployenv.Common {
	return deployenv.Common{Table: *s.Table.TableName(), Fleet: s.props.Fleet, CaseInsensitiveHosts: s.props.CaseInsensitiveHosts}
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
	// Data, then compute on it, the network and the mirrors' storage, the containers,
	// serving, and what watches it all (data.go, compute.go, network.go, containers.go,
	// serving.go, observe.go).
	s.Table = s.table()
	s.timers()
	if err := s.coordinator(); err != nil {
		return nil, err
	}
	s.Vpc = s.network()
	s.FileSystem, s.AccessPoint = s.mirrorsFileSystem(s.Vpc)
	image, err := s.containerImage()
	if err != nil {
		return nil, err
	}
	s.Image = image
	s.Cluster = s.cluster(s.Vpc)
	s.EventBus = s.eventBus()
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
