package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/plot"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// tickLatencySection renders ticklatency.json: coordinator tick latency against repos,
// workers and changes, beside a naive coordinator that reads every repo.
func tickLatencySection(r *Report) (string, results.Meta, error) {
	var v results.TickLatency
	if err := r.Load("ticklatency", &v); err != nil {
		return "", results.Meta{}, err
	}
	if len(v.Cells) == 0 {
		return "", v.Meta, fmt.Errorf("ticklatency: no cells")
	}
	charts, err := tickCharts(r, v)
	if err != nil {
		return "", v.Meta, err
	}
	type kind struct {
		results.ChangeKind
		Rows [][]string
	}
	var kinds []kind
	for _, k := range v.Kinds {
		kinds = append(kinds, kind{ChangeKind: k, Rows: tickChangeRows(v.Cells, k.Name)})
	}
	md, err := render("ticklatency", struct {
		V      results.TickLatency
		C      tickConclusionFigures
		Charts string
		Ks     []int
		Kinds  []kind
		Dynamo tickDynamoFigures
		Setup  string
	}{v, tickConclusion(v), charts, tickKs(v.Cells), kinds, tickDynamo(v.Dynamo), tickSetup(v)})
	return md, v.Meta, err
}

// tickMs formats milliseconds with about three significant digits.
func tickMs(x float64) string {
	switch {
	case math.IsNaN(x):
		return "—"
	case x < 1:
		return strconv.FormatFloat(x, 'f', 3, 64)
	case x < 10:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case x < 100:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 0, 64)
}

// tickCount formats a mean count: whole numbers as such, else one decimal.
func tickCount(x float64) string {
	tenths := int(math.Round(x * 10))
	if tenths%10 == 0 {
		return fmtInt(tenths / 10)
	}
	return fmtInt(tenths/10) + "." + strconv.Itoa(tenths%10)
}

func tickInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmtInt(n)
	}
	return "{" + strings.Join(s, ", ") + "}"
}

func tickRatio(a, b float64) string {
	if b <= 0 {
		return "—"
	}
	r := a / b
	if r < 10 {
		return strconv.FormatFloat(r, 'f', 1, 64) + "×"
	}
	return strconv.FormatFloat(r, 'f', 0, 64) + "×"
}

func tickCell(cells []results.TickCell, repos, workers int) (results.TickCell, bool) {
	for _, c := range cells {
		if c.Repos == repos && c.Workers == workers {
			return c, true
		}
	}
	return results.TickCell{}, false
}

func tickChange(c results.TickCell, kind string, k int) (results.ChangeLatency, bool) {
	for _, ch := range c.Changes {
		if ch.Kind == kind && ch.K == k {
			return ch, true
		}
	}
	return results.ChangeLatency{}, false
}

// tickKs are the change counts present in the cells, ascending, without 0.
func tickKs(cells []results.TickCell) []int {
	seen := map[int]bool{}
	var ks []int
	for _, c := range cells {
		for _, ch := range c.Changes {
			if !seen[ch.K] {
				seen[ch.K] = true
				ks = append(ks, ch.K)
			}
		}
	}
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j] < ks[j-1]; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	return ks
}

// tickConclusionFigures is what the conclusion says: the growth from the smallest to
// the largest fleet of the quiet tick and of the naive tick, and what the ticks grow
// with instead.
type tickConclusionFigures struct {
	Sizes         bool // more than one fleet size
	Lo, Hi, W     int
	Grow          string
	Growth        []string
	Flat          bool
	QuietRead     string
	QuietHi       float64
	Steps         []string
	PerDecision   string
	Workers       *tickWorkerGrowth
	Joins, Shares []string
}

type tickWorkerGrowth struct {
	Verb   string
	A, Z   float64
	W0, W1 int
}

func tickConclusion(v results.TickLatency) tickConclusionFigures {
	var c tickConclusionFigures
	if len(v.Repos) < 2 {
		return c
	}
	c.Sizes = true
	lo, hi := v.Repos[0], v.Repos[len(v.Repos)-1]
	c.Lo, c.Hi, c.Grow = lo, hi, tickRatio(float64(hi)/float64(lo), 1)
	c.Flat = true
	for _, w := range v.Workers {
		a, ok1 := tickCell(v.Cells, lo, w)
		z, ok2 := tickCell(v.Cells, hi, w)
		if !ok1 || !ok2 {
			continue
		}
		if z.Quiet.P50Ms/a.Quiet.P50Ms >= 2 {
			c.Flat = false
		}
		c.Growth = append(c.Growth, fmt.Sprintf("at %s workers the quiet tick's p50 goes from %s ms to %s ms (%s) while the "+
			"naive tick's goes from %s ms to %s ms (%s) and the full scan's from %s ms to %s ms (%s)",
			fmtInt(w), tickMs(a.Quiet.P50Ms), tickMs(z.Quiet.P50Ms), tickRatio(z.Quiet.P50Ms, a.Quiet.P50Ms),
			tickMs(a.NaiveQuiet.P50Ms), tickMs(z.NaiveQuiet.P50Ms), tickRatio(z.NaiveQuiet.P50Ms, a.NaiveQuiet.P50Ms),
			tickMs(a.FullScan.P50Ms), tickMs(z.FullScan.P50Ms), tickRatio(z.FullScan.P50Ms, a.FullScan.P50Ms)))
	}
	c.QuietRead = tickCount(tickMaxQuietRead(v.Cells))
	// What it grows with: changes, at the largest fleet and the first worker count.
	c.W = v.Workers[0]
	if z, ok := tickCell(v.Cells, hi, c.W); ok {
		c.QuietHi = z.Quiet.P50Ms
		ks := tickKs(v.Cells)
		for _, k := range ks {
			if ch, ok := tickChange(z, "add", k); ok {
				c.Steps = append(c.Steps, fmt.Sprintf("%s ms at k = %s", tickMs(ch.P50Ms), fmtInt(k)))
			}
		}
		if len(c.Steps) > 0 {
			if last, ok := tickChange(z, "add", ks[len(ks)-1]); ok && last.K > 0 {
				c.PerDecision = tickMs((last.P50Ms - z.Quiet.P50Ms) * 1000 / float64(last.K))
			}
		}
	}
	if len(v.Workers) >= 2 {
		w0, w1 := v.Workers[0], v.Workers[len(v.Workers)-1]
		a, ok1 := tickCell(v.Cells, hi, w0)
		z, ok2 := tickCell(v.Cells, hi, w1)
		if ok1 && ok2 {
			g := &tickWorkerGrowth{Verb: "grow", A: a.Quiet.P50Ms, Z: z.Quiet.P50Ms, W0: w0, W1: w1}
			if z.Quiet.P50Ms < 2*a.Quiet.P50Ms {
				g.Verb = "barely change"
			}
			c.Workers = g
		}
	}
	// Joins and deaths: does the tick read only what moves?
	for _, w := range v.Workers {
		z, ok := tickCell(v.Cells, hi, w)
		if !ok || z.Join.Moved == 0 || z.Death.Moved == 0 {
			continue
		}
		c.Joins = append(c.Joins, fmt.Sprintf("at %s workers a join reads %s repos to move %s (%s as many) while a death reads %s to move %s",
			fmtInt(w), tickCount(z.Join.ReposRead), tickCount(z.Join.Moved), tickRatio(z.Join.ReposRead, z.Join.Moved),
			tickCount(z.Death.ReposRead), tickCount(z.Death.Moved)))
		c.Shares = append(c.Shares, fmt.Sprintf("%.0f%% of all repos at %s workers", 100*z.Join.ReposRead/float64(hi), fmtInt(w)))
	}
	return c
}

// tickSetup says what preparing the largest fleets cost, from the setup timings.
func tickSetup(v results.TickLatency) string {
	if len(v.Repos) == 0 {
		return ""
	}
	hi := v.Repos[len(v.Repos)-1]
	create := -1.0
	var assign []string
	for _, s := range v.Setup {
		switch {
		case s.Repos != hi:
		case s.Workers == 0:
			create = s.Seconds
		default:
			assign = append(assign, fmt.Sprintf("%.1f s at %s workers", s.Seconds, fmtInt(s.Workers)))
		}
	}
	if create < 0 || len(assign) == 0 {
		return ""
	}
	return fmt.Sprintf("- At %s repos, creating the repos took %.1f s and joining the workers and assigning the repos %s.\n",
		fmtInt(hi), create, strings.Join(assign, ", "))
}

func tickMaxQuietRead(cells []results.TickCell) float64 {
	m := 0.0
	for _, c := range cells {
		m = math.Max(m, c.Quiet.ReposRead)
	}
	return m
}

// tickCharts draws, per worker count, p50 tick latency against repos: one line per k of
// the "add" kind and the naive tick dashed.
func tickCharts(r *Report, v results.TickLatency) (string, error) {
	var b strings.Builder
	for _, w := range v.Workers {
		ln := plot.Line{Title: fmt.Sprintf("Coordinator tick p50, %s workers", fmtInt(w)), XLabel: "repos",
			YLabel: "ms per tick (p50)", LogX: true, LogY: true}
		quiet := plot.Series{Name: "k = 0 (quiet)"}
		naive := plot.Series{Name: "naive tick (reads every repo)", Dash: true}
		for _, n := range v.Repos {
			if c, ok := tickCell(v.Cells, n, w); ok {
				quiet.X, quiet.Y = append(quiet.X, float64(n)), append(quiet.Y, c.Quiet.P50Ms)
				naive.X, naive.Y = append(naive.X, float64(n)), append(naive.Y, c.NaiveQuiet.P50Ms)
			}
		}
		ln.Series = append(ln.Series, quiet)
		for _, k := range tickKs(v.Cells) {
			s := plot.Series{Name: fmt.Sprintf("k = %s added", fmtInt(k))}
			for _, n := range v.Repos {
				if c, ok := tickCell(v.Cells, n, w); ok {
					if ch, ok := tickChange(c, "add", k); ok {
						s.X, s.Y = append(s.X, float64(n)), append(s.Y, ch.P50Ms)
					}
				}
			}
			ln.Series = append(ln.Series, s)
		}
		ln.Series = append(ln.Series, naive)
		line, err := r.Plot(fmt.Sprintf("ticklatency-%d-workers.svg", w),
			fmt.Sprintf("tick p50 against repos at %d workers, one line per number of changes, naive full-scan tick dashed", w), ln)
		if err != nil {
			return "", err
		}
		b.WriteString(line + "\n")
	}
	return b.String(), nil
}

// tickChangeRows are the cells of the table of one kind of change, row by row.
func tickChangeRows(cells []results.TickCell, kind string) [][]string {
	ks := tickKs(cells)
	var rows [][]string
	for _, c := range cells {
		row := []string{fmtInt(c.Repos), fmtInt(c.Workers), tickMs(c.Quiet.P50Ms) + " / " + tickMs(c.Quiet.P99Ms)}
		var samples []string
		writes := "—"
		for _, k := range ks {
			ch, ok := tickChange(c, kind, k)
			if !ok {
				row = append(row, "—")
				continue
			}
			row = append(row, tickMs(ch.P50Ms)+" / "+tickMs(ch.P99Ms))
			samples = append(samples, strconv.Itoa(ch.Samples))
			writes = tickCount(ch.Writes)
		}
		rows = append(rows, append(row, writes, strings.Join(samples, ", ")))
	}
	return rows
}

// tickMembership is a cell's join or death.
func tickMembership(c results.TickCell, event string) results.Membership {
	if event == "join" {
		return c.Join
	}
	return c.Death
}

// tickDynamoFigures is the DynamoDB Local grid, or why it did not run.
type tickDynamoFigures struct {
	NotRun  string
	Ks      []int
	Rows    [][]string
	Growth  *struct{ Lo, Hi results.TickCell }
	Stopped string
}

func tickDynamo(d *results.TickDynamo) tickDynamoFigures {
	if d == nil || len(d.Cells) == 0 {
		reason := "no result recorded"
		if d != nil && d.Skipped != "" {
			reason = d.Skipped
		}
		return tickDynamoFigures{NotRun: strings.TrimSuffix(reason, ".")}
	}
	f := tickDynamoFigures{Ks: tickKs(d.Cells), Stopped: strings.TrimSuffix(d.Skipped, ".")}
	for _, c := range d.Cells {
		row := []string{fmtInt(c.Repos), fmtInt(c.Workers), tickMs(c.Quiet.P50Ms) + " / " + tickMs(c.Quiet.P99Ms)}
		for _, kind := range []string{"add", "delete"} {
			for _, k := range f.Ks {
				if ch, ok := tickChange(c, kind, k); ok {
					row = append(row, tickMs(ch.P50Ms)+" / "+tickMs(ch.P99Ms))
				} else {
					row = append(row, "—")
				}
			}
		}
		f.Rows = append(f.Rows, append(row, tickMs(c.NaiveQuiet.P50Ms)+" / "+tickMs(c.NaiveQuiet.P99Ms), tickMs(c.FullScan.P50Ms),
			fmt.Sprintf("%s (%s / %s)", tickMs(c.Join.P50Ms), tickCount(c.Join.Moved), tickCount(c.Join.ReposRead)),
			fmt.Sprintf("%s (%s / %s)", tickMs(c.Death.P50Ms), tickCount(c.Death.Moved), tickCount(c.Death.ReposRead))))
	}
	if lo, hi := d.Cells[0], d.Cells[len(d.Cells)-1]; hi.Repos > lo.Repos && hi.Workers == lo.Workers {
		f.Growth = &struct{ Lo, Hi results.TickCell }{lo, hi}
	}
	return f
}
