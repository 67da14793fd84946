package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// mirrorReads are what each operation reads of a mirror on EFS: the bill's read
// figures, in one place, with their source. Bytes are of the measured mirror; the bill
// scales what grows with the mirror (its packs and the index files over them) to its
// own mirror size, and keeps what does not (ref files, a negotiation's commits).
type mirrorReads struct {
	Source string
	// PackBytes is the measured mirror's pack; IndexBytes its index files of 128 KiB or
	// more (pack .idx, multi-pack index and bitmap, commit-graph), which EFS tiers like
	// the pack; SmallBytes what every poll reads (HEAD, config, packed-refs), which stays
	// in Standard (files under 128 KiB never move).
	PackBytes, IndexBytes, SmallBytes float64
	// MIDXBytes and PackIdxBytes are two of the index files: the multi-pack index a
	// changed mirror's maintenance rewrites, and the pack's own .idx the scrub keeps
	// (it rewrites the rest: multi-pack index, bitmap, commit-graph).
	MIDXBytes, PackIdxBytes float64
	// PollBytes is a no-change poll's read (small files only), and the same for the
	// maintenance of an unchanged mirror (MaintainUnchangedBytes).
	PollBytes, MaintainUnchangedBytes float64
	// FetchOldPackBytes is what a fetch that brings a change reads of the old pack
	// (go-git's negotiation walks up to 100 commits back: commits only), and
	// FetchIndexBytes what it reads of the index files (the pack's .idx).
	FetchOldPackBytes, FetchIndexBytes float64
	// MaintainChangedIndexBytes is what a changed mirror's maintenance reads of the
	// index files (no old pack: ADR 23).
	MaintainChangedIndexBytes float64
	// ScrubPackFactor is the bytes a scrub reads of the pack per byte of pack (repack
	// with a bitmap, commit-graph from all refs, connectivity check: each walks it).
	ScrubPackFactor float64
	// ClonePackFactor is the same for a clone served from EFS.
	ClonePackFactor float64
}

// readsFromMaintenance reads bench/maintenance's results (maintenance.json in dir).
func readsFromMaintenance(dir string) (mirrorReads, error) {
	path := filepath.Join(dir, "maintenance.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return mirrorReads{}, fmt.Errorf("the bill's EFS read figures come from %s (go run ./bench/maintenance -out %s): %w", path, dir, err)
	}
	var m results.Maintenance
	if err := json.Unmarshal(data, &m); err != nil {
		return mirrorReads{}, fmt.Errorf("%s: %w", path, err)
	}
	return mirrorReadsOf(m, path)
}

// mirrorReadsOf picks the figures out of the maintenance results.
func mirrorReadsOf(m results.Maintenance, path string) (mirrorReads, error) {
	byName := map[string]results.MaintenanceScenario{}
	for _, s := range m.Scenarios {
		byName[s.Name] = s
	}
	var missing []string
	get := func(name string) results.MaintenanceScenario {
		s, ok := byName[name]
		if !ok {
			missing = append(missing, name)
		}
		return s
	}
	poll, unchanged, fetch := get("poll, no change"), get("maintenance, unchanged"), get("fetch of a small change")
	changed, scrub, clone := get("maintenance, changed"), get("scrub"), get("clone served, with bitmap")
	if len(missing) > 0 {
		return mirrorReads{}, fmt.Errorf("%s: no scenario %s", path, strings.Join(missing, ", "))
	}
	if m.Repo.PackBytes <= 0 {
		return mirrorReads{}, fmt.Errorf("%s: no pack size", path)
	}
	r := mirrorReads{
		Source: fmt.Sprintf("bench/results/maintenance.json (%s, a %.0f MiB mirror, page cache evicted before each step, %s)",
			m.GitVersion, float64(m.Repo.PackBytes)/(1<<20), m.Meta.Date),
		PackBytes:              float64(m.Repo.PackBytes),
		PollBytes:              float64(poll.ReadBytes),
		MaintainUnchangedBytes: float64(unchanged.ReadBytes),
		FetchOldPackBytes:      float64(fetch.OldPackReadBytes),
		ScrubPackFactor:        float64(scrub.OldPackReadBytes) / float64(scrub.OldPackBytes),
		ClonePackFactor:        float64(clone.OldPackReadBytes) / float64(clone.OldPackBytes),
	}
	// A clone reads every file of the mirror: the index files are those of 128 KiB or
	// more that are not packs, the small ones what is left.
	for _, f := range clone.Files {
		switch {
		case strings.HasSuffix(f.Path, ".pack"):
		case f.Size >= 128<<10:
			r.IndexBytes += float64(f.Size)
			switch {
			case strings.HasSuffix(f.Path, "/multi-pack-index"):
				r.MIDXBytes = float64(f.Size)
			case strings.HasSuffix(f.Path, ".idx"):
				r.PackIdxBytes += float64(f.Size)
			}
		default:
			r.SmallBytes += float64(f.Size)
		}
	}
	for _, f := range fetch.Files {
		if !strings.HasSuffix(f.Path, ".pack") && f.Size >= 128<<10 {
			r.FetchIndexBytes += float64(f.Read)
		}
	}
	for _, f := range changed.Files {
		if !strings.HasSuffix(f.Path, ".pack") && f.Size >= 128<<10 {
			r.MaintainChangedIndexBytes += float64(f.Read)
		}
	}
	if r.ScrubPackFactor <= 0 || r.ClonePackFactor <= 0 || r.IndexBytes <= 0 {
		return mirrorReads{}, fmt.Errorf("%s: a scrub, a clone or the index files read nothing", path)
	}
	return r, nil
}

// scaled are the read figures of a mirror of mirrorMB MB: what grows with the pack
// scaled, the rest as measured.
func (r mirrorReads) scaled(mirrorMB float64) mirrorReads {
	k := (mirrorMB*(1<<20) - r.SmallBytes) / (r.PackBytes + r.IndexBytes)
	r.PackBytes *= k
	r.IndexBytes *= k
	r.FetchIndexBytes *= k
	r.MaintainChangedIndexBytes *= k
	r.MIDXBytes *= k
	r.PackIdxBytes *= k
	return r
}
