package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Histogram buckets, in seconds. A fetch runs from a sub-second no-change poll to a
// clone of many minutes; a tick from milliseconds (a quiet fleet) to about a minute.
var (
	fetchBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
	tickBuckets  = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
)

// Prometheus is the local-mode sink: Record updates collectors in a registry of its own
// (never the global default registry, so two fleets in one test process do not mix),
// and Handler serves them. Safe for concurrent use.
type Prometheus struct {
	reg      *prometheus.Registry
	gauges   map[string]*prometheus.GaugeVec
	counters map[string]*prometheus.CounterVec
	hists    map[string]*prometheus.HistogramVec
}

// NewPrometheus returns a sink with every metric of Defs registered.
func NewPrometheus() *Prometheus {
	p := &Prometheus{reg: prometheus.NewRegistry(), gauges: map[string]*prometheus.GaugeVec{},
		counters: map[string]*prometheus.CounterVec{}, hists: map[string]*prometheus.HistogramVec{}}
	for _, d := range defs {
		var labels []string
		for _, k := range append(append([]string{}, d.Dims...), d.Props...) {
			labels = append(labels, snake(k))
		}
		switch d.Kind {
		case Gauge:
			v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: d.PromName(), Help: d.Help}, labels)
			p.gauges[d.Name] = v
			p.reg.MustRegister(v) // names are constants: a clash is a bug caught by any test
		case Counter:
			v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.PromName(), Help: d.Help}, labels)
			p.counters[d.Name] = v
			p.reg.MustRegister(v)
		case Histogram:
			buckets := fetchBuckets
			if d.Name == TickDuration {
				buckets = tickBuckets
			}
			v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.PromName(), Help: d.Help, Buckets: buckets}, labels)
			p.hists[d.Name] = v
			p.reg.MustRegister(v)
		}
	}
	return p
}

// Record applies samples: a gauge is set, a counter added to, a histogram observed.
// Invalid samples are skipped and returned as an error; the valid ones are applied.
func (p *Prometheus) Record(samples ...Sample) error {
	return each(samples, func(d Def, s Sample) {
		labels := prometheus.Labels{}
		for k, v := range s.Dims {
			labels[snake(k)] = v
		}
		switch d.Kind {
		case Gauge:
			p.gauges[d.Name].With(labels).Set(s.Value)
		case Counter:
			p.counters[d.Name].With(labels).Add(s.Value)
		case Histogram:
			p.hists[d.Name].With(labels).Observe(s.Value)
		}
	})
}

// Handler serves the registry in the Prometheus exposition format, for /metrics.
func (p *Prometheus) Handler() http.Handler {
	return promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Registry is the sink's registry, for adding collectors (Go runtime, process) to the
// same /metrics.
func (p *Prometheus) Registry() *prometheus.Registry { return p.reg }
