package main

import (
	"math"

	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
)

// CloudWatch bills a custom metric prorated by the hour, for the hours in which it
// receives data ("prorated by the hour and metered only when data is sent to
// CloudWatch"). A metric written on the fleet's own schedule — every tick, every
// worker flush — has data every hour. One written only with an event (a Sparse counter
// of shared/metrics, or a histogram of events) has data in the hours with at least one:
// with n events a month arriving at random, 730·(1 − e^(−n/730)) hours, at most n.
// Events that come in bursts fill fewer hours, so this bills an upper bound.

// metricEvents are the month's events the event-only metrics count, from the bill's
// scenario.
type metricEvents struct {
	Deaths  float64 // worker deaths, each followed by a replacement join
	Changes float64 // polls that found a change (each publishes a mirror.updated event)
	Clones  float64 // clones served
	// CloneMisses are the clones the whole-clone cache does not answer: they go to the
	// pack cache, which answers them or runs pack-objects.
	CloneMisses float64
	Rare        float64 // of each rare kind (model.RareEventsPerMonth)
	Polls       float64 // polls the budget counts (the Polls counter)
}

// eventsOf returns, for a metric written only with events, the events a month of each
// of its series; ok false for a metric written every hour.
func eventsOf(name string, series int, ev metricEvents) (perSeries []float64, ok bool) {
	each := func(n float64) []float64 {
		out := make([]float64, series)
		for i := range out {
			out[i] = n
		}
		return out
	}
	switch name {
	case metrics.ReposMoved:
		return each(2 * ev.Deaths), true // the death moves its repos, the replacement's join moves some back
	case metrics.ReposOffOwner, metrics.MirrorsRecloned, metrics.ServeRejected, metrics.EventsRetried, metrics.EventsDropped, metrics.GitFailures:
		return each(ev.Rare), true
	case metrics.EventsPublished, metrics.EventsDelivered, metrics.PollsFound:
		return each(ev.Changes), true // PollsFound: at most every change
	case metrics.Polls:
		return each(ev.Polls), true
	case metrics.HookPushesAnnounced:
		return each(ev.Changes), true // at most every change, when every repo sends hooks
	case metrics.HookPushesLost, metrics.HookPushesOutside, metrics.FeedsUncovered:
		return each(ev.Rare), true
	case metrics.ServeRequests:
		// The 2xx class with every clone; the other classes (4xx, 5xx) are rare.
		out := each(ev.Rare)
		if series > 0 {
			out[0] = ev.Clones
		}
		return out, true
	case metrics.ServeBytes:
		return each(ev.Clones), true
	case metrics.PackCacheHits, metrics.PackCacheMisses, metrics.PackGenerationSeconds:
		return each(ev.CloneMisses), true // each at most every miss of the clone cache
	}
	return nil, false
}

// eventHours is how many hours of the month n events at random fill.
func eventHours(n float64) float64 {
	if n <= 0 {
		return 0
	}
	return hoursPerMonth * -math.Expm1(-n/hoursPerMonth)
}

// metricMonths is the metric-months CloudWatch bills for the dashboard's custom
// metrics: every series of a metric written on schedule a whole month, one written
// only with events for the hours its events fill. eventOnly counts the series of the
// latter.
func metricMonths(ms []customMetric, ev metricEvents) (months, eventOnly float64) {
	for _, m := range ms {
		per, ok := eventsOf(m.Name, int(m.Series), ev)
		if !ok {
			months += m.Series
			continue
		}
		for _, n := range per {
			months += eventHours(n) / hoursPerMonth
		}
		eventOnly += m.Series
	}
	return months, eventOnly
}
