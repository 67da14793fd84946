package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/plot"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// fcNotable is how far a ratio must be from parity to be called a loss or a win.
const fcNotable = 1.25

// fetchCostSection renders fetchcost.json: go-git's Mirrorer against the git CLI on
// generated repositories of several sizes.
func fetchCostSection(r *Report) (string, results.Meta, error) {
	var v results.FetchCost
	if err := r.Load("fetchcost", &v); err != nil {
		return "", results.Meta{}, err
	}
	if len(v.Sizes) == 0 {
		return "", v.Meta, fmt.Errorf("fetchcost: no sizes")
	}
	charts, err := fcCharts(r, v.Sizes)
	if err != nil {
		return "", v.Meta, err
	}
	type size struct {
		S                 results.FetchCostSize
		Rows              [][4]string
		ListRate, ListCPU string
	}
	var sizes []size
	for _, s := range v.Sizes {
		sizes = append(sizes, size{S: s, Rows: fcSizeRows(s), ListRate: fcNum(s.Polls.GoGitList.PerSecond),
			ListCPU: fcMs(s.Polls.GoGitList.CPUMillisPerPoll)})
	}
	losses, wins := fcVerdicts(v.Sizes)
	md, err := render("fetchcost", struct {
		V                   results.FetchCost
		Git                 string
		Names               []string
		Short               [][2]string
		Charts              string
		Sizes               []size
		Notable, NotableWin float64
		Losses, Wins        []string
		Memory              *fcMemory
		Burst               *fcBurst
		Poll                *fcPolling
		PollSeconds         string
		LoadStart, LoadEnd  string
		LoadRemark          string
	}{v, strings.TrimPrefix(v.GitVersion, "git version "), fcNames(v.Sizes), fcShort(v.Sizes), charts, sizes,
		fcNotable, 1 / fcNotable, losses, wins, fcMemoryOf(v), fcBurstOf(v.Burst), fcPollOf(v),
		fcNum(v.PollSeconds), fcNum(v.LoadStart), fcNum(v.LoadEnd), fcLoadRemark(v)})
	return md, v.Meta, err
}

// fcShort is the short answer: the ratios per size, one metric a line.
func fcShort(sizes []results.FetchCostSize) [][2]string {
	var out [][2]string
	row := func(label string, f func(s results.FetchCostSize) float64) {
		parts := make([]string, len(sizes))
		for i, s := range sizes {
			parts[i] = fcRatio(f(s))
		}
		out = append(out, [2]string{label, strings.Join(parts, " / ")})
	}
	row("initial mirror, wall time", func(s results.FetchCostSize) float64 { return s.Clone.Ratio.Wall })
	row("initial mirror, peak memory (all processes)", func(s results.FetchCostSize) float64 { return s.Clone.Ratio.TreeRSS })
	row("fetch after a small change, wall time", func(s results.FetchCostSize) float64 { return s.Fetch.Ratio.Wall })
	row("fetch after a small change, peak memory (all processes)", func(s results.FetchCostSize) float64 { return s.Fetch.Ratio.TreeRSS })
	row("no-change poll, CPU per poll vs `git fetch`", func(s results.FetchCostSize) float64 { return s.Polls.CPUVsFetch })
	row("no-change poll, CPU per poll vs `git ls-remote`", func(s results.FetchCostSize) float64 { return s.Polls.CPUVsLsRemote })
	row("no-change polls per second, go-git / `git ls-remote` (above 1: go-git polls faster)", func(s results.FetchCostSize) float64 {
		return s.Polls.RateVsLsRemote
	})
	return out
}

func fcNames(sizes []results.FetchCostSize) []string {
	names := make([]string, len(sizes))
	for i, s := range sizes {
		names[i] = s.Name
	}
	return names
}

// fcSizeRows put go-git and the CLI side by side for one repository: label, go-git,
// CLI, ratio.
func fcSizeRows(s results.FetchCostSize) [][4]string {
	var rows [][4]string
	row := func(label, g, c, ratio string) { rows = append(rows, [4]string{label, g, c, ratio}) }
	op := func(name string, p results.FetchCostPair) {
		row(fmt.Sprintf("%s: wall time (median of %d)", name, p.GoGit.Runs), fcSecs(p.GoGit.WallSeconds), fcSecs(p.CLI.WallSeconds), fcRatio(p.Ratio.Wall))
		row(name+": CPU time", fcSecs(p.GoGit.CPUSeconds), fcSecs(p.CLI.CPUSeconds), fcRatio(p.Ratio.CPU))
		row(name+": peak RSS, largest process", fcMiB(p.GoGit.MaxRSSBytes), fcMiB(p.CLI.MaxRSSBytes), fcRatio(p.Ratio.MaxRSS))
		row(name+": peak RSS, all processes", fcMiB(p.GoGit.TreeRSSBytes), fcMiB(p.CLI.TreeRSSBytes), fcRatio(p.Ratio.TreeRSS))
		row(name+": mirror on disk", fcMiB(p.GoGit.DiskBytes), fcMiB(p.CLI.DiskBytes), fcRatio(p.Ratio.Disk))
	}
	op("Initial mirror", s.Clone)
	op("Fetch after a small change", s.Fetch)
	p := s.Polls
	row("No-change poll vs `git fetch --prune`: polls/s (ratio above 1: go-git faster)", fcNum(p.GoGit.PerSecond), fcNum(p.GitFetch.PerSecond), fcRatio(p.RateVsFetch))
	row("No-change poll vs `git fetch --prune`: CPU per poll", fcMs(p.GoGit.CPUMillisPerPoll), fcMs(p.GitFetch.CPUMillisPerPoll), fcRatio(p.CPUVsFetch))
	row("No-change poll vs `git ls-remote`: polls/s (ratio above 1: go-git faster)", fcNum(p.GoGit.PerSecond), fcNum(p.LsRemote.PerSecond), fcRatio(p.RateVsLsRemote))
	row("No-change poll vs `git ls-remote`: CPU per poll", fcMs(p.GoGit.CPUMillisPerPoll), fcMs(p.LsRemote.CPUMillisPerPoll), fcRatio(p.CPUVsLsRemote))
	row("Polling: peak RSS (go-git: the polling process; CLI: one `git fetch`)", fcMiB(p.GoGit.MaxRSSBytes), fcMiB(p.GitFetch.MaxRSSBytes),
		fcRatio(fcDiv(float64(p.GoGit.MaxRSSBytes), float64(p.GitFetch.MaxRSSBytes))))
	return rows
}

// fcCharts draws the ratios per size and peak memory against pack size.
func fcCharts(r *Report, sizes []results.FetchCostSize) (string, error) {
	bars := plot.Bars{Title: "go-git / git CLI (1 = parity; above: go-git costs more)", YLabel: "ratio", LogY: true}
	series := []struct {
		name string
		f    func(s results.FetchCostSize) float64
	}{
		{"initial mirror: time", func(s results.FetchCostSize) float64 { return s.Clone.Ratio.Wall }},
		{"initial mirror: peak memory", func(s results.FetchCostSize) float64 { return s.Clone.Ratio.TreeRSS }},
		{"fetch: time", func(s results.FetchCostSize) float64 { return s.Fetch.Ratio.Wall }},
		{"poll CPU vs git fetch", func(s results.FetchCostSize) float64 { return s.Polls.CPUVsFetch }},
		{"poll CPU vs git ls-remote", func(s results.FetchCostSize) float64 { return s.Polls.CPUVsLsRemote }},
	}
	for _, s := range sizes {
		bars.Groups = append(bars.Groups, s.Name)
	}
	for _, se := range series {
		bs := plot.BarSeries{Name: se.name}
		for _, s := range sizes {
			bs.Values = append(bs.Values, se.f(s))
		}
		bars.Series = append(bars.Series, bs)
	}
	ratios, err := r.Plot("fetchcost-ratios.svg", "go-git / git CLI ratios per repository size", bars)
	if err != nil {
		return "", err
	}

	mem := plot.Line{Title: "Peak memory against pack size", XLabel: "pack (MiB)", YLabel: "peak RSS, all processes (MiB)", LogX: true, LogY: true}
	lines := []struct {
		name string
		dash bool
		f    func(s results.FetchCostSize) int64
	}{
		{"go-git initial mirror", false, func(s results.FetchCostSize) int64 { return s.Clone.GoGit.TreeRSSBytes }},
		{"git clone --mirror", false, func(s results.FetchCostSize) int64 { return s.Clone.CLI.TreeRSSBytes }},
		{"go-git fetch", true, func(s results.FetchCostSize) int64 { return s.Fetch.GoGit.TreeRSSBytes }},
		{"git fetch", true, func(s results.FetchCostSize) int64 { return s.Fetch.CLI.TreeRSSBytes }},
	}
	for _, l := range lines {
		ser := plot.Series{Name: l.name, Dash: l.dash}
		for _, s := range sizes {
			ser.X = append(ser.X, fcMiBf(s.Repo.PackBytes))
			ser.Y = append(ser.Y, fcMiBf(l.f(s)))
		}
		mem.Series = append(mem.Series, ser)
	}
	memory, err := r.Plot("fetchcost-memory.svg", "peak memory of go-git and the git CLI against pack size", mem)
	if err != nil {
		return "", err
	}
	return ratios + "\n" + memory + "\n", nil
}

// fcVerdicts lists, per metric, the sizes where go-git costs notably more or less.
func fcVerdicts(sizes []results.FetchCostSize) (losses, wins []string) {
	metrics := []struct {
		name string
		f    func(s results.FetchCostSize) float64
	}{
		{"initial mirror time", func(s results.FetchCostSize) float64 { return s.Clone.Ratio.Wall }},
		{"initial mirror CPU", func(s results.FetchCostSize) float64 { return s.Clone.Ratio.CPU }},
		{"initial mirror peak memory", func(s results.FetchCostSize) float64 { return s.Clone.Ratio.TreeRSS }},
		{"mirror on disk", func(s results.FetchCostSize) float64 { return s.Clone.Ratio.Disk }},
		{"fetch time", func(s results.FetchCostSize) float64 { return s.Fetch.Ratio.Wall }},
		{"fetch CPU", func(s results.FetchCostSize) float64 { return s.Fetch.Ratio.CPU }},
		{"fetch peak memory", func(s results.FetchCostSize) float64 { return s.Fetch.Ratio.TreeRSS }},
		{"no-change poll CPU vs `git ls-remote`", func(s results.FetchCostSize) float64 { return s.Polls.CPUVsLsRemote }},
		{"no-change poll CPU vs `git fetch`", func(s results.FetchCostSize) float64 { return s.Polls.CPUVsFetch }},
	}
	for _, m := range metrics {
		var lose, win []string
		for _, s := range sizes {
			switch x := m.f(s); {
			case x >= fcNotable:
				lose = append(lose, s.Name+" "+fcRatio(x))
			case x > 0 && x <= 1/fcNotable:
				win = append(win, s.Name+" "+fcRatio(x))
			}
		}
		if len(lose) > 0 {
			losses = append(losses, m.name+" ("+strings.Join(lose, ", ")+")")
		}
		if len(win) > 0 {
			wins = append(wins, m.name+" ("+strings.Join(win, ", ")+")")
		}
	}
	return losses, wins
}

// fcMemory sizes a worker task for first clones of the largest repository.
type fcMemory struct {
	S                                  results.FetchCostSize
	GoGit, CLI, GoGitAll, CLIAll, Task int64
	Fetchers, Fit                      int
}

func fcMemoryOf(v results.FetchCost) *fcMemory {
	s := v.Sizes[len(v.Sizes)-1]
	w := v.Worker
	g, c := s.Clone.GoGit.TreeRSSBytes, s.Clone.CLI.TreeRSSBytes
	if g <= 0 || c <= 0 || w.TaskMemoryMiB <= 0 || w.Fetchers <= 0 {
		return nil
	}
	task := int64(w.TaskMemoryMiB) << 20
	return &fcMemory{S: s, GoGit: g, CLI: c, GoGitAll: int64(w.Fetchers) * g, CLIAll: int64(w.Fetchers) * c, Task: task,
		Fetchers: w.Fetchers, Fit: int(task / g)}
}

// fcPolling turns CPU per poll into repos a worker can keep polled.
type fcPolling struct {
	VCPU   string
	Parts  []string
	Mirror *struct{ Name, Share, List string }
}

func fcPollOf(v results.FetchCost) *fcPolling {
	w := v.Worker
	if w.TaskVCPU <= 0 || w.MinIntervalSeconds <= 0 {
		return nil
	}
	var parts []string
	for _, s := range v.Sizes {
		p := s.Polls
		if p.GoGit.CPUMillisPerPoll <= 0 || p.LsRemote.CPUMillisPerPoll <= 0 {
			continue
		}
		perSec := 1000 / p.GoGit.CPUMillisPerPoll * w.TaskVCPU
		parts = append(parts, fmt.Sprintf("%s: %s CPU per go-git poll (`git ls-remote`: %s) → about %s polls/s per task, "+
			"%s repos like it at one poll every %s", s.Name, fcMs(p.GoGit.CPUMillisPerPoll), fcMs(p.LsRemote.CPUMillisPerPoll),
			fcNum(perSec), fmtInt(int(perSec*w.MinIntervalSeconds)), fcDuration(w.MinIntervalSeconds)))
	}
	if len(parts) == 0 {
		return nil
	}
	out := &fcPolling{VCPU: fcNum(w.TaskVCPU), Parts: parts}
	s := v.Sizes[len(v.Sizes)-1]
	sync, list := s.Polls.GoGit.CPUMillisPerPoll, s.Polls.GoGitList.CPUMillisPerPoll
	if sync > 0 && list > 0 {
		out.Mirror = &struct{ Name, Share, List string }{s.Name, fcPct(math.Max(0, 1-list/sync)), fcMs(list)}
	}
	return out
}

// fcLoadRemark warns when other work competed for the CPU during the run.
func fcLoadRemark(v results.FetchCost) string {
	if v.Meta.Cores > 0 && math.Max(v.LoadStart, v.LoadEnd) > float64(v.Meta.Cores) {
		return ": other work competed for the CPU, so wall times are inflated and noisy; CPU times are the steadier figures"
	}
	return ""
}

func fcDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Goals of the burst section (issue 26).
const (
	fcBurstRSSGoal  = 1.25 // peak resident memory over the budget
	fcBurstTimeGoal = 1.5  // wall time over the same burst without a budget
)

// fcBurst is the burst section's table and verdicts.
type fcBurst struct {
	B                       results.FetchCostBurst
	Rows                    [][3]string
	RSSGoal, TimeGoal       float64
	RSSMet, TimeMet, AllRan bool
}

func fcBurstOf(b *results.FetchCostBurst) *fcBurst {
	if b == nil {
		return nil
	}
	u, g := b.Unbudgeted, b.Budgeted
	rows := [][3]string{
		{"mirrors completed", fmt.Sprintf("%d of %d", u.Completed, b.Mirrors), fmt.Sprintf("%d of %d", g.Completed, b.Mirrors)},
		{"wall time", fcSecs(u.WallSeconds), fcSecs(g.WallSeconds)},
		{"CPU", fcSecs(u.CPUSeconds), fcSecs(g.CPUSeconds)},
		{"peak RSS, all processes", fcMiB(u.TreeRSSBytes), fcMiB(g.TreeRSSBytes)},
		{"GOMEMLIMIT", fcMiB(u.GoMemLimitBytes), fcMiB(g.GoMemLimitBytes)},
		{"peak memory reserved by the fetches", "—", fcMiB(g.PeakReservedBytes)},
		{"most fetches waiting for memory at once", fmtInt(u.MaxWaiting), fmtInt(g.MaxWaiting)},
	}
	return &fcBurst{B: *b, Rows: rows, RSSGoal: fcBurstRSSGoal, TimeGoal: fcBurstTimeGoal,
		RSSMet:  b.TreeRSSOverBudget > 0 && b.TreeRSSOverBudget <= fcBurstRSSGoal,
		TimeMet: b.TimeRatio > 0 && b.TimeRatio <= fcBurstTimeGoal,
		AllRan:  u.Completed == b.Mirrors && g.Completed == b.Mirrors}
}

// fcRatio formats a ratio; 0 (not measurable) shows as a dash.
func fcRatio(x float64) string {
	switch {
	case x <= 0 || math.IsNaN(x) || math.IsInf(x, 0):
		return "—"
	case x < 10:
		return strconv.FormatFloat(x, 'f', 2, 64) + "×"
	}
	return strconv.FormatFloat(x, 'f', 0, 64) + "×"
}

func fcSecs(x float64) string {
	switch {
	case x <= 0:
		return "—"
	case x < 1:
		return strconv.FormatFloat(x*1000, 'f', 0, 64) + " ms"
	case x < 10:
		return strconv.FormatFloat(x, 'f', 2, 64) + " s"
	}
	return strconv.FormatFloat(x, 'f', 1, 64) + " s"
}

func fcMs(x float64) string {
	if x <= 0 {
		return "—"
	}
	if x < 10 {
		return strconv.FormatFloat(x, 'f', 2, 64) + " ms"
	}
	return strconv.FormatFloat(x, 'f', 1, 64) + " ms"
}

func fcMiBf(n int64) float64 { return float64(n) / (1 << 20) }

func fcMiB(n int64) string {
	x := fcMiBf(n)
	switch {
	case n <= 0:
		return "—"
	case x < 100:
		return strconv.FormatFloat(x, 'f', 1, 64) + " MiB"
	case x < 10240:
		return strconv.FormatFloat(x, 'f', 0, 64) + " MiB"
	}
	return strconv.FormatFloat(x/1024, 'f', 1, 64) + " GiB"
}

func fcNum(x float64) string {
	if x >= 100 {
		return fmtInt(int(math.Round(x)))
	}
	return strconv.FormatFloat(x, 'f', 1, 64)
}

func fcPct(x float64) string { return strconv.FormatFloat(100*x, 'f', 0, 64) + " %" }

func fcDuration(seconds float64) string {
	if seconds >= 60 && math.Mod(seconds, 60) == 0 {
		return strconv.FormatFloat(seconds/60, 'f', 0, 64) + " min"
	}
	return fcNum(seconds) + " s"
}
