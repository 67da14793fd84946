package stackfacts

import (
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		providers    []Provider
		n            int
		od, spotWant float64
	}{
		{nil, 3, 3, 0},
		{[]Provider{{Name: "FARGATE_SPOT", Weight: 1}}, 3, 0, 3},
		{[]Provider{{Name: "FARGATE_SPOT", Weight: 1}, {Name: "FARGATE", Base: 1}}, 3, 1, 2},
		{[]Provider{{Name: "FARGATE_SPOT", Weight: 1}, {Name: "FARGATE", Base: 2}}, 1, 1, 0},
		{[]Provider{{Name: "FARGATE_SPOT", Weight: 3}, {Name: "FARGATE", Weight: 1}}, 8, 2, 6},
	} {
		od, sp := Service{Providers: c.providers}.Split(c.n)
		if od != c.od || sp != c.spotWant {
			t.Errorf("%+v × %d: %v on-demand + %v Spot, want %v + %v", c.providers, c.n, od, sp, c.od, c.spotWant)
		}
	}
}

// A small template in the shape CloudFormation has it, quotes inside the dashboard
// body escaped twice as cdk synth writes them.
const fixture = `{"Resources":{
 "Task":{"Type":"AWS::ECS::TaskDefinition","Properties":{"Cpu":"512","Memory":"1024",
   "ContainerDefinitions":[{"Command":["worker"],"Environment":[{"Name":"MIRRORFLEET_FETCHERS","Value":"4"},{"Name":"MIRRORFLEET_TABLE","Value":{"Ref":"T"}}]},
     {"Command":["serve"],"Environment":[{"Name":"MIRRORFLEET_LISTEN","Value":":8080"}]}]}},
 "Svc":{"Type":"AWS::ECS::Service","Properties":{"DesiredCount":2,"LaunchType":"FARGATE","TaskDefinition":{"Ref":"Task"},
   "NetworkConfiguration":{"AwsvpcConfiguration":{"AssignPublicIp":"DISABLED"}}}},
 "Target":{"Type":"AWS::ApplicationAutoScaling::ScalableTarget","Properties":{"MinCapacity":2,"MaxCapacity":6,
   "ResourceId":{"Fn::Join":["",["service/",{"Ref":"C"},"/",{"Fn::GetAtt":["Svc","Name"]}]]}}},
 "Nat":{"Type":"AWS::EC2::NatGateway","Properties":{}},
 "S":{"Type":"AWS::SecretsManager::Secret","Properties":{}},
 "Bus":{"Type":"AWS::Events::EventBus","Properties":{"Name":"x"}},
 "A1":{"Type":"AWS::CloudWatch::Alarm","Properties":{"MetricName":"Ticks"}},
 "A2":{"Type":"AWS::CloudWatch::Alarm","Properties":{"Metrics":[{"Expression":"a+b","Id":"e"},{"MetricStat":{},"Id":"a"},{"MetricStat":{},"Id":"b"}]}},
 "TT":{"Type":"AWS::ApplicationAutoScaling::ScalingPolicy","Properties":{"PolicyType":"TargetTrackingScaling"}},
 "Dash":{"Type":"AWS::CloudWatch::Dashboard","Properties":{"DashboardBody":{"Fn::Join":["",["{\"widgets\":[{\"properties\":{\"metrics\":[[\"MirrorFleet\",\"Ticks\",\"Fleet\",\"x\"],[{\"expression\":\"SEARCH('Namespace=\\\"MirrorFleet\\\" MetricName=\\\"ReposByState\\\" Fleet=\\\"x\\\"', 'Maximum', 60)\"}]]}}]}"]]}}},
 "Fs":{"Type":"AWS::EFS::FileSystem","Properties":{"LifecyclePolicies":[{"TransitionToIA":"AFTER_30_DAYS"},{"TransitionToPrimaryStorageClass":"AFTER_1_ACCESS"}]}},
 "Fn":{"Type":"AWS::Lambda::Function","Properties":{"MemorySize":256}},
 "Rule":{"Type":"AWS::Events::Rule","Properties":{"ScheduleExpression":"rate(5 minutes)","Targets":[{"Arn":{"Fn::GetAtt":["Fn","Arn"]}}]}},
 "Cdn":{"Type":"AWS::CloudFront::Distribution","Properties":{"DistributionConfig":{"PriceClass":"PriceClass_100","Aliases":["git.example.org"],
   "DefaultCacheBehavior":{"CachePolicyId":"4135ea2d-6df8-44a3-9df3-4b5a84be39ad"},"Origins":[{"DomainName":{"Fn::GetAtt":["Lb","DNSName"]}}]}}},
 "Cdn2":{"Type":"AWS::CloudFront::Distribution","Properties":{"DistributionConfig":{"DefaultCacheBehavior":{"CachePolicyId":"658327ea-f89d-4fab-a63d-7e88639e58f6"},
   "Origins":[{"DomainName":"example.org"}]}}}
}}`

func TestParse(t *testing.T) {
	f, err := Parse([]byte(fixture))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Services) != 1 {
		t.Fatalf("services %+v", f.Services)
	}
	s := f.Services[0]
	if s.CPU != 512 || s.MemoryMiB != 1024 || s.Desired != 2 || s.MinTasks != 2 || s.MaxTasks != 6 || s.PublicIP ||
		s.Role() != "worker" || s.Env["MIRRORFLEET_FETCHERS"] != "4" || len(s.Env) != 1 {
		t.Errorf("service %+v", s)
	}
	// The git server beside the worker: the worker's service, serving.
	if !slices.Equal(s.Roles, []string{"worker", "serve"}) || !s.Runs("serve") || !f.Serving() || len(f.ServicesRunning("serve")) != 0 {
		t.Errorf("roles %v, serving %v", s.Roles, f.Serving())
	}
	if od, sp := s.Split(2); od != 2 || sp != 0 {
		t.Errorf("a launch-type service is on-demand: %v + %v", od, sp)
	}
	if f.NATGateways != 1 || f.Secrets != 1 || f.Alarms != 4 || f.AlarmMetrics != 5 || f.Dashboards != 1 || f.TickSeconds != 300 ||
		f.EventBuses != 1 {
		t.Errorf("facts %+v", f)
	}
	if !slices.Equal(f.DashboardMetrics, []string{"ReposByState", "Ticks"}) {
		t.Errorf("dashboard metrics %v", f.DashboardMetrics)
	}
	if fs := f.FileSystems[0]; fs.IAAfterDays != 30 || fs.ArchiveAfterDays != 0 || !fs.BackToStandardOnRead || fs.Elastic {
		t.Errorf("file system %+v", fs)
	}
	if d := f.Distributions; len(d) != 2 || d[0].PriceClass != "PriceClass_100" || !d[0].CachingDisabled || d[0].Aliases != 1 ||
		!slices.Equal(d[0].Origins, []string{"Lb"}) || d[1].PriceClass != "PriceClass_All" || d[1].CachingDisabled || len(d[1].Origins) != 0 {
		t.Errorf("distributions %+v", d)
	}
	if l, ok := f.TickLambda(); !ok || l.MemoryMB != 256 {
		t.Errorf("tick Lambda %+v %v", l, ok)
	}
	for _, bad := range []string{`{}`, `not json`, `{"Resources":{"S":{"Type":"AWS::ECS::Service","Properties":{"TaskDefinition":{"Ref":"none"}}}}}`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%s): no error", bad)
		}
	}
	if days("AFTER_1_DAY") != 1 || days("AFTER_365_DAYS") != 365 || days("") != 0 {
		t.Error("days")
	}
}
