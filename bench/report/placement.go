package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/plot"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// placementSection renders placement.json: balance, movement and lookup cost of our ring
// against the baselines, one table per worker count.
func placementSection(r *Report) (string, results.Meta, error) {
	var v results.Placement
	if err := r.Load("placement", &v); err != nil {
		return "", results.Meta{}, err
	}
	runs, err := placementIndex(v)
	if err != nil {
		return "", v.Meta, err
	}
	charts, err := placementCharts(r, v, runs)
	if err != nil {
		return "", v.Meta, err
	}
	type goalRow struct {
		N                 int
		X                 results.PlacementResult
		Balance, Movement bool
	}
	type row struct {
		Scheme, Tokens string
		X              results.PlacementResult
	}
	type table struct {
		N, KeysPerWorker int
		Noise            results.PlacementNoise
		Rows             []row
	}
	var goals []goalRow
	var missed []string
	for i, n := range v.Workers {
		x := runs[v.Goal.Scheme][n]
		bal, mov := placementMeets(v.Goal, x)
		goals = append(goals, goalRow{N: n, X: x, Balance: bal, Movement: mov})
		if !bal {
			missed = append(missed, fmt.Sprintf("peak/mean at %s workers (%.3f; sampling noise alone gives %.3f there)",
				fmtInt(n), x.PeakMean, v.Noise[i].PeakMean))
		}
		if !mov {
			missed = append(missed, fmt.Sprintf("movement at %s workers", fmtInt(n)))
		}
	}
	var tables []table
	for _, n := range v.Workers {
		t := table{N: n}
		for _, x := range v.Noise {
			if x.Workers == n {
				t.Noise = x
			}
		}
		t.KeysPerWorker = int(math.Round(t.Noise.MeanKeys))
		for _, s := range v.Schemes {
			x := runs[s][n]
			tokens := "—"
			if x.Tokens > 0 {
				tokens = fmtInt(x.Tokens)
			}
			t.Rows = append(t.Rows, row{Scheme: s, Tokens: tokens, X: x})
		}
		tables = append(tables, t)
	}
	md, err := render("placement", struct {
		V       results.Placement
		Workers string
		Goals   []goalRow
		Missed  []string
		Charts  string
		Tables  []table
		E       placementExplanation
	}{v, placementJoin(v.Workers), goals, missed, charts, tables, placementExplain(v, runs)})
	return md, v.Meta, err
}

// placementRuns finds a run by scheme and worker count.
type placementRuns map[string]map[int]results.PlacementResult

func placementIndex(v results.Placement) (placementRuns, error) {
	runs := placementRuns{}
	for _, x := range v.Runs {
		if runs[x.Scheme] == nil {
			runs[x.Scheme] = map[int]results.PlacementResult{}
		}
		runs[x.Scheme][x.Workers] = x
	}
	for _, s := range v.Schemes {
		for _, n := range v.Workers {
			if _, ok := runs[s][n]; !ok {
				return nil, fmt.Errorf("placement: no run of %s at %d workers", s, n)
			}
		}
	}
	if _, ok := runs[v.Goal.Scheme]; !ok {
		return nil, fmt.Errorf("placement: goal scheme %q not measured", v.Goal.Scheme)
	}
	if len(v.Noise) != len(v.Workers) {
		return nil, fmt.Errorf("placement: %d noise rows for %d worker counts", len(v.Noise), len(v.Workers))
	}
	return runs, nil
}

// placementMeets reports whether a run meets the goal.
func placementMeets(g results.PlacementGoal, x results.PlacementResult) (balance, movement bool) {
	return x.PeakMean <= g.PeakMean, x.JoinRatio <= g.MovedRatio && x.LeaveRatio <= g.MovedRatio
}

func placementVerdict(ok bool) string {
	if ok {
		return "meets the goal"
	}
	return "**misses the goal**"
}

// placementCharts draws the excess load, the join movement and the lookup cost.
func placementCharts(r *Report, v results.Placement, runs placementRuns) (string, error) {
	groups := make([]string, len(v.Workers))
	for i, n := range v.Workers {
		groups[i] = fmtInt(n) + " workers"
	}
	excess := plot.Bars{Title: "Busiest worker's load above the mean", YLabel: "peak/mean − 1 (%)", Groups: groups}
	moved := plot.Bars{Title: "Keys moved when one worker joins", YLabel: "× ideal (keys/(n+1))", Groups: groups}
	lookup := plot.Line{Title: "Lookup cost", XLabel: "workers", YLabel: "ns per lookup", LogX: true, LogY: true}
	for _, s := range v.Schemes {
		ex, mv := plot.BarSeries{Name: s}, plot.BarSeries{Name: s}
		ln := plot.Series{Name: s}
		for _, n := range v.Workers {
			x := runs[s][n]
			ex.Values = append(ex.Values, (x.PeakMean-1)*100)
			mv.Values = append(mv.Values, x.JoinRatio)
			ln.X, ln.Y = append(ln.X, float64(n)), append(ln.Y, x.LookupNs)
		}
		excess.Series = append(excess.Series, ex)
		moved.Series = append(moved.Series, mv)
		lookup.Series = append(lookup.Series, ln)
	}
	floor := plot.BarSeries{Name: "uniform random (noise floor)"}
	for _, nz := range v.Noise {
		floor.Values = append(floor.Values, (nz.PeakMean-1)*100)
	}
	excess.Series = append(excess.Series, floor)

	var b strings.Builder
	for _, c := range []struct {
		file, alt string
		chart     chart
	}{
		{"placement-balance.svg", "peak/mean load minus one, by worker count and scheme", excess},
		{"placement-join.svg", "keys moved on a join relative to the ideal, by worker count and scheme", moved},
		{"placement-lookup.svg", "lookup ns/op against worker count, by scheme", lookup},
	} {
		line, err := r.Plot(c.file, c.alt, c.chart)
		if err != nil {
			return "", err
		}
		b.WriteString(line)
		b.WriteString("\n")
	}
	return b.String(), nil
}

// placementExplanation is what the closing prose says of the largest worker count.
type placementExplanation struct {
	Scheme                     string
	Last, Keys, KeysPerWorker  int
	Ours                       results.PlacementResult
	Noise                      results.PlacementNoise
	VNodes                     int
	LoadFactor                 float64
	OursArcPct, VNodeSpreadPct float64
	FloorPct                   float64
	OnFloor                    []string
	ShowNeed                   bool
	GoalPeakMean               float64
	Need, NeedKeys             int
	Where                      string
	OwnPoints, DrawPoints      float64
	LookupRuns                 int
	MemMethod                  string
	Notes                      []results.PlacementResult
}

// placementExplain says what each scheme is and why its figures are what they are.
func placementExplain(v results.Placement, runs placementRuns) placementExplanation {
	last := v.Workers[len(v.Workers)-1]
	nz := v.Noise[len(v.Noise)-1]
	ours := runs[v.Goal.Scheme][last]
	e := placementExplanation{Scheme: v.Goal.Scheme, Last: last, Keys: v.Keys, KeysPerWorker: int(math.Round(nz.MeanKeys)),
		Ours: ours, Noise: nz, VNodes: v.Params.VNodes, LoadFactor: v.Params.LoadFactor,
		OursArcPct: (ours.SharePeakMean - 1) * 100, VNodeSpreadPct: 100 / math.Sqrt(float64(v.Params.VNodes)),
		FloorPct: (nz.PeakMean - 1) * 100, OnFloor: placementOnFloor(v, runs, nz), GoalPeakMean: v.Goal.PeakMean,
		Where: "within", OwnPoints: (ours.KeySetsPeakMean - nz.PeakMean) * 100,
		LookupRuns: v.Params.LookupRuns, MemMethod: v.Params.MemMethod}
	if g := v.Goal.PeakMean - 1; nz.PeakMean-1 > g {
		// Excess load scales as 1/sqrt(keys per worker).
		need := nz.MeanKeys * math.Pow((nz.PeakMean-1)/g, 2)
		e.ShowNeed, e.Need, e.NeedKeys = true, int(math.Round(need)), int(math.Round(need*float64(last)))
	}
	switch {
	case ours.PeakMean > nz.PeakMeanMax:
		e.Where = "above"
	case ours.PeakMean < nz.PeakMeanMin:
		e.Where = "below"
	}
	if d := ours.PeakMean - ours.KeySetsPeakMean; d > 0 {
		e.DrawPoints = d * 100
	}
	for _, s := range v.Schemes {
		if x := runs[s][last]; x.Note != "" {
			e.Notes = append(e.Notes, x)
		}
	}
	return e
}

// placementOnFloor lists the schemes whose peak/mean at nz's worker count lies within the
// uniform draws' range.
func placementOnFloor(v results.Placement, runs placementRuns, nz results.PlacementNoise) []string {
	var on []string
	for _, s := range v.Schemes {
		if x := runs[s][nz.Workers]; x.PeakMean >= nz.PeakMeanMin && x.PeakMean <= nz.PeakMeanMax {
			on = append(on, fmt.Sprintf("`%s` (%.3f)", s, x.PeakMean))
		}
	}
	return on
}

// placementOptional formats v, or a dash where a scheme has no such figure (0).
func placementOptional(v float64, format string) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf(format, v)
}

// placementKiB formats a byte count in KiB.
func placementKiB(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }

// placementJoin writes worker counts as "10, 100 and 1,000".
func placementJoin(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmtInt(n)
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
