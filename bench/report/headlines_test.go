package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

func TestWholeReportLeadsWithHeadlinesFromTheJSON(t *testing.T) {
	dir := t.TempDir()
	sc := storeCostFixture()
	for name, v := range map[string]any{
		"freshness": freshFixture(), "placement": placementFixture(), "fetchcost": fcFixture(),
		"storecost": sc, "ticklatency": tickFixture(), "hostile": hostileFixture(), "serve": serveFixture(),
		"maintenance": maintFixture(),
		"events":      results.Events{SSE: &results.EventsSSE{Repos: 2, Pushes: 3, Workers: 1, GoalMs: 100}},
	} {
		if err := results.Write(dir, name, v); err != nil {
			t.Fatal(err)
		}
	}
	r := &Report{Results: dir, Out: dir}
	if err := run(r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	head, _, _ := strings.Cut(md, "## 1. Freshness")
	for _, want := range []string{
		"## Headlines",
		// 6.5/6.1; cold start ×1.3 both; drift 26/7.6 at 0.5; rate 8.5/6.5, cbrt 10.4/6.5, uniform 24/6.5
		"`bayes` (default) mean lag 6.50 h; over the optimum: runs 1.07× (p99 1.07×), coldstart 1.07× (p99 1.07×), drift 3.42× (p99 1.07×); `rate` 1.31×, `cbrt` 1.60×, uniform 3.69× ours (stationary).",
		"**Placement, ", "**Fetch cost, go-git ÷ git CLI, first mirror:**",
		fmt.Sprintf("at %s repos", fmtInt(sc.Bills[0].Repos)),
		"at 10,000 repos, serving (goal ≤ $100.00: **missed**)",
		"**Coordinator tick, ",
		"- **Hostile inputs:** 4 of 5 attacks refused",
		"- **Cold mirrors:** maintenance of an unchanged mirror reads 0 B of its packs (0 B for a changed one); 6000 unchanged or 30 changed mirrors per CPU-second; 1,000,000 repos on 10 workers use 1 % of their CPU for maintenance.",
		"**Serving, fleet front ÷ git http-backend (goals ≤ 1.1× time, ≤ 0.2× CPU):** unmaintained: cold clone 1.08× the time, 20 concurrent clones 0.15× the server CPU; maintained: cold clone 1.25× the time",
	} {
		if !strings.Contains(head, want) {
			t.Errorf("headlines lack %q\n%s", want, head)
		}
	}
	for _, s := range []string{"## 1. Freshness", "## 2. Placement", "## 3. Fetch cost", "## 4. Store cost", "## 5. Coordinator tick latency", "## 6. Hostile inputs", "## 7. Serving clones", "## 8. Keeping cold mirrors cold"} {
		if !strings.Contains(md, s) {
			t.Errorf("report lacks %q", s)
		}
	}
}
