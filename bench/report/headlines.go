package main

import (
	"fmt"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// headlines is the report's summary: the ratios each part exists to measure, read from
// the same JSON as the sections below.
func headlines(r *Report) (string, error) {
	type fresh struct {
		Budget              float64
		Default             string
		LagMeanH            float64
		OverOptimum         []string
		Rate, Cbrt, Uniform float64
	}
	type tick struct {
		Lo, Hi         *results.TickCell
		QuietX, NaiveX float64
	}
	var h struct {
		Freshness        []fresh
		PlacementKeys    int
		Placement        []string
		FetchCost, Bills []string
		Tick             *tick
		Hostile, Serve   string
		Maintenance      string
	}

	var f results.Freshness
	if err := r.Load("freshness", &f); err != nil {
		return "", err
	}
	def, err := defaultPolicy(f)
	if err != nil {
		return "", err
	}
	freshClosedFormOptimum(&f) // the optimum every ratio is over, as section 1's
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
		h.Freshness = append(h.Freshness, fresh{Budget: b, Default: def, LagMeanH: ours.LagMeanH, OverOptimum: parts,
			Rate: secs[0].runs["rate"][b].LagMeanH / ours.LagMeanH, Cbrt: secs[0].runs["cbrt"][b].LagMeanH / ours.LagMeanH,
			Uniform: secs[0].runs["uniform"][b].LagMeanH / ours.LagMeanH})
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
	h.PlacementKeys, h.Placement = p.Keys, pm

	var fc results.FetchCost
	if err := r.Load("fetchcost", &fc); err != nil {
		return "", err
	}
	var fs []string
	for _, s := range fc.Sizes {
		fs = append(fs, fmt.Sprintf("%s: %.2f× the time, %.2f× the memory", s.Name, s.Clone.Ratio.Wall, s.Clone.Ratio.TreeRSS))
	}
	h.FetchCost = fs

	var sc results.StoreCost
	if err := r.Load("storecost", &sc); err != nil {
		return "", err
	}
	var bs []string
	for _, b := range sc.Bills {
		bs = append(bs, fmt.Sprintf("%s at %s%s (%s polls per repo a day; DynamoDB $%.2f)", scUSD(b.TotalUSD), scBillLabel(b), scGoal(b),
			scNum(b.PollsPerDay), b.DynamoDBUSD))
	}
	h.Bills = bs

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
		h.Tick = &tick{Lo: lo, Hi: hi, QuietX: hi.Quiet.P50Ms / lo.Quiet.P50Ms, NaiveX: hi.NaiveQuiet.P50Ms / lo.NaiveQuiet.P50Ms}
	}

	var ho results.Hostile
	if err := r.Load("hostile", &ho); err != nil {
		return "", err
	}
	h.Hostile = strings.Trim(hostileHeadline(ho), "*")
	var sv results.Serve
	if err := r.Load("serve", &sv); err != nil {
		return "", err
	}
	h.Serve = serveHeadline(sv)
	var mt results.Maintenance
	if err := r.Load("maintenance", &mt); err != nil {
		return "", err
	}
	h.Maintenance = maintenanceHeadline(mt)
	return render("headlines", h)
}
