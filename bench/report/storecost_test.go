package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// storeCostFixture is a result whose figures are all distinct, so the test can tell
// which one the Markdown shows.
func storeCostFixture() results.StoreCost {
	u := func(lr, lw, ar, aw, idx float64, calls, writes int) results.StoreCostUnits {
		return results.StoreCostUnits{Calls: calls, WriteCalls: writes, LocalRCU: lr, LocalWCU: lw, AWSRCU: ar, AWSWCU: aw, AWSIndexWCU: idx, Bytes: 1234}
	}
	comp := func(key, name string, usd float64) results.StoreCostComponent {
		return results.StoreCostComponent{Key: key, Name: name, USD: usd, Detail: "qty of " + key}
	}
	bill := func(repos, workers int, k float64, serving bool, goal float64) results.StoreCostBill {
		b := results.StoreCostBill{Repos: repos, Workers: workers, PollsPerDay: 2, WritesPerRepoDay: 2.25, Serving: serving, GoalUSD: goal,
			Stack: results.StoreCostStack{Context: "-c serving=false", WorkerVCPU: 0.25, WorkerGB: 2, WorkerMin: 1, WorkerMax: 10,
				WorkerSpot: true, OnDemandTwin: true, PublicTaskIPs: true, Alarms: 11, AlarmMetrics: 15, CustomMetrics: 28, Dashboards: 1,
				EFSIADays: 7, EFSArchiveDays: 90, DynamoEndpoint: true},
			Components: []results.StoreCostComponent{
				comp("dynamodb", "DynamoDB", 1.71*k), comp("fargate", "Fargate workers", 57.67*k), comp("efs_storage", "EFS storage", 25.84*k*k),
				comp("scheduler", "EventBridge Scheduler", 0.000002),
			},
			DynamoDB: []results.StoreCostComponent{
				comp("ticks", "coordinator ticks", 0.057), comp("heartbeats", "worker heartbeats", 0.394*k), comp("polls", "polls (checkpoint writes)", 1.131*k),
				comp("changes", "polls that found a change", 0.0104*k),
			},
			DynamoDBUSD: 1.71 * k, NaiveDynamoDBUSD: 3.42 * k,
			Unthrottled: results.StoreCostUnthrottled{PollsPerDay: 115.2 / k, PollWritesUSD: 2.27 * k, NaiveUSD: 65.7 * k},
		}
		if serving {
			b.Stack.Context, b.Stack.ServeTasks, b.Stack.ServeVCPU, b.Stack.ServeGB, b.Stack.ServeSpot = "-c serving=true", 1, 0.25, 1, true
			b.Stack.LoadBalancers, b.Stack.LBPublicIPs = 1, 2
			b.Components = append(b.Components, comp("load_balancer", "Application Load Balancer", 16.72))
		}
		for _, c := range b.Components {
			b.TotalUSD += c.USD
		}
		b.Previous = []results.StoreCostComponent{comp("dynamodb", "DynamoDB", 1.5*k), comp("efs_throughput", "EFS Elastic throughput", 1.33*k)}
		b.PreviousTotalUSD, b.PreviousWorkers = 2.83*k, workers-1
		b.EFS = &results.StoreCostEFS{StandardGB: 9.85 * k, IAGB: 73.5 * k, ArchiveGB: 405 * k, WriteGB: 6.57, ToIAGB: 21.1, ToArchiveGB: 12.7,
			Changes: 2980 * k, ScrubsPerMonth: 3350 * k, MetadataReadGB: 28.1 * k, MetadataWriteGB: 1.15, ReadMinimumGB: 22.5, WriteMinimumGB: 1.54,
			Operations: []results.StoreCostOpCount{{Op: "fetch_change", Count: 2920 * k}},
			Reads:      []results.StoreCostEFSRead{{Source: "scrubs", StandardGB: 0.5, IAGB: 57.6, ArchiveGB: 305 * k}}}
		b.Freshness = &results.StoreCostFreshness{Budget: 2, Policy: "bayes", LagMeanH: 1.65, LagP50H: 0.99, LagP99H: 9.04, Freshness: 0.99931}
		b.Staleness = results.StoreCostStaleness{PollsPerDay: 21.6 / k, TailHours: 5.89 * k, AlarmHours: 127.2, ScaleOutHours: 95.4}
		return b
	}
	return results.StoreCost{
		Meta:          results.Meta{Date: "2026-11-22T22:00:00Z", GitCommit: "abc1234", Seconds: 105},
		DynamoDBLocal: "DynamoDB Local 9.9.9",
		Rules:         []string{"Transactional write: 2 WRU per started KB."},
		Measurements: []results.StoreCostMeasurement{
			{Key: "idle_tick_5000", Name: "quiet tick", Repos: 5000, Workers: 10, Count: 3, Total: u(5, 1, 5.5, 1.25, 0, 7, 1), WallMillis: 10.3,
				Ops: []results.StoreCostOp{{Op: "GetElection/GetItem", StoreCostUnits: u(1, 0, 1, 0, 0, 1, 0)}}},
			{Key: "poll_nochange", Name: "poll that finds nothing new", Repos: 50, Workers: 1, Count: 3590, Note: "no store call at all"},
			{Key: "join_tick_5000", Name: "join tick", Repos: 5000, Workers: 11, Count: 1, Moved: 440, Total: u(5727.5, 393, 5729, 4019, 880, 123, 27),
				SchedulerAPICalls: 1.9},
		},
		ItemSizes:   []results.StoreCostItemSize{{Kind: "repo", Count: 1000, MeanSize: 388.65, MaxSize: 431}},
		Assumptions: []results.StoreCostAssumption{{Key: "mirror_mb", Value: 50, Unit: "MB per repo", Note: "stated: 50 MB median"}},
		Prices: []results.StoreCostPrice{
			{Key: "ddb_wru", Service: "DynamoDB", Item: "write request unit", USD: 0.625e-6, Unit: "WRU", Source: "https://example.com/ddb", Taken: "2026-11-22", Confirmed: true},
			{Key: "efs_ia", Service: "EFS", Item: "IA storage", USD: 0.016, Unit: "GB-month", Source: "https://example.com/efs", Taken: "2026-11-22", Note: "sources disagree"},
		},
		Bills: []results.StoreCostBill{bill(10_000, 2, 1, false, 90), bill(10_000, 2, 1, true, 100), bill(1_000_000, 8, 10, false, 1500)},
		Sensitivity: results.StoreCostSensitivity{Repos: 100_000, PollsPerDay: []float64{2, 24, 288},
			OursUSD: []float64{11.41, 22.89, 22.91}, NaiveUSD: []float64{11.41, 136.88, 1642.5}},
		Notes:   []string{"The bill uses the AWS-rule units."},
		Sources: []string{"EFS read figures: bench/results/maintenance.json (test)"},
		EFSOps: []results.StoreCostEFSOp{
			{Key: "poll_nochange", Name: "no-change poll"},
			{Key: "fetch_change", Name: "fetch with changes", MetaReads: 404, MetaWrites: 19, DataReads: 61, DataReadBytes: 176509, DataWrites: 3,
				DataWriteBytes: 13067, MeteredReadBytes: 3568 << 10, MeteredWriteBytes: 172 << 10, Calls: []results.StoreCostCallCount{{Call: "openat", Count: 108}}},
		},
		EFSOpsMirrorBytes: 2181234,
		Alternative: []results.StoreCostVM{{Repos: 10_000, Instance: "c7g.large", VolumeType: "st1", Volumes: 1, ProvisionedGiB: 575, TotalUSD: 84.05,
			FleetUSD: 32.95, Components: []results.StoreCostComponent{comp("instance", "EC2 instance", 52.93), comp("volumes", "EBS", 25.88),
				comp("root", "root", 1.6), comp("ipv4", "IPv4", 3.65)}}},
		Crossover: &results.StoreCostCrossover{FleetCheaperFrom: 1000, Points: []results.StoreCostCrossoverPoint{
			{Repos: 1000, FleetUSD: 25, VMUSD: 60.05, VM: "c7g.large + sc1"}, {Repos: 1_000_000, FleetUSD: 932.9, VMUSD: 1105.24, VM: "m7g.2xlarge + sc1"}}},
		Tiers: []results.StoreCostTier{
			{Repos: 1_000_000, Name: "EFS as deployed", Description: "IA after 1 day", Deployed: true, StorageUSD: 1110, TotalUSD: 1377, GoalUSD: 1500},
			{Repos: 1_000_000, Name: "cold packs on S3 Glacier Instant Retrieval", Description: "modelled", StorageUSD: 1219.95, TotalUSD: 1587.62, GoalUSD: 1500},
		},
	}
}

func TestStoreCostSectionShowsTheJSON(t *testing.T) {
	v := storeCostFixture()
	r := &Report{Results: t.TempDir(), Out: t.TempDir()}
	if err := results.Write(r.Results, "storecost", v); err != nil {
		t.Fatal(err)
	}
	md, meta, err := storeCostSection(r)
	if err != nil {
		t.Fatal(err)
	}
	if meta != v.Meta {
		t.Errorf("meta %+v, want %+v", meta, v.Meta)
	}
	for _, want := range []string{
		"## 4. Store cost",
		"DynamoDB Local 9.9.9",
		// units: local and AWS side by side
		"| quiet tick | 5,000 | 10 | 3 | — | 5 / 1 | **5.5 / 1.25** | 0 | 7 (1) |",
		"| 5727.5 / 393 | **5729 / 4019** | 880 | 123 (27) | 1.9 |",
		"| join tick | 5,000 | 11 | 1 | 440 |",
		"3,590 no-change polls observed made no store call at all",
		"`GetElection/GetItem`",
		"Transactional write: 2 WRU per started KB.",
		"| repo | 1,000 | 388.65 | 431 |",
		// bill: components per size, total, DynamoDB breakdown
		"| component | 10,000 repos | 10,000 repos, serving | 1,000,000 repos |",
		"| EFS storage | $25.84 | $25.84 | $2,584 |",
		"| Fargate workers | $57.67 | $57.67 | $576.70 |",
		"| Application Load Balancer | — | $16.72 | — |",
		"| workers (Fargate tasks) | 2 | 2 | 8 |",
		"| **total** | **$85.22** | **$101.94** | **$3,178** |",
		"| goal | ≤ $90.00: met | ≤ $100.00: **missed** | ≤ $1,500: **missed** |",
		// the stack each bill read
		"| worker task | 0.25 vCPU / 2 GB, Spot, 1–10 | 0.25 vCPU / 2 GB, Spot, 1–10 | 0.25 vCPU / 2 GB, Spot, 1–10 |",
		"| git server task | — | 0.25 vCPU / 1 GB, Spot, 1 | — |",
		"| load balancers (public IPs) | 0 (0) | 1 (2) | 0 (0) |",
		"| CDK context | `-c serving=false` | `-c serving=true` | `-c serving=false` |",
		// DynamoDB does not depend on serving: its table has the plain bills only
		"| DynamoDB part | 10,000 repos | 1,000,000 repos |",
		"| polls (checkpoint writes) | $1.13 | $11.31 |",
		"| **DynamoDB total** | **$1.71** | **$17.10** |",
		"1,000,000 repos: **$3,178/month** (goal ≤ $1,500: **missed**) (2 polls per repo a day, 8 workers; largest: EFS storage $2,584, 81%; DynamoDB $17.10)",
		// goals with the budget and its freshness, what EFS meters, the VM beside the stack
		"| ≤ $90.00 at 10,000 repos | $85.22 | met | 2 | 1.65 | 0.99 | 9.04 | 0.9993 |",
		"| ≤ $1,500 at 1,000,000 repos | $3,178 | **missed** | 2 |",
		"| cheaper than one VM from 10,000 repos up | cheaper from 1,000 repos | met |",
		"| fetch with changes (`fetch_change`) | 404 / 19 | 61 (176,509) | 3 (13,067) | 0 | 3,568 KiB | 172 KiB | openat 108 |",
		"on a mirror of 2,181,234 bytes of pack",
		"| metadata operations metered: read / write | 28.1 / 1.15 | 28.1 / 1.15 | 281 / 1.15 |",
		"| `fetch_change` a month | 2,920 | 2,920 | 29,200 |",
		"| 10,000 | c7g.large + st1 | 1 × 575 GiB | $52.93 | $25.88 | $5.25 | **$84.05** | $32.95 | the stack |",
		"| 1,000,000 | $932.90 | $1,105 | m7g.2xlarge + sc1 | the stack |",
		"the stack is cheaper **from 1,000 repos up**",
		"(plots/storecost-vm.svg)",
		"10,000 repos, serving: **$101.94/month** (goal ≤ $100.00: **missed**)",
		"10,000 repos: **$85.22/month** (goal ≤ $90.00: met)",
		"qty of fargate",
		// baseline
		"| 10,000 repos, as billed above | 2 | $1.71 | $3.42 | 2.0× |",
		"| 10,000 repos, workers unthrottled (poll writes only) | 115.2 | $2.27 | $65.70 | 28.9× |",
		"| naive | $11.41 | $136.88 | $1,643 |",
		// assumptions and prices
		"| `mirror_mb` | 50 | MB per repo | stated: 50 MB median |",
		"| DynamoDB | write request unit | $0.625 per million | WRU | <https://example.com/ddb> | confirmed |",
		"| EFS | IA storage | $0.016 | GB-month | <https://example.com/efs> | *unconfirmed*: sources disagree |",
		"at the billed 2 polls a day, DynamoDB costs 50% of what the naive design costs at 10,000 repos ($1.71 against $3.42); " +
			"with the workers unthrottled (115.2 polls a day) the poll writes cost $2.27 against the naive $65.70 (3%)",
		"taken 2026-11-22",
		"*Not drawn (under $0.01 at every size):* EventBridge Scheduler.",
		"The bill uses the AWS-rule units.",
		"![Monthly AWS bill by component for each fleet size](plots/storecost-bill.svg)",
		// the previous model beside the honest one
		"| component | 10,000 repos: previous | honest | 10,000 repos, serving: previous | honest | 1,000,000 repos: previous | honest |",
		"| workers | 1 | 2 | 1 | 2 | 7 | 8 |",
		"| EFS Elastic throughput | $1.33 | — | $1.33 | — | $13.30 | — |",
		"| EFS storage | — | $25.84 | — | $25.84 | — | $2,584 |",
		"| **total** | **$2.83** | **$85.22** | **$2.83** | **$101.94** | **$28.30** | **$3,178** |",
		"EFS read figures: bench/results/maintenance.json (test)",
		// EFS month, staleness, tiers
		"| stored: Standard / IA / Archive | 9.85 / 73.5 / 405 | 9.85 / 73.5 / 405 | 98.5 / 735 / 4050 |",
		"| read by scrubs: Standard / IA / Archive | 0.5 / 57.6 / 305 | 0.5 / 57.6 / 305 | 0.5 / 57.6 / 3050 |",
		"| 10,000 repos | 2 | 21.6 | 5.89 | 95.4 | 127.2 | quiet |",
		"| 1,000,000 repos | 8 | 2.16 | 58.9 | 95.4 | 127.2 | quiet |",
		"| 1,000,000 | **EFS as deployed** (deployed) | $1,110 | $1,377 | ≤ $1,500: met | IA after 1 day |",
		"| 1,000,000 | cold packs on S3 Glacier Instant Retrieval | $1,220 | $1,588 | ≤ $1,500: **missed** | modelled |",
		"(plots/storecost-baseline.svg)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	for _, f := range []string{"storecost-bill.svg", "storecost-baseline.svg", "storecost-vm.svg"} {
		b, err := os.ReadFile(filepath.Join(r.Out, "plots", f))
		if err != nil || !strings.Contains(string(b), "<svg") {
			t.Errorf("chart %s: %v", f, err)
		}
	}
	bill, _ := os.ReadFile(filepath.Join(r.Out, "plots", "storecost-bill.svg"))
	for _, s := range []string{"10,000 repos", "1,000,000 repos", "Fargate workers"} {
		if !strings.Contains(string(bill), s) {
			t.Errorf("bill chart lacks %q", s)
		}
	}
}

func TestStoreCostSectionNeedsItsJSON(t *testing.T) {
	r := &Report{Results: t.TempDir(), Out: t.TempDir()}
	if _, _, err := storeCostSection(r); err == nil {
		t.Error("no error without storecost.json")
	}
	if err := results.Write(r.Results, "storecost", results.StoreCost{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := storeCostSection(r); err == nil {
		t.Error("no error for a result without measurements")
	}
}

func TestStoreCostFormats(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{scUSD(0), "$0"}, {scUSD(0.0041), "$0.0041"}, {scUSD(12.345), "$12.35"}, {scUSD(3201.4), "$3,201"},
		{scNum(1168.5), "1168.5"}, {scNum(0.333), "0.33"}, {scNum(0.008667), "0.0087"}, {scNum(123456.7), "123,457"},
		{fmtInt(-1234567), "-1,234,567"}, {scPrice(0.0000133334), "$13.3334 per million"}, {scPrice(0.045), "$0.045"},
		{scPrice(0.2e-6), "$0.20 per million"}, {scPrice(3), "$3.00"}, {scPrice(0.3), "$0.30"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// A git server in the worker tasks (ADR 27) has no task of its own: the stack table says
// where it runs.
func TestStoreCostStackGitServerInWorkerTasks(t *testing.T) {
	b := storeCostFixture().Bills[1]
	b.Stack.ServeTasks, b.Stack.ServeVCPU, b.Stack.ServeGB, b.Stack.ServeInWorkers = 0, 0, 0, true
	for _, r := range scStackTable([]results.StoreCostBill{b}).Rows {
		if r[0] == "git server task" {
			if r[1] != "a container of each worker task" {
				t.Errorf("git server row %q", r)
			}
			return
		}
	}
	t.Error("no git server row")
}
