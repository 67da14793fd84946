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
	suppress := func(c constructs.IConstruct, id, reason string, appliesTo ...string) {
		sup := &cdknag.NagPackSuppression{Id: jsii.String(id), Reason: jsii.String(reason)}
		if len(appliesTo) > 0 {
			var a []interface{}
			for _, x := range appliesTo {
				a = append(a, x)
			}
			sup.AppliesTo = &a
		}
		cdknag.NagSuppressions_AddResourceSuppressions(c, &[]*cdknag.NagPackSuppression{sup}, jsii.Bool(true))
	}

	suppress(s.TimerDLQ, "AwsSolutions-SQS3",
		"This queue is itself the dead-letter queue of the Scheduler timers (set on each schedule "+
			"by the coordinator at run time, MIRRORFLEET_TIMER_DLQ_ARN); a DLQ of a DLQ adds nothing.")

	task := s.Service.TaskDefinition()
	suppress(task, "AwsSolutions-ECS2",
		"The worker's environment is non-secret configuration (table name, mount path, fetchers, "+
			"fleet name); the worker holds no secrets, it uses its task role for AWS.")
	suppress(task.(awsecs.TaskDefinition).ObtainExecutionRole(), "AwsSolutions-IAM5",
		"ecr:GetAuthorizationToken cannot be scoped to a resource (AWS requires Resource \"*\"); "+
			"the image pull itself is scoped to the asset repository.",
		"Resource::*")

	// Schedule names are per timer (worker id, incarnation), created at run time: scope is
	// the stack's own schedule group.
	suppress(s.Coordinator.Role(), "AwsSolutions-IAM5",
		"Timer schedules are named at run time (one per worker death/warmup timer); the "+
			"permission is limited to schedules in this stack's own schedule group.",
		"Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/<ScheduleGroup>/*")
}
