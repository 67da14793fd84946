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
	var b strings.Builder
	b.WriteString("## 5. Coordinator tick latency\n\n")
	fmt.Fprintf(&b, "Wall-clock time of one `Coordinator.Tick` (the code the coordinator Lambda runs) on %s, for %s repos × "+
		"%s workers, in a settled fleet. A tick reads the repos needing a decision from an index and the repos of the "+
		"workers whose ring arcs changed, so it should cost in proportion to what changed, not to the fleet. "+
		"The baseline beside it is a **naive tick**: the same code with the index read replaced by a scan of every "+
		"repo, and a bare **full scan** of the repo table. Percentiles are nearest-rank: with fewer than 100 samples "+
		"the p99 is the slowest sample.\n\n", v.Store, tickInts(v.Repos), tickInts(v.Workers))
	b.WriteString(tickConclusion(v))

	charts, err := tickCharts(r, v)
	if err != nil {
		return "", v.Meta, err
	}
	b.WriteString(charts)

	b.WriteString("### Quiet ticks (nothing changed) and the full-scan baseline\n\n")
	b.WriteString(tickQuietTable(v.Cells))
	b.WriteString("### Ticks with k changes\n\n")
	for _, k := range v.Kinds {
		fmt.Fprintf(&b, "**%s** — %s. p50 / p99 in ms; k = 0 is the quiet tick.\n\n", k.Name, k.Description)
		b.WriteString(tickChangeTable(v.Cells, k.Name))
	}
	b.WriteString("### Worker join and death\n\n")
	b.WriteString("A join admits one new worker, which takes 1/(n+1) of the ring from up to 64 donors; a death is the " +
		"tick that finds a silent worker past its grace and moves its repos. **Repos read** counts the repo " +
		"records the tick loaded; **µs per moved repo** is the median of tick time over repos moved.\n\n")
	b.WriteString(tickMembershipTable(v.Cells))

	b.WriteString(tickDynamo(v.Dynamo))
	if len(v.NotRun) > 0 {
		b.WriteString("**Not run:** " + strings.Join(v.NotRun, "; ") + ".\n\n")
	}
	if len(v.Notes) > 0 {
		b.WriteString("How it was measured:\n\n")
		for _, n := range v.Notes {
			b.WriteString("- " + n + "\n")
		}
		b.WriteString(tickSetup(v))
		b.WriteString(fmt.Sprintf("- Seed %d; the run took %.0f s.\n\n", v.Seed, v.Meta.Seconds))
	}
	return b.String(), v.Meta, nil
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

// tickConclusion compares the growth from the smallest to the largest fleet of the
// quiet tick and of the naive tick, and says what the ticks grow with instead.
func tickConclusion(v results.TickLatency) string {
	var b strings.Builder
	b.WriteString("**Conclusion.** ")
	if len(v.Repos) < 2 {
		b.WriteString("Only one fleet size was measured, so growth with the number of repos cannot be read off this run.\n\n")
		return b.String()
	}
	lo, hi := v.Repos[0], v.Repos[len(v.Repos)-1]
	grow := float64(hi) / float64(lo)
	var parts []string
	flat := true
	for _, w := range v.Workers {
		a, ok1 := tickCell(v.Cells, lo, w)
		z, ok2 := tickCell(v.Cells, hi, w)
		if !ok1 || !ok2 {
			continue
		}
		q := z.Quiet.P50Ms / a.Quiet.P50Ms
		if q >= 2 {
			flat = false
		}
		parts = append(parts, fmt.Sprintf("at %s workers the quiet tick's p50 goes from %s ms to %s ms (%s) while the "+
			"naive tick's goes from %s ms to %s ms (%s) and the full scan's from %s ms to %s ms (%s)",
			fmtInt(w), tickMs(a.Quiet.P50Ms), tickMs(z.Quiet.P50Ms), tickRatio(z.Quiet.P50Ms, a.Quiet.P50Ms),
			tickMs(a.NaiveQuiet.P50Ms), tickMs(z.NaiveQuiet.P50Ms), tickRatio(z.NaiveQuiet.P50Ms, a.NaiveQuiet.P50Ms),
			tickMs(a.FullScan.P50Ms), tickMs(z.FullScan.P50Ms), tickRatio(z.FullScan.P50Ms, a.FullScan.P50Ms)))
	}
	fmt.Fprintf(&b, "From %s to %s repos (%s more), %s. ", fmtInt(lo), fmtInt(hi), tickRatio(grow, 1), strings.Join(parts, "; "))
	if flat {
		fmt.Fprintf(&b, "The indexed tick is flat in the number of repos: a quiet tick reads %s repo records at every size. ",
			tickCount(tickMaxQuietRead(v.Cells)))
	} else {
		b.WriteString("**The quiet tick grows with the number of repos** (p50 at least doubles), which the indexes should prevent. ")
	}
	// What it grows with: changes, at the largest fleet and the first worker count.
	w := v.Workers[0]
	if z, ok := tickCell(v.Cells, hi, w); ok {
		ks := tickKs(v.Cells)
		var steps []string
		for _, k := range ks {
			if ch, ok := tickChange(z, "add", k); ok {
				steps = append(steps, fmt.Sprintf("%s ms at k = %s", tickMs(ch.P50Ms), fmtInt(k)))
			}
		}
		if len(steps) > 0 {
			fmt.Fprintf(&b, "It rises with the changes instead: at %s repos and %s workers a tick assigning k new repos takes "+
				"%s ms at k = 0, %s", fmtInt(hi), fmtInt(w), tickMs(z.Quiet.P50Ms), strings.Join(steps, ", "))
			if last, ok := tickChange(z, "add", ks[len(ks)-1]); ok && last.K > 0 {
				fmt.Fprintf(&b, " (about %s µs per decision)", tickMs((last.P50Ms-z.Quiet.P50Ms)*1000/float64(last.K)))
			}
			b.WriteString(". ")
		}
	}
	if len(v.Workers) >= 2 {
		w0, w1 := v.Workers[0], v.Workers[len(v.Workers)-1]
		a, ok1 := tickCell(v.Cells, hi, w0)
		z, ok2 := tickCell(v.Cells, hi, w1)
		if ok1 && ok2 {
			verb := "grow"
			if z.Quiet.P50Ms < 2*a.Quiet.P50Ms {
				verb = "barely change"
			}
			fmt.Fprintf(&b, "With the number of workers quiet ticks %s (%s ms at %s workers, %s ms at %s, at %s repos): "+
				"every tick reads all worker records and the whole ring, whose tokens grow with the workers. ",
				verb, tickMs(a.Quiet.P50Ms), fmtInt(w0), tickMs(z.Quiet.P50Ms), fmtInt(w1), fmtInt(hi))
		}
	}
	// Joins and deaths: does the tick read only what moves?
	var joins, shares []string
	for _, w := range v.Workers {
		z, ok := tickCell(v.Cells, hi, w)
		if !ok || z.Join.Moved == 0 || z.Death.Moved == 0 {
			continue
		}
		joins = append(joins, fmt.Sprintf("at %s workers a join reads %s repos to move %s (%s as many) while a death reads %s to move %s",
			fmtInt(w), tickCount(z.Join.ReposRead), tickCount(z.Join.Moved), tickRatio(z.Join.ReposRead, z.Join.Moved),
			tickCount(z.Death.ReposRead), tickCount(z.Death.Moved)))
		shares = append(shares, fmt.Sprintf("%.0f%% of all repos at %s workers", 100*z.Join.ReposRead/float64(hi), fmtInt(w)))
	}
	if len(joins) > 0 {
		fmt.Fprintf(&b, "Membership changes at %s repos: %s. ", fmtInt(hi), strings.Join(joins, "; "))
		fmt.Fprintf(&b, "A death reads only the dead worker's repos (the owner index), so it costs in proportion to what "+
			"moves. A join reads every repo of every worker that gives up part of its arcs — the owner index cannot say "+
			"which of a donor's repos fall in the arcs it gave away — so **a join's cost follows the number of repos** "+
			"(it read %s), not the 1/(n+1) that move.", strings.Join(shares, ", "))
	}
	b.WriteString("\n\n")
	return b.String()
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

func tickQuietTable(cells []results.TickCell) string {
	var b strings.Builder
	b.WriteString("| repos | workers | samples | p50 ms | p99 ms | repos read | naive p50 ms | naive p99 ms | naive repos read | " +
		"full scan p50 ms | naive / ours (p50) |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cells {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			fmtInt(c.Repos), fmtInt(c.Workers), c.Quiet.Samples, tickMs(c.Quiet.P50Ms), tickMs(c.Quiet.P99Ms),
			tickCount(c.Quiet.ReposRead), tickMs(c.NaiveQuiet.P50Ms), tickMs(c.NaiveQuiet.P99Ms), tickCount(c.NaiveQuiet.ReposRead),
			tickMs(c.FullScan.P50Ms), tickRatio(c.NaiveQuiet.P50Ms, c.Quiet.P50Ms))
	}
	b.WriteString("\n")
	return b.String()
}

func tickChangeTable(cells []results.TickCell, kind string) string {
	ks := tickKs(cells)
	var b strings.Builder
	b.WriteString("| repos | workers | k = 0 |")
	for _, k := range ks {
		fmt.Fprintf(&b, " k = %s |", fmtInt(k))
	}
	b.WriteString(" Apply calls at the largest k | samples |\n|---:|---:|---:|")
	for range ks {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---|\n")
	for _, c := range cells {
		fmt.Fprintf(&b, "| %s | %s | %s / %s |", fmtInt(c.Repos), fmtInt(c.Workers), tickMs(c.Quiet.P50Ms), tickMs(c.Quiet.P99Ms))
		var samples []string
		writes := "—"
		for _, k := range ks {
			ch, ok := tickChange(c, kind, k)
			if !ok {
				b.WriteString(" — |")
				continue
			}
			fmt.Fprintf(&b, " %s / %s |", tickMs(ch.P50Ms), tickMs(ch.P99Ms))
			samples = append(samples, strconv.Itoa(ch.Samples))
			writes = tickCount(ch.Writes)
		}
		fmt.Fprintf(&b, " %s | %s |\n", writes, strings.Join(samples, ", "))
	}
	b.WriteString("\n")
	return b.String()
}

func tickMembershipTable(cells []results.TickCell) string {
	var b strings.Builder
	b.WriteString("| repos | workers | event | repos moved | repos read | p50 ms | p99 ms | µs per moved repo | samples |\n")
	b.WriteString("|---:|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cells {
		for _, e := range []struct {
			name string
			m    results.Membership
		}{{"join", c.Join}, {"death", c.Death}} {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", fmtInt(c.Repos), fmtInt(c.Workers), e.name,
				tickCount(e.m.Moved), tickCount(e.m.ReposRead), tickMs(e.m.P50Ms), tickMs(e.m.P99Ms), tickMs(e.m.UsPerMovedP50), e.m.Samples)
		}
	}
	b.WriteString("\n")
	return b.String()
}

// tickDynamo renders the DynamoDB Local grid, or why it did not run.
func tickDynamo(d *results.TickDynamo) string {
	var b strings.Builder
	b.WriteString("### On DynamoDB Local\n\n")
	if d == nil || len(d.Cells) == 0 {
		reason := "no result recorded"
		if d != nil && d.Skipped != "" {
			reason = d.Skipped
		}
		fmt.Fprintf(&b, "Not run: %s.\n\n", strings.TrimSuffix(reason, "."))
		return b.String()
	}
	b.WriteString("The same measurements on a smaller grid, on DynamoDB Local (a JVM on the same machine), so every store " +
		"call is an HTTP round trip and every Apply a transaction. Absolute figures say little about DynamoDB itself; " +
		"the shape is the point. p50 / p99 in ms.\n\n")
	ks := tickKs(d.Cells)
	b.WriteString("| repos | workers | quiet |")
	for _, k := range ks {
		fmt.Fprintf(&b, " add k = %s |", fmtInt(k))
	}
	for _, k := range ks {
		fmt.Fprintf(&b, " delete k = %s |", fmtInt(k))
	}
	b.WriteString(" naive tick | full scan | join (moved / read) | death (moved / read) |\n|---:|---:|---:|")
	for range 2 * len(ks) {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|---:|---:|\n")
	for _, c := range d.Cells {
		fmt.Fprintf(&b, "| %s | %s | %s / %s |", fmtInt(c.Repos), fmtInt(c.Workers), tickMs(c.Quiet.P50Ms), tickMs(c.Quiet.P99Ms))
		for _, kind := range []string{"add", "delete"} {
			for _, k := range ks {
				if ch, ok := tickChange(c, kind, k); ok {
					fmt.Fprintf(&b, " %s / %s |", tickMs(ch.P50Ms), tickMs(ch.P99Ms))
				} else {
					b.WriteString(" — |")
				}
			}
		}
		fmt.Fprintf(&b, " %s / %s | %s | %s (%s / %s) | %s (%s / %s) |\n", tickMs(c.NaiveQuiet.P50Ms), tickMs(c.NaiveQuiet.P99Ms),
			tickMs(c.FullScan.P50Ms), tickMs(c.Join.P50Ms), tickCount(c.Join.Moved), tickCount(c.Join.ReposRead),
			tickMs(c.Death.P50Ms), tickCount(c.Death.Moved), tickCount(c.Death.ReposRead))
	}
	b.WriteString("\n")
	if lo, hi := d.Cells[0], d.Cells[len(d.Cells)-1]; hi.Repos > lo.Repos && hi.Workers == lo.Workers {
		fmt.Fprintf(&b, "From %s to %s repos at %s workers the quiet tick's p50 goes from %s ms to %s ms (%s), the naive "+
			"tick's from %s ms to %s ms (%s).\n\n", fmtInt(lo.Repos), fmtInt(hi.Repos), fmtInt(lo.Workers),
			tickMs(lo.Quiet.P50Ms), tickMs(hi.Quiet.P50Ms), tickRatio(hi.Quiet.P50Ms, lo.Quiet.P50Ms),
			tickMs(lo.NaiveQuiet.P50Ms), tickMs(hi.NaiveQuiet.P50Ms), tickRatio(hi.NaiveQuiet.P50Ms, lo.NaiveQuiet.P50Ms))
	}
	if d.Skipped != "" {
		fmt.Fprintf(&b, "The grid stopped early: %s.\n\n", strings.TrimSuffix(d.Skipped, "."))
	}
	return b.String()
}
