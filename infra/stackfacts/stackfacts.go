// Package stackfacts reads what a synthesized mirrorfleet CloudFormation template
// provisions — services and their task sizes, counts and capacity providers, public
// IPs, NAT gateways, load balancers, alarms, dashboards, the metrics they graph, the
// file system's lifecycle — so the cost model (bench/storecost) bills the stack as it
// is, not as someone remembered it. It reads JSON only: no CDK.
package stackfacts

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Facts are what a template provisions, as far as it costs money.
type Facts struct {
	Services      []Service
	NATGateways   int
	LoadBalancers []LoadBalancer
	// Distributions are CloudFront distributions: in front of the git server's load
	// balancer, the clones' bytes leave AWS through CloudFront (billed by its price
	// class), not from the load balancer.
	Distributions []Distribution
	// Alarms is the number of alarms the stack runs, and AlarmMetrics the metrics they
	// evaluate (CloudWatch bills per alarm metric): the template's alarms, plus the two
	// one-metric alarms Application Auto Scaling creates for each target tracking policy.
	Alarms, AlarmMetrics int
	Dashboards           int
	// DashboardMetrics are the names of the custom metrics (namespace Namespace) the
	// dashboards graph, SEARCH expressions included, sorted.
	DashboardMetrics  []string
	ContainerInsights bool
	FlowLogs          []string // traffic type of each VPC flow log
	GatewayEndpoints  []string // services reached through a gateway endpoint: "dynamodb", "s3"
	FileSystems       []FileSystem
	Lambdas           []Lambda
	// TickSeconds is the period of the rule that invokes a Lambda on a rate (0: none).
	TickSeconds float64
	Buckets     int
	KMSKeys     int // customer managed keys ($1 a month each)
	Secrets     int // Secrets Manager secrets the stack creates ($0.40 a month each)
	// EventBuses are the custom EventBridge buses (the workers put mirror.updated on
	// one: every event billed).
	EventBuses int
	// StaleAfterSeconds is the threshold of the alarm on StalenessMax (0: none).
	StaleAfterSeconds float64
}

// Namespace is the fleet's metric namespace.
const Namespace = "MirrorFleet"

// Service is one ECS service and its task definition.
type Service struct {
	ID             string
	CPU, MemoryMiB int
	Desired        int
	// MinTasks and MaxTasks bound its autoscaling (both Desired without).
	MinTasks, MaxTasks int
	Providers          []Provider // capacity provider strategy; empty: the launch type
	LaunchType         string
	PublicIP           bool
	LoadBalanced       bool
	Command            []string          // of its first container
	Env                map[string]string // the container's literal environment values
	// Roles are what each of its containers runs, in order: the first word of each
	// command ("worker", "serve"); a worker task may run the git server beside it.
	Roles []string
}

// Runs reports whether one of the service's containers runs role.
func (s Service) Runs(role string) bool { return s.Role() == role || slices.Contains(s.Roles, role) }

// Provider is one entry of a capacity provider strategy.
type Provider struct {
	Name         string // FARGATE, FARGATE_SPOT
	Base, Weight int
}

// Split is how n tasks of the service divide between on-demand Fargate and Fargate
// Spot: the base first, the rest by weight.
func (s Service) Split(n int) (onDemand, spot float64) {
	if len(s.Providers) == 0 {
		return float64(n), 0
	}
	left := float64(n)
	weights := 0
	for _, p := range s.Providers {
		b := min(float64(p.Base), left)
		if p.Name == "FARGATE_SPOT" {
			spot += b
		} else {
			onDemand += b
		}
		left -= b
		weights += p.Weight
	}
	if left <= 0 || weights == 0 {
		return onDemand, spot
	}
	for _, p := range s.Providers {
		share := left * float64(p.Weight) / float64(weights)
		if p.Name == "FARGATE_SPOT" {
			spot += share
		} else {
			onDemand += share
		}
	}
	return onDemand, spot
}

// Role is what the service runs: the first word of its container command.
func (s Service) Role() string {
	if len(s.Command) == 0 {
		return ""
	}
	return s.Command[0]
}

// LoadBalancer is an Elastic Load Balancing v2 load balancer.
type LoadBalancer struct {
	ID             string
	Type           string // application, network
	InternetFacing bool
	Subnets        int // one node, and one public IPv4 when internet-facing, per subnet
	AccessLogs     bool
}

// Distribution is a CloudFront distribution, as far as the bill goes.
type Distribution struct {
	ID string
	// PriceClass is CloudFront's: PriceClass_100 (edges in North America and Europe,
	// billed at their rates), PriceClass_200, PriceClass_All (the default).
	PriceClass string
	// CachingDisabled: its default behaviour caches nothing (the managed
	// CachingDisabled policy): every request and byte goes to the origin.
	CachingDisabled bool
	// Origins are the logical ids of the load balancers it fronts (its origins'
	// domain names).
	Origins []string
	// Aliases: it serves names of the operator's (SNI certificates cost nothing more).
	Aliases int
}

// CachingDisabledPolicy is the id of CloudFront's managed CachingDisabled cache policy.
const CachingDisabledPolicy = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"

// FileSystem is an EFS file system's lifecycle.
type FileSystem struct {
	ID                   string
	IAAfterDays          int  // 0: never
	ArchiveAfterDays     int  // 0: never
	BackToStandardOnRead bool // TransitionToPrimaryStorageClass AFTER_1_ACCESS
	Elastic              bool // Elastic throughput
}

// Lambda is a function's size.
type Lambda struct {
	ID       string
	MemoryMB int
	Env      map[string]string // literal values
	OnRule   bool              // a rate rule invokes it
}

type resource struct {
	Type       string          `json:"Type"`
	Properties json.RawMessage `json:"Properties"`
}

// Parse reads a template (the JSON `cdk synth` writes).
func Parse(template []byte) (Facts, error) {
	var t struct {
		Resources map[string]resource `json:"Resources"`
	}
	if err := json.Unmarshal(template, &t); err != nil {
		return Facts{}, fmt.Errorf("stackfacts: %w", err)
	}
	if len(t.Resources) == 0 {
		return Facts{}, errors.New("stackfacts: no resources in the template")
	}
	var f Facts
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range t.Resources {
			if !yield(id) {
				return
			}
		}
	})
	props := func(id string, v any) error {
		if err := json.Unmarshal(t.Resources[id].Properties, v); err != nil {
			return fmt.Errorf("stackfacts: %s (%s): %w", id, t.Resources[id].Type, err)
		}
		return nil
	}
	tasks := map[string]taskDef{}
	scaling := map[string][2]int{} // service logical id → min, max
	ruled := map[string]bool{}     // Lambda logical id → invoked by a rate rule
	dashboardNames := map[string]bool{}
	for _, id := range ids {
		r := t.Resources[id]
		var err error
		switch r.Type {
		case "AWS::ECS::TaskDefinition":
			var td taskDef
			err = props(id, &td)
			tasks[id] = td
		case "AWS::EC2::NatGateway":
			f.NATGateways++
		case "AWS::ElasticLoadBalancingV2::LoadBalancer":
			var p struct {
				Type, Scheme string
				Subnets      []any
				Attributes   []struct{ Key, Value string } `json:"LoadBalancerAttributes"`
			}
			if err = props(id, &p); err == nil {
				lb := LoadBalancer{ID: id, Type: p.Type, InternetFacing: p.Scheme == "internet-facing", Subnets: len(p.Subnets)}
				if lb.Type == "" {
					lb.Type = "application"
				}
				for _, a := range p.Attributes {
					if a.Key == "access_logs.s3.enabled" && a.Value == "true" {
						lb.AccessLogs = true
					}
				}
				f.LoadBalancers = append(f.LoadBalancers, lb)
			}
		case "AWS::CloudFront::Distribution":
			var p struct {
				DistributionConfig struct {
					PriceClass           string
					Aliases              []any
					DefaultCacheBehavior struct {
						CachePolicyID string `json:"CachePolicyId"`
					}
					Origins []struct{ DomainName json.RawMessage }
				}
			}
			if err = props(id, &p); err == nil {
				c := p.DistributionConfig
				d := Distribution{ID: id, PriceClass: cmp.Or(c.PriceClass, "PriceClass_All"), Aliases: len(c.Aliases),
					CachingDisabled: c.DefaultCacheBehavior.CachePolicyID == CachingDisabledPolicy}
				for _, o := range c.Origins {
					d.Origins = append(d.Origins, getAtts(o.DomainName, "DNSName")...)
				}
				f.Distributions = append(f.Distributions, d)
			}
		case "AWS::KMS::Key":
			f.KMSKeys++
		case "AWS::SecretsManager::Secret":
			f.Secrets++
		case "AWS::Events::EventBus":
			f.EventBuses++
		case "AWS::CloudWatch::Alarm":
			var p struct {
				MetricName string
				Namespace  string
				Threshold  float64
				Metrics    []struct {
					MetricStat any
					Expression string
				}
			}
			if err = props(id, &p); err == nil {
				if p.MetricName == "StalenessMax" && p.Namespace == Namespace {
					f.StaleAfterSeconds = p.Threshold
				}
				f.Alarms++
				if p.MetricName != "" {
					f.AlarmMetrics++
				}
				for _, m := range p.Metrics {
					if m.MetricStat != nil {
						f.AlarmMetrics++
					}
				}
			}
		case "AWS::ApplicationAutoScaling::ScalingPolicy":
			var p struct {
				PolicyType string
			}
			if err = props(id, &p); err == nil && p.PolicyType == "TargetTrackingScaling" {
				f.Alarms += 2
				f.AlarmMetrics += 2
			}
		case "AWS::ApplicationAutoScaling::ScalableTarget":
			var p struct {
				MinCapacity, MaxCapacity int
				ResourceID               json.RawMessage `json:"ResourceId"`
			}
			if err = props(id, &p); err == nil {
				for _, svc := range getAtts(p.ResourceID, "Name") {
					scaling[svc] = [2]int{p.MinCapacity, p.MaxCapacity}
				}
			}
		case "AWS::CloudWatch::Dashboard":
			f.Dashboards++
			var p struct {
				DashboardBody json.RawMessage
			}
			if err = props(id, &p); err == nil {
				for _, n := range dashboardMetricNames(string(p.DashboardBody)) {
					dashboardNames[n] = true
				}
			}
		case "AWS::ECS::Cluster":
			var p struct {
				ClusterSettings []struct{ Name, Value string }
			}
			if err = props(id, &p); err == nil {
				for _, s := range p.ClusterSettings {
					if s.Name == "containerInsights" && s.Value != "disabled" {
						f.ContainerInsights = true
					}
				}
			}
		case "AWS::EC2::FlowLog":
			var p struct{ TrafficType string }
			if err = props(id, &p); err == nil {
				f.FlowLogs = append(f.FlowLogs, p.TrafficType)
			}
		case "AWS::EC2::VPCEndpoint":
			var p struct {
				VpcEndpointType string
				ServiceName     json.RawMessage
			}
			if err = props(id, &p); err == nil && p.VpcEndpointType == "Gateway" {
				name := string(p.ServiceName)
				for _, svc := range []string{"dynamodb", "s3"} {
					if strings.Contains(name, "."+svc) {
						f.GatewayEndpoints = append(f.GatewayEndpoints, svc)
					}
				}
			}
		case "AWS::EFS::FileSystem":
			var p struct {
				ThroughputMode    string
				LifecyclePolicies []map[string]string
			}
			if err = props(id, &p); err == nil {
				fs := FileSystem{ID: id, Elastic: p.ThroughputMode == "elastic"}
				for _, lp := range p.LifecyclePolicies {
					fs.IAAfterDays = max(fs.IAAfterDays, days(lp["TransitionToIA"]))
					fs.ArchiveAfterDays = max(fs.ArchiveAfterDays, days(lp["TransitionToArchive"]))
					if lp["TransitionToPrimaryStorageClass"] == "AFTER_1_ACCESS" {
						fs.BackToStandardOnRead = true
					}
				}
				f.FileSystems = append(f.FileSystems, fs)
			}
		case "AWS::Lambda::Function":
			var p struct {
				MemorySize  int
				Environment struct{ Variables map[string]any }
			}
			if err = props(id, &p); err == nil {
				f.Lambdas = append(f.Lambdas, Lambda{ID: id, MemoryMB: cmpOr(p.MemorySize, 128), Env: literals(p.Environment.Variables)})
			}
		case "AWS::Events::Rule":
			var p struct {
				ScheduleExpression string
				Targets            []struct{ Arn json.RawMessage }
			}
			if err = props(id, &p); err == nil {
				if s, ok := rateSeconds(p.ScheduleExpression); ok {
					f.TickSeconds = s
					for _, tg := range p.Targets {
						for _, fn := range getAtts(tg.Arn, "Arn") {
							ruled[fn] = true
						}
					}
				}
			}
		case "AWS::S3::Bucket":
			f.Buckets++
		}
		if err != nil {
			return Facts{}, err
		}
	}
	for i := range f.Lambdas {
		f.Lambdas[i].OnRule = ruled[f.Lambdas[i].ID]
	}
	f.DashboardMetrics = slices.Sorted(func(yield func(string) bool) {
		for n := range dashboardNames {
			if !yield(n) {
				return
			}
		}
	})
	for _, id := range ids {
		if t.Resources[id].Type != "AWS::ECS::Service" {
			continue
		}
		var p struct {
			DesiredCount             int
			LaunchType               string
			TaskDefinition           map[string]string
			CapacityProviderStrategy []struct {
				CapacityProvider string
				Base, Weight     int
			}
			NetworkConfiguration struct {
				AwsvpcConfiguration struct{ AssignPublicIp string }
			}
			LoadBalancers []any
		}
		if err := props(id, &p); err != nil {
			return Facts{}, err
		}
		td, ok := tasks[p.TaskDefinition["Ref"]]
		if !ok {
			return Facts{}, fmt.Errorf("stackfacts: service %s: no task definition %v", id, p.TaskDefinition)
		}
		s := Service{ID: id, CPU: atoi(td.Cpu), MemoryMiB: atoi(td.Memory), Desired: p.DesiredCount, LaunchType: p.LaunchType,
			PublicIP: p.NetworkConfiguration.AwsvpcConfiguration.AssignPublicIp == "ENABLED", LoadBalanced: len(p.LoadBalancers) > 0,
			MinTasks: p.DesiredCount, MaxTasks: p.DesiredCount}
		if mm, ok := scaling[id]; ok {
			s.MinTasks, s.MaxTasks = mm[0], mm[1]
		}
		for _, c := range p.CapacityProviderStrategy {
			s.Providers = append(s.Providers, Provider{Name: c.CapacityProvider, Base: c.Base, Weight: c.Weight})
		}
		for _, c := range td.ContainerDefinitions {
			if len(c.Command) > 0 {
				s.Roles = append(s.Roles, c.Command[0])
			}
		}
		if len(td.ContainerDefinitions) > 0 {
			c := td.ContainerDefinitions[0]
			s.Command = c.Command
			s.Env = map[string]string{}
			for _, e := range c.Environment {
				if v, ok := e.Value.(string); ok {
					s.Env[e.Name] = v
				}
			}
		}
		f.Services = append(f.Services, s)
	}
	return f, nil
}

type taskDef struct {
	Cpu, Memory          string
	ContainerDefinitions []struct {
		Command     []string
		Environment []struct {
			Name  string
			Value any
		}
	}
}

// ServicesRunning returns the services whose (first container's) command starts with
// role ("worker", "serve"): a git server beside the workers is not a service of its
// own (Serving says whether any task serves).
func (f Facts) ServicesRunning(role string) []Service {
	var out []Service
	for _, s := range f.Services {
		if s.Role() == role {
			out = append(out, s)
		}
	}
	return out
}

// Serving reports whether any service's tasks run the git server.
func (f Facts) Serving() bool {
	return slices.ContainsFunc(f.Services, func(s Service) bool { return s.Runs("serve") })
}

// HasGatewayEndpoint reports whether traffic to service bypasses any NAT gateway.
func (f Facts) HasGatewayEndpoint(service string) bool {
	return slices.Contains(f.GatewayEndpoints, service)
}

// TickLambda is the function a rate rule invokes (the coordinator).
func (f Facts) TickLambda() (Lambda, bool) {
	for _, l := range f.Lambdas {
		if l.OnRule {
			return l, true
		}
	}
	return Lambda{}, false
}

// getAtts finds the logical ids of {"Fn::GetAtt": [id, attr]} anywhere in raw.
func getAtts(raw json.RawMessage, attr string) []string {
	re := regexp.MustCompile(`"Fn::GetAtt":\s*\[\s*"([^"]+)"\s*,\s*"` + regexp.QuoteMeta(attr) + `"`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(string(raw), -1) {
		out = append(out, m[1])
	}
	return out
}

// dashboardMetricNames finds the metrics of Namespace a dashboard body graphs: in
// metric arrays ["MirrorFleet","Name",...] and in SEARCH expressions
// (MetricName="Name"). The body is JSON inside JSON (CloudFormation joins it), its
// quotes escaped once or twice: the backslashes go first.
func dashboardMetricNames(body string) []string {
	body = strings.ReplaceAll(body, `\`, "")
	var out []string
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`\["` + Namespace + `","([A-Za-z0-9]+)"`),
		regexp.MustCompile(`Namespace="?` + Namespace + `"? MetricName="([A-Za-z0-9]+)"`),
		regexp.MustCompile(`\{` + Namespace + `,[^}]*\} MetricName="([A-Za-z0-9]+)"`),
	} {
		for _, m := range re.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

var rateRE = regexp.MustCompile(`^rate\((\d+) (second|minute|hour|day)s?\)$`)

func rateSeconds(expr string) (float64, bool) {
	m := rateRE.FindStringSubmatch(expr)
	if m == nil {
		return 0, false
	}
	n, _ := strconv.Atoi(m[1])
	unit := map[string]float64{"second": 1, "minute": 60, "hour": 3600, "day": 86400}[m[2]]
	return float64(n) * unit, true
}

// days reads AFTER_7_DAYS and its kind; "" is 0.
func days(v string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(v, "AFTER_"), "_DAYS"))
	if strings.HasSuffix(v, "_DAY") { // AFTER_1_DAY
		n, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(v, "AFTER_"), "_DAY"))
	}
	return n
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func literals(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}
