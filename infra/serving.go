package main

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapplicationautoscaling"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscertificatemanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudfront"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudfrontorigins"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awselasticloadbalancingv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"

	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
)

// HookRoute is the forges' webhook route: the HTTP API's one route without IAM (the
// forge's signature authenticates a delivery), throttled on its own at hookRate and
// hookBurst (the budget's by default): a forge sends one delivery per push and hook,
// and past the throttle API Gateway answers 429. GitHub does not deliver again by
// itself: such a push is found by the repo's next poll (docs/webhooks.md).
const HookRoute = "POST /v1/hooks/{forge}"

// api: the HTTP API Lambda behind API Gateway, IAM authorization on every route but the
// forges' webhooks (HookRoute), whose secret comes from Secrets Manager.
func (s *Stack) api() error {
	role, logs, code, err := s.goFunction("Api", "api")
	if err != nil {
		return err
	}
	env := deployenv.API{
		Common:       s.common(),
		PublicReads:  s.props.PublicReads,
		CloneBaseURL: s.CloneBaseURL,
		List:         s.props.List,
		CORSOrigins:  s.props.CORSOrigins,
		SiteAbbr:     s.props.SiteAbbr,
		SiteName:     s.props.SiteName,
	}
	if !s.props.WithoutWebhooks {
		s.WebhookSecret = s.webhookSecret()
		// The ARN only: the function reads the value at cold start (shared/secrets).
		env.WebhookSecretARN = *s.WebhookSecret.SecretArn()
	}
	s.API = awslambda.NewFunction(s.Stack, jsii.String("Api"),
		functionProps(code, role, logs, 256, 15*time.Second, "mirrorfleet HTTP API", env.Env()))
	s.logWrite(role, logs)
	s.grantTable(role, tableActions)
	if s.WebhookSecret != nil {
		s.WebhookSecret.GrantRead(role, nil) // GetSecretValue and DescribeSecret on this secret alone
	}

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
	var hooks *[]awsapigatewayv2.HttpRoute
	if !s.props.WithoutWebhooks {
		hooks = s.HTTPAPI.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String("/v1/hooks/{forge}"),
			Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_POST},
			Integration: integration,
			Authorizer:  awsapigatewayv2.NewHttpNoneAuthorizer(),
		})
	}
	access := s.logGroup("ApiAccessLogs")
	stage := awsapigatewayv2.NewHttpStage(s.Stack, jsii.String("ApiStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:           s.HTTPAPI,
		StageName:         jsii.String("$default"),
		AutoDeploy:        jsii.Bool(true),
		Throttle:          &awsapigatewayv2.ThrottleSettings{RateLimit: jsii.Number(50), BurstLimit: jsii.Number(100)},
		AccessLogSettings: &accessLog{dest: awsapigatewayv2.NewLogGroupLogDestination(access)},
	})
	if hooks != nil {
		// Route-level throttling (the L2 stage has no per-route settings). The route must
		// exist before the stage names it.
		stage.Node().DefaultChild().(awsapigatewayv2.CfnStage).AddPropertyOverride(jsii.String("RouteSettings"), map[string]any{
			HookRoute: map[string]any{"ThrottlingRateLimit": s.props.HookRate, "ThrottlingBurstLimit": s.props.HookBurst},
		})
		for _, r := range *hooks {
			stage.Node().AddDependency(r)
			s.HookRoutes = append(s.HookRoutes, r)
		}
		awscdk.NewCfnOutput(s.Stack, jsii.String("WebhookUrl"), &awscdk.CfnOutputProps{
			Value:       awscdk.Fn_Join(jsii.String(""), &[]*string{s.HTTPAPI.ApiEndpoint(), jsii.String("/v1/hooks/{github,gitlab,gitea}")}),
			Description: jsii.String("where the forges' push webhooks go (docs/webhooks.md)"),
		})
		awscdk.NewCfnOutput(s.Stack, jsii.String("WebhookSecretArn"), &awscdk.CfnOutputProps{
			Value:       s.WebhookSecret.SecretArn(),
			Description: jsii.String("the webhooks' secret: aws secretsmanager get-secret-value --secret-id <this>"),
		})
	}
	awscdk.NewCfnOutput(s.Stack, jsii.String("ApiUrl"), &awscdk.CfnOutputProps{Value: s.HTTPAPI.ApiEndpoint()})
	return nil
}

// webhookSecret is the forges' webhook secret: the one named by webhookSecretArn, or a
// new one whose value Secrets Manager generates at deploy time (never in the template).
func (s *Stack) webhookSecret() awssecretsmanager.ISecret {
	if arn := s.props.WebhookSecretARN; arn != "" {
		return awssecretsmanager.Secret_FromSecretCompleteArn(s.Stack, jsii.String("WebhookSecret"), jsii.String(arn))
	}
	return awssecretsmanager.NewSecret(s.Stack, jsii.String("WebhookSecret"), &awssecretsmanager.SecretProps{
		Description: jsii.String("mirrorfleet: the shared secret of the forges' push webhooks (docs/webhooks.md); " +
			`a plain string, or {"secret": S, "secret_for": {"HOST": S}}`),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength:     jsii.Number(40),
			ExcludePunctuation: jsii.Bool(true), // pasted into forms and headers as is
		},
	})
}

// accessLog implements IAccessLogSettings: JSON access logs with the caller identity.
type accessLog struct {
	dest awsapigatewayv2.IAccessLogDestination
}

func (a *accessLog) Destination() awsapigatewayv2.IAccessLogDestination { return a.dest }

func (a *accessLog) Format() awsapigateway.AccessLogFormat {
	return awsapigateway.AccessLogFormat_Custom(jsii.String(`{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","userArn":"$context.identity.userArn","requestTime":"$context.requestTime","method":"$context.httpMethod","path":"$context.path","status":"$context.status","latency":"$context.responseLatency","error":"$context.error.message"}`))
}

// serving: `mirrorfleet serve` behind an internet-facing Application Load Balancer,
// health-checked at /healthz: by default the git server container of every worker task
// (ADR 27), with serveSeparate a service of its own (serveService). By default a
// CloudFront distribution in front serves the clones over HTTPS (cdn); with cdn=false
// the load balancer serves them itself, HTTPS on 443 with certificateArn (HTTP then
// redirects), plain HTTP on 80 with allowPlainHttp. The clone base URL goes to the API
// and to the stack's outputs.
func (s *Stack) serving() {
	public := &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PUBLIC}
	description := "mirrorfleet git server load balancer: HTTP from the CloudFront origin-facing servers"
	if s.props.WithoutCDN {
		description = "mirrorfleet git server load balancer: HTTP(S) from anywhere (public mirrors)"
	}
	lbSG := awsec2.NewSecurityGroup(s.Stack, jsii.String("ServeLoadBalancerSG"), &awsec2.SecurityGroupProps{
		Vpc:              s.Vpc,
		Description:      jsii.String(description),
		AllowAllOutbound: jsii.Bool(false),
	})
	lb := awselasticloadbalancingv2.NewApplicationLoadBalancer(s.Stack, jsii.String("ServeLoadBalancer"), &awselasticloadbalancingv2.ApplicationLoadBalancerProps{
		Vpc:                     s.Vpc,
		InternetFacing:          jsii.Bool(true),
		VpcSubnets:              public,
		SecurityGroup:           lbSG,
		DropInvalidHeaderFields: jsii.Bool(true),
		// A large clone's pack can take a while to start (object counting); git sends
		// keep-alives, but a slow client may not read for a while either.
		IdleTimeout: awscdk.Duration_Seconds(jsii.Number(300)),
	})
	var logs awss3.Bucket
	if s.props.ServeAccessLogs {
		logs = awss3.NewBucket(s.Stack, jsii.String("ServeAccessLogs"), &awss3.BucketProps{
			Encryption:        awss3.BucketEncryption_S3_MANAGED, // what ELB access logs support
			EnforceSSL:        jsii.Bool(true),
			BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
			LifecycleRules:    &[]*awss3.LifecycleRule{{Expiration: awscdk.Duration_Days(jsii.Number(30))}},
			RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
		})
		lb.LogAccessLogs(logs, jsii.String("serve"))
	}
	tg := awselasticloadbalancingv2.NewApplicationTargetGroup(s.Stack, jsii.String("ServeTargets"), &awselasticloadbalancingv2.ApplicationTargetGroupProps{
		Vpc:        s.Vpc,
		Port:       jsii.Number(servePort),
		Protocol:   awselasticloadbalancingv2.ApplicationProtocol_HTTP,
		TargetType: awselasticloadbalancingv2.TargetType_IP,
		HealthCheck: &awselasticloadbalancingv2.HealthCheck{
			Path:                    jsii.String("/healthz"),
			Interval:                awscdk.Duration_Seconds(jsii.Number(15)),
			Timeout:                 awscdk.Duration_Seconds(jsii.Number(5)),
			HealthyThresholdCount:   jsii.Number(2),
			UnhealthyThresholdCount: jsii.Number(3),
		},
		// Within Fargate's 120 s stop timeout: clones in flight finish on a task that
		// is stopping (a Spot interruption gives two minutes).
		DeregistrationDelay: awscdk.Duration_Seconds(jsii.Number(110)),
	})
	forward := func(port int, protocol awselasticloadbalancingv2.ApplicationProtocol) *awselasticloadbalancingv2.BaseApplicationListenerProps {
		return &awselasticloadbalancingv2.BaseApplicationListenerProps{
			Port:                jsii.Number(float64(port)),
			Protocol:            protocol,
			DefaultTargetGroups: &[]awselasticloadbalancingv2.IApplicationTargetGroup{tg},
			Open:                jsii.Bool(false),
		}
	}
	var dist awscloudfront.Distribution
	switch {
	case !s.props.WithoutCDN:
		// CloudFront reaches the load balancer over HTTP on 80 (its default name has no
		// certificate of ours), from its origin-facing servers only.
		lbSG.AddIngressRule(awsec2.Peer_PrefixList(s.cloudFrontPrefixList()), awsec2.Port_Tcp(jsii.Number(80)),
			jsii.String("CloudFront origin-facing servers"), nil)
		for _, cidr := range s.props.ServeIngress {
			lbSG.AddIngressRule(awsec2.Peer_Ipv4(jsii.String(cidr)), awsec2.Port_Tcp(jsii.Number(80)),
				jsii.String("git clients the operator admits directly"), nil)
		}
		lb.AddListener(jsii.String("Http"), forward(80, awselasticloadbalancingv2.ApplicationProtocol_HTTP))
		dist = s.cdn(lb)
		host := dist.DistributionDomainName()
		if s.props.DomainName != "" {
			host = jsii.String(s.props.DomainName)
		}
		s.CloneBaseURL = "https://" + *host
	case s.props.CertificateARN != "":
		lbSG.AddIngressRule(awsec2.Peer_AnyIpv4(), awsec2.Port_Tcp(jsii.Number(443)), jsii.String("git clients over HTTPS"), nil)
		lbSG.AddIngressRule(awsec2.Peer_AnyIpv4(), awsec2.Port_Tcp(jsii.Number(80)), jsii.String("HTTP, redirected to HTTPS"), nil)
		https := forward(443, awselasticloadbalancingv2.ApplicationProtocol_HTTPS)
		https.Certificates = &[]awselasticloadbalancingv2.IListenerCertificate{awselasticloadbalancingv2.ListenerCertificate_FromArn(jsii.String(s.props.CertificateARN))}
		https.SslPolicy = awselasticloadbalancingv2.SslPolicy_RECOMMENDED_TLS
		lb.AddListener(jsii.String("Https"), https)
		lb.AddListener(jsii.String("Http"), &awselasticloadbalancingv2.BaseApplicationListenerProps{
			Port:     jsii.Number(80),
			Protocol: awselasticloadbalancingv2.ApplicationProtocol_HTTP,
			DefaultAction: awselasticloadbalancingv2.ListenerAction_Redirect(&awselasticloadbalancingv2.RedirectOptions{
				Protocol: jsii.String("HTTPS"), Port: jsii.String("443"), Permanent: jsii.Bool(true)}),
			Open: jsii.Bool(false),
		})
		s.CloneBaseURL = "https://" + s.props.DomainName
	default: // allowPlainHttp, checked
		lbSG.AddIngressRule(awsec2.Peer_AnyIpv4(), awsec2.Port_Tcp(jsii.Number(80)), jsii.String("git clients over HTTP"), nil)
		lb.AddListener(jsii.String("Http"), forward(80, awselasticloadbalancingv2.ApplicationProtocol_HTTP))
		host := lb.LoadBalancerDnsName()
		if s.props.DomainName != "" {
			host = jsii.String(s.props.DomainName)
		}
		s.CloneBaseURL = "http://" + *host
		awscdk.Annotations_Of(s.Stack).AddWarningV2(jsii.String("mirrorfleet:plain-http"),
			jsii.String("allowPlainHttp: clones are served over plain HTTP from the load balancer"))
	}

	var svc awsecs.FargateService
	var sg awsec2.ISecurityGroup
	if s.props.ServeSeparate {
		svc, sg = s.serveService(tg)
	} else {
		// Beside the workers (ADR 27): every worker task's git server is a target, the
		// on-demand twin's too, so serving fails over with the workers.
		svc, sg = s.Service, s.workerSG
		for _, w := range []awsecs.FargateService{s.Service, s.Fallback} {
			if w != nil {
				tg.AddTarget(w.LoadBalancerTarget(&awsecs.LoadBalancerTargetOptions{
					ContainerName: jsii.String("serve"), ContainerPort: jsii.Number(servePort)}))
			}
		}
	}
	lbSG.AddEgressRule(sg, awsec2.Port_Tcp(jsii.Number(servePort)), jsii.String("to the git server"), nil)
	sg.AddIngressRule(lbSG, awsec2.Port_Tcp(jsii.Number(servePort)), jsii.String("from the load balancer"), nil)
	s.Serve = &Serving{LoadBalancer: lb, TargetGroup: tg, Service: svc, Separate: s.props.ServeSeparate, AccessLogs: logs, Distribution: dist}
	awscdk.NewCfnOutput(s.Stack, jsii.String("CloneBaseUrl"), &awscdk.CfnOutputProps{
		Value:       jsii.String(s.CloneBaseURL),
		Description: jsii.String("Clone a mirror from <CloneBaseUrl>/git/<mirror path>; each repo's clone_url in the API says it in full"),
	})
	if dist != nil {
		awscdk.NewCfnOutput(s.Stack, jsii.String("ServeDistributionDomain"), &awscdk.CfnOutputProps{
			Value:       dist.DistributionDomainName(),
			Description: jsii.String("The CloudFront distribution in front of the git server: point domainName (a CNAME) here"),
		})
	}
	awscdk.NewCfnOutput(s.Stack, jsii.String("ServeLoadBalancerDns"), &awscdk.CfnOutputProps{
		Value:       lb.LoadBalancerDnsName(),
		Description: jsii.String("The git server's load balancer (with cdn=false, point domainName here)"),
	})
}

// Settings of the distribution in front of the git server (ADR 30). CloudFront waits
// originReadTimeout for each packet of a response, the first included: git's
// upload-pack sends a keep-alive every gitKeepAlive (uploadpack.keepAlive, git's default,
// which the server leaves as it is) while pack-objects is quiet, and the server's own
// waits before git's first byte (a place in its queue, a shared pack generation) are
// its queue wait each: serveQueueWait, below the server's own default (30 s), so that
// both fit in the read timeout.
const (
	originReadTimeout = 60 * time.Second // the most CloudFront allows without a quota increase
	gitKeepAlive      = 5 * time.Second
	serveQueueWait    = 25 * time.Second // MIRRORFLEET_SERVE_QUEUE_WAIT of the git server
)

// cdn is the CloudFront distribution in front of the load balancer: HTTPS for the
// viewers (HTTP redirected) on its own name or domainName, every method (git's
// upload-pack is a POST), nothing cached (CachingDisabled), every viewer header passed
// on — Git-Protocol, Content-Encoding and Authorization among them — with the origin's
// own Host (AllViewerExceptHostHeader, which forwards Authorization when nothing is
// cached), responses streamed as they come, and edges in North America and Europe
// (PriceClass_100: the bill prices them at that rate).
func (s *Stack) cdn(lb awselasticloadbalancingv2.ApplicationLoadBalancer) awscloudfront.Distribution {
	props := &awscloudfront.DistributionProps{
		Comment: jsii.String("mirrorfleet git server: clones over HTTPS"),
		DefaultBehavior: &awscloudfront.BehaviorOptions{
			Origin: awscloudfrontorigins.NewLoadBalancerV2Origin(lb, &awscloudfrontorigins.LoadBalancerV2OriginProps{
				ProtocolPolicy: awscloudfront.OriginProtocolPolicy_HTTP_ONLY,
				HttpPort:       jsii.Number(80),
				ReadTimeout:    awscdk.Duration_Seconds(jsii.Number(originReadTimeout.Seconds())),
			}),
			ViewerProtocolPolicy: awscloudfront.ViewerProtocolPolicy_REDIRECT_TO_HTTPS,
			AllowedMethods:       awscloudfront.AllowedMethods_ALLOW_ALL(),
			CachedMethods:        awscloudfront.CachedMethods_CACHE_GET_HEAD(),
			CachePolicy:          awscloudfront.CachePolicy_CACHING_DISABLED(),
			OriginRequestPolicy:  awscloudfront.OriginRequestPolicy_ALL_VIEWER_EXCEPT_HOST_HEADER(),
			Compress:             jsii.Bool(false),
		},
		PriceClass:  awscloudfront.PriceClass_PRICE_CLASS_100,
		HttpVersion: awscloudfront.HttpVersion_HTTP2_AND_3,
		EnableIpv6:  jsii.Bool(true),
	}
	if s.props.CertificateARN != "" {
		props.DomainNames = jsii.Strings(s.props.DomainName)
		props.Certificate = awscertificatemanager.Certificate_FromCertificateArn(s.Stack, jsii.String("ServeCertificate"), jsii.String(s.props.CertificateARN))
		props.MinimumProtocolVersion = awscloudfront.SecurityPolicyProtocol_TLS_V1_2_2021
	}
	return awscloudfront.NewDistribution(s.Stack, jsii.String("ServeCdn"), props)
}

// cloudFrontPrefixListName is the managed prefix list of CloudFront's origin-facing
// servers (IPv4; the load balancer has no IPv6 address).
const cloudFrontPrefixListName = "com.amazonaws.global.cloudfront.origin-facing"

// placeholderPrefixList names no prefix list: a stack without account and region cannot
// look the real one up.
const placeholderPrefixList = "pl-00000000"

// cloudFrontPrefixList is the id of CloudFront's origin-facing prefix list in the
// stack's region, which a context lookup finds (the CDK CLI runs it with the stack's
// account and region, and keeps the answer in cdk.context.json). Without them it is
// a placeholder when placeholders are allowed (synth, tests).
func (s *Stack) cloudFrontPrefixList() *string {
	if !*awscdk.Token_IsUnresolved(s.Stack.Account()) && !*awscdk.Token_IsUnresolved(s.Stack.Region()) {
		return awsec2.PrefixList_FromLookup(s.Stack, jsii.String("CloudFrontOriginFacing"), &awsec2.PrefixListLookupOptions{
			PrefixListName: jsii.String(cloudFrontPrefixListName)}).PrefixListId()
	}
	s.Placeholders = append(s.Placeholders, "cloudFrontPrefixList")
	awscdk.Annotations_Of(s.Stack).AddWarningV2(jsii.String("mirrorfleet:placeholder-prefix-list"),
		jsii.String("no account and region: the load balancer admits a placeholder prefix list, not CloudFront's (allowPlaceholders); this stack must not be deployed"))
	return jsii.String(placeholderPrefixList)
}

// serveContainer adds the git server to task: `mirrorfleet serve` on the mirrors
// mounted read-only, its pack cache on the task's local disk.
func (s *Stack) serveContainer(task awsecs.TaskDefinition, share *taskShare) awsecs.ContainerDefinition {
	env := deployenv.Serve{
		Common:         s.common(),
		MirrorRoot:     mirrorRoot,
		Listen:         fmt.Sprintf(":%d", servePort),
		PackCacheDir:   packCacheDir,
		PackCacheBytes: s.props.PackCacheBytes,
		// The load balancer sits in the VPC, CloudFront's edges in front of it: their
		// X-Forwarded-For names the client, so the per-client limit is not one limit for
		// everyone behind them.
		TrustedProxy: s.trustedProxies(),
		QueueWait:    serveQueueWait,
	}.Env()
	container := s.container(task, "serve", "ServeLogs", 120*time.Second, env,
		healthCheck(time.Minute, "--url", fmt.Sprintf("http://127.0.0.1:%d/healthz", servePort)), share)
	container.AddPortMappings(&awsecs.PortMapping{ContainerPort: jsii.Number(servePort)})
	container.AddMountPoints(
		&awsecs.MountPoint{SourceVolume: jsii.String("mirrors"), ContainerPath: jsii.String(mirrorRoot), ReadOnly: jsii.Bool(true)},
		&awsecs.MountPoint{SourceVolume: jsii.String("packcache"), ContainerPath: jsii.String(packCacheDir), ReadOnly: jsii.Bool(false)},
		&awsecs.MountPoint{SourceVolume: jsii.String("tmp"), ContainerPath: jsii.String(tmpDir), ReadOnly: jsii.Bool(false)},
	)
	return container
}

// trustedProxies are the proxies in front of the git server: the load balancer (the
// VPC's network) and, with the CDN, CloudFront's origin-facing servers.
func (s *Stack) trustedProxies() string {
	t := *s.Vpc.VpcCidrBlock()
	if !s.props.WithoutCDN {
		t += "," + deployenv.TrustedCloudFront
	}
	return t
}

// serveService is the git server as a service of its own (serveSeparate): Fargate ARM64
// tasks on Spot (but ServeOnDemand of them), a task role that may only read — the
// table, and the mirrors through EFS — scaled on CPU and on requests per task.
func (s *Stack) serveService(tg awselasticloadbalancingv2.ApplicationTargetGroup) (awsecs.FargateService, awsec2.ISecurityGroup) {
	task := s.taskDefinition("ServeTask", s.props.ServeCPU, s.props.ServeMemory, "packcache")
	s.serveContainer(task, nil)
	s.grantTable(task.TaskRole(), tableReadActions) // the /git/ index lists the repos
	s.grantMount(task.TaskRole(), false)

	sg := awsec2.NewSecurityGroup(s.Stack, jsii.String("ServeSG"), &awsec2.SecurityGroupProps{
		Vpc:              s.Vpc,
		Description:      jsii.String("mirrorfleet git server: the load balancer only"),
		AllowAllOutbound: jsii.Bool(true),
	})
	s.FileSystem.Connections().AllowDefaultPortFrom(sg, jsii.String("NFS from the mirrorfleet git server"))

	providers := []*awsecs.CapacityProviderStrategy{strategy(fargateSpot, 1, 0)}
	if s.props.ServeOnDemand > 0 {
		providers = append(providers, strategy(fargateOnDemand, 0, s.props.ServeOnDemand))
	}
	svc := s.service("Serve", s.serviceProps(task, sg, s.props.ServeMin, providers...))
	svc.AttachToApplicationTargetGroup(tg)
	scaling := svc.AutoScaleTaskCount(&awsapplicationautoscaling.EnableScalingProps{
		MinCapacity: jsii.Number(float64(s.props.ServeMin)),
		MaxCapacity: jsii.Number(float64(s.props.ServeMax)),
	})
	scaling.ScaleOnCpuUtilization(jsii.String("ServeCpu"), &awsecs.CpuUtilizationScalingProps{
		TargetUtilizationPercent: jsii.Number(60),
		ScaleInCooldown:          awscdk.Duration_Minutes(jsii.Number(10)),
		ScaleOutCooldown:         awscdk.Duration_Minutes(jsii.Number(2)),
	})
	scaling.ScaleOnRequestCount(jsii.String("ServeRequests"), &awsecs.RequestCountScalingProps{
		RequestsPerTarget: jsii.Number(1000), // a minute; a clone is two or three requests
		TargetGroup:       tg,
		ScaleInCooldown:   awscdk.Duration_Minutes(jsii.Number(10)),
		ScaleOutCooldown:  awscdk.Duration_Minutes(jsii.Number(2)),
	})
	return svc, sg
}
