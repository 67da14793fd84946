package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
)

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

// Coordinator invocation settings (ADR 13): no retries of a failed tick or timer firing — the next minute's tick repairs what a failed one left
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
	role, logs, code, err := s.goFunction("Coordinator", "coordinator")
	if err != nil {
		return err
	}
	warmup := s.props.Warmup
	if s.props.NoWarmup {
		warmup = 0 // deployenv writes it as none
	}
	env := deployenv.Coordinator{
		Common:           s.common(),
		ScheduleGroup:    *s.ScheduleGroup.Ref(),
		SchedulerRoleARN: *s.SchedulerRole.RoleArn(),
		TimerDLQARN:      *s.TimerDLQ.QueueArn(),
		Grace:            s.props.Grace,
		Warmup:           warmup,
		List:             s.props.List,
	}.Env()
	// No reservation unless asked for: a new account's concurrency quota (10, of which
	// Lambda keeps 10 unreserved) refuses any, and the election lease keeps one leader
	// anyway (ADR 19: overlapping invocations fence each other and repeat work, no more).
	var reserved *float64
	if n := s.props.CoordinatorConcurrency; n > 0 {
		reserved = jsii.Number(float64(n))
		awscdk.Annotations_Of(s.Stack).AddWarningV2(jsii.String("mirrorfleet:reserved-concurrency"),
			jsii.String(fmt.Sprintf("coordinatorConcurrency=%d reserves Lambda concurrency: the account's concurrent executions "+
				"quota must be at least %d (Lambda keeps 10 unreserved), and a new account's is 10, which refuses any "+
				"reservation: request an increase in Service Quotas (Lambda, Concurrent executions) before deploying", n, 10+n)))
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

// goFunction is what a Go Lambda needs before its props: a role (id+"Role"), a log
// group (id+"Logs") and the code of build/<name>.zip.
func (s *Stack) goFunction(id, name string) (awsiam.Role, awslogs.LogGroup, awslambda.Code, error) {
	role := s.lambdaRole(id + "Role")
	logs := s.logGroup(id + "Logs")
	code, err := s.lambdaCode(name)
	return role, logs, code, err
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
