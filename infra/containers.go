package main

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapplicationautoscaling"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecr"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"

	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
	"github.com/mirrorfleet/mirrorfleet/shared/membudget"
)

// Capacity providers of the services.
const (
	fargateSpot     = "FARGATE_SPOT"
	fargateOnDemand = "FARGATE"
)

// ecrRefRE matches an ECR image reference: account, region, repository, then a digest
// or a tag.
var ecrRefRE = regexp.MustCompile(`^([0-9]{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/([a-z0-9][a-z0-9._/-]*)(?:@(sha256:[0-9a-f]{64})|:([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))$`)

// placeholderDigest names no image: a placeholder stack pulls from the account's
// "mirrorfleet" repository, as a deployed one does, but nothing by that digest.
const placeholderDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// containerImage is the image both services run (Props.WorkerImage). An ECR image is
// imported with its repository, so the execution role may pull from that repository
// only; any other reference is pulled as a public image.
func (s *Stack) containerImage() (awsecs.ContainerImage, error) {
	ref := s.props.WorkerImage
	if ref == "" {
		repo := awsecr.Repository_FromRepositoryName(s.Stack, jsii.String("ImageRepository"), jsii.String("mirrorfleet"))
		image := awsecs.ContainerImage_FromEcrRepository(repo, jsii.String(placeholderDigest))
		s.Placeholders = append(s.Placeholders, "workerImage")
		awscdk.Annotations_Of(s.Stack).AddWarningV2(jsii.String("mirrorfleet:placeholder-image"),
			jsii.String("no workerImage: using a placeholder image reference (allowPlaceholders); this stack must not be deployed"))
		return image, nil
	}
	if m := ecrRefRE.FindStringSubmatch(ref); m != nil {
		account, region, name, tag := m[1], m[2], m[3], m[4]+m[5]
		arn := fmt.Sprintf("arn:%s:ecr:%s:%s:repository/%s", *s.Stack.Partition(), region, account, name)
		repo := awsecr.Repository_FromRepositoryAttributes(s.Stack, jsii.String("ImageRepository"), &awsecr.RepositoryAttributes{
			RepositoryArn: jsii.String(arn), RepositoryName: jsii.String(name)})
		return awsecs.ContainerImage_FromEcrRepository(repo, jsii.String(tag)), nil
	}
	if strings.Contains(ref, ".dkr.ecr.") {
		return nil, fmt.Errorf("infra: workerImage %q: an ECR reference needs a tag or an @sha256: digest", ref)
	}
	return awsecs.ContainerImage_FromRegistry(jsii.String(ref), nil), nil
}

// cluster: the ECS cluster with the Fargate and Fargate Spot capacity providers.
// Container Insights stays off: its per-task metrics cost more than the fleet's own
// (the dashboard graphs the fleet's metrics and the services' CPU and memory).
func (s *Stack) cluster(vpc awsec2.IVpc) awsecs.Cluster {
	return awsecs.NewCluster(s.Stack, jsii.String("Cluster"), &awsecs.ClusterProps{
		Vpc:                            vpc,
		EnableFargateCapacityProviders: jsii.Bool(true),
		ContainerInsightsV2:            awsecs.ContainerInsights_DISABLED,
	})
}

// taskDefinition is a Fargate ARM64 task with the mirrors' EFS volume (through the
// access point, TLS and IAM) and a scratch volume at /tmp (the root file system is
// read-only), plus the extra scratch volumes named.
func (s *Stack) taskDefinition(id string, cpu, memory int, scratch ...string) awsecs.FargateTaskDefinition {
	volumes := []*awsecs.Volume{{
		Name: jsii.String("mirrors"),
		EfsVolumeConfiguration: &awsecs.EfsVolumeConfiguration{
			FileSystemId:      s.FileSystem.FileSystemId(),
			TransitEncryption: jsii.String("ENABLED"),
			AuthorizationConfig: &awsecs.AuthorizationConfig{
				AccessPointId: s.AccessPoint.AccessPointId(),
				Iam:           jsii.String("ENABLED"),
			},
		},
	}}
	for _, name := range append([]string{"tmp"}, scratch...) {
		volumes = append(volumes, &awsecs.Volume{Name: jsii.String(name)}) // no host: task storage
	}
	return awsecs.NewFargateTaskDefinition(s.Stack, &id, &awsecs.FargateTaskDefinitionProps{
		Cpu:            jsii.Number(float64(cpu)),
		MemoryLimitMiB: jsii.Number(float64(memory)),
		RuntimePlatform: &awsecs.RuntimePlatform{
			CpuArchitecture:       awsecs.CpuArchitecture_ARM64(),
			OperatingSystemFamily: awsecs.OperatingSystemFamily_LINUX(),
		},
		Volumes: &volumes,
	})
}

// container adds the image's container to task running `mirrorfleet <command>` as the
// image's non-root user on a read-only root file system, logging to its own group.
func (s *Stack) container(task awsecs.TaskDefinition, command, logs string, stop time.Duration,
	env map[string]string, health *awsecs.HealthCheck, share *taskShare) awsecs.ContainerDefinition {
	opts := &awsecs.ContainerDefinitionOptions{
		Image:                  s.Image,
		Command:                jsii.Strings(command),
		User:                   jsii.String(deployenv.ImageUID + ":" + deployenv.ImageUID),
		ReadonlyRootFilesystem: jsii.Bool(true),
		StopTimeout:            awscdk.Duration_Seconds(jsii.Number(stop.Seconds())),
		Logging:                awsecs.LogDrivers_AwsLogs(&awsecs.AwsLogDriverProps{StreamPrefix: jsii.String(command), LogGroup: s.logGroup(logs)}),
		Environment:            envOf(env),
		HealthCheck:            health,
	}
	if share != nil {
		opts.MemoryLimitMiB = jsii.Number(float64(share.MemoryMiB))
		if share.Sidecar {
			opts.Essential = jsii.Bool(false)
			opts.EnableRestartPolicy = jsii.Bool(true)
		}
	}
	return task.AddContainer(jsii.String(command), opts)
}

// taskShare is a container's part of a task it shares: a hard memory limit, and for a
// sidecar, that its exit does not stop the task — ECS restarts it in place.
type taskShare struct {
	MemoryMiB int
	Sidecar   bool
}

// healthCheck runs `mirrorfleet healthcheck` in the container: the image has no shell.
func healthCheck(start time.Duration, args ...string) *awsecs.HealthCheck {
	return &awsecs.HealthCheck{
		Command:     jsii.Strings(append([]string{"CMD", deployenv.ImageBinary, "healthcheck"}, args...)...),
		Interval:    awscdk.Duration_Seconds(jsii.Number(30)),
		Timeout:     awscdk.Duration_Seconds(jsii.Number(10)),
		Retries:     jsii.Number(3),
		StartPeriod: awscdk.Duration_Seconds(jsii.Number(start.Seconds())),
	}
}

func strategy(provider string, weight, base int) *awsecs.CapacityProviderStrategy {
	st := &awsecs.CapacityProviderStrategy{CapacityProvider: jsii.String(provider), Weight: jsii.Number(float64(weight))}
	if base > 0 {
		st.Base = jsii.Number(float64(base))
	}
	return st
}

// serviceProps are what every service shares: the cluster, the subnets, a public IP
// unless the network is private, rolling deploys that roll back.
func (s *Stack) serviceProps(task awsecs.TaskDefinition, sg awsec2.ISecurityGroup, desired int,
	providers ...*awsecs.CapacityProviderStrategy) *awsecs.FargateServiceProps {
	return &awsecs.FargateServiceProps{
		Cluster:                    s.Cluster,
		TaskDefinition:             task,
		DesiredCount:               jsii.Number(float64(desired)),
		SecurityGroups:             &[]awsec2.ISecurityGroup{sg},
		VpcSubnets:                 s.taskSubnets(),
		AssignPublicIp:             jsii.Bool(!s.props.PrivateNetwork),
		MinHealthyPercent:          jsii.Number(100),
		MaxHealthyPercent:          jsii.Number(200),
		CircuitBreaker:             &awsecs.DeploymentCircuitBreaker{Rollback: jsii.Bool(true)},
		PlatformVersion:            awsecs.FargatePlatformVersion_LATEST,
		CapacityProviderStrategies: &providers,
	}
}

// service creates a Fargate service that starts only once the file system's mount
// targets exist (else the first deploy's tasks fail to mount and it rolls back).
func (s *Stack) service(id string, props *awsecs.FargateServiceProps) awsecs.FargateService {
	svc := awsecs.NewFargateService(s.Stack, &id, props)
	svc.Node().AddDependency(s.mountTargets)
	return svc
}

// workers: the Fargate ARM64 service of fetch workers on Spot, its on-demand twin,
// and scaling on staleness.
func (s *Stack) workers() {
	var scratch []string
	var share *taskShare
	if s.props.ServeBeside() {
		scratch = append(scratch, "packcache")
		share = &taskShare{MemoryMiB: s.props.WorkerContainerMemory()}
	}
	task := s.taskDefinition("WorkerTask", s.props.WorkerCPU, s.props.WorkerMemory, scratch...)
	env := deployenv.Worker{
		Common:     s.common(),
		MirrorRoot: mirrorRoot,
		Fetchers:   s.props.Fetchers,
		// The container's memory and the fetches' budget are sized together (ADR 0026).
		MemoryBudget: fmt.Sprintf("%dM", int(float64(s.props.WorkerContainerMemory())*membudget.ContainerShare)),
		Drain:        20 * time.Second, // + the goodbye stays inside the 30 s stop timeout
		// EFS grows with the mirrors: no fleet-wide stop unless diskQuota asks for one
		// (compared with EFS's own used bytes, no tree walk); the storage alarm watches
		// the size (ADR 31).
		DiskQuota: s.props.DiskQuota,
		DiskUsage: deployenv.DiskUsageElastic,
		AliveFile: aliveFile,
		EventBus:  *s.EventBus.EventBusName(),
		// The workers hold the budget the fleet is sized for (infra/budget).
		PollBudget: s.props.PollsPerDay,

		MaintainEvery: s.props.MaintainEvery,
		ScrubEvery:    s.props.ScrubEvery,
		ScrubChanged:  !s.props.ScrubAll,

		// ADR 28: each worker probes the feeds for its own repos; the tokens' secret is
		// named, never its value, and read at start with the task role.
		Feeds:          s.props.Feeds,
		FeedEvery:      s.props.FeedEvery,
		ForgeTokensARN: s.props.ForgeTokensARN,
	}.Env()
	// Healthy while heartbeats land: a worker cut off from the store is replaced.
	container := s.container(task, "worker", "WorkerLogs", 30*time.Second, env,
		healthCheck(2*time.Minute, "--file", aliveFile, "--max-age", "2m"), share)
	container.AddMountPoints(
		&awsecs.MountPoint{SourceVolume: jsii.String("mirrors"), ContainerPath: jsii.String(mirrorRoot), ReadOnly: jsii.Bool(false)},
		&awsecs.MountPoint{SourceVolume: jsii.String("tmp"), ContainerPath: jsii.String(tmpDir), ReadOnly: jsii.Bool(false)},
	)
	if s.props.ServeBeside() {
		// The git server beside the worker (ADR 27): the mirrors read-only, its own
		// memory, restarted in place when it exits.
		s.serveContainer(task, &taskShare{MemoryMiB: s.props.ServeMemory, Sidecar: true})
	}
	s.grantTable(task.TaskRole(), tableActions)
	s.grantMount(task.TaskRole(), true)
	s.grantPutEvents(task.TaskRole())
	if arn := s.props.ForgeTokensARN; arn != "" {
		awssecretsmanager.Secret_FromSecretCompleteArn(s.Stack, jsii.String("ForgeTokens"), jsii.String(arn)).GrantRead(task.TaskRole(), nil)
	}

	description := "mirrorfleet workers: no ingress; egress for upstream git and AWS APIs"
	if s.props.ServeBeside() {
		description = "mirrorfleet workers and their git server: the server port from the load balancer only; egress for upstream git and AWS APIs"
	}
	sg := awsec2.NewSecurityGroup(s.Stack, jsii.String("WorkerSG"), &awsec2.SecurityGroupProps{
		Vpc:              s.Vpc,
		Description:      jsii.String(description),
		AllowAllOutbound: jsii.Bool(true),
	})
	s.workerSG = sg
	s.FileSystem.Connections().AllowDefaultPortFrom(sg, jsii.String("NFS from mirrorfleet workers"))
	props := s.serviceProps(task, sg, s.props.WorkerCount, strategy(fargateSpot, 1, 0))
	s.Service = s.service("Workers", props)
	s.liveWorkers = awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String("FILL(active, 0) + FILL(joining, 0)"),
		Label:      jsii.String("live workers (active + joining)"),
		Period:     awscdk.Duration_Minutes(jsii.Number(1)),
		UsingMetrics: &map[string]awscloudwatch.IMetric{
			"active":  s.metric("WorkersByState", "Maximum", time.Minute, map[string]*string{dimState: jsii.String("active")}),
			"joining": s.metric("WorkersByState", "Maximum", time.Minute, map[string]*string{dimState: jsii.String("joining")}),
		},
	})
	s.workerScaling()
	if !s.props.WithoutFallback {
		twin := *props
		twin.DesiredCount = jsii.Number(0)
		twin.CapacityProviderStrategies = &[]*awsecs.CapacityProviderStrategy{strategy(fargateOnDemand, 1, 0)}
		s.Fallback = s.service("WorkersOnDemand", &twin)
		s.onDemandFallback(s.Fallback)
	}
	if s.props.DiskQuota != "" {
		awscdk.Annotations_Of(s.Stack).AddWarningV2(jsii.String("mirrorfleet:disk-quota"),
			jsii.String("diskQuota="+s.props.DiskQuota+": past 85% of it every worker stops fetching and new repos overflow; "+
				"storageBudgetGiB alarms on the file system's size without stopping anything"))
	}
}

// maxFallbackStep bounds the twin's steps: a larger shortfall is filled over more than
// one step (a step policy takes at most 20 intervals).
const maxFallbackStep = 16

// onDemandFallback scales the on-demand twin of the Spot workers. ECS does not move a
// service to on-demand Fargate when Spot has no capacity, so the twin keeps the fleet at
// the workers it cannot do without: minLiveWorkers, or, when more, the workers its repos
// need to be polled at the budget with no headroom (budget.BareWorkersPerRepo: below it
// the fleet falls behind). While fewer are live (joining or active: a worker waiting out
// the warm-up counts) for three minutes, the twin starts as many on-demand workers as are
// missing; while more are, it stops as many as are over, down to none once Spot capacity
// is back. A healthy Spot fleet is at least that large (its scaling on staleness shrinks
// it only when it polls at twice the budget), so the twin runs nothing then.
func (s *Stack) onDemandFallback(twin awsecs.FargateService) {
	scaling := twin.AutoScaleTaskCount(&awsapplicationautoscaling.EnableScalingProps{
		MinCapacity: jsii.Number(0),
		MaxCapacity: jsii.Number(float64(s.props.MaxWorkers)),
	})
	// In order: as many fewer as are over, the last open below; as many more as are
	// missing, the last open above.
	var steps []*awsapplicationautoscaling.ScalingInterval
	top := min(s.props.MaxWorkers, maxFallbackStep)
	for n := top; n >= 1; n-- {
		down := &awsapplicationautoscaling.ScalingInterval{Upper: jsii.Number(0.5 - float64(n)), Change: jsii.Number(-float64(n))}
		if n < top {
			down.Lower = jsii.Number(-0.5 - float64(n))
		}
		steps = append(steps, down)
	}
	for n := 1; n <= top; n++ {
		up := &awsapplicationautoscaling.ScalingInterval{Lower: jsii.Number(float64(n) - 0.5), Change: jsii.Number(float64(n))}
		if n < top {
			up.Upper = jsii.Number(float64(n) + 0.5)
		}
		steps = append(steps, up)
	}
	scaling.ScaleOnMetric(jsii.String("FallbackOnShortfall"), &awsapplicationautoscaling.BasicStepScalingPolicyProps{
		Metric:            s.workerShortfall(),
		ScalingSteps:      &steps,
		AdjustmentType:    awsapplicationautoscaling.AdjustmentType_CHANGE_IN_CAPACITY,
		EvaluationPeriods: jsii.Number(3),
		Cooldown:          awscdk.Duration_Minutes(jsii.Number(5)),
	})
}

// workerShortfall is how many live workers the fleet lacks: the floor (minLiveWorkers,
// or its repos' bare need when more) less the live workers. Repos are the coordinator's
// ReposByState of the states that are polled.
func (s *Stack) workerShortfall() awscloudwatch.IMetric {
	minute := time.Minute
	using := map[string]awscloudwatch.IMetric{
		"active":  s.metric("WorkersByState", "Maximum", minute, map[string]*string{dimState: jsii.String("active")}),
		"joining": s.metric("WorkersByState", "Maximum", minute, map[string]*string{dimState: jsii.String("joining")}),
	}
	var repos []string
	for _, st := range liveRepoStates {
		using[st] = s.metric("ReposByState", "Maximum", minute, map[string]*string{dimState: jsii.String(st)})
		repos = append(repos, "FILL("+st+", 0)")
	}
	need := fmt.Sprintf("CEIL(%.6g * (%s))", s.props.Budget().BareWorkersPerRepo(), strings.Join(repos, " + "))
	floor := fmt.Sprintf("%d", s.props.MinLive)
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression:   jsii.String(fmt.Sprintf("IF(%s > %s, %s, %s) - (FILL(active, 0) + FILL(joining, 0))", need, floor, need, floor)),
		Label:        jsii.String("workers short of the floor (minLiveWorkers, or the repos' need at the budget)"),
		Period:       awscdk.Duration_Minutes(jsii.Number(1)),
		UsingMetrics: &using,
	})
}

// liveRepoStates are the repo states (shared/store) of the repos the fleet polls: a
// pending or cloning repo is a passing state, a gone or deleted one is not polled.
var liveRepoStates = []string{"ok", "failing"}

// workerScaling grows the Spot fleet when it falls behind its poll budget — the 99th
// percentile of how long repos have gone without a successful fetch, which the
// coordinator merges from the workers' heartbeats at any fleet size — and shrinks it
// when it is well ahead. The steps follow from the budget (infra/budget): a fleet at its
// budget shows TailStaleness, between the scale-in and scale-out steps, and the second
// step out is the stale-repos alarm's threshold. New workers take their arcs at the next
// tick; leavers hand theirs over as they drain.
func (s *Stack) workerScaling() {
	scaling := s.Service.AutoScaleTaskCount(&awsapplicationautoscaling.EnableScalingProps{
		MinCapacity: jsii.Number(float64(s.props.WorkerCount)),
		MaxCapacity: jsii.Number(float64(s.props.MaxWorkers)),
	})
	b := s.props.Budget()
	scaling.ScaleOnMetric(jsii.String("ScaleOnStaleness"), &awsapplicationautoscaling.BasicStepScalingPolicyProps{
		Metric: s.metric("StalenessP99", "Maximum", 10*time.Minute, nil),
		ScalingSteps: &[]*awsapplicationautoscaling.ScalingInterval{
			{Upper: jsii.Number(b.ScaleInBelow().Seconds()), Change: jsii.Number(-1)},
			{Lower: jsii.Number(b.ScaleOutAbove().Seconds()), Change: jsii.Number(1)},
			{Lower: jsii.Number(s.props.StaleAfter.Seconds()), Change: jsii.Number(2)},
		},
		AdjustmentType: awsapplicationautoscaling.AdjustmentType_CHANGE_IN_CAPACITY,
		Cooldown:       awscdk.Duration_Minutes(jsii.Number(15)),
	})
}
