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
	var md strings.Builder
	md.WriteString("## 2. Placement\n\n")
	fmt.Fprintf(&md, "How evenly each scheme spreads %s repos over %s workers, how many repos one join and one "+
		"leave move, and what a lookup costs. Keys are the ring hashes of `https://host/org/repo-<i>`, as the "+
		"coordinator hashes them; every scheme places the same keys.\n\n", fmtInt(v.Keys), placementJoin(v.Workers))
	md.WriteString(placementGoal(v, runs))
	charts, err := placementCharts(r, v, runs)
	if err != nil {
		return "", v.Meta, err
	}
	md.WriteString(charts)
	md.WriteString("Columns: **peak/mean** is the most keys on one worker over the mean; **other key sets** the " +
		"mean of the same over fresh uniform key sets of the same size (the noise floor's), for the schemes with arcs, " +
		"which separates a scheme's own imbalance from this key set's draw; **arc peak/mean** the " +
		"largest share of the hash space times n, i.e. balance without key-sampling noise (— where a scheme has no " +
		"arcs); **moved × ideal** counts keys whose owner changed, over keys/(n+1) for a join and over the leaver's " +
		"keys for a leave; **stray moves** are moved keys that neither went to the newcomer nor came from the " +
		"leaver.\n\n")
	for _, n := range v.Workers {
		md.WriteString(placementTable(v, runs, n))
	}
	md.WriteString(placementExplain(v, runs))
	return md.String(), v.Meta, nil
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

func placementGoal(v results.Placement, runs placementRuns) string {
	g := v.Goal
	var b strings.Builder
	fmt.Fprintf(&b, "**Goal** for `%s`: peak/mean load ≤ %.2f and keys moved on a join or a leave ≤ %.1f × ideal.\n\n", g.Scheme, g.PeakMean, g.MovedRatio)
	var missed []string
	for i, n := range v.Workers {
		x := runs[g.Scheme][n]
		bal, mov := placementMeets(g, x)
		fmt.Fprintf(&b, "- %s workers: peak/mean %.3f (%s), join %.3f × ideal, leave %.3f × ideal (%s).\n",
			fmtInt(n), x.PeakMean, placementVerdict(bal), x.JoinRatio, x.LeaveRatio, placementVerdict(mov))
		if !bal {
			missed = append(missed, fmt.Sprintf("peak/mean at %s workers (%.3f; sampling noise alone gives %.3f there)",
				fmtInt(n), x.PeakMean, v.Noise[i].PeakMean))
		}
		if !mov {
			missed = append(missed, fmt.Sprintf("movement at %s workers", fmtInt(n)))
		}
	}
	if len(missed) == 0 {
		b.WriteString("\nThe goal is met at every worker count.\n\n")
	} else {
		fmt.Fprintf(&b, "\n**The goal is not met** for %s.\n\n", strings.Join(missed, "; "))
	}
	return b.String()
}

func placementVerdict(ok bool) string {
	if ok {
		return "meets the goal"
	}
	return "**misses the goal**"
}

func placementTable(v results.Placement, runs placementRuns, n int) string {
	var b strings.Builder
	var nz results.PlacementNoise
	for _, x := range v.Noise {
		if x.Workers == n {
			nz = x
		}
	}
	fmt.Fprintf(&b, "### %s workers\n\n", fmtInt(n))
	fmt.Fprintf(&b, "| scheme | peak/mean | peak/mean, %d other key sets | arc peak/mean | join moved × ideal | leave moved × ideal "+
		"| stray moves join / leave | lookup ns/op | allocs/op | memory | tokens |\n", nz.Trials)
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range v.Schemes {
		x := runs[s][n]
		tokens := "—"
		if x.Tokens > 0 {
			tokens = fmtInt(x.Tokens)
		}
		fmt.Fprintf(&b, "| %s | %.3f | %s | %s | %.3f | %.3f | %d / %d | %.0f | %d | %s | %s |\n",
			s, x.PeakMean, placementOptional(x.KeySetsPeakMean, "%.3f"), placementOptional(x.SharePeakMean, "%.3f"),
			x.JoinRatio, x.LeaveRatio, x.JoinStray, x.LeaveStray, x.LookupNs, x.LookupAllocs, placementKiB(x.MemBytes), tokens)
	}
	fmt.Fprintf(&b, "\nSampling-noise floor: %s keys per worker placed uniformly at random give peak/mean %.3f "+
		"(%.3f–%.3f over %d draws).\n\n", fmtInt(int(math.Round(nz.MeanKeys))), nz.PeakMean, nz.PeakMeanMin, nz.PeakMeanMax, nz.Trials)
	return b.String()
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

// placementExplain says what each scheme is and why its figures are what they are.
func placementExplain(v results.Placement, runs placementRuns) string {
	last := v.Workers[len(v.Workers)-1]
	nz := v.Noise[len(v.Noise)-1]
	ours := runs[v.Goal.Scheme][last]
	var b strings.Builder
	b.WriteString("**What the schemes are.**\n\n")
	fmt.Fprintf(&b, "- `ours` is `shared/ring`: token positions are chosen, not hashed; a joining worker carves exactly "+
		"1/(n+1) of the circle out of the largest members and a leaver's arcs go to the smallest, so arcs stay "+
		"within %.1f%% of the mean at %s workers (arc peak/mean), with %s tokens.\n",
		(ours.SharePeakMean-1)*100, fmtInt(last), fmtInt(ours.Tokens))
	fmt.Fprintf(&b, "- `plain-%d` is the classic ring: %d virtual nodes per worker at hashed positions. A worker's "+
		"share is a sum of %d random arcs, about ±%.0f%% from the mean, and the busiest of n workers is the tail of "+
		"that spread, so peak/mean grows with n. Positions depend only on worker IDs, so a join moves only keys "+
		"to the newcomer, but as many as its random share: the join figure is that share.\n",
		v.Params.VNodes, v.Params.VNodes, v.Params.VNodes, 100/math.Sqrt(float64(v.Params.VNodes)))
	b.WriteString("- `jump` is jump consistent hash (Lamping & Veach): no state but the bucket count, O(log n) " +
		"steps per lookup, every bucket equally likely, so its imbalance is sampling noise alone. Workers are numbered buckets, so only the last one " +
		"can leave: its leave figure is for removing the last bucket, not a worker in the middle.\n")
	b.WriteString("- `rendezvous` is highest-random-weight hashing: a key goes to the worker with the highest " +
		"score of (key, worker); every worker equally likely and minimal movement, but a lookup scores every " +
		"worker, so its cost grows linearly with n.\n")
	fmt.Fprintf(&b, "- `bounded-loads` is consistent hashing with bounded loads (Mirrokni, Thorup & "+
		"Zadimoghaddam) on the plain-%d ring, c = %.2f: a key whose owner already has ceil(c·keys/n) keys "+
		"goes on clockwise. It caps peak/mean at about c, which only matters where the plain ring's peak is "+
		"above it; placements depend on key order, so a change can also move keys between two other "+
		"workers (the stray moves).\n\n", v.Params.VNodes, v.Params.LoadFactor)

	b.WriteString("**Why the figures are what they are.** ")
	fmt.Fprintf(&b, "At %s workers and %s keys a worker has about %s keys, so even a perfect hash leaves the busiest "+
		"worker %.1f%% above the mean (the noise floor, %.3f, from %.3f to %.3f over %d draws); no scheme that places "+
		"keys by hash alone can do better. ",
		fmtInt(last), fmtInt(v.Keys), fmtInt(int(math.Round(nz.MeanKeys))), (nz.PeakMean-1)*100,
		nz.PeakMean, nz.PeakMeanMin, nz.PeakMeanMax, nz.Trials)
	if on := placementOnFloor(v, runs, nz); len(on) > 0 {
		fmt.Fprintf(&b, "Within that range at %s workers: %s. ", fmtInt(last), strings.Join(on, ", "))
	}
	if g := v.Goal.PeakMean - 1; nz.PeakMean-1 > g {
		// Excess load scales as 1/sqrt(keys per worker).
		need := nz.MeanKeys * math.Pow((nz.PeakMean-1)/g, 2)
		fmt.Fprintf(&b, "Reaching %.2f at %s workers by hashing would take about %s keys per worker (%s keys), "+
			"scaling the measured floor as 1/√(keys per worker). ",
			v.Goal.PeakMean, fmtInt(last), fmtInt(int(math.Round(need))), fmtInt(int(math.Round(need*float64(last)))))
	}
	where := "within"
	switch {
	case ours.PeakMean > nz.PeakMeanMax:
		where = "above"
	case ours.PeakMean < nz.PeakMeanMin:
		where = "below"
	}
	fmt.Fprintf(&b, "`%s` at %s workers: peak/mean %.3f on these keys (%s the range of the uniform draws), %.3f on "+
		"average over %d other key sets against the floor's %.3f, with arcs at most %.1f%% above the mean. On average "+
		"its own imbalance adds %.1f points to the floor", v.Goal.Scheme, fmtInt(last), ours.PeakMean, where,
		ours.KeySetsPeakMean, nz.Trials, nz.PeakMean, (ours.SharePeakMean-1)*100, (ours.KeySetsPeakMean-nz.PeakMean)*100)
	if d := ours.PeakMean - ours.KeySetsPeakMean; d > 0 {
		fmt.Fprintf(&b, "; the other %.1f points of %.3f are this key set's draw", d*100, ours.PeakMean)
	}
	b.WriteString(". ")
	b.WriteString("The movement ratios of the consistent schemes (no stray moves) are not overhead: a join moves " +
		"exactly the keys the newcomer takes and a leave exactly the leaver's keys, so the join figure is the " +
		"newcomer's share of these keys — below 1 it got fewer than keys/(n+1), above 1 more.\n\n")

	fmt.Fprintf(&b, "Lookup is ns per lookup of a precomputed key hash, over the %s hashes in order, with "+
		"`testing.Benchmark`, the fastest of %d runs (the machine is shared, and other load only adds time). "+
		"Memory is %s.\n", fmtInt(v.Keys), v.Params.LookupRuns, v.Params.MemMethod)
	var notes []string
	for _, s := range v.Schemes {
		if x := runs[s][last]; x.Note != "" {
			notes = append(notes, fmt.Sprintf("- `%s`: %s.\n", s, x.Note))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\nNotes:\n\n")
		b.WriteString(strings.Join(notes, ""))
	}
	return b.String()
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
