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
		V       results.TickLatency
		C       string
		Charts  string
		Bulk    string
		Heap    string
		Ks      []int
		Kinds   []kind
		Dynamo  tickDynamoFigures
		Setup   string
		Restart string
	}{v, tickConclusion(v), charts, tickBulk(v.BulkAdd, v.TickBudgetS), tickHeap(v.Cells), tickKs(v.Cells), kinds, tickDynamo(v.Dynamo), tickSetup(v),
		tickRestart(v.RestartBacklog)})
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

// tickConclusion compares, per worker count, the quiet and naive ticks of the smallest
// and largest fleet measured, the quiet tick across worker counts, and what joins and
// deaths read against what they move.
func tickConclusion(v results.TickLatency) string {
	var b strings.Builder
	b.WriteString("**Conclusion.** ")
	var parts []string
	// flat: no worker count's quiet tick doubled (by a tenth of a millisecond or more);
	// proportional: one grew by the square root of the repos' factor or more (10× for
	// 100× the repos), on the way to a tick that reads every repo. In between it grows
	// slowly.
	flat, proportional, compared := true, false, false
	for _, w := range v.Workers {
		a, z, ok := tickSpan(v.Cells, w)
		if !ok {
			continue
		}
		compared = true
		// Growth is a doubling that is also worth a look: a tenth of a millisecond more on
		// a tick of hundredths is the machine, not the repos.
		if z.Quiet.P50Ms/a.Quiet.P50Ms >= 2 && z.Quiet.P50Ms-a.Quiet.P50Ms >= 0.1 {
			flat = false
		}
		if z.Quiet.P50Ms/a.Quiet.P50Ms >= math.Sqrt(float64(z.Repos)/float64(a.Repos)) {
			proportional = true
		}
		parts = append(parts, fmt.Sprintf("at %s workers, from %s to %s repos (%s more), the quiet tick's p50 goes from %s ms "+
			"to %s ms (%s) while the naive tick's goes from %s ms to %s ms (%s) and the full scan's from %s ms to %s ms (%s)",
			fmtInt(w), fmtInt(a.Repos), fmtInt(z.Repos), tickRatio(float64(z.Repos), float64(a.Repos)),
			tickMs(a.Quiet.P50Ms), tickMs(z.Quiet.P50Ms), tickRatio(z.Quiet.P50Ms, a.Quiet.P50Ms),
			tickMs(a.NaiveQuiet.P50Ms), tickMs(z.NaiveQuiet.P50Ms), tickRatio(z.NaiveQuiet.P50Ms, a.NaiveQuiet.P50Ms),
			tickMs(a.FullScan.P50Ms), tickMs(z.FullScan.P50Ms), tickRatio(z.FullScan.P50Ms, a.FullScan.P50Ms)))
	}
	if !compared {
		b.WriteString("No worker count was measured at two fleet sizes, so growth with the number of repos cannot be read off this run.\n\n")
		return b.String()
	}
	b.WriteString(upperFirst(strings.Join(parts, "; ")) + ". ")
	switch {
	case flat:
		fmt.Fprintf(&b, "The indexed tick is flat in the number of repos: a quiet tick reads %s repo records at every size. ",
			tickCount(tickMaxQuietRead(v.Cells)))
	case !proportional:
		fmt.Fprintf(&b, "The indexed tick grows slowly with the number of repos, by fractions of a millisecond where the naive "+
			"tick grows with them: a quiet tick reads %s repo records at every size, and what grows is the depth of the "+
			"store's indexes it looks into. ", tickCount(tickMaxQuietRead(v.Cells)))
	case tickMaxQuietRead(v.Cells) == 0 && tickMaxQuietSweep(v.Cells) > 0:
		// The growth is the sweep's pace, which is a share of every repo by design.
		fmt.Fprintf(&b, "**The quiet tick grows with the number of repos** (p50 up by the square root of their factor or more), "+
			"not by reads of its own (none at any size) but by the anti-entropy sweep's paced slices: up to %s repo records "+
			"a tick on average, so that a pass reads every repo within three quarters of its period (ADR 25). ",
			tickCount(tickMaxQuietSweep(v.Cells)))
	default:
		b.WriteString("**The quiet tick grows with the number of repos** (p50 up by the square root of their factor or more), which the indexes should prevent. ")
	}
	hi := v.Repos[len(v.Repos)-1]
	// What it grows with: changes, at the largest fleet and its first worker count.
	if z, ok := tickFirstAt(v.Cells, hi, v.Workers); ok {
		ks := tickKs(v.Cells)
		var steps []string
		for _, k := range ks {
			if ch, ok := tickChange(z, "add", k); ok {
				steps = append(steps, fmt.Sprintf("%s ms at k = %s", tickMs(ch.P50Ms), fmtInt(k)))
			}
		}
		if len(steps) > 0 {
			fmt.Fprintf(&b, "It rises with the changes instead: at %s repos and %s workers a tick assigning k new repos takes "+
				"%s ms at k = 0, %s", fmtInt(hi), fmtInt(z.Workers), tickMs(z.Quiet.P50Ms), strings.Join(steps, ", "))
			if last, ok := tickChange(z, "add", ks[len(ks)-1]); ok && last.K > 0 {
				fmt.Fprintf(&b, " (about %s µs per decision)", tickMs((last.P50Ms-z.Quiet.P50Ms)*1000/float64(last.K)))
			}
			b.WriteString(". ")
		}
	}
	// With the workers: the largest fleet measured at both the fewest and the most workers.
	if len(v.Workers) >= 2 {
		w0, w1 := v.Workers[0], v.Workers[len(v.Workers)-1]
		for i := len(v.Repos) - 1; i >= 0; i-- {
			a, ok1 := tickCell(v.Cells, v.Repos[i], w0)
			z, ok2 := tickCell(v.Cells, v.Repos[i], w1)
			if !ok1 || !ok2 {
				continue
			}
			verb := "grow"
			if z.Quiet.P50Ms <= 3*a.Quiet.P50Ms {
				verb = "grow little"
			}
			fmt.Fprintf(&b, "With the number of workers quiet ticks %s: at %s repos, %s ms at %s workers and %s ms at %s (%s; "+
				"the goal is at most 3×). A tick reads the worker records only when one changed since the last tick (the "+
				"store's workers version), and plans membership only then or when a silence reaches a threshold; the ring "+
				"is decoded only when its version changes. The p99, %s ms at %s workers and %s ms at %s, is the tick right "+
				"after the workers heartbeated, which reads and plans every one of them. ",
				verb, fmtInt(v.Repos[i]), tickMs(a.Quiet.P50Ms), fmtInt(w0), tickMs(z.Quiet.P50Ms), fmtInt(w1),
				tickRatio(z.Quiet.P50Ms, a.Quiet.P50Ms), tickMs(a.Quiet.P99Ms), fmtInt(w0), tickMs(z.Quiet.P99Ms), fmtInt(w1))
			break
		}
	}
	// Joins and deaths: do they read only what moves?
	var joins []string
	worst, met := 0.0, true
	for _, w := range v.Workers {
		z, ok := tickCell(v.Cells, hi, w)
		if !ok || z.Join.Moved == 0 || z.Death.Moved == 0 {
			continue
		}
		worst = math.Max(worst, math.Max(z.Join.ReposRead/z.Join.Moved, z.Death.ReposRead/z.Death.Moved))
		met = met && tickReadsWhatMoves(z.Join) && tickReadsWhatMoves(z.Death)
		joins = append(joins, fmt.Sprintf("at %s workers a join reads %s repos to move %s (%s as many) and a death reads %s to move %s (%s)",
			fmtInt(w), tickCount(z.Join.ReposRead), tickCount(z.Join.Moved), tickRatio(z.Join.ReposRead, z.Join.Moved),
			tickCount(z.Death.ReposRead), tickCount(z.Death.Moved), tickRatio(z.Death.ReposRead, z.Death.Moved)))
	}
	if len(joins) > 0 {
		fmt.Fprintf(&b, "Membership changes at %s repos: %s. ", fmtInt(hi), strings.Join(joins, "; "))
		if met {
			b.WriteString("Joins and deaths read what they move (the goal is at most 1.5 × moved + 100, the anti-entropy " +
				"sweep's reads apart): the repos of an arc a donor gives away are one range read of the owner and " +
				"ring-position index, and the sweep's slice waits for the next tick.")
		} else {
			fmt.Fprintf(&b, "**A membership change reads up to %s what it moves**, over the goal of 1.5 × moved + 100.", tickRatio(worst, 1))
		}
	}
	b.WriteString("\n\n")
	return b.String()
}

// tickSpan is the smallest and the largest fleet measured at w workers, if two differ.
func tickSpan(cells []results.TickCell, w int) (lo, hi results.TickCell, ok bool) {
	found := false
	for _, c := range cells {
		if c.Workers != w {
			continue
		}
		if !found || c.Repos < lo.Repos {
			lo = c
		}
		if !found || c.Repos > hi.Repos {
			hi = c
		}
		found = true
	}
	return lo, hi, found && hi.Repos > lo.Repos && lo.Quiet.P50Ms > 0
}

// tickFirstAt is the cell at repos with the first of workers that has one.
func tickFirstAt(cells []results.TickCell, repos int, workers []int) (results.TickCell, bool) {
	for _, w := range workers {
		if c, ok := tickCell(cells, repos, w); ok {
			return c, true
		}
	}
	return results.TickCell{}, false
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// tickBulk renders the bulk adds: each fleet's setup, every repo pending at once.
func tickBulk(bs []results.TickBulkAdd, budgetS float64) string {
	if len(bs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("### Bulk add\n\n")
	budget := "its budget"
	if budgetS > 0 {
		budget = fmt.Sprintf("its budget (%g s)", budgetS)
	}
	b.WriteString("Each fleet's setup is a bulk add: every repo pending and every worker new at once, assigned by the " +
		"coordinator's own ticks in batches doubling from 1,000 up to its cap of moves per tick, each tick's repo work " +
		"stopping at " + budget + ". **Cut** counts the ticks that stopped at a cap or the budget and " +
		"left the rest to the next one; **peak heap** is the Go heap seen during any of the ticks.\n\n")
	b.WriteString("| store | repos | workers | ticks until assigned | ticks until settled | ticks cut | slowest tick ms | peak heap MiB | seconds |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	slowest, heap := results.TickBulkAdd{}, results.TickBulkAdd{}
	for _, x := range bs {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %s | %s | %.0f |\n", x.Store, fmtInt(x.Repos), fmtInt(x.Workers),
			x.TicksUntilAssigned, x.Ticks, x.TicksCut, tickMs(x.SlowestTickMs), tickMs(x.PeakHeapMiB), x.Seconds)
		if x.SlowestTickMs > slowest.SlowestTickMs {
			slowest = x
		}
		if x.PeakHeapMiB > heap.PeakHeapMiB {
			heap = x
		}
	}
	fmt.Fprintf(&b, "\nThe slowest tick of any bulk add took %s s (%s, %s repos, %s workers); the largest heap was %s MiB "+
		"(%s, %s repos, %s workers).\n\n", tickMs(slowest.SlowestTickMs/1000), slowest.Store, fmtInt(slowest.Repos),
		fmtInt(slowest.Workers), tickMs(heap.PeakHeapMiB), heap.Store, fmtInt(heap.Repos), fmtInt(heap.Workers))
	return b.String()
}

// tickHeap renders the peak heap of each cell's ticks, if the run recorded it.
func tickHeap(cells []results.TickCell) string {
	var b strings.Builder
	any := false
	b.WriteString("### Peak heap of a tick\n\n")
	b.WriteString("The largest Go heap (live and not yet collected objects, default GOGC) sampled every millisecond while " +
		"ticks of each kind ran, in MiB; the benchmark's own state is included. The coordinator Lambda has 512 MB.\n\n")
	b.WriteString("| repos | workers | quiet | changes | join | death | naive tick |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cells {
		ch := 0.0
		for _, x := range c.Changes {
			ch = math.Max(ch, x.PeakHeapMiB)
		}
		any = any || c.Quiet.PeakHeapMiB > 0
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", fmtInt(c.Repos), fmtInt(c.Workers), tickMs(c.Quiet.PeakHeapMiB),
			tickMs(ch), tickMs(c.Join.PeakHeapMiB), tickMs(c.Death.PeakHeapMiB), tickMs(c.NaiveQuiet.PeakHeapMiB))
	}
	b.WriteString("\n")
	if !any {
		return ""
	}
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

// tickMaxQuietSweep is the most repo records the anti-entropy sweep read in a quiet tick
// of any cell, on average.
func tickMaxQuietSweep(cells []results.TickCell) float64 {
	m := 0.0
	for _, c := range cells {
		m = math.Max(m, c.Quiet.SweepRead)
	}
	return m
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

// tickTicks is the mean ticks of a join or death; results from before changes were
// followed over several ticks counted one.
func tickTicks(x float64) string {
	if x == 0 {
		return "1"
	}
	return tickCount(x)
}

// tickSlowest is the slowest tick of a join or death; in results from before changes
// were followed over several ticks each sample was one tick.
func tickSlowest(m results.Membership) string {
	if m.SlowestTickMs > 0 {
		return tickMs(m.SlowestTickMs)
	}
	return tickMs(m.MaxMs)
}

// tickReadsWhatMoves is the goal for a join or death: at most 1.5 times the repos it
// moves, plus 100, read (the anti-entropy sweep's reads apart).
func tickReadsWhatMoves(m results.Membership) bool { return m.ReposRead <= 1.5*m.Moved+100 }

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
		row := []string{fmtInt(c.Repos), fmtInt(c.Workers), tickMs(c.Quiet.P50Ms) + " / " + tickMs(c.Quiet.P99Ms),
			fmt.Sprintf("%.0f%%", 100*c.QuietWorkerReads)}
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

// tickRestart is the paragraph and table of a worker restarted under an outbox backlog:
// the time to its first heartbeat and the longest gap between two, against its interval.
func tickRestart(rs []results.RestartBacklog) string {
	if len(rs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("### A worker restarted under a backlog\n\n")
	b.WriteString("A worker restarts with an outbox of entries it never applied (adds of repos it does not hold, a repo " +
		"read each) and calls Heartbeat back to back until it has acked them all. Each call sends its heartbeat first, " +
		"then reads at most a slice of the backlog. **Next heartbeat** is the time from the restart to the first " +
		"heartbeat the store accepted; **longest gap** the longest time between two accepted heartbeats (about the " +
		"longest call). On its own schedule the worker heartbeats every interval, so its heartbeats stay one interval " +
		"apart as long as the longest gap is within it.\n\n")
	b.WriteString("| store | entries | heartbeats | next heartbeat s | first call s | longest call s | longest gap s | heartbeat interval s | caught up | entries/s | seconds |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n")
	worst := results.RestartBacklog{}
	for _, r := range rs {
		caught := "yes"
		if !r.CaughtUp {
			caught = fmt.Sprintf("no (%s acked)", fmtInt(r.Applied))
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.2f | %.2f | %.2f | %.2f | %g | %s | %s | %.0f |\n", r.Store, fmtInt(r.Entries), r.Heartbeats,
			r.NextHeartbeatS, r.FirstCallS, r.LongestCallS, restartGap(r), r.HeartbeatS, caught, fmtInt(int(r.EntriesPerSecond)), r.Seconds)
		if restartGap(r) >= restartGap(worst) {
			worst = r
		}
	}
	verdict := "within"
	if worst.HeartbeatS > 0 && (restartGap(worst) > worst.HeartbeatS || worst.NextHeartbeatS > worst.HeartbeatS) {
		verdict = "**not** within"
	}
	fmt.Fprintf(&b, "\nThe next heartbeat after the restart came after %.2f s and the longest gap was %.2f s, on %s: %s one heartbeat interval (%g s).\n\n",
		worst.NextHeartbeatS, restartGap(worst), worst.Store, verdict, worst.HeartbeatS)
	return b.String()
}

// restartGap is a restart's longest gap between heartbeats; results from before the
// store's heartbeats were logged have only the longest call.
func restartGap(r results.RestartBacklog) float64 {
	return max(r.LongestGapS, r.LongestCallS)
}
