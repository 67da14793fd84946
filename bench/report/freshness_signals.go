package main

import (
	"fmt"
	"slices"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// freshSignalBudget is the budget the bounds are read at.
const freshSignalBudget = 0.5

// freshSignalRow is one signal section at one budget: the default policy and the optimum
// given the same signals, each over the poll-only optimum.
type freshSignalRow struct {
	Section, Kind, Signal string
	Budget                float64
	Mean, P99             float64 // the default policy's, hours
	OverPollOnly          float64 // its mean over the poll-only optimum of the same population
	OptOverPollOnly       float64 // the optimum's that knows the rates and the coverage, likewise (closed form)
	CommitShare           float64 // of the commits, made in repos that send the signal
	SignalLag, SilentLag  float64 // mean lag of those commits and of the others, hours
	DormantPolls          float64
	SignalFetches, Polls  int
	Goal                  string // its goal over its signal bound at this budget ("" when none is)
}

// freshSignalRows reads the signal sections; none when the results hold none.
func freshSignalRows(v results.Freshness, def string) ([]freshSignalRow, error) {
	runs, drift := indexRuns(v.Runs), indexRuns(v.Drift)
	var rows []freshSignalRow
	for _, s := range v.Setup.Signals {
		sec := v.SignalSection(s.Section)
		if sec == nil {
			return nil, fmt.Errorf("freshness: unknown signal section %q", s.Section)
		}
		base := runs
		if s.Drift {
			base = drift
		}
		got := indexRuns(*sec)
		signal := fmt.Sprintf("%.0f%% of repos, %g–%g s, %.0f%% lost", 100*s.Share, s.DelayMinS, s.DelayMaxS, 100*s.Loss)
		if s.Kind == "feed" {
			signal = fmt.Sprintf("%.0f%% of repos, probed every %g min", 100*s.Share, s.PeriodMin)
		}
		for _, b := range v.Setup.Budgets {
			ours, ok := got[def][b]
			if !ok {
				return nil, fmt.Errorf("freshness: no %s run of %s at budget %g", s.Section, def, b)
			}
			poll, ok := base[freshOpt][b]
			if !ok || poll.LagMeanH <= 0 {
				return nil, fmt.Errorf("freshness: no poll-only optimum for %s at budget %g", s.Section, b)
			}
			r := freshSignalRow{Section: s.Section, Kind: s.Kind, Signal: signal, Budget: b, Mean: ours.LagMeanH,
				P99: ours.LagP99H, OverPollOnly: ours.LagMeanH / poll.LagMeanH, CommitShare: ours.SignallingCommitShare,
				SignalLag: ours.SignallingLagMeanH, SilentLag: ours.SilentLagMeanH, DormantPolls: ours.DormantPolls,
				SignalFetches: ours.SignalFetches, Polls: ours.Polls}
			for _, x := range v.Bound {
				if x.Section == s.Section && x.Evidence == results.EvidenceRates && x.Budget == b {
					r.OptOverPollOnly = x.Ratio
				}
			}
			for _, g := range v.Goals {
				if g.Section == s.Section && g.Budget == b && g.Goal == "mean / bound" {
					r.Goal = mark(g.Value, g.Value <= g.Target) + fmt.Sprintf(" (≤ %g× its bound)", g.Target)
				}
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// freshBoundRow is one measured bound beside the default policy in its section.
type freshBoundRow struct {
	Section, Evidence   string
	Ratio, DormantPolls float64
	P99, P99Exp04       float64 // its allocation's p99 over the optimum's, √ and ^0.4 (0: not measured)
	Default, OverBound  float64 // the default policy's mean over the optimum, and over the bound
	Budget              float64
}

// freshBoundRows are every bound at freshSignalBudget (or the first budget), with the
// default policy's distance to it.
func freshBoundRows(v results.Freshness, def string) []freshBoundRow {
	secs := map[string]freshRuns{"runs": indexRuns(v.Runs), "coldstart": indexRuns(v.ColdStart), "drift": indexRuns(v.Drift),
		"runs_realistic": indexRuns(v.RunsRealistic), "coldstart_realistic": indexRuns(v.ColdStartRealistic), "drift_realistic": indexRuns(v.DriftRealistic)}
	b := freshSignalBudget
	if len(v.Setup.Budgets) > 0 && !slices.Contains(v.Setup.Budgets, b) {
		b = v.Setup.Budgets[0]
	}
	var rows []freshBoundRow
	signalled := map[string]results.FreshnessSignal{}
	for _, s := range v.Setup.Signals {
		signalled[s.Section] = s
	}
	for _, x := range v.Bound {
		if x.Budget != 0 && x.Budget != b {
			continue // measured at every budget: the one the others are read at
		}
		ev := "push counts"
		if x.Section == "drift" || x.Section == "drift_realistic" {
			ev = "push times, under the true model"
		}
		switch x.Evidence {
		case "all":
			ev = "push counts, span, silence, root reached"
		case results.EvidenceCloned:
			ev = "the same, run as a policy that clones every repo blind (simulated)"
		}
		r := freshBoundRow{Section: x.Section, Evidence: ev, Ratio: x.Ratio, DormantPolls: x.DormantPolls, P99: x.P99, P99Exp04: x.P99Exp04, Budget: b}
		if runs, ok := secs[x.Section]; ok {
			if ours, opt := runs[def][b], runs[freshOpt][b]; opt.LagMeanH > 0 {
				r.Default = ours.LagMeanH / opt.LagMeanH
				r.OverBound = r.Default / x.Ratio
			}
		}
		if s, ok := signalled[x.Section]; ok {
			// Over the poll-only optimum of the population, as the signal goals are.
			r.Evidence = ev + ", which repos the signal covers"
			base := secs["runs"]
			if s.Drift {
				base = secs["drift"]
			}
			if sec := v.SignalSection(x.Section); sec != nil {
				if ours, opt := indexRuns(*sec)[def][b], base[freshOpt][b]; opt.LagMeanH > 0 {
					r.Default = ours.LagMeanH / opt.LagMeanH
					r.OverBound = r.Default / x.Ratio
				}
			}
		}
		rows = append(rows, r)
	}
	return rows
}
