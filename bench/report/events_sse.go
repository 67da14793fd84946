package main

import (
	"fmt"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// eventsSection renders events.json; its SSE part is eventsSSE.
func eventsSection(r *Report) (string, results.Meta, error) {
	var v results.Events
	if err := r.Load("events", &v); err != nil {
		return "", results.Meta{}, err
	}
	md := "## 9. Events\n\n"
	if v.SSE != nil {
		s, err := eventsSSE(*v.SSE)
		if err != nil {
			return "", v.Meta, err
		}
		md += s
	}
	if v.Hooks != nil {
		s, err := eventsHooks(*v.Hooks)
		if err != nil {
			return "", v.Meta, err
		}
		md += "\n" + s
	}
	if v.AWSHook != nil {
		s, err := eventsAWSHook(*v.AWSHook)
		if err != nil {
			return "", v.Meta, err
		}
		md += "\n" + s
	}
	return md, v.Meta, nil
}

// eventsSSE is the SSE subsection: the latency table and whether the goal held at the
// median and at the p99.
func eventsSSE(s results.EventsSSE) (string, error) {
	verdict := ""
	switch l := s.RefToEventMs; {
	case s.Pushes == 0:
		return "", fmt.Errorf("events: the SSE run has no pushes")
	case l.P50 > s.GoalMs:
		verdict = fmt.Sprintf("Not met: the median is %s ms.", tickMs(l.P50))
	case l.P99 <= s.GoalMs:
		verdict = fmt.Sprintf("Met: the p99 is %s ms.", tickMs(l.P99))
	default:
		verdict = fmt.Sprintf("Met at the median (%s ms), not at the p99 (%s ms).", tickMs(l.P50), tickMs(l.P99))
	}
	return render("events_sse", struct {
		S       results.EventsSSE
		Verdict string
	}{s, verdict})
}
