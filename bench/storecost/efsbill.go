package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// efsOps are the measured mirror operations (measureEFSOps), by key: what EFS meters
// of each beyond the bytes it moves.
type efsOps struct {
	ByKey map[string]results.StoreCostEFSOp
	// MirrorBytes is the measured mirror's pack: a first clone's reads scale with it.
	MirrorBytes float64
}

// The operations the bill counts, by measureEFSOps key.
const (
	opPoll            = "poll_nochange"
	opFetch           = "fetch_change"
	opMaintainChanged = "maintain_changed"
	opMaintainSame    = "maintain_unchanged"
	opScrub           = "scrub"
	opClone           = "clone_served"
	opFirstClone      = "first_clone"
)

// billedOps are the operations the bill needs measured.
var billedOps = []string{opPoll, opFetch, opMaintainChanged, opMaintainSame, opScrub, opClone, opFirstClone}

func newEFSOps(ops []results.StoreCostEFSOp, mirrorBytes int64) (efsOps, error) {
	o := efsOps{ByKey: map[string]results.StoreCostEFSOp{}, MirrorBytes: float64(mirrorBytes)}
	for _, op := range ops {
		o.ByKey[op.Key] = op
	}
	for _, k := range billedOps {
		if _, ok := o.ByKey[k]; !ok {
			return o, fmt.Errorf("no EFS operation count for %s", k)
		}
	}
	return o, nil
}

// overhead is what EFS meters of one operation beyond the bytes the byte model
// counts: its metadata operations (4 KiB each) and what the 32 KiB minimum adds to its
// data operations, for reads and for writes, in bytes.
type overhead struct {
	MetaRead, MetaWrite, ReadMin, WriteMin float64
}

func overheadOf(op results.StoreCostEFSOp) overhead {
	mr, mw := float64(op.MetaReads)*efsMetaMin, float64(op.MetaWrites)*efsMetaMin
	return overhead{MetaRead: mr, MetaWrite: mw,
		ReadMin:  math.Max(0, float64(op.MeteredReadBytes)-mr-float64(op.DataReadBytes)),
		WriteMin: math.Max(0, float64(op.MeteredWriteBytes)-mw-float64(op.DataWriteBytes))}
}

// meter adds count operations of kind key to the month: their metered overhead, and
// the count.
func (m *efsMonth) meter(ops efsOps, key string, count float64) {
	const gb = 1 << 30
	o := overheadOf(ops.ByKey[key])
	m.MetaReadGB += count * o.MetaRead / gb
	m.MetaWriteGB += count * o.MetaWrite / gb
	m.ReadMinGB += count * o.ReadMin / gb
	m.WriteMinGB += count * o.WriteMin / gb
	for i := range m.Ops {
		if m.Ops[i].Op == key {
			m.Ops[i].Count += count
			return
		}
	}
	m.Ops = append(m.Ops, results.StoreCostOpCount{Op: key, Count: count})
}

// freshnessRuns are the freshness benchmark's runs of the default policy, by budget:
// what a poll budget gives.
type freshnessRuns struct {
	Source string
	Runs   []freshnessRun // by budget
}

type freshnessRun struct {
	Policy    string  `json:"policy"`
	Budget    float64 `json:"budget"`
	LagMeanH  float64 `json:"lag_mean_h"`
	LagP50H   float64 `json:"lag_p50_h"`
	LagP99H   float64 `json:"lag_p99_h"`
	Freshness float64 `json:"freshness"`
	Default   bool    `json:"default"`
}

// freshnessFrom reads the default policy's runs from freshness.json in dir.
func freshnessFrom(dir string) (freshnessRuns, error) {
	path := filepath.Join(dir, "freshness.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return freshnessRuns{}, fmt.Errorf("the budgets' freshness comes from %s: %w", path, err)
	}
	var f struct {
		Meta struct {
			Date string `json:"date"`
		} `json:"meta"`
		Runs []freshnessRun `json:"runs"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return freshnessRuns{}, fmt.Errorf("%s: %w", path, err)
	}
	out := freshnessRuns{Source: "bench/results/freshness.json (" + f.Meta.Date + "), section runs: 10,000 repos, the default policy"}
	for _, r := range f.Runs {
		if r.Default {
			out.Runs = append(out.Runs, r)
		}
	}
	slices.SortFunc(out.Runs, func(a, b freshnessRun) int { return cmp.Compare(a.Budget, b.Budget) })
	if len(out.Runs) == 0 {
		return out, fmt.Errorf("%s: no run of the default policy", path)
	}
	return out, nil
}

// at is the freshness at budget: a run's own where one was made at it, else the two
// around it interpolated on log budget (the figures go as a power of it); nil outside
// the runs' range.
func (f freshnessRuns) at(budget float64) *results.StoreCostFreshness {
	for i, r := range f.Runs {
		if math.Abs(r.Budget-budget) < 1e-9 {
			return &results.StoreCostFreshness{Budget: budget, Policy: r.Policy, LagMeanH: r.LagMeanH, LagP50H: r.LagP50H,
				LagP99H: r.LagP99H, Freshness: r.Freshness, Source: f.Source}
		}
		if i > 0 && f.Runs[i-1].Budget < budget && budget < r.Budget {
			a, b := f.Runs[i-1], r
			w := math.Log(budget/a.Budget) / math.Log(b.Budget/a.Budget)
			lerp := func(x, y float64) float64 {
				if x > 0 && y > 0 {
					return math.Exp(math.Log(x) + w*(math.Log(y)-math.Log(x)))
				}
				return x + w*(y-x)
			}
			return &results.StoreCostFreshness{Budget: budget, Policy: r.Policy, LagMeanH: lerp(a.LagMeanH, b.LagMeanH),
				LagP50H: lerp(a.LagP50H, b.LagP50H), LagP99H: lerp(a.LagP99H, b.LagP99H), Freshness: a.Freshness + w*(b.Freshness-a.Freshness),
				Source: f.Source + fmt.Sprintf(", between its budgets %g and %g (log scale)", a.Budget, b.Budget)}
		}
	}
	return nil
}
