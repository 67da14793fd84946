// Package metrics is the fleet's metrics seam (DESIGN.md §2, §4 step 7): the coordinator
// and the workers turn what they did into Samples — named values with dimensions — and
// hand them to a sink. Two sinks, one per deployment:
//
//   - EMF: CloudWatch Embedded Metric Format JSON lines on an io.Writer (AWS: the Lambda's
//     and the ECS tasks' stdout, which CloudWatch Logs turns into metrics in namespace
//     MirrorFleet, no PutMetricData calls);
//   - Prometheus: a per-sink registry served at /metrics (local mode).
//
// Both have the method Record(...Sample) error; callers define the interface they need
// where they use it. The names below are the contract with the dashboards and alarms.
//
// Dimensions: every CloudWatch metric carries Fleet (which deployment: staging, prod).
// WorkersByState and ReposByState carry State too — one metric per family with a State
// dimension rather than WorkersActive, WorkersDead, ..., so a new state needs no new
// name, and a dashboard graphs a family with one SEARCH expression. Every known state
// is reported, zeros included, so "no dead workers" is a 0, not missing data. QueueDepth
// names its Worker as a Prometheus label but, in EMF, only as a log property: a worker
// dimension would make a new CloudWatch metric (billed monthly) for every worker
// incarnation. Fleet-wide, read QueueDepth with the Maximum or Average statistic.
package metrics

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Namespace is the CloudWatch namespace of every metric.
const Namespace = "MirrorFleet"

// Metric names (CloudWatch). The Prometheus name of each is Def.PromName.
const (
	LeaderTerm     = "LeaderTerm"     // gauge: the leader's election term
	Ticks          = "Ticks"          // counter: coordinator ticks that succeeded (leader or not)
	TickDuration   = "TickDuration"   // histogram, seconds
	WorkersByState = "WorkersByState" // gauge per State: joining, active, suspect, dead, draining
	ReposByState   = "ReposByState"   // gauge per State: pending, cloning, ok, failing, gone, overflow, deleting
	ReposMoved     = "ReposMoved"     // counter: repos (re)assigned by the leader
	StalenessP50   = "StalenessP50"   // gauge, seconds since the last successful fetch
	StalenessP99   = "StalenessP99"   // gauge, seconds
	StalenessMax   = "StalenessMax"   // gauge, seconds
	FetchSuccesses = "FetchSuccesses" // counter
	FetchFailures  = "FetchFailures"  // counter
	FetchDuration  = "FetchDuration"  // histogram, seconds
	BytesFetched   = "BytesFetched"   // counter, bytes
	QueueDepth     = "QueueDepth"     // gauge: repos in a worker's fetch queue

	MaintenanceRuns    = "MaintenanceRuns"    // counter: mirror maintenance runs (repack, commit-graph, fsck)
	MaintenanceSeconds = "MaintenanceSeconds" // histogram, seconds
	MirrorsRecloned    = "MirrorsRecloned"    // counter: corrupt mirrors moved to the trash and cloned again
	MirrorPacks        = "MirrorPacks"        // gauge: the largest pack count among a worker's mirrors
)

// Dimension names.
const (
	DimFleet  = "Fleet"  // EMF only: set on the EMF sink, not on samples
	DimState  = "State"  // WorkersByState, ReposByState
	DimWorker = "Worker" // QueueDepth, MirrorPacks
)

// Kind says how a sink aggregates a metric's samples.
type Kind int

const (
	Gauge     Kind = iota // the last value wins
	Counter               // values add up; never negative
	Histogram             // every value is an observation
)

// Unit is a CloudWatch unit.
type Unit string

const (
	UnitNone    Unit = "None"
	UnitCount   Unit = "Count"
	UnitSeconds Unit = "Seconds"
	UnitBytes   Unit = "Bytes"
)

// Def describes one metric.
type Def struct {
	Name  string
	Kind  Kind
	Unit  Unit
	Dims  []string // keys every sample carries: CloudWatch dimensions and Prometheus labels
	Props []string // keys every sample carries: Prometheus labels; in EMF, log properties only
	Help  string
}

// PromName is the metric's Prometheus name: mirrorfleet_ + the name in snake_case, with
// the unit suffix (_seconds) and the counter suffix (_total) Prometheus conventions ask
// for, e.g. FetchDuration → mirrorfleet_fetch_duration_seconds, Ticks →
// mirrorfleet_ticks_total.
func (d Def) PromName() string {
	n := "mirrorfleet_" + snake(d.Name)
	if d.Unit == UnitSeconds && !strings.HasSuffix(n, "_seconds") { // MaintenanceSeconds: once
		n += "_seconds"
	}
	if d.Kind == Counter {
		n += "_total"
	}
	return n
}

func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

var defs = []Def{
	{Name: LeaderTerm, Kind: Gauge, Unit: UnitNone, Help: "Election term of the current leader coordinator."},
	{Name: Ticks, Kind: Counter, Unit: UnitCount, Help: "Coordinator ticks that succeeded, by leaders and followers."},
	{Name: TickDuration, Kind: Histogram, Unit: UnitSeconds, Help: "Wall time of a coordinator tick."},
	{Name: WorkersByState, Kind: Gauge, Unit: UnitCount, Dims: []string{DimState}, Help: "Workers by membership state, as the leader last saw them."},
	{Name: ReposByState, Kind: Gauge, Unit: UnitCount, Dims: []string{DimState}, Help: "Repos by lifecycle state."},
	{Name: ReposMoved, Kind: Counter, Unit: UnitCount, Help: "Repos (re)assigned to a worker by the leader."},
	{Name: StalenessP50, Kind: Gauge, Unit: UnitSeconds, Help: "Median time since a repo's last successful fetch."},
	{Name: StalenessP99, Kind: Gauge, Unit: UnitSeconds, Help: "99th percentile of the time since a repo's last successful fetch."},
	{Name: StalenessMax, Kind: Gauge, Unit: UnitSeconds, Help: "Longest time since a repo's last successful fetch."},
	{Name: FetchSuccesses, Kind: Counter, Unit: UnitCount, Help: "Fetches (and clones) that succeeded."},
	{Name: FetchFailures, Kind: Counter, Unit: UnitCount, Help: "Fetches (and clones) that failed."},
	{Name: FetchDuration, Kind: Histogram, Unit: UnitSeconds, Help: "Wall time of a fetch, including a no-change poll."},
	{Name: BytesFetched, Kind: Counter, Unit: UnitBytes, Help: "Bytes received from upstreams."},
	{Name: QueueDepth, Kind: Gauge, Unit: UnitCount, Props: []string{DimWorker}, Help: "Repos in a worker's fetch queue."},
	{Name: MaintenanceRuns, Kind: Counter, Unit: UnitCount, Help: "Mirror maintenance runs (repack, commit-graph, connectivity check), failed ones included."},
	{Name: MaintenanceSeconds, Kind: Histogram, Unit: UnitSeconds, Help: "Wall time of a mirror maintenance run."},
	{Name: MirrorsRecloned, Kind: Counter, Unit: UnitCount, Help: "Corrupt mirrors moved to the trash and cloned again."},
	{Name: MirrorPacks, Kind: Gauge, Unit: UnitCount, Props: []string{DimWorker}, Help: "Largest pack count among a worker's mirrors (maintenance rolls them up)."},
}

var byName = func() map[string]Def {
	m := map[string]Def{}
	for _, d := range defs {
		m[d.Name] = d
	}
	return m
}()

// Defs returns every metric the fleet emits (for dashboards, alarms and docs).
func Defs() []Def {
	out := make([]Def, len(defs))
	for i, d := range defs {
		d.Dims, d.Props = slices.Clone(d.Dims), slices.Clone(d.Props)
		out[i] = d
	}
	return out
}

// Lookup returns the definition of the metric called name.
func Lookup(name string) (Def, bool) {
	d, ok := byName[name]
	return d, ok
}

// Sample is one value of one metric. Dims holds exactly the keys of the metric's
// Def.Dims and Def.Props.
type Sample struct {
	Name  string
	Value float64
	Dims  map[string]string
}

// check validates s against its definition.
func (s Sample) check() (Def, error) {
	d, ok := byName[s.Name]
	if !ok {
		return d, fmt.Errorf("metrics: unknown metric %q", s.Name)
	}
	if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
		return d, fmt.Errorf("metrics: %s: value %v is not a finite number", s.Name, s.Value)
	}
	if d.Kind == Counter && s.Value < 0 {
		return d, fmt.Errorf("metrics: %s: counter increment %v is negative", s.Name, s.Value)
	}
	want := append(slices.Clone(d.Dims), d.Props...)
	if len(s.Dims) != len(want) {
		return d, fmt.Errorf("metrics: %s: dimensions %v, want exactly %v", s.Name, slices.Sorted(maps.Keys(s.Dims)), want)
	}
	for _, k := range want {
		if v, ok := s.Dims[k]; !ok || v == "" {
			return d, fmt.Errorf("metrics: %s: dimension %s missing or empty", s.Name, k)
		}
	}
	return d, nil
}

// each runs f on every valid sample and returns the errors of the others, joined: a
// bad sample is a bug to report, not a reason to lose the good ones.
func each(samples []Sample, f func(Def, Sample)) error {
	var errs []error
	for _, s := range samples {
		d, err := s.check()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f(d, s)
	}
	return errors.Join(errs...)
}

// Known states, reported with zeros so a state that empties shows 0, not a gap.
var (
	workerStates = []store.WorkerState{store.WorkerJoining, store.WorkerActive, store.WorkerSuspect, store.WorkerDead, store.WorkerDraining}
	repoStates   = []store.RepoState{store.RepoPending, store.RepoCloning, store.RepoOK, store.RepoFailing, store.RepoGone, store.RepoOverflow, store.RepoDeleting}
)

func byState[S ~string](name string, known []S, counts map[S]int) []Sample {
	var out []Sample
	for _, s := range known {
		out = append(out, Sample{Name: name, Value: float64(counts[s]), Dims: map[string]string{DimState: string(s)}})
	}
	for _, s := range slices.Sorted(maps.Keys(counts)) { // states this package does not know yet
		if !slices.Contains(known, s) && s != "" {
			out = append(out, Sample{Name: name, Value: float64(counts[s]), Dims: map[string]string{DimState: string(s)}})
		}
	}
	return out
}

// FromReport turns a coordinator tick into samples; took is how long the tick ran and
// err what it returned. Every tick that succeeded counts (Ticks) — a failed one does
// not, so the no-tick alarm sees a coordinator that fails every minute — and every tick
// reports its duration. Only a leader's tick speaks for the fleet (LeaderTerm,
// ReposMoved, WorkersByState), so two coordinators never report conflicting states. A
// report of an ignored timer firing ran no tick: no samples.
func FromReport(rep coordinator.Report, took time.Duration, err error) []Sample {
	if rep.Ignored != "" {
		return nil
	}
	out := []Sample{{Name: TickDuration, Value: max(took, 0).Seconds()}}
	if err == nil {
		out = append([]Sample{{Name: Ticks, Value: 1}}, out...)
	}
	if !rep.Leader {
		return out
	}
	out = append(out, Sample{Name: LeaderTerm, Value: float64(rep.Term)}, Sample{Name: ReposMoved, Value: float64(max(rep.Moved, 0))})
	if rep.WorkersByState != nil { // nil when the tick stopped before reading the workers
		out = append(out, byState(WorkersByState, workerStates, rep.WorkersByState)...)
	}
	return out
}

// ReposByStateSamples reports repo counts (Store.CountRepos) with every known state.
func ReposByStateSamples(counts map[store.RepoState]int) []Sample {
	return byState(ReposByState, repoStates, counts)
}

// Fetch reports one fetch by a worker: its outcome, wall time and bytes received.
func Fetch(ok bool, took time.Duration, bytes int64) []Sample {
	outcome := FetchFailures
	if ok {
		outcome = FetchSuccesses
	}
	return []Sample{
		{Name: outcome, Value: 1},
		{Name: FetchDuration, Value: max(took, 0).Seconds()},
		{Name: BytesFetched, Value: float64(max(bytes, 0))},
	}
}

// Maintenance reports one maintenance run of a worker: its wall time and whether it
// re-cloned a corrupt mirror.
func Maintenance(took time.Duration, recloned bool) []Sample {
	out := []Sample{{Name: MaintenanceRuns, Value: 1}, {Name: MaintenanceSeconds, Value: max(took, 0).Seconds()}}
	if recloned {
		out = append(out, Sample{Name: MirrorsRecloned, Value: 1})
	}
	return out
}

// Packs reports the largest pack count among a worker's mirrors.
func Packs(worker string, n int) Sample {
	return Sample{Name: MirrorPacks, Value: float64(max(n, 0)), Dims: map[string]string{DimWorker: worker}}
}

// Queue reports the depth of a worker's fetch queue.
func Queue(worker string, depth int) Sample {
	return Sample{Name: QueueDepth, Value: float64(max(depth, 0)), Dims: map[string]string{DimWorker: worker}}
}
