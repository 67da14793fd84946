package main

import (
	"fmt"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// maintenanceSection renders maintenance.json: what polls, fetches, maintenance and
// served clones read of a mirror out of the page cache, and whether maintenance keeps
// up with a fleet.
func maintenanceSection(r *Report) (string, results.Meta, error) {
	var v results.Maintenance
	if err := r.Load("maintenance", &v); err != nil {
		return "", results.Meta{}, err
	}
	if len(v.Scenarios) == 0 {
		return "", v.Meta, fmt.Errorf("maintenance: no scenarios")
	}
	type stepRow struct {
		Run string
		results.MaintenanceStep
		OldFiles string
	}
	var steps []stepRow
	for _, s := range v.Scenarios {
		for _, st := range s.Steps {
			steps = append(steps, stepRow{Run: s.Name, MaintenanceStep: st, OldFiles: maintOldFiles(st.Files)})
		}
	}
	md, err := render("maintenance", struct {
		V     results.Maintenance
		Steps []stepRow
	}{v, steps})
	return md, v.Meta, err
}

// maintOldFiles says which old packs a step read, and how much of each.
func maintOldFiles(files []results.MaintenanceFile) string {
	var out []string
	for _, f := range files {
		if f.OldPack {
			out = append(out, fmt.Sprintf("%s of %s", hBytes(f.Read), hBytes(f.Size)))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// maintenanceHeadline is the maintenance line of the report's headlines.
func maintenanceHeadline(v results.Maintenance) string {
	var unchanged, changed int64 = -1, -1
	for _, s := range v.Scenarios {
		switch s.Name {
		case "maintenance, unchanged":
			unchanged = s.OldPackReadBytes
		case "maintenance, changed":
			changed = s.OldPackReadBytes
		}
	}
	return fmt.Sprintf("maintenance of an unchanged mirror reads %s of its packs (%s for a changed one); %.0f unchanged or %.0f changed mirrors per CPU-second; %s repos on %d workers use %s of their CPU for maintenance",
		hBytes(max(unchanged, 0)), hBytes(max(changed, 0)), v.Throughput.UnchangedPerCPUSecond, v.Throughput.ChangedPerCPUSecond,
		fmtInt(v.Schedule.Repos), v.Schedule.Workers, fcPct(v.Schedule.Share))
}
