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
	def, err := defaultPolicy(f)
	if err != nil {
		return "", err
	}
	secs := freshSections(f)
	for _, b := range []float64{0.5, 2} {
		ours, ok := secs[0].runs[def][b]
		if !ok || ours.LagMeanH <= 0 {
			continue
		}
		var parts []string
		for _, s := range secs {
			x, o := s.runs[def][b], s.runs[freshOpt][b]
			if x.LagMeanH > 0 && o.LagMeanH > 0 {
				parts = append(parts, fmt.Sprintf("%s %.2f× (p99 %.2f×)", s.key, x.LagMeanH/o.LagMeanH, x.LagP99H/o.LagP99H))
			}
		}
		fmt.Fprintf(&md, "- **Freshness, %g polls/repo/day:** `%s` (default) mean lag %.2f h; over the optimum: %s; "+
			"`rate` %.2f×, `cbrt` %.2f×, uniform %.2f× ours (stationary).\n", b, def, ours.LagMeanH, strings.Join(parts, ", "),
			secs[0].runs["rate"][b].LagMeanH/ours.LagMeanH, secs[0].runs["cbrt"][b].LagMeanH/ours.LagMeanH,
			secs[0].runs["uniform"][b].LagMeanH/ours.LagMeanH)
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
