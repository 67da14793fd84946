package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// nagSuppressions records, on the resources concerned, each cdk-nag AwsSolutions finding
// accepted by design and why. They are metadata only: deploying without cdk-nag ignores
// them; infra/nag_test.go checks that nothing else is reported.
func (s *Stack) nagSuppressions() {
	suppress := func(c constructs.IConstruct, id, reason string, appliesTo ...any) {
		sup := &cdknag.NagPackSuppression{Id: jsii.String(id), Reason: jsii.String(reason)}
		if len(appliesTo) > 0 {
			sup.AppliesTo = &appliesTo
		}
		cdknag.NagSuppressions_AddResourceSuppressions(c, &[]*cdknag.NagPackSuppression{sup}, jsii.Bool(true))
	}

	suppress(s.TimerDLQ, "AwsSolutions-SQS3",
		"This queue is itself the dead-letter queue of the Scheduler timers (set on each schedule "+
			"by the coordinator at run time, MIRRORFLEET_TIMER_DLQ_ARN); a DLQ of a DLQ adds nothing.")

	suppress(s.Cluster, "AwsSolutions-ECS4",
		"Container Insights is off by default for cost: its per-task metrics would cost more than the "+
			"fleet's own. The dashboard graphs the fleet's metrics and the services' CPU and memory "+
			"(AWS/ECS, free).")

	tasks := []awsecs.TaskDefinition{s.Service.TaskDefinition()}
	if s.Serve != nil && s.Serve.Separate { // else the git server is in the workers' task
		tasks = append(tasks, s.Serve.Service.TaskDefinition())
	}
	for _, task := range tasks {
		suppress(task, "AwsSolutions-ECS2",
			"The environment is non-secret configuration (table name, mount path, fleet name, sizes); "+
				"the containers hold no secrets, they use their task role for AWS.")
		suppress(task.(awsecs.TaskDefinition).ObtainExecutionRole(), "AwsSolutions-IAM5",
			"ecr:GetAuthorizationToken cannot be scoped to a resource (AWS requires Resource \"*\"); "+
				"the image pull itself is scoped to the image's repository.",
			"Resource::*")
	}

	// Schedule names are per timer (worker id, incarnation), created at run time: scope is
	// the stack's own schedule group.
	suppress(s.Coordinator.Role(), "AwsSolutions-IAM5",
		"Timer schedules are named at run time (one per worker death/warmup timer); the "+
			"permission is limited to schedules in this stack's own schedule group.",
		// The region and account are tokens, or literal when the CLI pins the environment.
		&cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::arn:<AWS::Partition>:scheduler:(<AWS::Region>|[a-z0-9-]+):(<AWS::AccountId>|[0-9]{12}):schedule\/<ScheduleGroup>\/\*$/`)})

	for _, r := range s.HookRoutes {
		suppress(r, "AwsSolutions-APIG4",
			"The forges' push webhooks cannot sign requests with SigV4: each delivery is authenticated by "+
				"its HMAC signature (or GitLab's token) against the secret in Secrets Manager, checked by the "+
				"function, which answers 401 and does nothing else without it. The route is throttled on its own.")
	}
	if s.WebhookSecret != nil && s.props.WebhookSecretARN == "" {
		suppress(s.WebhookSecret, "AwsSolutions-SMG4",
			"The webhooks' secret is shared with the forges (each hook's settings hold a copy); an automatic "+
				"rotation would break every hook until someone copied the new value. It is rotated by hand: "+
				"a new value here, then in the forges (docs/webhooks.md).")
	}

	if s.Serve != nil {
		if s.props.WithoutCDN {
			for _, sg := range *s.Serve.LoadBalancer.Connections().SecurityGroups() {
				suppress(sg, "AwsSolutions-EC23",
					"With cdn=false the git server's load balancer serves public mirrors itself: HTTP(S) on 80 and 443 "+
						"only, from anywhere, by design (issue 11). The tasks behind it admit only the load balancer.")
			}
		}
		if d := s.Serve.Distribution; d != nil {
			suppress(d, "AwsSolutions-CFR1",
				"Public mirrors are served to any country; a geographic restriction is the operator's to add.")
			suppress(d, "AwsSolutions-CFR2",
				"The git server bounds every client itself (requests at once per client address, which it reads "+
					"through CloudFront's X-Forwarded-For; git processes per repo and in all); a web ACL costs $5 a "+
					"month and $0.60 a million requests more, and is the operator's to add.")
			suppress(d, "AwsSolutions-CFR3",
				"Access logs are off for cost (an S3 bucket of them); the git server logs every request itself "+
					"(CloudWatch Logs), with the client address CloudFront names.")
			suppress(d, "AwsSolutions-CFR5",
				"CloudFront reaches the load balancer over HTTP: the load balancer's own name has no certificate of "+
					"ours, and it admits only CloudFront's origin-facing servers (ADR 30).")
			if s.props.CertificateARN == "" {
				suppress(d, "AwsSolutions-CFR4",
					"With CloudFront's default certificate (*.cloudfront.net, no domain of the operator's) the viewer "+
						"policy cannot be set; with certificateArn the stack sets TLSv1.2_2021.")
			}
		}
		if s.Serve.AccessLogs != nil {
			suppress(s.Serve.AccessLogs, "AwsSolutions-S1",
				"This bucket holds the load balancer's access logs; logging access to the access logs "+
					"would only add a second bucket of the same kind.")
		} else {
			suppress(s.Serve.LoadBalancer, "AwsSolutions-ELB2",
				"Access logs are optional (context serveAccessLogs=true), off by default for cost; the git "+
					"server logs every request itself (CloudWatch Logs).")
		}
	}
}
