// Command report turns bench/results/*.json into bench/REPORT.md and its SVG charts.
// Every number in the report is read from the JSON files, never typed in.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// Report is what a section renders with: where the results are and where charts go.
type Report struct {
	Results string // directory of the JSON results
	Out     string // directory of REPORT.md; charts go to Out/plots
}

// Load reads results/name.json into v.
func (r *Report) Load(name string, v any) error { return results.Read(r.Results, name, v) }

// chart is what Plot draws: plot.Line or plot.Bars.
type chart interface{ SVG() ([]byte, error) }

// Plot writes an SVG chart under plots/ and returns the Markdown that shows it.
func (r *Report) Plot(file, alt string, c chart) (string, error) {
	svg, err := c.SVG()
	if err != nil {
		return "", fmt.Errorf("plot %s: %w", file, err)
	}
	dir := filepath.Join(r.Out, "plots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("plots dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), svg, 0o644); err != nil {
		return "", fmt.Errorf("write plot: %w", err)
	}
	return fmt.Sprintf("![%s](plots/%s)\n", alt, file), nil
}

// section renders one part of the report from its JSON; meta is that JSON's Meta.
type section struct {
	name   string // results/<name>.json
	render func(r *Report) (md string, meta results.Meta, err error)
}

func sections() []section {
	return []section{
		{"freshness", freshnessSection},
		{"placement", placementSection},
		{"fetchcost", fetchCostSection},
		{"storecost", storeCostSection},
		{"ticklatency", tickLatencySection},
		{"hostile", hostileSection},
		{"serve", serveSection},
		{"maintenance", maintenanceSection},
		{"events", eventsSection},
	}
}

func main() {
	var r Report
	flag.StringVar(&r.Results, "results", "bench/results", "directory of the benchmark results (JSON)")
	flag.StringVar(&r.Out, "out", "bench", "directory to write REPORT.md and plots/ into")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(&r); err != nil {
		log.Error("report", "err", err)
		os.Exit(1)
	}
	log.Info("report written", "path", filepath.Join(r.Out, "REPORT.md"))
}

func run(r *Report) error {
	type part struct {
		Name, MD string
		Meta     results.Meta
	}
	var parts []part
	for _, s := range sections() {
		md, meta, err := s.render(r)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		parts = append(parts, part{Name: s.name, MD: md, Meta: meta})
	}
	m, err := anyMeta(r)
	if err != nil {
		return err
	}
	heads, err := headlines(r)
	if err != nil {
		return fmt.Errorf("headlines: %w", err)
	}
	doc, err := render("report", struct {
		M         results.Meta
		Parts     []part
		Headlines string
	}{m, parts, heads})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(r.Out, 0o755); err != nil {
		return fmt.Errorf("out dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(r.Out, "REPORT.md"), []byte(doc), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// anyMeta returns the machine description of the first result found.
func anyMeta(r *Report) (results.Meta, error) {
	for _, s := range sections() {
		var v struct{ Meta results.Meta }
		if err := r.Load(s.name, &v); err == nil {
			return v.Meta, nil
		}
	}
	return results.Meta{}, fmt.Errorf("no results in %s", r.Results)
}
