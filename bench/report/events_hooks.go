package main

import (
	"fmt"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// eventsHooks is the hooks subsection: hook (and sync) to the commit served, against
// the p50 and p99 goals.
func eventsHooks(h results.EventsHooks) (string, error) {
	if h.Pushes == 0 {
		return "", fmt.Errorf("events: the hook run has no pushes")
	}
	verdict := func(l results.EventLatencyMs) string {
		p50, p99 := l.P50 <= h.GoalP50Ms, l.P99 <= h.GoalP99Ms
		return fmt.Sprintf("p50 %s ms %s, p99 %s ms %s", tickMs(l.P50), mark1(p50), tickMs(l.P99), mark1(p99))
	}
	return render("events_hooks", struct {
		H             results.EventsHooks
		Hook, SyncRow string
	}{h, verdict(h.HookToServedMs), verdict(h.SyncToServedMs)})
}

func mark1(ok bool) string {
	if ok {
		return "✅"
	}
	return "❌"
}

// eventsAWSHook is the AWS subsection: hook → fetched on the functions e2e tier, against
// the goal of one heartbeat interval.
func eventsAWSHook(h results.EventsAWSHook) (string, error) {
	if h.Pushes == 0 || len(h.HookToFetchedMs) == 0 {
		return "", fmt.Errorf("events: the AWS hook run has no pushes")
	}
	verdict := fmt.Sprintf("every push within one heartbeat (%s ms) %s", tickMs(h.HeartbeatMs), mark1(h.MaxMs <= h.HeartbeatMs))
	return render("events_aws_hook", struct {
		H       results.EventsAWSHook
		Verdict string
	}{h, verdict})
}
