package main

import (
	"fmt"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// Goals of the serving benchmark (issue: serve the mirrors).
const (
	serveCloneGoal      = 1.1 // cold clone wall time, front ÷ http-backend
	serveConcurrentGoal = 0.2 // concurrent identical clones, server CPU, front ÷ http-backend
)

// serveSection renders serve.json: cloning through the fleet's git front against
// plain git http-backend on the same mirror.
func serveSection(r *Report) (string, results.Meta, error) {
	var v results.Serve
	if err := r.Load("serve", &v); err != nil {
		return "", results.Meta{}, err
	}
	if len(v.States) == 0 {
		return "", v.Meta, fmt.Errorf("serve: no states")
	}
	var b strings.Builder
	b.WriteString("## 7. Serving clones\n\n")
	fmt.Fprintf(&b, "One generated mirror (%s of packs, %s commits, %d refs) served over smart HTTP by the fleet's git "+
		"front (`mirrorfleet serve`: git upload-pack behind the front, with the pack cache) and, as the baseline, by plain "+
		"`git http-backend` on the same directory (%s). Each server ran in a process of its own, started for one operation; "+
		"its CPU is that process's and every git process's it ran. Goals: a cold clone within %.1f× http-backend's time, "+
		"and %d identical clones at once for at most %.1f× its server CPU.\n\n",
		fcMiB(v.Repo.PackBytes), fmtInt(v.Repo.Commits), v.Repo.Refs, v.GitVersion, serveCloneGoal, v.Clients, serveConcurrentGoal)
	b.WriteString(serveVerdicts(v))
	for _, s := range v.States {
		bitmap := "no bitmap"
		if s.Bitmap {
			bitmap = "bitmap"
		}
		fmt.Fprintf(&b, "### %s mirror (pack files: %d, %s)\n\n", s.Name, s.Packs, bitmap)
		b.WriteString("| operation | front wall | http-backend wall | wall ÷ | front server CPU | http-backend server CPU | CPU ÷ | front peak memory | http-backend peak memory | cache hits / packs | cache disk written |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, row := range []struct {
			name string
			p    results.ServePair
		}{
			{fmt.Sprintf("cold full clone (median of %d)", s.Clone.Front.Runs), s.Clone},
			{fmt.Sprintf("%d identical clones at once", v.Clients), s.Concurrent},
			{"fetch after a small change", s.Fetch},
			{fmt.Sprintf("shallow clone, depth 1 (median of %d)", s.Shallow.Front.Runs), s.Shallow},
		} {
			f, k := row.p.Front, row.p.Backend
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.name,
				fcSecs(f.WallSeconds), fcSecs(k.WallSeconds), fcRatio(row.p.WallRatio),
				fcSecs(f.ServerCPUSeconds), fcSecs(k.ServerCPUSeconds), fcRatio(row.p.CPURatio),
				fcMiB(f.PeakServerRSSBytes), fcMiB(k.PeakServerRSSBytes), serveHits(f), fcMiB(f.CacheDiskBytes))
		}
		b.WriteString("\n")
	}
	if len(v.Notes) > 0 {
		b.WriteString("How it was measured:\n\n")
		for _, n := range v.Notes {
			b.WriteString("- " + n + "\n")
		}
		fmt.Fprintf(&b, "- Load average %.1f at the start, %.1f at the end, on %d cores; the run took %s.\n\n",
			v.LoadStart, v.LoadEnd, v.Meta.Cores, fcDuration(v.Meta.Seconds))
	}
	return b.String(), v.Meta, nil
}

// serveHits is "hits / packs (ratio)" for the front; a dash without packs.
func serveHits(f results.ServeRun) string {
	n := f.CacheHits + f.CacheMisses
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf("%d / %d (%s)", f.CacheHits, n, fcPct(float64(f.CacheHits)/float64(n)))
}

// serveVerdicts says, per state, whether each goal was met.
func serveVerdicts(v results.Serve) string {
	var b strings.Builder
	for _, s := range v.States {
		fmt.Fprintf(&b, "- **%s:** cold clone %s http-backend's time (%s the %.1f× goal); %d concurrent clones %s its server CPU (%s the %.1f× goal).\n",
			s.Name, fcRatio(s.Clone.WallRatio), serveMet(s.Clone.WallRatio, serveCloneGoal), serveCloneGoal,
			v.Clients, fcRatio(s.Concurrent.CPURatio), serveMet(s.Concurrent.CPURatio, serveConcurrentGoal), serveConcurrentGoal)
	}
	b.WriteString("\n")
	return b.String()
}

func serveMet(x, goal float64) string {
	if x > 0 && x <= goal {
		return "meets"
	}
	return "misses"
}

// serveHeadline is the serving line of the report's headlines.
func serveHeadline(v results.Serve) string {
	var parts []string
	for _, s := range v.States {
		parts = append(parts, fmt.Sprintf("%s: cold clone %s the time, %d concurrent clones %s the server CPU",
			s.Name, fcRatio(s.Clone.WallRatio), v.Clients, fcRatio(s.Concurrent.CPURatio)))
	}
	return fmt.Sprintf("- **Serving, fleet front ÷ git http-backend (goals ≤ %.1f× time, ≤ %.1f× CPU):** %s.\n",
		serveCloneGoal, serveConcurrentGoal, strings.Join(parts, "; "))
}
