package main

import (
	"fmt"
	"math"
	"strconv"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// hoursPerMonth is AWS's billing month.
const hoursPerMonth = 730.0

// model holds every input of the bill that is neither a measurement nor a price.
type model struct {
	PollsPerDay            float64 // per repo: the sizing target
	ChangingShare          float64 // repos that change at least once in a month
	ChangesPerChangingRepo float64 // polls a month that find a change, per changing repo
	CheckpointHours        float64 // a no-change poll writes once the record is this old
	MinIntervalMinutes     float64 // a repo is never polled sooner
	HeartbeatSeconds       float64
	TickSeconds            float64 // the coordinator's tick period
	GraceMinutes           float64 // silence before a worker's repos move
	Fetchers               float64 // concurrent fetches per worker
	NoChangePollSeconds    float64 // wall time of a poll that finds nothing
	ChangePollSeconds      float64 // wall time of a fetch that brings a change
	Utilisation            float64 // share of fetcher time a sized fleet plans to use
	MinWorkers             float64 // the stack's WorkerCount default
	WorkerVCPU, WorkerGB   float64
	LambdaMB               float64
	LambdaSeconds          float64 // billed duration of one coordinator invocation on AWS
	DeathsPerWorkerMonth   float64 // unplanned task losses, each followed by a replacement join
	MirrorMB               float64 // mean mirror size on EFS
	IAShare                float64 // share of mirror bytes EFS lifecycle moves to IA
	EFSReadKBPerPoll       float64 // EFS bytes a no-change poll reads (refs, config, index lookups)
	ChangeKB               float64 // pack bytes a change brings: received through the NAT and written to EFS
	PollNATKB              float64 // bytes a no-change poll exchanges with the upstream (TLS, ref advertisement)
	APIOverheadBytes       float64 // per DynamoDB call beyond the JSON bodies (headers, TLS records)
	CustomMetrics          float64
	AlarmMetrics           float64
	Dashboards             float64
	ContainerInsights      float64 // Container Insights metrics (charged as custom metrics)
	LogKBPerInvocation     float64 // coordinator: EMF line and Lambda's START/END/REPORT
	LogKBPerWorkerMinute   float64 // worker EMF flush
}

// measured are the per-event AWS-rule units the bill multiplies.
type measured struct {
	Tick, Heartbeat, Change, Checkpoint units
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

// bill is the monthly bill of a fleet of repos repos.
func (md model) bill(repos int, mu measured, p []results.StoreCostPrice) results.StoreCostBill {
	n := float64(repos)
	days := hoursPerMonth / 24
	P := md.PollsPerDay
	changesDay, checkpointsDay := md.pollWrites(P)
	W := md.workers(n, P)
	b := results.StoreCostBill{Repos: repos, Workers: int(W), PollsPerDay: P, WritesPerRepoDay: changesDay + checkpointsDay}

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
	for _, c := range b.DynamoDB {
		b.DynamoDBUSD += c.USD
	}
	ours, naive := md.pollDynamoDB(n, P, mu, p)
	b.NaiveDynamoDBUSD = b.DynamoDBUSD - ours + naive

	invocations := ticks + deaths
	gbs := invocations * md.LambdaSeconds * md.LambdaMB / 1024
	schedCalls := deaths * md.GraceMinutes * 60 / md.TickSeconds * mu.SchedulerCallsPerSuspectTick
	fargateHour := md.WorkerVCPU*price("fargate_vcpu_arm") + md.WorkerGB*price("fargate_gb_arm")
	efsGB := n * md.MirrorMB / 1024
	efsReadGB := (polls-changes)*md.EFSReadKBPerPoll/(1<<20) + changes*md.ChangeKB/(1<<20)
	efsWriteGB := changes * md.ChangeKB / (1 << 20)
	// Workers reach DynamoDB through the NAT (the stack has no gateway endpoint); the
	// coordinator Lambda runs outside the VPC.
	workerAPI := hbU.plus(ckU).plus(chU)
	natGB := (polls-changes)*md.PollNATKB/(1<<20) + changes*md.ChangeKB/(1<<20) +
		(workerAPI.Bytes+workerAPI.Calls*md.APIOverheadBytes)/(1<<30)
	logGB := (invocations*md.LogKBPerInvocation + W*hoursPerMonth*60*md.LogKBPerWorkerMinute) / (1 << 20)
	b.Components = []results.StoreCostComponent{
		{Key: "dynamodb", Name: "DynamoDB", USD: b.DynamoDBUSD, Detail: "on-demand request units by AWS's rules, storage, PITR (below)"},
		{Key: "lambda", Name: "Lambda (coordinator)", USD: invocations*price("lambda_request") + gbs*price("lambda_gbs_arm"),
			Detail: fmt.Sprintf("%s invocations × %.0f MB × %.2f s = %s GB-s", qty(invocations), md.LambdaMB, md.LambdaSeconds, qty(gbs))},
		{Key: "scheduler", Name: "EventBridge Scheduler", USD: deaths * price("scheduler_invocation"),
			Detail: fmt.Sprintf("%s death-timer invocations (priced before the 14 million free); %s API calls (not billed)", qty(deaths), qty(schedCalls))},
		{Key: "fargate", Name: "Fargate workers", USD: W * hoursPerMonth * fargateHour,
			Detail: fmt.Sprintf("%.0f tasks × %.3g vCPU / %.3g GB × %.0f h", W, md.WorkerVCPU, md.WorkerGB, hoursPerMonth)},
		{Key: "efs_storage", Name: "EFS storage", USD: efsGB * ((1-md.IAShare)*price("efs_standard") + md.IAShare*price("efs_ia")),
			Detail: fmt.Sprintf("%s GB, %.0f%% in Infrequent Access", qty(efsGB), 100*md.IAShare)},
		{Key: "efs_throughput", Name: "EFS Elastic throughput", USD: efsReadGB*price("efs_elastic_read") + efsWriteGB*price("efs_elastic_write"),
			Detail: fmt.Sprintf("%s GB read, %s GB written", qty(efsReadGB), qty(efsWriteGB))},
		{Key: "nat", Name: "NAT gateway", USD: hoursPerMonth*(price("nat_hour")+price("ipv4_hour")) + natGB*price("nat_gb"),
			Detail: fmt.Sprintf("1 gateway + its IPv4 × %.0f h; %s GB processed (git and worker DynamoDB traffic)", hoursPerMonth, qty(natGB))},
		{Key: "cloudwatch", Name: "CloudWatch", USD: (md.CustomMetrics+md.ContainerInsights)*price("cw_metric") + md.Dashboards*price("cw_dashboard") +
			md.AlarmMetrics*price("cw_alarm") + logGB*price("cw_logs_gb"),
			Detail: fmt.Sprintf("%.0f custom + %.0f Container Insights metrics, %.0f dashboard, %.0f alarm metrics, %s GB logs", md.CustomMetrics,
				md.ContainerInsights, md.Dashboards, md.AlarmMetrics, qty(logGB))},
	}
	for _, c := range b.Components {
		b.TotalUSD += c.USD
	}
	up := md.unthrottledPollsPerDay(n, W)
	b.Unthrottled.PollsPerDay = up
	b.Unthrottled.PollWritesUSD, b.Unthrottled.NaiveUSD = md.pollDynamoDB(n, up, mu, p)
	return b
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
