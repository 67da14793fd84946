package main

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/infra/budget"
	"github.com/mirrorfleet/mirrorfleet/infra/stackfacts"
	"github.com/mirrorfleet/mirrorfleet/shared/secrets"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// hoursPerMonth is AWS's billing month.
const hoursPerMonth = 730.0

// model holds every input of the bill that is neither a measurement, nor a price, nor
// taken from the synthesized stack (stackInputs): stated assumptions and the code's
// defaults. MinWorkers, Fetchers and TickSeconds are the stack's (with).
type model struct {
	PollsPerDay            float64 // per repo: the sizing target
	ChangingShare          float64 // repos that change at least once in a month
	ChangesPerChangingRepo float64 // polls a month that find a change, per changing repo
	CheckpointHours        float64 // a no-change poll writes once the record is this old
	MinIntervalMinutes     float64 // a repo is never polled sooner
	HeartbeatSeconds       float64
	TickSeconds            float64 // the coordinator's tick period (the stack's rule)
	GraceMinutes           float64 // silence before a worker's repos move
	Fetchers               float64 // concurrent fetches per worker (the stack's)
	NoChangePollSeconds    float64 // wall time of a poll that finds nothing
	ChangePollSeconds      float64 // wall time of a fetch that brings a change
	Utilisation            float64 // share of fetcher time a sized fleet plans to use
	MinWorkers             float64 // the stack's Spot worker minimum
	LambdaSeconds          float64 // billed duration of one coordinator invocation on AWS
	DeathsPerWorkerMonth   float64 // unplanned task losses, each followed by a replacement join
	MirrorMB               float64 // mean mirror size on EFS
	StandardMBPerRepo      float64 // what stays in EFS Standard: files under 128 KiB, maintenance's rewrites
	ArchiveShare           float64 // of the bytes past the IA transition, the share unread for the Archive transition
	EFSReadKBPerPoll       float64 // EFS bytes a no-change poll reads (refs, config, index lookups)
	ChangeKB               float64 // pack bytes a change brings: received from the upstream and written to EFS
	PollNATKB              float64 // bytes a no-change poll exchanges with the upstream (TLS, ref advertisement)
	APIOverheadBytes       float64 // per DynamoDB call beyond the JSON bodies (headers, TLS records)
	ServeLCU               float64 // load balancer capacity units the git server's traffic uses, on average
	ServeStatusClasses     float64 // values of ServeRequests' status class dimension seen in a month
	// RareEventsPerMonth is how often each rare event an event-only metric counts
	// happens (a mirror re-cloned, a request refused by a limit, an event delivery
	// retried or dropped, a repo found off its owner, a 4xx or 5xx answer).
	RareEventsPerMonth   float64
	FlowLogMBPerPublicIP float64 // rejected-traffic flow log records a month per public IPv4 (internet probes)
	InsightsPerService   float64 // Container Insights metrics per service, when the stack enables it
	LogKBPerInvocation   float64 // coordinator: EMF line and Lambda's START/END/REPORT
	LogKBPerWorkerMinute float64 // worker EMF flush
	// HorizonDays is how long a pack nothing rewrites is billed as living: a dormant
	// mirror's pack lives as long as the fleet, and the months after it reached its
	// final class are what the bill averages over.
	HorizonDays float64
	// ClonesPerDay is the stated clone volume of a serving stack, at every fleet size;
	// CloneCacheHit the share the git server's whole-clone cache answers (ADR 20);
	// HotRepos the popular repos HotShare of the cache's misses go to.
	ClonesPerDay, CloneCacheHit, HotRepos, HotShare float64
	// ColdAfterDays is how long a mirror goes untouched before its packs go to S3 in the
	// cold-packs tier (ADR 24, modelled).
	ColdAfterDays float64
	// NewReposShare is the repos added a month, as a share of the fleet: each is a first
	// clone (and a mirror.updated event listing its refs).
	NewReposShare float64
	// EventBytesChange and EventBytesClone are the size of the mirror.updated
	// EventBridge entry of a change and of a first clone (events.Entry of a typical one);
	// EventBridge bills each 64 KB of an entry as one event.
	EventBytesChange, EventBytesClone float64
	// RequestsPerClone are the HTTPS requests of one clone (protocol v2: the ref
	// advertisement, ls-refs and fetch); APIWarmInstances the API functions kept warm,
	// each reading the webhooks' secret once per cache period.
	RequestsPerClone, APIWarmInstances float64
	// DiskThreshold is the disk guard's (worker.DefaultConfig): the one-VM alternative
	// provisions the mirrors' bytes over it.
	DiskThreshold float64
}

// with returns md with the inputs the stack decides.
func (md model) with(st stackInputs) model {
	md.MinWorkers = float64(st.Workers.MinTasks)
	md.Fetchers = st.Fetchers
	md.TickSeconds = st.TickSeconds
	return md
}

// measured are the per-event AWS-rule units the bill multiplies.
type measured struct {
	Tick, Heartbeat, Change, Checkpoint units
	// Signal is one read of a worker's signal item (GetSignals), a second per worker.
	Signal units
	// Membership changes cost Fixed + PerRepo × repos moved; deaths also invoke the
	// coordinator once more (the timer) and make SchedulerCallsPerSuspectTick calls
	// on every tick of the grace.
	Join, Death                  linear
	SchedulerCallsPerSuspectTick float64
	RepoBytes                    float64 // mean repo item, table storage
	RepoIndexBytes               float64 // its index entries, storage (with overhead)
}

// units are read and write request units (and NAT bytes) of one event.
type units struct {
	RRU, WRU, Bytes, Calls float64
}

func (u units) usd(p []results.StoreCostPrice) float64 {
	return u.RRU*priceOf(p, "ddb_rru") + u.WRU*priceOf(p, "ddb_wru")
}

func (u units) times(n float64) units {
	return units{u.RRU * n, u.WRU * n, u.Bytes * n, u.Calls * n}
}

func (u units) plus(v units) units {
	return units{u.RRU + v.RRU, u.WRU + v.WRU, u.Bytes + v.Bytes, u.Calls + v.Calls}
}

// linear is the cost of a membership change: fixed, plus per repo moved, plus per repo
// of the fleet (a join's tick reads every repo of the members whose arcs shrink, which
// is all of them).
type linear struct {
	Fixed, PerMoved, PerFleetRepo units
}

func (l linear) at(moved, repos float64) units {
	return l.Fixed.plus(l.PerMoved.times(moved)).plus(l.PerFleetRepo.times(repos))
}

// fit is the line through (x1, y1) and (x2, y2) as fixed + slope·x, both clamped at 0;
// with x1 = x2, a line through the origin.
func fit(x1 float64, y1 units, x2 float64, y2 units) (fixed, slope units) {
	if x2 == x1 {
		return units{}, y1.times(1 / x1)
	}
	slope = y2.plus(y1.times(-1)).times(1 / (x2 - x1))
	fixed = y1.plus(slope.times(-x1))
	clamp := func(u units) units {
		return units{math.Max(u.RRU, 0), math.Max(u.WRU, 0), math.Max(u.Bytes, 0), math.Max(u.Calls, 0)}
	}
	return clamp(fixed), clamp(slope)
}

// point is one measured membership change: repos moved, fleet size, units.
type point struct {
	moved, repos float64
	u            units
}

// fitDeath: a death reads and writes only the dead worker's repos, so everything
// scales with the repos moved.
func fitDeath(a, b point) linear {
	f, s := fit(a.moved, a.u, b.moved, b.u)
	return linear{Fixed: f, PerMoved: s}
}

// fitJoin: a join's reads scale with the fleet (every shrinking member's repos are
// read), its writes and the workers' follow-up with the repos moved.
func fitJoin(a, b point) linear {
	rf, rs := fit(a.repos, a.u, b.repos, b.u)
	wf, ws := fit(a.moved, a.u, b.moved, b.u)
	return linear{
		Fixed:        units{RRU: rf.RRU, WRU: wf.WRU, Bytes: wf.Bytes, Calls: wf.Calls},
		PerMoved:     units{WRU: ws.WRU, Bytes: ws.Bytes, Calls: ws.Calls},
		PerFleetRepo: units{RRU: rs.RRU},
	}
}

// pollWrites is how many repo writes a day polling makes per repo: every change, and a
// checkpoint on every m-th no-change poll, m = ⌈checkpoint / poll interval⌉ (a poll
// interval at or past the checkpoint makes every poll write).
func (md model) pollWrites(pollsPerDay float64) (changes, checkpoints float64) {
	changes = math.Min(pollsPerDay, md.ChangingShare*md.ChangesPerChangingRepo*24/(hoursPerMonth))
	quiet := pollsPerDay - changes
	interval := 24 / pollsPerDay
	m := math.Max(1, math.Ceil(md.CheckpointHours/interval-1e-9))
	return changes, quiet / m
}

// workers sizes the fleet: enough fetcher time for the polls at the planned utilisation.
func (md model) workers(repos, pollsPerDay float64) float64 {
	changes, _ := md.pollWrites(pollsPerDay)
	busy := repos * ((pollsPerDay-changes)*md.NoChangePollSeconds + changes*md.ChangePollSeconds)
	per := md.Fetchers * 86400 * md.Utilisation
	return math.Max(md.MinWorkers, math.Ceil(busy/per))
}

// unthrottledPollsPerDay is how often each repo is polled when the workers run flat out
// (the deployed default sets no rate limit), capped by the minimum interval.
func (md model) unthrottledPollsPerDay(repos, workers float64) float64 {
	capacity := workers * md.Fetchers * 86400 / md.NoChangePollSeconds
	return math.Min(capacity/repos, 24*60/md.MinIntervalMinutes)
}

// pollDynamoDB is the monthly DynamoDB cost of the writes polls make at pollsPerDay,
// for this design (changes and checkpoints) and the naive one (every poll).
func (md model) pollDynamoDB(repos, pollsPerDay float64, mu measured, p []results.StoreCostPrice) (ours, naive float64) {
	changes, checkpoints := md.pollWrites(pollsPerDay)
	days := hoursPerMonth / 24
	ours = repos * days * (mu.Change.times(changes).usd(p) + mu.Checkpoint.times(checkpoints).usd(p))
	naive = repos * days * (mu.Change.times(changes).usd(p) + mu.Checkpoint.times(pollsPerDay-changes).usd(p))
	return ours, naive
}

// billInputs are the bill's inputs from other benchmarks and the shared budget: what
// each operation reads of a mirror (bench/maintenance), the repos' change rates
// (bench/freshness), the poll budget and politeness the fleet is sized by (infra/budget).
type billInputs struct {
	Reads  mirrorReads
	Pop    population
	Budget budget.Budget
	// EFS are the measured operations as EFS meters them (measureEFSOps); Fresh what
	// each poll budget gives (bench/freshness).
	EFS   efsOps
	Fresh freshnessRuns
}

// bill is the monthly bill of a fleet of repos repos on the stack st: the honest one
// (Components), and beside it, line by line, what the previous model made of the same
// stack (Previous).
func (md model) bill(repos int, mu measured, p []results.StoreCostPrice, st stackInputs, in billInputs) results.StoreCostBill {
	b := md.billOf(repos, mu, p, st, in, false)
	prev := md.billOf(repos, mu, p, st, in, true)
	b.Previous, b.PreviousTotalUSD, b.PreviousWorkers = prev.Components, prev.TotalUSD, prev.Workers
	return b
}

// billOf is one model's bill. The previous model (previous) sized workers by fetcher
// time alone, billed polls at the budget's rate, counted EFS reads for polls only and
// assumed 97% of the bytes in IA and Archive, and left out the KMS key and clone
// traffic. The honest one sizes workers by the per-host limit too, bills polls at the
// rate the workers run them (nothing throttles them), counts every byte read from EFS
// with what it does to the lifecycle, and adds the key and a stated clone volume.
func (md model) billOf(repos int, mu measured, p []results.StoreCostPrice, st stackInputs, in billInputs, previous bool) results.StoreCostBill {
	md = md.with(st)
	n := float64(repos)
	days := hoursPerMonth / 24
	bud := in.Budget
	bud.Fetchers = int(md.Fetchers)
	// The poll rate the writes and reads follow: the fleet's poll budget, which the
	// workers keep (MIRRORFLEET_POLL_BUDGET in the stack; the sizing target in the
	// previous model).
	P := md.PollsPerDay
	if !previous && st.PollBudget > 0 {
		P = st.PollBudget
	}
	bud.PollsPerDay = P
	var need float64
	if previous {
		need = md.workers(n, md.PollsPerDay)
	} else {
		need = float64(bud.Workers(repos, int(md.MinWorkers)))
	}
	W := math.Min(need, float64(st.Workers.MaxTasks))
	changesDay, checkpointsDay := md.pollWrites(P)
	b := results.StoreCostBill{Repos: repos, Workers: int(W), PollsPerDay: P, WritesPerRepoDay: changesDay + checkpointsDay,
		Serving: st.Serving, Stack: st.summary()}
	if !previous {
		b.Freshness = in.Fresh.at(P)
	}

	polls := n * P * days
	changes := n * changesDay * days
	checkpoints := n * checkpointsDay * days
	ticks := hoursPerMonth * 3600 / md.TickSeconds
	heartbeats := W * hoursPerMonth * 3600 / md.HeartbeatSeconds
	deaths := W * md.DeathsPerWorkerMonth
	moved := n / W

	price := func(k string) float64 { return priceOf(p, k) }
	ddb := func(key, name string, u units, detail string) results.StoreCostComponent {
		return results.StoreCostComponent{Key: key, Name: name, USD: u.usd(p),
			Detail: fmt.Sprintf("%s: %s RRU + %s WRU", detail, qty(u.RRU), qty(u.WRU))}
	}
	tickU := mu.Tick.times(ticks)
	hbU := mu.Heartbeat.times(heartbeats)
	ckU := mu.Checkpoint.times(checkpoints)
	chU := mu.Change.times(changes)
	memU := mu.Death.at(moved, n).plus(mu.Join.at(moved, n)).times(deaths)
	signals := W * hoursPerMonth * 3600 / worker.SignalEvery.Seconds()
	sigU := mu.Signal.times(signals)
	storageGB := n * (mu.RepoBytes + 100 + mu.RepoIndexBytes) / (1 << 30)
	b.DynamoDB = []results.StoreCostComponent{
		ddb("ticks", "coordinator ticks", tickU, qty(ticks)+" ticks"),
		ddb("heartbeats", "worker heartbeats", hbU, fmt.Sprintf("%s heartbeats (%.0f workers every %.0f s)", qty(heartbeats), W, md.HeartbeatSeconds)),
		ddb("polls", "polls (checkpoint writes)", ckU, fmt.Sprintf("%s no-change polls, %s of them write (checkpoint)", qty(polls-changes), qty(checkpoints))),
		ddb("changes", "polls that found a change", chU, qty(changes)+" changes"),
		ddb("membership", "worker deaths and replacement joins", memU, fmt.Sprintf("%s deaths, each followed by a replacement join; %s repos moved by each", qty(deaths), qty(moved))),
		{Key: "storage", Name: "storage and PITR", USD: storageGB * (price("ddb_storage") + price("ddb_pitr")),
			Detail: fmt.Sprintf("%s GB (items + indexes, 100 B overhead each)", qty(storageGB))},
	}
	if !previous {
		b.DynamoDB = append(b.DynamoDB, ddb("signals", "signal item reads", sigU,
			fmt.Sprintf("%s reads (each of %.0f workers reads its signal item every %s)", qty(signals), W, worker.SignalEvery)))
	}
	for _, c := range b.DynamoDB {
		b.DynamoDBUSD += c.USD
	}
	ours, naive := md.pollDynamoDB(n, P, mu, p)
	b.NaiveDynamoDBUSD = b.DynamoDBUSD - ours + naive

	invocations := ticks + deaths
	gbs := invocations * md.LambdaSeconds * st.LambdaMB / 1024
	schedCalls := deaths * md.GraceMinutes * 60 / md.TickSeconds * mu.SchedulerCallsPerSuspectTick
	add := func(c results.StoreCostComponent) { b.Components = append(b.Components, c) }
	add(results.StoreCostComponent{Key: "dynamodb", Name: "DynamoDB", USD: b.DynamoDBUSD, Detail: "on-demand request units by AWS's rules, storage, PITR (below)"})
	add(results.StoreCostComponent{Key: "lambda", Name: "Lambda (coordinator)", USD: invocations*price("lambda_request") + gbs*price("lambda_gbs_arm"),
		Detail: fmt.Sprintf("%s invocations × %.0f MB × %.2f s = %s GB-s", qty(invocations), st.LambdaMB, md.LambdaSeconds, qty(gbs))})
	add(results.StoreCostComponent{Key: "scheduler", Name: "EventBridge Scheduler", USD: deaths * price("scheduler_invocation"),
		Detail: fmt.Sprintf("%s death-timer invocations (priced before the 14 million free); %s API calls (not billed)", qty(deaths), qty(schedCalls))})

	workers := fargate(st.Workers, W, p)
	detail := workers.detail
	switch {
	case need > W:
		detail += fmt.Sprintf("; the polls need %.0f, past maxWorkers", need)
	case !previous:
		detail += fmt.Sprintf(" (the polls need %.2g for fetcher time, %.2g for the per-host limit with %.0f%% of the repos on one host)",
			bud.FetcherWorkers(repos), bud.HostWorkers(repos), 100*bud.OneHostShare)
	}
	if st.Fallback != nil {
		detail += "; their on-demand twin runs none while Spot keeps them up"
	}
	add(results.StoreCostComponent{Key: "fargate", Name: "Fargate workers", USD: workers.usd, Detail: detail})
	tasks := W
	if st.Serve != nil { // a git server service of its own; beside the workers it is in their tasks
		serve := fargate(*st.Serve, float64(st.Serve.MinTasks), p)
		add(results.StoreCostComponent{Key: "fargate_serve", Name: "Fargate git server", USD: serve.usd,
			Detail: serve.detail + " (its minimum; more under load)"})
		tasks += float64(st.Serve.MinTasks)
	}
	// Public IPv4 addresses: one per task in public subnets, per internet-facing load
	// balancer node, per NAT gateway.
	ips := float64(st.lbPublicIPs() + st.NATGateways)
	if st.Workers.PublicIP {
		ips += tasks
	}
	add(results.StoreCostComponent{Key: "ipv4", Name: "Public IPv4 addresses", USD: ips * hoursPerMonth * price("ipv4_hour"),
		Detail: fmt.Sprintf("%.0f addresses × %.0f h (tasks with a public IP, load balancer nodes, NAT gateways)", ips, hoursPerMonth)})
	clones := 0.0
	if st.Serving && !previous {
		clones = md.ClonesPerDay
	}
	servedGB := clones * days * md.MirrorMB / 1024
	if len(st.LoadBalancers) > 0 {
		lbs := float64(len(st.LoadBalancers))
		if previous {
			add(results.StoreCostComponent{Key: "load_balancer", Name: "Application Load Balancer", USD: lbs * hoursPerMonth * (price("alb_hour") + md.ServeLCU*price("alb_lcu")),
				Detail: fmt.Sprintf("%.0f × %.0f h, %.2g LCU on average (serving traffic; each further GB served: $%.3f LCU + $%.2f internet egress)",
					lbs, hoursPerMonth, md.ServeLCU, price("alb_lcu"), price("egress_gb"))})
		} else {
			// An LCU-hour per GB processed (to IP targets), the dimension a clone-sized
			// response fills first; new and active connections of 20 clones a day are far
			// below theirs.
			add(results.StoreCostComponent{Key: "load_balancer", Name: "Application Load Balancer", USD: lbs*hoursPerMonth*price("alb_hour") + servedGB*price("alb_lcu"),
				Detail: fmt.Sprintf("%.0f × %.0f h; %s LCU-hours for %s GB served (%.0f clones a day of %.0f MB)", lbs, hoursPerMonth, qty(servedGB), qty(servedGB), clones, md.MirrorMB)})
		}
	}
	switch {
	case servedGB > 0 && st.Distributions > 0 && !previous:
		// CloudFront in front of the load balancer: clients are served from its edges
		// (data out and HTTPS requests billed there), and with caching disabled every
		// byte is an origin fetch from the load balancer, an AWS origin.
		reqs := clones * days * md.RequestsPerClone
		add(results.StoreCostComponent{Key: "cloudfront", Name: "CloudFront (clones)",
			USD: servedGB*(price("cloudfront_gb")+price("cloudfront_origin_fetch")) + reqs*price("cloudfront_https_request"),
			Detail: fmt.Sprintf("%s GB out to the internet at $%.3f, %s HTTPS requests (%.0f a clone) at $%.4f per 10,000, %s GB fetched from the load balancer at $%.2f (an AWS origin); the always-free 1 TB and 10 M requests not deducted",
				qty(servedGB), price("cloudfront_gb"), qty(reqs), md.RequestsPerClone, price("cloudfront_https_request")*10_000,
				qty(servedGB), price("cloudfront_origin_fetch"))})
	case servedGB > 0:
		add(results.StoreCostComponent{Key: "egress", Name: "Internet egress (clones)", USD: servedGB * price("egress_gb"),
			Detail: fmt.Sprintf("%s GB served a month (the 100 GB free a month not deducted)", qty(servedGB))})
	}

	if previous {
		efs := md.efs(n, changes, st.FS, p)
		add(results.StoreCostComponent{Key: "efs_storage", Name: "EFS storage", USD: efs.usd, Detail: efs.detail})
		efsReadGB := (polls-changes)*md.EFSReadKBPerPoll/(1<<20) + changes*md.ChangeKB/(1<<20)
		efsWriteGB := changes * md.ChangeKB / (1 << 20)
		add(results.StoreCostComponent{Key: "efs_throughput", Name: "EFS Elastic throughput", USD: efsReadGB*price("efs_elastic_read") + efsWriteGB*price("efs_elastic_write"),
			Detail: fmt.Sprintf("%s GB read, %s GB written", qty(efsReadGB), qty(efsWriteGB))})
	} else {
		load := md.load(n, P, W, deaths, clones, st)
		month := md.mirrorsOnEFS(load, in.Reads, in.Pop, in.EFS)
		for _, c := range efsComponents(month, p) {
			add(c)
		}
		b.EFS = efsSummary(month)
	}

	if st.NATGateways > 0 {
		// Upstream git traffic crosses the NAT unless the tasks have public IPs; the
		// workers' DynamoDB calls unless a gateway endpoint carries them. The
		// coordinator Lambda runs outside the VPC.
		var natGB float64
		if !st.Workers.PublicIP {
			natGB += (polls-changes)*md.PollNATKB/(1<<20) + changes*md.ChangeKB/(1<<20)
			if !st.DynamoDBEndpoint {
				api := hbU.plus(ckU).plus(chU)
				natGB += (api.Bytes + api.Calls*md.APIOverheadBytes) / (1 << 30)
			}
		}
		nats := float64(st.NATGateways)
		add(results.StoreCostComponent{Key: "nat", Name: "NAT gateway", USD: nats*hoursPerMonth*price("nat_hour") + natGB*price("nat_gb"),
			Detail: fmt.Sprintf("%.0f gateway(s) × %.0f h; %s GB processed", nats, hoursPerMonth, qty(natGB))})
	}

	services := 1.0
	if st.Fallback != nil {
		services++
	}
	if st.Serve != nil {
		services++
	}
	insights := 0.0
	if st.ContainerInsights {
		insights = services * md.InsightsPerService
	}
	logGB := (invocations*md.LogKBPerInvocation + W*hoursPerMonth*60*md.LogKBPerWorkerMinute) / (1 << 20)
	flowGB := float64(st.FlowLogs) * ips * md.FlowLogMBPerPublicIP / 1024
	// Custom metrics by the hours they have data (cwmetrics.go); the previous model
	// billed every one a whole month.
	months, eventOnly := st.CustomMetrics, 0.0
	if !previous {
		misses := clones * days * (1 - md.CloneCacheHit)
		months, eventOnly = metricMonths(st.Metrics, metricEvents{Deaths: deaths, Changes: changes, Clones: clones * days,
			CloneMisses: misses, Rare: md.RareEventsPerMonth, Polls: polls})
	}
	b.CustomMetricMonths = months
	metricDetail := fmt.Sprintf("%.0f custom metrics", st.CustomMetrics)
	if eventOnly > 0 {
		metricDetail = fmt.Sprintf("%.0f custom metrics billed as %.1f metric-months (%.0f written only with events, billed for the hours they have data)",
			st.CustomMetrics, months, eventOnly)
	}
	add(results.StoreCostComponent{Key: "cloudwatch", Name: "CloudWatch",
		USD: (months+insights)*price("cw_metric") + float64(st.Dashboards)*price("cw_dashboard") +
			float64(st.AlarmMetrics)*price("cw_alarm") + (logGB+flowGB)*price("cw_logs_gb"),
		Detail: fmt.Sprintf("%s + %.0f Container Insights metrics, %d dashboard(s), %d alarm metrics (%d alarms), %s GB logs, %s GB flow logs",
			metricDetail, insights, st.Dashboards, st.AlarmMetrics, st.Alarms, qty(logGB), qty(flowGB))})
	if !previous && st.KMSKeys > 0 {
		// The alarm topic's key; its requests (an SNS publish of an alarm) are a few a
		// month.
		add(results.StoreCostComponent{Key: "kms", Name: "KMS", USD: float64(st.KMSKeys) * price("kms_key"),
			Detail: fmt.Sprintf("%d customer managed key(s) (the alarm topic's), rotation on; requests a few a month", st.KMSKeys)})
	}
	if !previous && st.Secrets > 0 {
		// The webhooks' secret; the API function reads it at most once per
		// secrets.DefaultTTL per warm instance.
		calls := md.APIWarmInstances * hoursPerMonth * 3600 / secrets.DefaultTTL.Seconds()
		add(results.StoreCostComponent{Key: "secrets", Name: "Secrets Manager", USD: float64(st.Secrets)*price("secret") + calls*price("secret_api_call"),
			Detail: fmt.Sprintf("%d secret(s) the stack creates (the webhooks'); %s GetSecretValue calls (%.0f warm API instance(s), one per %s each)",
				st.Secrets, qty(calls), md.APIWarmInstances, secrets.DefaultTTL)})
	}
	if !previous && st.EventBuses > 0 {
		// Every fetch that moved refs puts a mirror.updated event on the bus; EventBridge
		// bills each 64 KB of an entry as an event.
		chunk := func(bytes float64) float64 { return math.Max(1, math.Ceil(bytes/(64<<10))) }
		newRepos := n * md.NewReposShare
		events := changes*chunk(md.EventBytesChange) + newRepos*chunk(md.EventBytesClone)
		add(results.StoreCostComponent{Key: "eventbridge", Name: "EventBridge (mirror.updated)", USD: events * price("eventbridge_event"),
			Detail: fmt.Sprintf("%s events billed: %s changes (an entry of %s bytes each) and %s first clones (%s bytes each), per 64 KB",
				qty(events), qty(changes), qty(md.EventBytesChange), qty(newRepos), qty(md.EventBytesClone))})
	}

	for _, c := range b.Components {
		b.TotalUSD += c.USD
	}
	up := md.unthrottledPollsPerDay(n, W)
	if !previous {
		up = bud.PollCapacity(repos, int(W), time.Duration(md.MinIntervalMinutes*float64(time.Minute))) / n
	}
	b.Unthrottled.PollsPerDay = up
	b.Unthrottled.PollWritesUSD, b.Unthrottled.NaiveUSD = md.pollDynamoDB(n, up, mu, p)
	// Staleness: what a fleet polling at P shows, against the stack's alarm and scaling.
	at := bud
	at.PollsPerDay = P
	b.Staleness = results.StoreCostStaleness{PollsPerDay: P, TailHours: at.TailStaleness().Hours(),
		AlarmHours: st.StaleAfterSeconds / 3600, ScaleOutHours: bud.ScaleOutAbove().Hours()}
	return b
}

// load is what a month asks of the mirrors on EFS at n repos polled P times a day by W
// workers, with deaths deaths and clones clones a day served.
func (md model) load(n, P, W, deaths, clones float64, st stackInputs) mirrorLoad {
	l := mirrorLoad{Repos: n, PollsPerDay: P, ScrubDays: st.ScrubDays, ScrubChangedOnly: st.ScrubChangedOnly, MaintainDays: st.MaintainDays,
		FS: st.FS, NewRepos: n * md.NewReposShare,
		// A death moves the dead worker's repos to the others, the replacement's join
		// moves as many to it: each is taken by a worker that has not maintained it.
		Takeovers: 2 * deaths * n / math.Max(W, 1)}
	if clones > 0 {
		l.ClonesPerDay, l.CacheHit, l.HotRepos, l.HotShare = clones, md.CloneCacheHit, md.HotRepos, md.HotShare
	}
	return l
}

// efsSummary is what the bill records of the month on EFS.
func efsSummary(m efsMonth) *results.StoreCostEFS {
	s := &results.StoreCostEFS{StandardGB: m.GB[standard], IAGB: m.GB[infrequent], ArchiveGB: m.GB[archive], WriteGB: m.WriteGB,
		ToIAGB: m.ToIAGB, ToArchiveGB: m.ToArchiveGB, Changes: m.ChangesPerMonth, ScrubsPerMonth: m.ScrubsPerMonth,
		MetadataReadGB: m.MetaReadGB, MetadataWriteGB: m.MetaWriteGB, ReadMinimumGB: m.ReadMinGB, WriteMinimumGB: m.WriteMinGB,
		Operations: m.Ops}
	for _, r := range m.Reads {
		s.Reads = append(s.Reads, results.StoreCostEFSRead{Source: r.Source, StandardGB: r.GB[standard], IAGB: r.GB[infrequent], ArchiveGB: r.GB[archive]})
	}
	return s
}

type priced struct {
	usd    float64
	detail string
}

// fargate prices n tasks of service s for a month, split between on-demand Fargate and
// Spot as its capacity provider strategy splits them.
func fargate(s stackfacts.Service, n float64, p []results.StoreCostPrice) priced {
	od, spot := s.Split(int(math.Round(n)))
	v, g := vcpu(s), gb(s)
	hourOD := v*priceOf(p, "fargate_vcpu_arm") + g*priceOf(p, "fargate_gb_arm")
	hourSpot := v*priceOf(p, "fargate_spot_vcpu_arm") + g*priceOf(p, "fargate_spot_gb_arm")
	return priced{usd: hoursPerMonth * (od*hourOD + spot*hourSpot),
		detail: fmt.Sprintf("%.0f tasks (%.0f on Spot, %.0f on-demand) × %.3g vCPU / %.3g GB × %.0f h", n, spot, od, v, g, hoursPerMonth)}
}

// efs prices the mirrors' storage by class. Files under 128 KiB never leave Standard,
// and maintenance rewrites its index files (StandardMBPerRepo); a change's pack stays
// in Standard until the IA transition; the rest moves to IA, and the share no fetch or
// clone reads until the Archive transition moves on (ArchiveShare). A file system that
// moves a file back to Standard on a read keeps the changing repos' packs there.
func (md model) efs(repos, changesMonth float64, fs stackfacts.FileSystem, p []results.StoreCostPrice) priced {
	total := repos * md.MirrorMB / 1024
	if fs.IAAfterDays == 0 {
		return priced{usd: total * priceOf(p, "efs_standard"), detail: fmt.Sprintf("%s GB, all in Standard (no lifecycle)", qty(total))}
	}
	recent := changesMonth * md.ChangeKB / (1 << 20) * math.Min(float64(fs.IAAfterDays)/(hoursPerMonth/24), 1)
	standard := math.Min(total, repos*md.StandardMBPerRepo/1024+recent)
	if fs.BackToStandardOnRead {
		standard += md.ChangingShare * (total - standard)
	}
	cold := total - standard
	archive := 0.0
	if fs.ArchiveAfterDays > 0 {
		archive = md.ArchiveShare * cold
	}
	ia := cold - archive
	return priced{usd: standard*priceOf(p, "efs_standard") + ia*priceOf(p, "efs_ia") + archive*priceOf(p, "efs_archive"),
		detail: fmt.Sprintf("%s GB: %s Standard, %s Infrequent Access (after %d days), %s Archive (after %d days)",
			qty(total), qty(standard), qty(ia), fs.IAAfterDays, qty(archive), fs.ArchiveAfterDays)}
}

// qty writes a quantity for a reader: three significant digits, "million" and
// thousands separators instead of exponents.
func qty(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return strconv.FormatFloat(v/1e9, 'g', 3, 64) + " billion"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + " million"
	case a >= 1000:
		r := math.Round(v/math.Pow(10, math.Floor(math.Log10(a))-2)) * math.Pow(10, math.Floor(math.Log10(a))-2)
		return thousands(int64(r))
	case a == 0:
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	return string(b)
}

// sensitivity is the DynamoDB cost of poll writes at repos repos for each poll rate.
func (md model) sensitivity(repos int, rates []float64, mu measured, p []results.StoreCostPrice) results.StoreCostSensitivity {
	s := results.StoreCostSensitivity{Repos: repos, PollsPerDay: rates}
	for _, r := range rates {
		ours, naive := md.pollDynamoDB(float64(repos), r, mu, p)
		s.OursUSD = append(s.OursUSD, ours)
		s.NaiveUSD = append(s.NaiveUSD, naive)
	}
	return s
}
