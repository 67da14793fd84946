package results

// StoreCost is bench/results/storecost.json: the request units of the fleet's store
// operations, measured on DynamoDB Local and recomputed by AWS's billing rules, and the
// monthly AWS bill they imply at several fleet sizes.
type StoreCost struct {
	Meta Meta `json:"meta"`
	// DynamoDBLocal names the emulator the units were measured on.
	DynamoDBLocal string `json:"dynamodb_local"`
	// Rules are the AWS billing rules the AWS-rule figures apply, one sentence each.
	Rules []string `json:"rules"`
	// Measurements are per event (one tick, one heartbeat, one poll, ...): when Count > 1
	// the units are the mean over Count events.
	Measurements []StoreCostMeasurement `json:"measurements"`
	// ItemSizes are the record sizes observed in a settled fleet's table.
	ItemSizes []StoreCostItemSize `json:"item_sizes"`
	// Assumptions are every input of the bill model that is not a measurement or a price.
	Assumptions []StoreCostAssumption `json:"assumptions"`
	Prices      []StoreCostPrice      `json:"prices"`
	Bills       []StoreCostBill       `json:"bills"`
	// Sensitivity is the DynamoDB cost of poll writes against the poll rate, for this
	// design and for the naive one that writes the repo record on every poll.
	Sensitivity StoreCostSensitivity `json:"sensitivity"`
	// Tiers are the ways of storing the mirrors the model compares (ADR 24), per fleet
	// size without serving.
	Tiers []StoreCostTier `json:"tiers,omitempty"`
	// EFSOps are what each operation on a mirror makes EFS meter, counted from its
	// system calls on the mirror tree; EFSOpsMirrorBytes is the measured mirror's pack.
	EFSOps            []StoreCostEFSOp `json:"efs_ops,omitempty"`
	EFSOpsMirrorBytes int64            `json:"efs_ops_mirror_bytes,omitempty"`
	// Alternative is one VM running `mirrorfleet run` at each billed fleet size
	// (without serving), and Crossover the fleet against it over a range of sizes.
	Alternative []StoreCostVM       `json:"alternative,omitempty"`
	Crossover   *StoreCostCrossover `json:"crossover,omitempty"`
	// Sources say where the bill's read figures and change rates come from.
	Sources []string `json:"sources,omitempty"`
	Notes   []string `json:"notes"`
}

// StoreCostUnits are request units: as DynamoDB Local reported them (ConsumedCapacity)
// and as AWS bills them (computed from the observed item sizes). AWSIndexWCU is the part
// of AWSWCU spent on global secondary index entries.
type StoreCostUnits struct {
	Calls       int     `json:"calls"`
	WriteCalls  int     `json:"write_calls"`
	LocalRCU    float64 `json:"local_rcu"`
	LocalWCU    float64 `json:"local_wcu"`
	AWSRCU      float64 `json:"aws_rcu"`
	AWSWCU      float64 `json:"aws_wcu"`
	AWSIndexWCU float64 `json:"aws_index_wcu"`
	// Bytes are request plus response bodies: what crosses the NAT gateway per event.
	Bytes float64 `json:"bytes"`
}

// StoreCostOp is one store operation's share, named "Method/API" as Config.OnConsumed
// names it.
type StoreCostOp struct {
	Op string `json:"op"`
	StoreCostUnits
}

// StoreCostMeasurement is one measured event kind.
type StoreCostMeasurement struct {
	Key     string `json:"key"` // stable id, e.g. "idle_tick", "join_tick_5000"
	Name    string `json:"name"`
	Repos   int    `json:"repos"`
	Workers int    `json:"workers"`
	Moved   int    `json:"moved,omitempty"` // repos (re)assigned by the event
	// Count is how many events the figures average over (1 for a single event).
	Count int            `json:"count"`
	Total StoreCostUnits `json:"total"`
	Ops   []StoreCostOp  `json:"ops"`
	// SchedulerAPICalls and SchedulerInvocations count EventBridge Scheduler traffic
	// (on an in-process fake of its API) per event.
	SchedulerAPICalls    float64 `json:"scheduler_api_calls"`
	SchedulerInvocations float64 `json:"scheduler_invocations"`
	// WallMillis is the event's wall time against DynamoDB Local (not AWS latency).
	WallMillis float64 `json:"wall_millis"`
	Note       string  `json:"note,omitempty"`
}

// StoreCostItemSize is the observed size of one kind of record, by AWS's item size rules.
type StoreCostItemSize struct {
	Kind     string  `json:"kind"`
	Count    int     `json:"count"`
	MeanSize float64 `json:"mean_bytes"`
	MaxSize  int     `json:"max_bytes"`
}

// StoreCostAssumption is one input of the bill model.
type StoreCostAssumption struct {
	Key   string  `json:"key"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Note  string  `json:"note"` // where it comes from: the code, the stack, or a stated guess
}

// StoreCostPrice is one list price (us-east-1, on-demand).
type StoreCostPrice struct {
	Key       string  `json:"key"`
	Service   string  `json:"service"`
	Item      string  `json:"item"`
	USD       float64 `json:"usd"`
	Unit      string  `json:"unit"`
	Source    string  `json:"source"` // URL
	Taken     string  `json:"taken"`  // date the price was taken (YYYY-MM-DD)
	Confirmed bool    `json:"confirmed"`
	Note      string  `json:"note,omitempty"`
}

// StoreCostBill is the monthly bill of one fleet size, with the git server or without.
type StoreCostBill struct {
	Repos   int `json:"repos"`
	Workers int `json:"workers"`
	// Serving says whether the stack serves the mirrors (git server and load balancer).
	Serving bool `json:"serving"`
	// Stack is what the bill took from the synthesized template.
	Stack StoreCostStack `json:"stack"`
	// GoalUSD is the monthly total this bill is meant to stay within (0: none).
	GoalUSD float64 `json:"goal_usd,omitempty"`
	// PollsPerDay is the poll rate per repo the bill assumes: the fleet's poll budget
	// (the stack's MIRRORFLEET_POLL_BUDGET); WritesPerRepoDay the store writes per repo
	// per day it implies (changes plus checkpoints).
	PollsPerDay float64 `json:"polls_per_day"`
	// Freshness is what the poll budget gives, from bench/freshness (the default policy).
	Freshness        *StoreCostFreshness  `json:"freshness,omitempty"`
	WritesPerRepoDay float64              `json:"writes_per_repo_day"`
	Components       []StoreCostComponent `json:"components"`
	DynamoDB         []StoreCostComponent `json:"dynamodb"` // the DynamoDB component broken down
	TotalUSD         float64              `json:"total_usd"`
	DynamoDBUSD      float64              `json:"dynamodb_usd"`
	// CustomMetricMonths is what CloudWatch bills of the custom metrics: a metric-month
	// per series written every hour, the hours with data of those written only with
	// events.
	CustomMetricMonths float64 `json:"custom_metric_months,omitempty"`
	// NaiveDynamoDBUSD is DynamoDB under the baseline design that writes the repo record
	// on every poll, at the same poll rate.
	NaiveDynamoDBUSD float64 `json:"naive_dynamodb_usd"`
	// Unthrottled is the same fleet at the poll rate its workers reach when nothing
	// limits them (the deployed default): poll writes of this design and of the naive one.
	Unthrottled StoreCostUnthrottled `json:"unthrottled"`
	// Previous is the same stack as the previous model billed it (reads of polls only,
	// 97% of the bytes assumed cold, workers by fetcher time alone, no key, no clone
	// traffic), line by line; PreviousTotalUSD its total.
	Previous         []StoreCostComponent `json:"previous,omitempty"`
	PreviousTotalUSD float64              `json:"previous_total_usd,omitempty"`
	PreviousWorkers  int                  `json:"previous_workers,omitempty"`
	// EFS is the month of the mirrors on EFS behind the EFS lines.
	EFS *StoreCostEFS `json:"efs,omitempty"`
	// Staleness is what the fleet of this bill shows against the stack's alarm and
	// scaling thresholds (infra/budget).
	Staleness StoreCostStaleness `json:"staleness"`
}

// StoreCostEFS is a month of the mirrors on EFS: average storage by class, what each
// source read from each class, bytes written and tiered down.
type StoreCostEFS struct {
	StandardGB     float64            `json:"standard_gb"`
	IAGB           float64            `json:"ia_gb"`
	ArchiveGB      float64            `json:"archive_gb"`
	Reads          []StoreCostEFSRead `json:"reads"`
	WriteGB        float64            `json:"write_gb"`
	ToIAGB         float64            `json:"to_ia_gb"`
	ToArchiveGB    float64            `json:"to_archive_gb"`
	Changes        float64            `json:"changes"`
	ScrubsPerMonth float64            `json:"scrubs"`
	// MetadataReadGB and MetadataWriteGB are the metadata operations as EFS meters
	// them (4 KiB each at least); ReadMinimumGB and WriteMinimumGB what the 32 KiB
	// minimum of data operations adds to the bytes read and written.
	MetadataReadGB  float64 `json:"metadata_read_gb"`
	MetadataWriteGB float64 `json:"metadata_write_gb"`
	ReadMinimumGB   float64 `json:"read_minimum_gb"`
	WriteMinimumGB  float64 `json:"write_minimum_gb"`
	// Operations are the month's mirror operations, by kind (efs_ops keys).
	Operations []StoreCostOpCount `json:"operations,omitempty"`
}

// StoreCostOpCount is how many times a month one kind of mirror operation runs.
type StoreCostOpCount struct {
	Op    string  `json:"op"`
	Count float64 `json:"count"`
}

// StoreCostFreshness is what a poll budget gives with the default policy, from
// bench/results/freshness.json (its runs at the nearest budgets, interpolated on a log
// scale when the budget lies between two).
type StoreCostFreshness struct {
	Budget    float64 `json:"budget"`
	Policy    string  `json:"policy"`
	LagMeanH  float64 `json:"lag_mean_h"`
	LagP50H   float64 `json:"lag_p50_h"`
	LagP99H   float64 `json:"lag_p99_h"`
	Freshness float64 `json:"freshness"`
	Source    string  `json:"source"`
}

// StoreCostVM is one VM running `mirrorfleet run` (the local store, the mirrors on
// EBS volumes) for a fleet of Repos repos: what a user would pick instead of the stack.
type StoreCostVM struct {
	Repos          int                  `json:"repos"`
	Instance       string               `json:"instance"`
	VolumeType     string               `json:"volume_type"`
	Volumes        int                  `json:"volumes"`
	ProvisionedGiB float64              `json:"provisioned_gib"`
	Components     []StoreCostComponent `json:"components"`
	TotalUSD       float64              `json:"total_usd"`
	// FleetUSD is the stack's bill at the same size, without serving.
	FleetUSD float64 `json:"fleet_usd"`
}

// StoreCostCrossover is the stack's bill and the cheapest one-VM alternative over a
// range of fleet sizes, and where the stack becomes the cheaper.
type StoreCostCrossover struct {
	Points []StoreCostCrossoverPoint `json:"points"`
	// FleetCheaperFrom is the smallest size of Points from which the stack is cheaper
	// at every larger size (0: at none).
	FleetCheaperFrom int `json:"fleet_cheaper_from"`
}

// StoreCostCrossoverPoint is one fleet size: the stack's bill and the cheapest VM.
type StoreCostCrossoverPoint struct {
	Repos    int     `json:"repos"`
	FleetUSD float64 `json:"fleet_usd"`
	VMUSD    float64 `json:"vm_usd"`
	VM       string  `json:"vm"` // instance and volume type
}

// StoreCostEFSRead is what one source read in the month, by storage class.
type StoreCostEFSRead struct {
	Source     string  `json:"source"`
	StandardGB float64 `json:"standard_gb"`
	IAGB       float64 `json:"ia_gb"`
	ArchiveGB  float64 `json:"archive_gb"`
}

// StoreCostStaleness is a billed fleet's staleness against the stack's thresholds: the
// p99 a fleet polling at PollsPerDay shows (a dormant repo's revisit), the stale-repos
// alarm's threshold and the workers' scale-out step.
type StoreCostStaleness struct {
	PollsPerDay   float64 `json:"polls_per_day"`
	TailHours     float64 `json:"tail_hours"`
	AlarmHours    float64 `json:"alarm_hours"`
	ScaleOutHours float64 `json:"scale_out_hours"`
}

// StoreCostTier is one way of storing the mirrors at a fleet size, priced by the model:
// the bill's storage lines under it, and the bill's total with them.
type StoreCostTier struct {
	Repos       int                  `json:"repos"`
	Name        string               `json:"name"`
	Description string               `json:"description"`
	Deployed    bool                 `json:"deployed"` // what the stack deploys today
	Components  []StoreCostComponent `json:"components"`
	StorageUSD  float64              `json:"storage_usd"` // the components' sum
	TotalUSD    float64              `json:"total_usd"`   // the whole bill with this storage
	GoalUSD     float64              `json:"goal_usd,omitempty"`
}

// StoreCostComponent is one line of a bill.
type StoreCostComponent struct {
	Key    string  `json:"key"`
	Name   string  `json:"name"`
	USD    float64 `json:"usd"`
	Detail string  `json:"detail"` // the quantities and prices behind USD
}

// StoreCostUnthrottled is a fleet polling as fast as its workers can.
type StoreCostUnthrottled struct {
	PollsPerDay   float64 `json:"polls_per_day"`
	PollWritesUSD float64 `json:"poll_writes_usd"`
	NaiveUSD      float64 `json:"naive_usd"`
}

// StoreCostSensitivity is the DynamoDB monthly cost of poll and change writes at Repos
// repos for each poll rate.
type StoreCostSensitivity struct {
	Repos       int       `json:"repos"`
	PollsPerDay []float64 `json:"polls_per_day"`
	OursUSD     []float64 `json:"ours_usd"`
	NaiveUSD    []float64 `json:"naive_usd"`
}

// StoreCostStack is what a bill took from the CloudFormation template the CDK app
// synthesized (infra/stackfacts), so the bill follows the stack.
type StoreCostStack struct {
	Context        string  `json:"context"` // the CDK context it was synthesized with
	WorkerVCPU     float64 `json:"worker_vcpu"`
	WorkerGB       float64 `json:"worker_gb"`
	WorkerMin      int     `json:"worker_min"`
	WorkerMax      int     `json:"worker_max"`
	WorkerSpot     bool    `json:"worker_spot"`                     // the workers run on Fargate Spot
	OnDemandTwin   bool    `json:"on_demand_twin"`                  // with an on-demand twin (desired 0) as fallback
	Fetchers       int     `json:"fetchers"`                        // per worker
	ServeTasks     int     `json:"serve_tasks"`                     // the git server's minimum
	ServeVCPU      float64 `json:"serve_vcpu"`                      //
	ServeGB        float64 `json:"serve_gb"`                        //
	ServeSpot      bool    `json:"serve_spot"`                      //
	ServeInWorkers bool    `json:"serve_in_worker_tasks,omitempty"` // the git server is a container of the worker tasks (ADR 27)
	PublicTaskIPs  bool    `json:"public_task_ips"`                 // a public IPv4 per task
	NATGateways    int     `json:"nat_gateways"`
	LoadBalancers  int     `json:"load_balancers"`
	LBPublicIPs    int     `json:"lb_public_ips"` // one per subnet of an internet-facing load balancer
	DynamoEndpoint bool    `json:"dynamodb_gateway_endpoint"`
	Alarms         int     `json:"alarms"`
	AlarmMetrics   int     `json:"alarm_metrics"`
	Dashboards     int     `json:"dashboards"`
	CustomMetrics  int     `json:"custom_metrics"` // the dashboard's metric names, one per dimension value
	Insights       bool    `json:"container_insights"`
	EFSIADays      int     `json:"efs_ia_after_days"`
	EFSArchiveDays int     `json:"efs_archive_after_days"`
	EFSBackOnRead  bool    `json:"efs_back_to_standard_on_read,omitempty"`
	ScrubDays      float64 `json:"scrub_days,omitempty"` // the workers' scrub period
	KMSKeys        int     `json:"kms_keys,omitempty"`
	StaleAfterH    float64 `json:"stale_after_hours,omitempty"` // the stale-repos alarm
	TickSeconds    float64 `json:"tick_seconds"`
	LambdaMB       int     `json:"lambda_mb"`
	PollBudget     float64 `json:"poll_budget,omitempty"`   // the workers' MIRRORFLEET_POLL_BUDGET
	EventBuses     int     `json:"event_buses,omitempty"`   // EventBridge buses (mirror.updated)
	Distributions  int     `json:"distributions,omitempty"` // CloudFront distributions
}

// StoreCostEFSOp is one operation on a mirror (a poll, a fetch, a maintenance run, a
// clone) as EFS meters it, counted from its system calls on the mirror tree (strace, no
// NFS client cache assumed: every call that needs the server is one operation): data
// reads and writes each metered at 32 KiB at least, metadata operations at 4 KiB.
type StoreCostEFSOp struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	// MetaReads are opens, stats, directory listings and closes; MetaWrites creates,
	// renames, deletes, locks and syncs.
	MetaReads  int `json:"metadata_reads"`
	MetaWrites int `json:"metadata_writes"`
	// DataReads and DataWrites are read and write calls, with their bytes.
	DataReads      int   `json:"data_reads"`
	DataReadBytes  int64 `json:"data_read_bytes"`
	DataWrites     int   `json:"data_writes"`
	DataWriteBytes int64 `json:"data_write_bytes"`
	// MeteredReadBytes and MeteredWriteBytes are what EFS bills at the read and the
	// write price: each operation at its minimum or its size.
	MeteredReadBytes  int64 `json:"metered_read_bytes"`
	MeteredWriteBytes int64 `json:"metered_write_bytes"`
	// Mappings are files mapped (git reads packs and indexes so); their page faults
	// are data reads no system call shows (bench/maintenance measures those bytes).
	Mappings    int   `json:"mappings"`
	MappedBytes int64 `json:"mapped_bytes"`
	Paths       int   `json:"paths"` // distinct paths under the root named
	// Calls are the metered calls by system call.
	Calls []StoreCostCallCount `json:"calls,omitempty"`
}

// StoreCostCallCount is how many times one system call was made.
type StoreCostCallCount struct {
	Call  string `json:"call"`
	Count int    `json:"count"`
}
