package main

import (
	"embed"
	"fmt"
	"strings"
	"text/template"
)

// The report's prose and layout live in templates/*.md.tmpl; the Go code computes the
// figures they print. Each template is named for its file.
//
//go:embed templates/*.md.tmpl
var templateFiles embed.FS

var templates = template.Must(template.New("report").Option("missingkey=error").Funcs(template.FuncMap{
	"int":        fmtInt,
	"cell":       scCell,
	"yesNo":      yesNo,
	"hMiB":       hMiB,
	"hSecs":      hSeconds,
	"hBytes":     hBytes,
	"mib":        fcMiB,
	"secs":       fcSecs,
	"ratio":      fcRatio,
	"pct":        fcPct,
	"dur":        fcDuration,
	"join":       strings.Join,
	"bullets":    bullets,
	"verdict":    placementVerdict,
	"optional":   func(v float64) string { return placementOptional(v, "%.3f") },
	"kib":        placementKiB,
	"ints":       tickInts,
	"ms":         tickMs,
	"count":      tickCount,
	"tickRatio":  tickRatio,
	"membership": tickMembership,
	"ticks":      tickTicks,
	"slowest":    tickSlowest,
	"policy":     freshPolicy,
	"pct100":     func(x float64) string { return fmt.Sprintf("%.0f", 100*x) },
	"x100":       func(x float64) float64 { return 100 * x },
	"div1000":    func(x float64) float64 { return x / 1000 },
	"x1000":      func(x float64) float64 { return 1000 * x },
	"div365":     func(x float64) float64 { return x / 365 },
	"num":        scNum,
	"price":      scPrice,
	"list":       func(s ...string) []string { return s },
}).ParseFS(templateFiles, "templates/*.md.tmpl"))

// render fills the template file name (without .md.tmpl) with data.
func render(name string, data any) (string, error) {
	var b strings.Builder
	if err := templates.ExecuteTemplate(&b, name+".md.tmpl", data); err != nil {
		return "", fmt.Errorf("template %s: %w", name, err)
	}
	return b.String(), nil
}

// bullets is a Markdown list, one item a line.
func bullets(items []string) string {
	var b strings.Builder
	for _, s := range items {
		b.WriteString("- " + s + "\n")
	}
	return b.String()
}
