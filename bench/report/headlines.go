package main

import (
	"fmt"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// headlines is the report's summary: the ratios each part exists to measure, read from
// the same JSON as the sections below.
func headlines(r *Report) (string, error) {
	var md strings.Builder
	md.WriteString("## Headlines\n\n")

	var f results.Freshness
	if err := r.Load("freshness", &f); err != nil {
		return "", err
	}
	lag := map[string]map[float64]float64{}
	for _, x := range f.Runs {
		if lag[x.Policy] == nil {
			lag[x.Policy] = map[float64]float64{}
		}
		lag[x.Policy][x.Budget] = x.LagMeanH
	}
	for _, b := range freshGoalBudgets {
		ours, ok := lag[freshOurs][b]
		if !ok || ours <= 0 {
			continue
		}
		fmt.Fprintf(&md, "- **Freshness, %g polls/repo/day:** `rate` mean lag %.2f h = %.2f× the optimum's; "+
			"uniform %.2f×, `cbrt` %.2f×, SWH %.2f× ours.\n", b, ours, ours/lag[freshOpt][b],
			lag["uniform"][b]/ours, lag["cbrt"][b]/ours, lag["swh"][b]/ours)
	}

	if len(f.Drift) > 0 {
		dl := map[string]map[float64]float64{}
		for _, x := range f.Drift {
			if dl[x.Policy] == nil {
				dl[x.Policy] = map[float64]float64{}
			}
			dl[x.Policy][x.Budget] = x.LagMeanH
		}
		var parts []string
		for _, b := range f.Setup.DriftBudgets {
			if ours := dl[freshOurs][b]; ours > 0 {
				parts = append(parts, fmt.Sprintf("at %g, `cbrt` %.2f× and uniform %.2f× ours", b, dl["cbrt"][b]/ours, dl["uniform"][b]/ours))
			}
		}
		fmt.Fprintf(&md, "- **Freshness with drift** (%.0f%% of repos change behaviour a month): %s.\n",
			100*f.Setup.DriftPerMonth, strings.Join(parts, "; "))
	}

	var p results.Placement
	if err := r.Load("placement", &p); err != nil {
		return "", err
	}
	var pm []string
	for _, n := range p.Workers {
		var ours, plain float64
		for _, x := range p.Runs {
			if x.Workers == n && x.Scheme == p.Goal.Scheme {
				ours = x.PeakMean
			}
			if x.Workers == n && x.Scheme == "plain-160" {
				plain = x.PeakMean
			}
		}
		pm = append(pm, fmt.Sprintf("%.3f (plain 160-vnode ring %.3f) at %d workers", ours, plain, n))
	}
	fmt.Fprintf(&md, "- **Placement, %s keys:** ring peak/mean %s.\n", fmtInt(p.Keys), strings.Join(pm, ", "))

	var fc results.FetchCost
	if err := r.Load("fetchcost", &fc); err != nil {
		return "", err
	}
	var fs []string
	for _, s := range fc.Sizes {
		fs = append(fs, fmt.Sprintf("%s: %.2f× the time, %.2f× the memory", s.Name, s.Clone.Ratio.Wall, s.Clone.Ratio.TreeRSS))
	}
	fmt.Fprintf(&md, "- **Fetch cost, go-git ÷ git CLI, first mirror:** %s.\n", strings.Join(fs, "; "))

	var sc results.StoreCost
	if err := r.Load("storecost", &sc); err != nil {
		return "", err
	}
	var bs []string
	for _, b := range sc.Bills {
		bs = append(bs, fmt.Sprintf("%s at %s%s (DynamoDB $%.2f)", scUSD(b.TotalUSD), scBillLabel(b), scGoal(b), b.DynamoDBUSD))
	}
	fmt.Fprintf(&md, "- **Monthly AWS bill:** %s.\n", strings.Join(bs, ", "))

	var tl results.TickLatency
	if err := r.Load("ticklatency", &tl); err != nil {
		return "", err
	}
	var lo, hi *results.TickCell
	for i := range tl.Cells {
		c := &tl.Cells[i]
		if len(tl.Workers) == 0 || c.Workers != tl.Workers[0] {
			continue
		}
		if lo == nil || c.Repos < lo.Repos {
			lo = c
		}
		if hi == nil || c.Repos > hi.Repos {
			hi = c
		}
	}
	if lo != nil && hi != nil && lo.Quiet.P50Ms > 0 && lo.NaiveQuiet.P50Ms > 0 {
		fmt.Fprintf(&md, "- **Coordinator tick, %d workers, %s → %s repos:** quiet tick p50 %.3f → %.3f ms (×%.1f); "+
			"a tick that reads every repo %.1f → %.1f ms (×%.0f).\n", lo.Workers, fmtInt(lo.Repos), fmtInt(hi.Repos),
			lo.Quiet.P50Ms, hi.Quiet.P50Ms, hi.Quiet.P50Ms/lo.Quiet.P50Ms,
			lo.NaiveQuiet.P50Ms, hi.NaiveQuiet.P50Ms, hi.NaiveQuiet.P50Ms/lo.NaiveQuiet.P50Ms)
	}

	var h results.Hostile
	if err := r.Load("hostile", &h); err != nil {
		return "", err
	}
	fmt.Fprintf(&md, "- **Hostile inputs:** %s\n", strings.Trim(hostileHeadline(h), "*"))
	var sv results.Serve
	if err := r.Load("serve", &sv); err != nil {
		return "", err
	}
	md.WriteString(serveHeadline(sv))
	md.WriteString("\n")
	return md.String(), nil
}
