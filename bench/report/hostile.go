package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// hostileSection renders hostile.json: each attack on an upstream, the list and the
// API with its outcome and the memory peak under it, then the chaos runs.
func hostileSection(r *Report) (string, results.Meta, error) {
	var v results.Hostile
	if err := r.Load("hostile", &v); err != nil {
		return "", results.Meta{}, err
	}
	if len(v.Upstreams) == 0 || len(v.Clients) == 0 || len(v.Chaos) == 0 {
		return "", v.Meta, fmt.Errorf("hostile: no upstream attacks, client attacks or chaos runs")
	}
	var b strings.Builder
	b.WriteString("## 6. Hostile inputs\n\n")
	b.WriteString("Each attack of issue 15, run by `bench/hostile` against real servers on 127.0.0.1 in one process: the " +
		"upstreams of `shared/hostile` synced by a `mirror.Mirrorer` through the URL policy's HTTP client, a list repository of " +
		"bad lines synced by the list sync, the client attacks against a local fleet's API. *Refused* means the attack ended in a " +
		"classified error, a 4xx, or connections the server closed, as it should.\n\n")
	b.WriteString(hostileHeadline(v) + "\n\n")

	b.WriteString("### Upstreams\n\n| attack | what it sends | refused | outcome | after | heap peak | RSS peak |\n|---|---|---|---|---:|---:|---:|\n")
	for _, a := range v.Upstreams {
		fmt.Fprintf(&b, "| `%s` | %s | %s | `%s` | %s | %s | %s |\n", a.Name, scCell(a.What), yesNo(a.Refused), a.Outcome,
			hSeconds(a.Seconds), hMiB(a.HeapPeakMiB), hMiB(a.RSSPeakMiB))
	}
	b.WriteString("\n<details><summary>The errors, as the repos' records show them</summary>\n\n")
	for _, a := range v.Upstreams {
		fmt.Fprintf(&b, "- `%s`: %s\n", a.Name, scCell(a.Detail))
	}
	b.WriteString("\n</details>\n\n")

	l := v.List
	b.WriteString("### A list of bad lines\n\n")
	fmt.Fprintf(&b, "A list repository whose `repos.txt` is %s lines in %s (%s in git), all but two bad: the sync took %s, "+
		"counted %s bad lines, kept %s for the status, added the %d good URLs; heap peak %s, RSS peak %s.\n\n",
		fmtInt(l.Lines), hBytes(l.Bytes), hBytes(l.PackBytes), hSeconds(l.Seconds), fmtInt(l.BadLines), fmtInt(l.Kept), l.Applied,
		hMiB(l.HeapPeakMiB), hMiB(l.RSSPeakMiB))

	b.WriteString("### API clients\n\n| attack | what it does | refused | sent | refused or cut | outcome | took | heap peak | RSS peak |\n|---|---|---|---:|---:|---|---:|---:|---:|\n")
	for _, a := range v.Clients {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s | %s | %s |\n", a.Name, scCell(a.What), yesNo(a.Refused), fmtInt(a.Sent),
			fmtInt(a.Handled), scCell(a.Outcome), hSeconds(a.Seconds), hMiB(a.HeapPeakMiB), hMiB(a.RSSPeakMiB))
	}
	b.WriteString("\nMeanwhile, for each: ")
	var during []string
	for _, a := range v.Clients {
		during = append(during, fmt.Sprintf("`%s`: %s", a.Name, a.Detail))
	}
	b.WriteString(scCell(strings.Join(during, "; ")) + ".\n\n")

	b.WriteString("### Chaos in the simulation\n\n")
	b.WriteString("`sim.Chaos` (the run the tests check): workers killed at every stage of a clone and of a fetch in turn and " +
		"restarted inside or past the grace, the coordinator crashed at one of its next writes every round, repos added and " +
		"deleted throughout; then the fleet settles and every repo is polled again.\n\n")
	b.WriteString("| store | clock skew | rounds | workers killed | restarts | coordinator crashes | store calls throttled | store errors reaching the fleet | repos | lost | deleted but kept | not mirrored | invariants |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, c := range v.Chaos {
		kills, errs := 0, 0
		for _, n := range c.Kills {
			kills += n
		}
		for _, n := range c.StoreErrors {
			errs += n
		}
		throttled := "—"
		if c.StoreCalls > 0 {
			throttled = fmt.Sprintf("%s of %s", fmtInt(c.Throttled), fmtInt(c.StoreCalls))
		}
		inv := "held"
		if c.Violations != "" {
			inv = "**broken**: " + scCell(cut(c.Violations, 200))
		}
		fmt.Fprintf(&b, "| %s | ±%.0f s | %d | %d | %d | %d | %s | %d | %s | **%d** | %d | %d | %s |\n", c.Store, c.ClockSkewSeconds,
			c.Rounds, kills, c.Restarts, c.CoordinatorCrashes, throttled, errs, fmtInt(c.Repos), c.Lost, c.LeftOver, c.NotMirrored, inv)
	}
	b.WriteString("\nWorkers killed, by stage of the sync (first run):\n\n")
	stages := slices.Sorted(func(yield func(string) bool) {
		for k := range v.Chaos[0].Kills {
			if !yield(k) {
				return
			}
		}
	})
	var ks []string
	for _, k := range stages {
		ks = append(ks, fmt.Sprintf("`%s` %d", k, v.Chaos[0].Kills[k]))
	}
	b.WriteString(strings.Join(ks, ", ") + ".\n\n")

	b.WriteString("### Limits in force\n\n| limit | value |\n|---|---|\n")
	for _, l := range v.Limits {
		fmt.Fprintf(&b, "| `%s` | %s |\n", l.Name, l.Value)
	}
	b.WriteString("\n")
	if len(v.Notes) > 0 {
		b.WriteString("Notes:\n\n")
		for _, n := range v.Notes {
			b.WriteString("- " + n + "\n")
		}
		fmt.Fprintf(&b, "- The benchmark ran for %.0f s.\n\n", v.Meta.Seconds)
	}
	return b.String(), v.Meta, nil
}

// hostileHeadline counts the attacks refused, the highest heap peak among them, and
// the repos the chaos runs lost.
func hostileHeadline(v results.Hostile) string {
	tried, refused := 0, 0
	peak, peakName := 0.0, ""
	all := slices.Concat(v.Upstreams, v.Clients)
	for _, a := range all {
		tried++
		if a.Refused {
			refused++
		}
		if a.HeapPeakMiB > peak {
			peak, peakName = a.HeapPeakMiB, a.Name
		}
	}
	tried++ // the list
	if v.List.BadLines == v.List.Lines-v.List.Applied && v.List.Kept <= 50 {
		refused++
	}
	if v.List.HeapPeakMiB > peak {
		peak, peakName = v.List.HeapPeakMiB, "list"
	}
	lost, runs := 0, 0
	for _, c := range v.Chaos {
		lost += c.Lost + c.LeftOver + c.NotMirrored
		runs++
	}
	return fmt.Sprintf("**%d of %d attacks refused; the highest heap peak under any was %s (`%s`); chaos: %d runs, %d repos lost.**",
		refused, tried, hMiB(peak), peakName, runs, lost)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}

func hMiB(m float64) string {
	if m == 0 {
		return "—"
	}
	if m < 10 {
		return fmt.Sprintf("%.1f MiB", m)
	}
	return fmt.Sprintf("%.0f MiB", m)
}

func hSeconds(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.0f ms", s*1000)
	}
	return fmt.Sprintf("%.1f s", s)
}

func hBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
