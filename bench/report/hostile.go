package main

import (
	"fmt"
	"maps"
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
	type chaos struct {
		results.HostileChaos
		Killed, Errors            int
		ThrottledText, Invariants string
	}
	var runs []chaos
	for _, c := range v.Chaos {
		x := chaos{HostileChaos: c, ThrottledText: "—", Invariants: "held"}
		for _, n := range c.Kills {
			x.Killed += n
		}
		for _, n := range c.StoreErrors {
			x.Errors += n
		}
		if c.StoreCalls > 0 {
			x.ThrottledText = fmt.Sprintf("%s of %s", fmtInt(c.Throttled), fmtInt(c.StoreCalls))
		}
		if c.Violations != "" {
			x.Invariants = "**broken**: " + scCell(cut(c.Violations, 200))
		}
		runs = append(runs, x)
	}
	var during []string
	for _, a := range v.Clients {
		during = append(during, fmt.Sprintf("`%s`: %s", a.Name, a.Detail))
	}
	var stages []string
	for _, k := range slices.Sorted(maps.Keys(v.Chaos[0].Kills)) {
		stages = append(stages, fmt.Sprintf("`%s` %d", k, v.Chaos[0].Kills[k]))
	}
	md, err := render("hostile", struct {
		V                results.Hostile
		Headline, During string
		Chaos            []chaos
		Stages           []string
		Serving          *hostileServing
	}{v, hostileHeadline(v), strings.Join(during, "; "), runs, stages, newHostileServing(v.Serving)})
	return md, v.Meta, err
}

// Goals of the serving attacks (issue 23).
const (
	hostileFrontMemGoal   = 256 // MiB, the front's peak over every attack
	hostileCacheFilesGoal = 2.0 // cache files on disk ÷ the entry bound
)

// hostileServing is the serving attacks with their goals checked; nil without them.
type hostileServing struct {
	V                            *results.HostileServing
	MemGoal                      int
	Abandoned, MemMet, FilesText string
	During                       string
}

func newHostileServing(v *results.HostileServing) *hostileServing {
	if v == nil || len(v.Scenarios) == 0 {
		return nil
	}
	h := &hostileServing{V: v, MemGoal: hostileFrontMemGoal, Abandoned: "not run", FilesText: "not run",
		MemMet: goalText(v.PeakFrontRSSMiB <= hostileFrontMemGoal)}
	var during []string
	for _, s := range v.Scenarios {
		if s.Name == "abandoned" && s.GitProcessesAfter >= 0 {
			h.Abandoned = fmt.Sprintf("%d: %s", s.GitProcessesAfter, goalText(s.GitProcessesAfter == 0))
		}
		if s.CacheEntryBound > 0 {
			x := float64(s.CacheFilesPeak) / float64(s.CacheEntryBound)
			h.FilesText = fmt.Sprintf("%s files for a bound of %s, %.2f×: %s", fmtInt(s.CacheFilesPeak), fmtInt(s.CacheEntryBound), x, goalText(x <= hostileCacheFilesGoal))
		}
		if s.Detail != "" {
			during = append(during, fmt.Sprintf("`%s`: %s", s.Name, s.Detail))
		}
	}
	h.During = strings.Join(during, "; ")
	return h
}

func goalText(met bool) string {
	if met {
		return "meets the goal"
	}
	return "**misses the goal**"
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
