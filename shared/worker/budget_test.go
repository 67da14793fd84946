package worker

import (
	"testing"
	"time"
)

// Polls taken as soon as the bucket allows stay within 1.05× the budget over every hour,
// the first included (the bucket starts full), and within the budget over a day.
func TestPollBudgetHoldsOverAnHour(t *testing.T) {
	for _, c := range []struct {
		budget float64
		repos  int
	}{{0.5, 10000}, {2, 3000}, {24, 100}, {0.5, 200}} {
		b := pollBudget{budget: c.budget}
		perHour := PollsPerDay(c.budget, c.repos) / 24
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		const day = 86400
		var taken [day]int // polls taken in each second of the day
		total := 0
		for s := range day {
			for b.ready(start.Add(time.Duration(s)*time.Second), c.repos) {
				b.take()
				taken[s]++
				total++
			}
		}
		most, window := 0, 0 // the busiest hour: a window of 3600 s slid over the day
		for s := range day {
			window += taken[s]
			if s >= 3600 {
				window -= taken[s-3600]
			}
			most = max(most, window)
		}
		if limit := max(1.05*perHour, perHour+1); float64(most) > limit {
			t.Errorf("budget %g × %d repos: %d polls in an hour, want at most %.1f (%.1f an hour)", c.budget, c.repos, most, limit, perHour)
		}
		if want := PollsPerDay(c.budget, c.repos); float64(total) > want*1.01+1 || float64(total) < want*0.99-1 {
			t.Errorf("budget %g × %d repos: %d polls in a day, want %.0f", c.budget, c.repos, total, want)
		}
	}
}

// Without a budget nothing waits; with one, the wait is until the next token.
func TestPollBudgetWait(t *testing.T) {
	none := pollBudget{}
	if !none.ready(time.Now(), 10) || none.wait(time.Now(), 10) != 0 || none.rate(10) != 0 {
		t.Fatal("no budget waits")
	}
	b := pollBudget{budget: 86.4} // 100 repos: 0.1 polls a second, a burst of 18
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	for b.ready(now, 100) {
		b.take()
		n++
	}
	if n != 18 {
		t.Fatalf("burst of %d polls, want 18 (three minutes' worth)", n)
	}
	if w := b.wait(now, 100); w <= 0 || w > 10*time.Second {
		t.Fatalf("wait %v for the next poll, want up to 10s", w)
	}
	if b.ready(now.Add(9*time.Second), 100) || !b.ready(now.Add(10*time.Second), 100) {
		t.Fatal("the next poll is not 10s after the burst")
	}
}
