package metrics

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
)

// EMF limits (CloudWatch Embedded Metric Format specification).
const (
	emfMaxMetrics = 100 // metric definitions per object
	emfMaxValues  = 100 // values in one metric's array
)

// EMF collects samples and writes them, at Flush, as CloudWatch Embedded Metric Format
// JSON lines. Samples are aggregated between flushes — counters add up, a gauge keeps its
// last value, histogram observations are kept as a value array — so a worker fetching
// thousands of repos a minute writes a few lines per flush, not one per fetch (log
// ingestion is billed by the byte). The coordinator Lambda flushes at the end of each
// invocation; a worker flushes on its heartbeat. Safe for concurrent use.
type EMF struct {
	w     io.Writer
	fleet string
	clock clock.Clock

	mu      sync.Mutex
	series  map[string]*series
	counted map[string]bool // counters seen once: reported (as 0) in every later flush
}

type series struct {
	def    Def
	dims   map[string]string
	value  float64   // counter sum or last gauge value
	values []float64 // histogram observations
	fresh  bool      // recorded since the last flush
}

// NewEMF returns a sink writing to w (the process's stdout on Lambda and ECS). fleet is
// the Fleet dimension of every metric ("" means "default"); clk stamps the lines (nil
// means the wall clock).
func NewEMF(w io.Writer, fleet string, clk clock.Clock) *EMF {
	if fleet == "" {
		fleet = "default"
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &EMF{w: w, fleet: fleet, clock: clk, series: map[string]*series{}, counted: map[string]bool{}}
}

func seriesKey(name string, dims map[string]string) string {
	var b strings.Builder
	b.WriteString(name)
	for _, k := range slices.Sorted(maps.Keys(dims)) {
		b.WriteString("\x00" + k + "=" + dims[k])
	}
	return b.String()
}

// Record adds samples to the current interval. Invalid samples are skipped and
// returned as an error; the valid ones are kept.
func (e *EMF) Record(samples ...Sample) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return each(samples, func(d Def, s Sample) {
		k := seriesKey(s.Name, s.Dims)
		sr := e.series[k]
		if sr == nil {
			sr = &series{def: d, dims: maps.Clone(s.Dims)}
			e.series[k] = sr
		}
		sr.fresh = true
		switch d.Kind {
		case Counter:
			sr.value += s.Value
			e.counted[k] = !d.Sparse
		case Gauge:
			sr.value = s.Value
		case Histogram:
			sr.values = append(sr.values, s.Value)
		}
	})
}

// entry is one metric value bound for an EMF object.
type entry struct {
	def   Def
	value any // float64 or []float64
}

// group is the samples sharing dimension and property values: they can share objects.
type group struct {
	dims, props map[string]string
	dimKeys     []string
	entries     []entry
}

// Flush writes everything recorded since the last flush and starts a new interval.
// Counters seen before but idle since are written as 0 so a quiet worker reads as 0
// fetches, not as missing data; a Sparse counter is written only when it counted
// something (recorded zeros included: no event, no data point, no billed hour). Nothing recorded, nothing written. Each object is one
// Write of one line. On a write error the interval's figures are lost: metrics are
// best-effort, and the error is returned for the caller to log.
func (e *EMF) Flush() error {
	e.mu.Lock()
	groups := map[string]*group{}
	for _, k := range slices.Sorted(maps.Keys(e.series)) {
		sr := e.series[k]
		if !sr.fresh && !e.counted[k] {
			continue
		}
		if sr.def.Sparse && sr.value == 0 { // no event this interval: no data point
			delete(e.series, k)
			continue
		}
		dims, props := map[string]string{DimFleet: e.fleet}, map[string]string{}
		for _, d := range sr.def.Dims {
			dims[d] = sr.dims[d]
		}
		for _, p := range sr.def.Props {
			props[p] = sr.dims[p]
		}
		gk := seriesKey("", dims) + "\x01" + seriesKey("", props)
		g := groups[gk]
		if g == nil {
			g = &group{dims: dims, props: props, dimKeys: append([]string{DimFleet}, sr.def.Dims...)}
			groups[gk] = g
		}
		switch sr.def.Kind {
		case Histogram:
			for c := range slices.Chunk(sr.values, emfMaxValues) {
				g.entries = append(g.entries, entry{sr.def, c})
			}
		default:
			g.entries = append(g.entries, entry{sr.def, sr.value})
		}
		// Start the next interval: counters restart at 0 (and stay reported), gauges and
		// histograms report again only when recorded again.
		if sr.def.Kind == Counter {
			sr.value, sr.fresh = 0, false
		} else {
			delete(e.series, k)
		}
	}
	ts := e.clock.Now().UnixMilli()
	e.mu.Unlock()

	for _, gk := range slices.Sorted(maps.Keys(groups)) {
		for _, obj := range pack(groups[gk], ts) {
			line, err := json.Marshal(obj)
			if err != nil {
				return fmt.Errorf("metrics: encode EMF: %w", err)
			}
			if _, err := e.w.Write(append(line, '\n')); err != nil {
				return fmt.Errorf("metrics: write EMF: %w", err)
			}
		}
	}
	return nil
}

// pack lays a group's entries out in as few EMF objects as the format allows: an object
// holds at most emfMaxMetrics metrics and each metric name once (a histogram with more
// than emfMaxValues observations continues in the next object).
func pack(g *group, ts int64) []map[string]any {
	type object struct {
		root    map[string]any
		metrics []map[string]string
	}
	var objs []*object
	for _, en := range g.entries {
		var o *object
		for _, c := range objs {
			if _, taken := c.root[en.def.Name]; !taken && len(c.metrics) < emfMaxMetrics {
				o = c
				break
			}
		}
		if o == nil {
			o = &object{root: map[string]any{}}
			for k, v := range g.props {
				o.root[k] = v
			}
			for k, v := range g.dims {
				o.root[k] = v
			}
			objs = append(objs, o)
		}
		o.root[en.def.Name] = en.value
		o.metrics = append(o.metrics, map[string]string{"Name": en.def.Name, "Unit": string(en.def.Unit)})
	}
	out := make([]map[string]any, 0, len(objs))
	for _, o := range objs {
		slices.SortFunc(o.metrics, func(a, b map[string]string) int { return cmp.Compare(a["Name"], b["Name"]) })
		o.root["_aws"] = map[string]any{
			"Timestamp": ts,
			"CloudWatchMetrics": []map[string]any{{
				"Namespace":  Namespace,
				"Dimensions": [][]string{g.dimKeys},
				"Metrics":    o.metrics,
			}},
		}
		out = append(out, o.root)
	}
	return out
}
