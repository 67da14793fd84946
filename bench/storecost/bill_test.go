package main

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/infra/budget"
	"github.com/mirrorfleet/mirrorfleet/infra/stackfacts"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// testPrices are round numbers so the bill can be checked by hand.
func testPrices(t *testing.T) []results.StoreCostPrice {
	t.Helper()
	sheet, err := loadPrices()
	if err != nil {
		t.Fatal(err)
	}
	var ps []results.StoreCostPrice
	for _, p := range sheet {
		p.USD = 0
		switch p.Key {
		case "ddb_wru":
			p.USD = 1e-6
		case "ddb_rru":
			p.USD = 0.5e-6
		case "fargate_vcpu_arm":
			p.USD = 0.04
		case "fargate_gb_arm":
			p.USD = 0.005
		case "nat_hour":
			p.USD = 0.01
		}
		ps = append(ps, p)
	}
	return ps
}

// setPrice sets one price of p.
func setPrice(p []results.StoreCostPrice, key string, usd float64) {
	for i := range p {
		if p[i].Key == key {
			p[i].USD = usd
		}
	}
}

func testModel() model {
	return model{PollsPerDay: 2, CheckpointHours: 6, MinIntervalMinutes: 5, HeartbeatSeconds: 10, TickSeconds: 60,
		GraceMinutes: 10, Fetchers: 10, NoChangePollSeconds: 1.5, ChangePollSeconds: 6, Utilisation: 0.5, MinWorkers: 2,
		MirrorMB: 50, ChangeKB: 500, HorizonDays: 1095}
}

// testStack is the old default stack: two on-demand 1 vCPU / 2 GB workers in private
// subnets behind a NAT gateway, nothing else billed.
func testStack() stackInputs {
	return stackInputs{Workers: stackfacts.Service{ID: "W", CPU: 1024, MemoryMiB: 2048, Desired: 2, MinTasks: 2, MaxTasks: 8},
		Fetchers: 10, TickSeconds: 60, LambdaMB: 512, NATGateways: 1, ScrubDays: 90}
}

// testInputs: a 50 MiB mirror whose operations read round amounts, repos that never
// change, the default budget.
func testInputs() billInputs {
	return billInputs{
		Reads: mirrorReads{Source: "test", PackBytes: 49 << 20, IndexBytes: 1 << 20, SmallBytes: 0, PollBytes: 4096,
			MaintainUnchangedBytes: 4096, FetchOldPackBytes: 1 << 20, FetchIndexBytes: 1 << 19, MaintainChangedIndexBytes: 1 << 20,
			MIDXBytes: 1 << 19, PackIdxBytes: 1 << 19, ScrubPackFactor: 2, ClonePackFactor: 1},
		Pop:    population{DormantShare: 1, Sigma: 1},
		Budget: budget.Default(),
	}
}

func TestPollWrites(t *testing.T) {
	md := testModel()
	for _, c := range []struct {
		polls, want float64
	}{
		{1, 1}, {2, 2}, {4, 4}, // every poll is at least 6 h after the last write
		{6, 3}, {8, 4}, // every 2nd poll
		{24, 4}, {288, 4}, // the checkpoint caps writes at 4 a day
	} {
		ch, ck := md.pollWrites(c.polls)
		if ch != 0 || !near(ck, c.want) {
			t.Errorf("%g polls/day: %g changes + %g checkpoints, want 0 + %g", c.polls, ch, ck, c.want)
		}
	}
	md.ChangingShare, md.ChangesPerChangingRepo = 0.5, 73 // 36.5 a month = 1.2 a day
	ch, ck := md.pollWrites(24)
	// Hourly polls: every 6th no-change poll writes.
	if !near(ch, 1.2) || !near(ck, (24-1.2)/6) {
		t.Errorf("with changes: %g + %g, want 1.2 + %g", ch, ck, (24-1.2)/6)
	}
}

func TestWorkers(t *testing.T) {
	md := testModel()
	// 100k × 2 × 1.5 s = 300,000 s a day of 432,000 per worker at 50%: the minimum, 2.
	if got := md.workers(100_000, 2); got != 2 {
		t.Errorf("100k repos: %g workers, want 2", got)
	}
	// 1M: 3,000,000 / 432,000 = 6.9 → 7.
	if got := md.workers(1_000_000, 2); got != 7 {
		t.Errorf("1M repos: %g workers, want 7", got)
	}
	// Unthrottled: 2 workers × 10 × 86400 / 1.5 s over 10k repos = 115.2 a day; capped at 288.
	if got := md.unthrottledPollsPerDay(10_000, 2); !near(got, 115.2) {
		t.Errorf("unthrottled 10k: %g polls/day, want 115.2", got)
	}
	if got := md.unthrottledPollsPerDay(100, 2); got != 288 {
		t.Errorf("unthrottled 100: %g polls/day, want the 288 cap", got)
	}
}

// A bill small enough to check by hand: 1000 repos, 2 workers, no changes, no deaths,
// as the previous model made it (polls at the budget's rate).
func TestPreviousBillByHand(t *testing.T) {
	md, p := testModel(), testPrices(t)
	mu := measured{Tick: units{RRU: 5, WRU: 1}, Heartbeat: units{RRU: 1, WRU: 1}, Checkpoint: units{WRU: 3}, Change: units{WRU: 3}}
	b := md.billOf(1000, mu, p, testStack(), testInputs(), true)
	ticks := 730.0 * 60           // 43,800
	heartbeats := 2 * 730.0 * 360 // 525,600
	polls := 1000 * 2 * 730.0 / 24
	want := map[string]float64{
		"ticks":      ticks * (5*0.5e-6 + 1e-6),    // 0.1533
		"heartbeats": heartbeats * (0.5e-6 + 1e-6), // 0.7884
		"polls":      polls * 3e-6,                 // 0.1825
		"changes":    0,
		"membership": 0,
		"storage":    0,
	}
	sum := 0.0
	for _, c := range b.DynamoDB {
		w, ok := want[c.Key]
		if !ok || !near(c.USD, w) {
			t.Errorf("DynamoDB %s = %g, want %g", c.Key, c.USD, w)
		}
		sum += w
	}
	if !near(b.DynamoDBUSD, sum) || !near(sum, 1.1242) {
		t.Errorf("DynamoDB total %g, want %g (≈ 1.1242)", b.DynamoDBUSD, sum)
	}
	// At 2 polls a day every poll writes anyway: the naive design costs the same.
	if !near(b.NaiveDynamoDBUSD, b.DynamoDBUSD) {
		t.Errorf("naive %g, want %g", b.NaiveDynamoDBUSD, b.DynamoDBUSD)
	}
	comp := map[string]float64{}
	total := 0.0
	for _, c := range b.Components {
		comp[c.Key] = c.USD
		total += c.USD
	}
	if !near(comp["fargate"], 2*730*(0.04+2*0.005)) { // 73
		t.Errorf("Fargate %g, want 73", comp["fargate"])
	}
	if !near(comp["nat"], 730*0.01) {
		t.Errorf("NAT %g, want 7.3 (hours only: data priced at 0 here)", comp["nat"])
	}
	if !near(b.TotalUSD, total) || !near(b.TotalUSD, sum+73+7.3) {
		t.Errorf("total %g, want %g", b.TotalUSD, sum+73+7.3)
	}
	if b.Workers != 2 || b.WritesPerRepoDay != 2 {
		t.Errorf("workers %d, writes/repo/day %g; want 2, 2", b.Workers, b.WritesPerRepoDay)
	}
	// Unthrottled, 1000 repos on 2 workers poll at the 288 cap: 4 writes a day against 288.
	if b.Unthrottled.PollsPerDay != 288 || !near(b.Unthrottled.PollWritesUSD, 1000*730.0/24*4*3e-6) ||
		!near(b.Unthrottled.NaiveUSD, 1000*730.0/24*288*3e-6) {
		t.Errorf("unthrottled %+v", b.Unthrottled)
	}
}

func TestSensitivityNaiveGrowsOursCaps(t *testing.T) {
	md, p := testModel(), testPrices(t)
	mu := measured{Checkpoint: units{WRU: 3}, Change: units{WRU: 3}}
	s := md.sensitivity(1000, []float64{2, 24, 288}, mu, p)
	if !near(s.NaiveUSD[2], s.NaiveUSD[0]*144) || !near(s.OursUSD[1], s.OursUSD[2]) || !near(s.OursUSD[2], s.OursUSD[0]*2) {
		t.Errorf("sensitivity %+v", s)
	}
}

func TestFits(t *testing.T) {
	a := point{moved: 100, repos: 1000, u: units{RRU: 1200, WRU: 950}}
	b := point{moved: 500, repos: 5000, u: units{RRU: 5600, WRU: 4550}}
	j := fitJoin(a, b)
	// reads: 1.1 per fleet repo + 100; writes: 9 per moved + 50.
	if !near(j.PerFleetRepo.RRU, 1.1) || !near(j.Fixed.RRU, 100) || !near(j.PerMoved.WRU, 9) || !near(j.Fixed.WRU, 50) || j.PerMoved.RRU != 0 {
		t.Errorf("join fit %+v", j)
	}
	if got := j.at(200, 2000); !near(got.RRU, 100+2200) || !near(got.WRU, 50+1800) {
		t.Errorf("join at 200 moved of 2000: %+v", got)
	}
	d := fitDeath(a, b)
	if !near(d.PerMoved.RRU, 11) || !near(d.PerMoved.WRU, 9) || d.PerFleetRepo != (units{}) {
		t.Errorf("death fit %+v", d)
	}
	// One size only: through the origin.
	if o := fitDeath(a, a); !near(o.PerMoved.WRU, 9.5) || o.Fixed != (units{}) {
		t.Errorf("single-point fit %+v", o)
	}
}

func TestQty(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {0.00909, "0.00909"}, {37.8, "37.8"}, {43800, "43,800"}, {525600, "526,000"}, {-1234, "-1,230"},
		{1.81e6, "1.81 million"}, {6.03e7, "60.3 million"}, {2.5e9, "2.5 billion"},
	} {
		if got := qty(c.v); got != c.want {
			t.Errorf("qty(%g) = %q, want %q", c.v, got, c.want)
		}
	}
}

// The default stack's shape: Spot workers and git server with public IPs, a load
// balancer over two subnets, no NAT gateway. Round prices, checked by hand.
func TestBillOfASpotStackWithServing(t *testing.T) {
	md, p := testModel(), testPrices(t)
	md.ServeLCU = 0.05
	set := func(key string, usd float64) { setPrice(p, key, usd) }
	set("fargate_spot_vcpu_arm", 0.01)
	set("fargate_spot_gb_arm", 0.001)
	set("ipv4_hour", 0.005)
	set("alb_hour", 0.02)
	set("alb_lcu", 0.01)
	set("secret", 0.5)
	spot := []stackfacts.Provider{{Name: "FARGATE_SPOT", Weight: 1}}
	st := stackInputs{
		Workers:  stackfacts.Service{ID: "W", CPU: 256, MemoryMiB: 2048, Desired: 1, MinTasks: 1, MaxTasks: 10, Providers: spot, PublicIP: true},
		Fallback: &stackfacts.Service{ID: "F", CPU: 256, MemoryMiB: 2048, MaxTasks: 1, Providers: []stackfacts.Provider{{Name: "FARGATE", Weight: 1}}},
		Serve:    &stackfacts.Service{ID: "S", CPU: 256, MemoryMiB: 1024, Desired: 1, MinTasks: 1, MaxTasks: 4, Providers: spot, PublicIP: true},
		Serving:  true,
		Fetchers: 10, TickSeconds: 60, LambdaMB: 512, ScrubDays: 90,
		LoadBalancers: []stackfacts.LoadBalancer{{ID: "LB", Type: "application", InternetFacing: true, Subnets: 2}},
		Secrets:       1,
	}
	md.ClonesPerDay, md.MirrorMB = 20, 50
	served := 20 * 730.0 / 24 * 50 / 1024 // GB a month
	b := md.bill(1000, measured{}, p, st, testInputs())
	comp := map[string]float64{}
	for _, c := range b.Components {
		comp[c.Key] = c.USD
	}
	for key, want := range map[string]float64{
		"fargate":       730 * (0.25*0.01 + 2*0.001), // 1 Spot worker: 3.285
		"fargate_serve": 730 * (0.25*0.01 + 1*0.001), // 2.555
		"ipv4":          (1 + 1 + 2) * 730 * 0.005,   // worker, server, two load balancer nodes: 14.6
		"load_balancer": 730*0.02 + served*0.01,      // hours, and an LCU-hour per GB of the 20 clones a day
		"secrets":       0.5,                         // the webhooks' secret
	} {
		if !near(comp[key], want) {
			t.Errorf("%s = %g, want %g", key, comp[key], want)
		}
	}
	if _, ok := comp["nat"]; ok {
		t.Error("a NAT line without a NAT gateway")
	}
	if b.Workers != 1 || !b.Serving || !b.Stack.WorkerSpot || !b.Stack.OnDemandTwin || b.Stack.LBPublicIPs != 2 {
		t.Errorf("bill %+v", b)
	}
	// The polls of a million repos need more workers than maxWorkers allows: capped, and said.
	st.Workers.MaxTasks = 3
	if b := md.bill(1_000_000, measured{}, p, st, testInputs()); b.Workers != 3 || !strings.Contains(b.Components[3].Detail, "past maxWorkers") {
		t.Errorf("capped bill: %d workers, %q", b.Workers, b.Components[3].Detail)
	}

	// The git server in the worker tasks (ADR 27): no task, no address of its own; the
	// same clones, load balancer and egress.
	st.Workers.MaxTasks, st.Serve = 10, nil
	beside := md.bill(1000, measured{}, p, st, testInputs())
	comp2 := map[string]float64{}
	for _, c := range beside.Components {
		comp2[c.Key] = c.USD
	}
	if _, ok := comp2["fargate_serve"]; ok || !near(comp2["ipv4"], 3*730*0.005) || !near(comp2["load_balancer"], comp["load_balancer"]) ||
		!near(comp2["egress"], comp["egress"]) || !beside.Serving || !beside.Stack.ServeInWorkers {
		t.Errorf("git server beside the workers: %v (separate: %v)", comp2, comp)
	}

	// Clones through CloudFront (the stack's default): data out and HTTPS requests at
	// its edges, the origin fetches from the load balancer at their price (none from an
	// AWS origin), no egress of the load balancer's own; the load balancer still bills
	// the bytes it processes.
	set("cloudfront_gb", 0.1)
	set("cloudfront_https_request", 2e-6)
	set("cloudfront_origin_fetch", 0.01)
	st.Distributions = 1
	md.RequestsPerClone = 3
	cdn := md.bill(1000, measured{}, p, st, testInputs())
	comp3 := map[string]float64{}
	for _, c := range cdn.Components {
		comp3[c.Key] = c.USD
	}
	reqs := 20 * 730.0 / 24 * 3
	if _, ok := comp3["egress"]; ok || !near(comp3["cloudfront"], served*(0.1+0.01)+reqs*2e-6) || !near(comp3["load_balancer"], comp["load_balancer"]) {
		t.Errorf("clones through CloudFront: %v", comp3)
	}
}

// CloudWatch bills a metric for the hours it has data: one written on the fleet's
// schedule every hour, one written only with events for the hours they fill.
func TestMetricMonths(t *testing.T) {
	ev := metricEvents{Deaths: 1, Changes: 3000, Clones: 608, CloneMisses: 304, Rare: 10}
	ms := []customMetric{{metrics.Ticks, 1}, {metrics.WorkersByState, 5}, {metrics.ReposMoved, 1}, {metrics.MirrorsRecloned, 1},
		{metrics.ServeRequests, 3}, {metrics.EventsPublished, 1}}
	months, eventOnly := metricMonths(ms, ev)
	h := func(n float64) float64 { return hoursPerMonth * (1 - math.Exp(-n/hoursPerMonth)) / hoursPerMonth }
	want := 1 + 5 + h(2) + h(10) + h(608) + 2*h(10) + h(3000)
	if !near(months, want) || eventOnly != 6 {
		t.Errorf("%v metric-months (%v series event-only), want %v (6)", months, eventOnly, want)
	}
	// A few events fill about as many hours; more events than hours fill the month at most.
	if e := eventHours(2); e > 2 || e < 1.99 {
		t.Errorf("2 events fill %v hours", e)
	}
	if e := eventHours(1e6); e > hoursPerMonth || e < hoursPerMonth-1e-6 {
		t.Errorf("a million events fill %v hours", e)
	}
	if m, _ := metricMonths([]customMetric{{metrics.ReposOffOwner, 1}}, metricEvents{}); m != 0 {
		t.Errorf("no event, %v metric-months", m)
	}

	// The bill treats a metric as event-only exactly when shared/metrics writes it only
	// with events: a Sparse counter, or a histogram whose samples are events. A metric
	// written every flush billed by its events would under-bill; a Sparse counter billed
	// every hour is a model that lags the code.
	for _, d := range metrics.Defs() {
		_, byEvents := eventsOf(d.Name, 1, ev)
		switch {
		case d.Sparse && !byEvents:
			t.Errorf("%s is written only with events, the bill bills it every hour", d.Name)
		case byEvents && !d.Sparse && d.Kind != metrics.Histogram:
			t.Errorf("%s is written every interval, the bill bills it by events", d.Name)
		}
	}
}

// EFS by storage class: small files and recent changes in Standard, the rest in IA
// and, past the Archive transition, Archive; no lifecycle keeps everything Standard.
func TestEFSClasses(t *testing.T) {
	md := testModel()
	md.MirrorMB, md.StandardMBPerRepo, md.ArchiveShare, md.ChangeKB, md.ChangingShare = 50, 0.5, 0.6, 500, 0.13
	p := testPrices(t)
	for i := range p {
		switch p[i].Key {
		case "efs_standard":
			p[i].USD = 0.3
		case "efs_ia":
			p[i].USD = 0.016
		case "efs_archive":
			p[i].USD = 0.008
		}
	}
	total := 10_000 * 50 / 1024.0
	recent := 5200 * 500 / 1048576.0 * 7 / (730 / 24.0)
	std := 10_000*0.5/1024 + recent
	cold := total - std
	got := md.efs(10_000, 5200, stackfacts.FileSystem{IAAfterDays: 7, ArchiveAfterDays: 90}, p)
	if want := std*0.3 + 0.4*cold*0.016 + 0.6*cold*0.008; !near(got.usd, want) {
		t.Errorf("IA + Archive: %g, want %g (%s)", got.usd, want, got.detail)
	}
	if got := md.efs(10_000, 5200, stackfacts.FileSystem{}, p); !near(got.usd, total*0.3) {
		t.Errorf("no lifecycle: %g, want %g", got.usd, total*0.3)
	}
	back := md.efs(10_000, 5200, stackfacts.FileSystem{IAAfterDays: 30, BackToStandardOnRead: true}, p)
	if back.usd <= md.efs(10_000, 5200, stackfacts.FileSystem{IAAfterDays: 30}, p).usd {
		t.Error("moving files back to Standard on a read costs nothing")
	}
}

// Custom metrics are counted from what the dashboard graphs, and a metric the code
// defines but the dashboard leaves out fails the bill rather than going uncounted.
func TestStackInputsCountTheDashboard(t *testing.T) {
	var names []string
	for _, d := range metrics.Defs() {
		names = append(names, d.Name)
	}
	f := stackfacts.Facts{
		Services: []stackfacts.Service{{ID: "W", Desired: 1, MinTasks: 1, MaxTasks: 2, Command: []string{"worker"},
			Env: map[string]string{"MIRRORFLEET_FETCHERS": "10"}}},
		Lambdas:          []stackfacts.Lambda{{ID: "C", MemoryMB: 512, OnRule: true}},
		FileSystems:      []stackfacts.FileSystem{{ID: "M"}},
		DashboardMetrics: names,
	}
	st, err := stackInputsFrom(f, "test", 3)
	if err != nil {
		t.Fatal(err)
	}
	// Every name once, the two State families once per state, ServeRequests per class.
	want := float64(len(names)) + float64(5-1) + float64(7-1) + float64(3-1)
	if st.CustomMetrics != want {
		t.Errorf("%v custom metrics, want %v", st.CustomMetrics, want)
	}
	f.DashboardMetrics = f.DashboardMetrics[1:]
	if _, err := stackInputsFrom(f, "test", 3); err == nil || !strings.Contains(err.Error(), names[0]) {
		t.Errorf("a dashboard without %s: %v", names[0], err)
	}

	// Without a git server the dashboard need not graph what only the server emits; with
	// one it must.
	f.DashboardMetrics = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(servedMetrics, n) })
	if _, err := stackInputsFrom(f, "test", 3); err != nil {
		t.Errorf("no git server, no serving metrics: %v", err)
	}
	served := f
	served.Services = append(slices.Clone(f.Services), stackfacts.Service{ID: "S", Desired: 1, MinTasks: 1, MaxTasks: 1, Command: []string{"serve"}})
	if _, err := stackInputsFrom(served, "test", 3); err == nil || !strings.Contains(err.Error(), metrics.ServeBytes) {
		t.Errorf("a git server whose metrics the dashboard leaves out: %v", err)
	}
	// The same for a git server in the worker tasks.
	f.Services[0].Roles = []string{"worker", "serve"}
	if st, err := stackInputsFrom(f, "test", 3); err == nil || !strings.Contains(err.Error(), metrics.ServeBytes) || !st.Serving || st.Serve != nil {
		t.Errorf("a git server beside the workers whose metrics the dashboard leaves out: %v (serving %v)", err, st.Serving)
	}
}
