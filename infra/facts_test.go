package main

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/infra/budget"
	"github.com/mirrorfleet/mirrorfleet/infra/stackfacts"
	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
)

// What the cost model reads from the template (stackfacts) is what the stack
// provisions: the bill and the stack cannot drift apart unnoticed.
func TestStackFactsOfTheTemplate(t *testing.T) {
	b, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	f, err := stackfacts.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]stackfacts.Service{}
	for _, s := range f.Services {
		byID[s.ID] = s
	}
	spot, twin := byID[logicalID(stack.Service)], byID[logicalID(stack.Fallback)]
	if spot.Role() != "worker" || spot.CPU != 256 || spot.MemoryMiB != 2048 || spot.MinTasks != 1 || spot.MaxTasks != 3 ||
		!spot.PublicIP || spot.Env[deployenv.Fetchers] != "10" {
		t.Errorf("workers %+v", spot)
	}
	if od, sp := spot.Split(3); od != 0 || sp != 3 {
		t.Errorf("workers on %v on-demand + %v Spot, want all Spot", od, sp)
	}
	if od, sp := twin.Split(1); twin.Role() != "worker" || twin.Desired != 0 || twin.MinTasks != 0 || twin.MaxTasks != 3 || od != 1 || sp != 0 {
		t.Errorf("on-demand twin %+v", twin)
	}
	// The git server runs in the worker tasks, the twin's too (ADR 27): no service of its own.
	for _, w := range []stackfacts.Service{spot, twin} {
		if !w.Runs("serve") || !w.LoadBalanced {
			t.Errorf("worker service %s: roles %v, load balanced %v", w.ID, w.Roles, w.LoadBalanced)
		}
	}
	if len(f.ServicesRunning("worker")) != 2 || len(f.ServicesRunning("serve")) != 0 || !f.Serving() {
		t.Errorf("services %+v", f.Services)
	}
	if f.NATGateways != 0 || len(f.LoadBalancers) != 1 || !f.LoadBalancers[0].InternetFacing || f.LoadBalancers[0].Subnets != 2 ||
		f.LoadBalancers[0].AccessLogs || f.ContainerInsights || !f.HasGatewayEndpoint("dynamodb") || f.Buckets != 0 ||
		!slices.Equal(f.FlowLogs, []string{"REJECT"}) || f.Dashboards != 1 || f.Secrets != 1 {
		t.Errorf("facts %+v", f)
	}
	// 13 alarms in the template evaluating 22 metrics (the fallback's two read the live
	// workers and the polled repos, four each); no target tracking (the git server scales
	// with the workers).
	if f.Alarms != 13 || f.AlarmMetrics != 22 {
		t.Errorf("%d alarms on %d metrics, want 13 on 22", f.Alarms, f.AlarmMetrics)
	}
	// The clones leave through CloudFront, which caches nothing, from edges billed at
	// North America's and Europe's rates, in front of the load balancer.
	if d := f.Distributions; len(d) != 1 || d[0].PriceClass != "PriceClass_100" || !d[0].CachingDisabled || d[0].Aliases != 0 ||
		!slices.Equal(d[0].Origins, []string{f.LoadBalancers[0].ID}) {
		t.Errorf("distributions %+v", d)
	}
	if fs := f.FileSystems; len(fs) != 1 || fs[0].IAAfterDays != 1 || fs[0].ArchiveAfterDays != 90 || fs[0].BackToStandardOnRead || !fs[0].Elastic {
		t.Errorf("file systems %+v", fs)
	}
	// The bill's key and the alarm threshold it checks its fleet against.
	if f.KMSKeys != 1 || f.StaleAfterSeconds != budget.Default().StaleAfter().Seconds() {
		t.Errorf("%d KMS keys, stale-repos alarm at %v s", f.KMSKeys, f.StaleAfterSeconds)
	}
	if l, ok := f.TickLambda(); !ok || l.ID != logicalID(stack.Coordinator) || l.MemoryMB != 512 || f.TickSeconds != 60 {
		t.Errorf("tick Lambda %+v every %v s", l, f.TickSeconds)
	}
	for _, name := range append(append([]string{"Ticks", "WorkersByState", "ReposByState", "StalenessP99", "QueueDepth"},
		servingMetrics...), maintenanceMetrics...) {
		if !slices.Contains(f.DashboardMetrics, name) {
			t.Errorf("dashboard metrics %v lack %s", f.DashboardMetrics, name)
		}
	}
}
