package main

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awselasticloadbalancingv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

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

// alarmTopic is the encrypted SNS topic the alarms notify. Its policy denies anything
// but TLS (enforceSSL) and allows CloudWatch to publish: a topic policy replaces SNS's
// default one, so without that Allow the alarms of this account could not publish to
// it — the key policy alone is not enough.
func (s *Stack) alarmTopic() {
	key := awskms.NewKey(s.Stack, jsii.String("AlarmKey"), &awskms.KeyProps{
		EnableKeyRotation: jsii.Bool(true),
		Description:       jsii.String("mirrorfleet alarm topic"),
		RemovalPolicy:     awscdk.RemovalPolicy_DESTROY,
	})
	cloudwatch := awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)
	key.GrantEncryptDecrypt(cloudwatch)
	s.AlarmTopic = awssns.NewTopic(s.Stack, jsii.String("Alarms"), &awssns.TopicProps{
		MasterKey:  key,
		EnforceSSL: jsii.Bool(true),
	})
	s.AlarmTopic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublish"),
		Effect:     awsiam.Effect_ALLOW,
		Principals: &[]awsiam.IPrincipal{cloudwatch},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  &[]*string{s.AlarmTopic.TopicArn()},
		Conditions: &map[string]interface{}{
			"StringEquals": map[string]interface{}{"aws:SourceAccount": s.Stack.Account()},
			"ArnLike": map[string]interface{}{"aws:SourceArn": fmt.Sprintf("arn:%s:cloudwatch:%s:%s:alarm:*",
				*s.Stack.Partition(), *s.Stack.Region(), *s.Stack.Account())},
		},
	}))
	if s.props.AlarmEmail != "" {
		s.AlarmTopic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(s.props.AlarmEmail), nil))
	} else {
		awscdk.Annotations_Of(s.Stack).AddWarningV2(jsii.String("mirrorfleet:no-alarm-email"),
			jsii.String("alarmEmail=none: the alarm topic has no subscriber, so no alarm reaches anyone; subscribe to its ARN (output AlarmTopicArn) yourself"))
	}
	awscdk.NewCfnOutput(s.Stack, jsii.String("AlarmTopicArn"), &awscdk.CfnOutputProps{
		Value:       s.AlarmTopic.TopicArn(),
		Description: jsii.String("The SNS topic the alarms notify"),
	})
}

// alarms: coordinator runs without a successful tick, too few live workers, stale repos,
// fetch failure ratio, DLQ not empty, Lambda errors, the mirrors past the storage budget,
// no healthy git server; to the alarm topic. Missing data is never a breach: a new fleet has no staleness (no repo yet), no
// worker states before its first tick, no fetches; each alarm looks at what is reported.
// The alarms on the services wait for the services (a first deploy creates them once
// the tasks run), so a new stack does not page while it starts.
func (s *Stack) alarms() {
	s.alarmTopic()
	action := awscloudwatchactions.NewSnsAction(s.AlarmTopic)
	add := func(id string, p *awscloudwatch.AlarmProps, after ...constructs.IConstruct) {
		if p.TreatMissingData == "" {
			p.TreatMissingData = awscloudwatch.TreatMissingData_NOT_BREACHING
		}
		a := awscloudwatch.NewAlarm(s.Stack, &id, p)
		a.AddAlarmAction(action)
		a.AddOkAction(action)
		for _, c := range after {
			a.Node().AddDependency(c)
		}
	}
	minute := time.Minute
	// Every invocation reports its duration, only a successful tick counts in Ticks
	// (metrics.FromReport): a minute with runs and no tick is a failed minute. A
	// coordinator that is not invoked at all reports nothing, and its Lambda's errors
	// and throttles are on the dashboard.
	add("NoTickAlarm", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String("The coordinator ran without a successful tick for 5 minutes"),
		Metric: awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String("IF(runs > 0 AND FILL(ticks, 0) < 1, 1, 0)"),
			Label:      jsii.String("minutes with runs and no successful tick"),
			Period:     awscdk.Duration_Minutes(jsii.Number(1)),
			UsingMetrics: &map[string]awscloudwatch.IMetric{
				"runs":  s.metric("TickDuration", "SampleCount", minute, nil),
				"ticks": s.metric("Ticks", "Sum", minute, nil),
			},
		}),
		Threshold:          jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		EvaluationPeriods:  jsii.Number(5),
	}, s.TickRule)
	// Joining workers count as live: during the first start's warm-up every worker is
	// joining (nothing is assigned yet), and a new worker is joining until the next tick.
	add("LiveWorkersAlarm", &awscloudwatch.AlarmProps{
		AlarmDescription:   jsii.String(fmt.Sprintf("Fewer than %d live (active or joining) workers for 5 minutes", s.props.MinLive)),
		Metric:             s.liveWorkers,
		Threshold:          jsii.Number(float64(s.props.MinLive)),
		ComparisonOperator: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(5),
	}, s.Service)
	// The threshold follows from the poll budget (infra/budget): a fleet polling at its
	// budget revisits its dormant repos every TailStaleness, half the threshold.
	add("StaleReposAlarm", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String(fmt.Sprintf("Some repo not fetched successfully for over %s (a fleet at its budget of %g polls a day shows about %s)",
			s.props.StaleAfter.Round(time.Minute), s.props.PollsPerDay, s.props.Budget().TailStaleness().Round(time.Minute))),
		Metric:             s.metric("StalenessMax", "Maximum", 10*minute, nil),
		Threshold:          jsii.Number(s.props.StaleAfter.Seconds()),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(2),
	}, s.Service)
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
	})
	add("TimerDLQAlarm", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String("Scheduler timer deliveries in the DLQ"),
		Metric: s.TimerDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Maximum"),
		}),
		Threshold:          jsii.Number(0),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(1),
	})
	// A failing tick is not retried (the next minute's repairs it): errors in three of
	// five minutes is a coordinator failing, not a blip. The API's errors are crashes
	// and start-up failures (bad configuration), not 4xx/5xx answers.
	for _, fn := range []struct {
		id, what string
		f        awslambda.Function
		of       int
	}{{"CoordinatorErrorsAlarm", "coordinator", s.Coordinator, 3}, {"ApiErrorsAlarm", "API", s.API, 1}} {
		add(fn.id, &awscloudwatch.AlarmProps{
			AlarmDescription: jsii.String(fmt.Sprintf("The %s Lambda failed in %d of the last 5 minutes", fn.what, fn.of)),
			Metric: fn.f.MetricErrors(&awscloudwatch.MetricOptions{
				Period: awscdk.Duration_Minutes(jsii.Number(1)), Statistic: jsii.String("Sum"),
			}),
			Threshold:          jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			EvaluationPeriods:  jsii.Number(5),
			DatapointsToAlarm:  jsii.Number(float64(fn.of)),
		})
	}
	if !s.props.NoStorageAlarm {
		// The mirrors' file system grows with them (no fleet-wide stop by default, ADR
		// 30): this alarm says when it outgrows the operator's budget. EFS reports its
		// size about every 15 minutes; an hour's maximum is the figure.
		add("StorageBudgetAlarm", &awscloudwatch.AlarmProps{
			AlarmDescription: jsii.String(fmt.Sprintf("The mirrors' file system holds more than the storage budget, %d GiB (storageBudgetGiB)",
				s.props.StorageBudgetGiB)),
			Metric:             s.storageBytes(time.Hour),
			Threshold:          jsii.Number(float64(s.props.StorageBudgetGiB) * (1 << 30)),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			EvaluationPeriods:  jsii.Number(1),
		})
	}
	if s.Serve != nil {
		add("ServeHealthyAlarm", &awscloudwatch.AlarmProps{
			AlarmDescription: jsii.String("No healthy git server behind the load balancer for 5 minutes"),
			Metric: s.Serve.TargetGroup.Metrics().HealthyHostCount(&awscloudwatch.MetricOptions{
				Period: awscdk.Duration_Minutes(jsii.Number(1)), Statistic: jsii.String("Minimum"),
			}),
			Threshold:          jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD,
			EvaluationPeriods:  jsii.Number(5),
		}, s.Serve.Service)
	}
}

// storageBytes is the mirrors' file system's size, every storage class.
func (s *Stack) storageBytes(period time.Duration) awscloudwatch.IMetric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String("AWS/EFS"),
		MetricName:    jsii.String("StorageBytes"),
		DimensionsMap: &map[string]*string{"FileSystemId": s.FileSystem.FileSystemId(), "StorageClass": jsii.String("Total")},
		Statistic:     jsii.String("Maximum"),
		Period:        awscdk.Duration_Seconds(jsii.Number(period.Seconds())),
	})
}

// tableThrottles graphs the table's throttled requests. DynamoDB publishes
// ThrottledRequests per operation only (dimensions TableName and Operation), so a metric
// with the table name alone has no data: a SEARCH finds every operation's.
func (s *Stack) tableThrottles() awscloudwatch.IMetric {
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(fmt.Sprintf(`SEARCH('{AWS/DynamoDB,Operation,TableName} MetricName="ThrottledRequests" TableName="%s"', 'Sum', 300)`,
			*s.Table.TableName())),
		Label:  jsii.String("throttled requests by operation"),
		Period: awscdk.Duration_Minutes(jsii.Number(5)),
	})
}

// servingMetrics and maintenanceMetrics are the names the git server and the
// workers' mirror maintenance emit (shared/metrics). ServeRequests carries a status
// class dimension; the dashboard finds it with a SEARCH on the name and the fleet.
var (
	servingMetrics     = []string{"ServeRequests", "ServeBytes", "PackCacheHits", "PackCacheMisses", "PackGenerationSeconds", "ServeRejected"}
	maintenanceMetrics = []string{"MaintenanceRuns", "MaintenanceSeconds", "MirrorsRecloned", "MirrorPacks"}
	// memoryMetrics are the workers' memory budget (ADR 26).
	memoryMetrics = []string{"MemoryBudgetBytes", "MemoryReservedBytes", "MemoryHeapBytes", "FetchesWaitingForMemory"}
	// gitMetrics count every git process (shared/gitcmd): maintenance's in the
	// workers, upload-pack's in the git server; by command in the EMF properties.
	gitMetrics = []string{"GitProcesses", "GitFailures", "GitCpuSeconds"}
)

// dashboard: the metric names of shared/metrics, then the platform's.
func (s *Stack) dashboard() {
	m := func(name, stat string) awscloudwatch.IMetric { return s.metric(name, stat, time.Minute, nil) }
	search := func(name, stat, label string) awscloudwatch.IMetric {
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf(`SEARCH('Namespace="%s" MetricName="%s" %s="%s"', '%s', 60)`,
				metricNamespace, name, dimFleet, s.props.Fleet, stat)),
			Label:  jsii.String(label),
			Period: awscdk.Duration_Minutes(jsii.Number(1)),
		})
	}
	graph := func(title string, left ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &left, Width: jsii.Number(8), Height: jsii.Number(6),
		})
	}
	rows := []*[]awscloudwatch.IWidget{
		{
			graph("Coordinator ticks", m("Ticks", "Sum")),
			graph("Tick duration (s)", m("TickDuration", "Average"), m("TickDuration", "p99")),
			graph("Leader term / repos moved", m("LeaderTerm", "Maximum"), m("ReposMoved", "Sum"), m("ReposOffOwner", "Sum")),
		},
		{
			graph("Workers by state", search("WorkersByState", "Maximum", "workers")),
			graph("Repos by state", search("ReposByState", "Maximum", "repos")),
			graph("Staleness (s)", m("StalenessP50", "Maximum"), m("StalenessP99", "Maximum"), m("StalenessMax", "Maximum")),
		},
		{
			graph("Fetches: successes / failures / polls (the budget's) / polls that found a change", m("FetchSuccesses", "Sum"), m("FetchFailures", "Sum"), m("Polls", "Sum"), m("PollsFound", "Sum")),
			graph("Fetch duration (s)", m("FetchDuration", "Average"), m("FetchDuration", "p99")),
			graph("Bytes fetched / queue depth", m("BytesFetched", "Sum"), m("QueueDepth", "Maximum")),
		},
		{
			graph("Mirror maintenance", m(maintenanceMetrics[0], "Sum"), m(maintenanceMetrics[2], "Sum"), m(maintenanceMetrics[3], "Maximum")),
			graph("Maintenance duration (s)", m(maintenanceMetrics[1], "Average"), m(maintenanceMetrics[1], "p99")),
			s.eventWidget(graph),
		},
		{
			graph("Worker memory (bytes): budget / reserved / heap", m(memoryMetrics[0], "Maximum"), m(memoryMetrics[1], "Maximum"),
				m(memoryMetrics[2], "Maximum")),
			graph("Fetches waiting for memory", m(memoryMetrics[3], "Maximum")),
			s.hookWidget(graph),
		},
		{
			graph("Git processes / failures / CPU (s)", m(gitMetrics[0], "Sum"), m(gitMetrics[1], "Sum"), m(gitMetrics[2], "Sum")),
		},
	}
	if s.Serve != nil {
		rows = append(rows, &[]awscloudwatch.IWidget{
			graph("Git requests by status class", search(servingMetrics[0], "Sum", "requests")),
			graph("Bytes served / rejected (429, 503)", m(servingMetrics[1], "Sum"), m(servingMetrics[5], "Sum")),
			graph("Pack cache hits / misses / generation (s)", m(servingMetrics[2], "Sum"), m(servingMetrics[3], "Sum"),
				m(servingMetrics[4], "Average")),
		})
	}
	rows = append(rows, s.platformWidgets(graph))
	s.Dashboard = awscloudwatch.NewDashboard(s.Stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(s.props.Fleet + "-mirrorfleet"),
		Widgets:       &rows,
	})
}

// platformWidgets is the dashboard's platform row: the Lambdas, the table, the file
// system, the services' CPU and memory and, with serving, the load balancer — from the
// services' own metrics (free).
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
	services := []awscloudwatch.IMetric{s.Service.MetricCpuUtilization(nil), s.Service.MetricMemoryUtilization(nil)}
	if s.Serve != nil && s.Serve.Separate {
		services = append(services, s.Serve.Service.MetricCpuUtilization(nil), s.Serve.Service.MetricMemoryUtilization(nil))
	}
	w := []awscloudwatch.IWidget{
		graph("Lambda errors / throttles", lambda...),
		graph("Lambda duration (ms)", s.Coordinator.MetricDuration(nil), s.API.MetricDuration(nil)),
		graph("DynamoDB capacity / throttles",
			aws("AWS/DynamoDB", "ConsumedReadCapacityUnits", "Sum", table),
			aws("AWS/DynamoDB", "ConsumedWriteCapacityUnits", "Sum", table),
			s.tableThrottles()),
		graph("EFS size (bytes) / throughput", s.storageBytes(5*time.Minute), aws("AWS/EFS", "MeteredIOBytes", "Sum", fs)),
		graph("Service CPU / memory (%)", services...),
	}
	if s.Serve != nil {
		lb := s.Serve.LoadBalancer.Metrics()
		w = append(w, graph("Load balancer requests / 5xx / healthy",
			lb.RequestCount(nil), lb.HttpCodeTarget(awselasticloadbalancingv2.HttpCodeTarget_TARGET_5XX_COUNT, nil),
			s.Serve.TargetGroup.Metrics().HealthyHostCount(nil)))
	}
	return &w
}
