package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/plot"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// storeCostSection renders storecost.json: request units per store operation (DynamoDB
// Local's and AWS's billing rules side by side), the bill model's assumptions and
// prices, the monthly bill per fleet size with serving and without (against its goal,
// with what it read from the synthesized template), and the naive write-every-poll
// baseline.
func storeCostSection(r *Report) (string, results.Meta, error) {
	var v results.StoreCost
	if err := r.Load("storecost", &v); err != nil {
		return "", results.Meta{}, err
	}
	if len(v.Measurements) == 0 || len(v.Bills) == 0 {
		return "", v.Meta, fmt.Errorf("storecost: no measurements or no bills")
	}
	var b strings.Builder
	b.WriteString("## 4. Store cost\n\n")
	fmt.Fprintf(&b, "Request units of the fleet's store operations, measured with `ReturnConsumedCapacity` on %s: the real "+
		"coordinator, workers and DynamoDB store run in the deterministic simulation (`shared/sim`), each fleet on a fresh table, "+
		"the coordinator's timers on the real Scheduler timer over a fake of the Scheduler API. Every DynamoDB call is "+
		"also recomputed by AWS's billing rules from the items it read or wrote (read back before and after each write), because "+
		"DynamoDB Local bills a transaction a flat amount. **The bill uses the AWS-rule figures.** Units are per event; "+
		"where an event was seen many times, the mean.\n\n", v.DynamoDBLocal)
	b.WriteString(scHeadline(v))

	b.WriteString("### Request units per operation\n\n")
	b.WriteString(scUnitsTable(v.Measurements))
	b.WriteString(scOpsDetails(v.Measurements))
	if len(v.Rules) > 0 {
		b.WriteString("AWS billing rules applied:\n\n")
		for _, rule := range v.Rules {
			b.WriteString("- " + rule + "\n")
		}
		b.WriteString("\n")
	}
	if len(v.ItemSizes) > 0 {
		b.WriteString("Record sizes observed in a settled fleet's table (AWS item size rules):\n\n")
		b.WriteString("| record | items | mean bytes | max bytes |\n|---|---:|---:|---:|\n")
		for _, s := range v.ItemSizes {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", s.Kind, fmtInt(s.Count), scNum(s.MeanSize), fmtInt(s.MaxSize))
		}
		b.WriteString("\n")
	}

	b.WriteString("### Monthly bill\n\n")
	chart, err := scBillChart(r, v.Bills)
	if err != nil {
		return "", v.Meta, err
	}
	b.WriteString(chart)
	b.WriteString(scBillTable(v.Bills))
	b.WriteString(scStackTable(v.Bills))
	b.WriteString(scDynamoTable(scPlain(v.Bills)))
	b.WriteString(scBillDetails(v.Bills))

	b.WriteString("### Baseline: a design that writes the repo record on every poll\n\n")
	base, err := scBaseline(r, v)
	if err != nil {
		return "", v.Meta, err
	}
	b.WriteString(base)

	b.WriteString("### Assumptions\n\n")
	b.WriteString("| input | value | unit | source |\n|---|---:|---|---|\n")
	for _, a := range v.Assumptions {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", a.Key, scNum(a.Value), a.Unit, scCell(a.Note))
	}
	b.WriteString("\n")

	b.WriteString("### Prices\n\n")
	taken := ""
	if len(v.Prices) > 0 {
		taken = v.Prices[0].Taken
	}
	fmt.Fprintf(&b, "us-east-1, on-demand list prices, taken %s. *Unconfirmed* marks a price no source seen that day stated.\n\n", taken)
	b.WriteString("| service | item | price | unit | source | |\n|---|---|---:|---|---|---|\n")
	for _, p := range v.Prices {
		status := "confirmed"
		if !p.Confirmed {
			status = "*unconfirmed*"
		}
		if p.Note != "" {
			status += ": " + p.Note
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | <%s> | %s |\n", p.Service, p.Item, scPrice(p.USD), p.Unit, p.Source, scCell(status))
	}
	b.WriteString("\n")

	if len(v.Notes) > 0 {
		b.WriteString("Notes:\n\n")
		for _, n := range v.Notes {
			b.WriteString("- " + n + "\n")
		}
		fmt.Fprintf(&b, "- The benchmark ran for %.0f s.\n", v.Meta.Seconds)
		b.WriteString("\n")
	}
	return b.String(), v.Meta, nil
}

// scHeadline states the per-operation figures and the bill in a few sentences.
func scHeadline(v results.StoreCost) string {
	var b strings.Builder
	find := func(prefix string) (results.StoreCostMeasurement, bool) {
		var best results.StoreCostMeasurement
		ok := false
		for _, m := range v.Measurements {
			if m.Key == prefix || strings.HasPrefix(m.Key, prefix+"_") {
				if !ok || m.Repos > best.Repos {
					best, ok = m, true
				}
			}
		}
		return best, ok
	}
	var parts []string
	for _, k := range []struct{ key, what string }{
		{"idle_tick", "a quiet coordinator tick"}, {"heartbeat", "a heartbeat"},
		{"poll_nochange", "a no-change poll"}, {"poll_change", "a poll that found a change"},
		{"add_repo", "adding a repo"},
	} {
		if m, ok := find(k.key); ok {
			parts = append(parts, fmt.Sprintf("%s %s RRU + %s WRU", k.what, scNum(m.Total.AWSRCU), scNum(m.Total.AWSWCU)))
		}
	}
	if len(parts) > 0 {
		b.WriteString("By AWS's rules: " + strings.Join(parts, "; ") + ".")
		if m, ok := find("poll_nochange"); ok {
			if m.Total.Calls == 0 {
				fmt.Fprintf(&b, " The %s no-change polls observed made no store call at all.", fmtInt(m.Count))
			} else {
				fmt.Fprintf(&b, " The %s no-change polls observed made %s store calls each on average.", fmtInt(m.Count), scNum(float64(m.Total.Calls)))
			}
		}
		b.WriteString("\n\n")
	}
	if bill := v.Bills[0]; bill.NaiveDynamoDBUSD > 0 && bill.DynamoDBUSD > 0 {
		u := bill.Unthrottled
		fmt.Fprintf(&b, "Against the naive design that writes the repo record on every poll: at the billed %s polls a day, DynamoDB costs %s "+
			"of what the naive design costs at %s repos (%s against %s)", scNum(bill.PollsPerDay), scPct(bill.DynamoDBUSD/bill.NaiveDynamoDBUSD),
			fmtInt(bill.Repos), scUSD(bill.DynamoDBUSD), scUSD(bill.NaiveDynamoDBUSD))
		if u.NaiveUSD > 0 {
			fmt.Fprintf(&b, "; with the workers unthrottled (%s polls a day) the poll writes cost %s against the naive %s (%s)",
				scNum(u.PollsPerDay), scUSD(u.PollWritesUSD), scUSD(u.NaiveUSD), scPct(u.PollWritesUSD/u.NaiveUSD))
		}
		b.WriteString(".\n\n")
	}
	var sizes []string
	for _, bill := range v.Bills {
		top := slices.MaxFunc(bill.Components, func(a, b results.StoreCostComponent) int { return scCmp(a.USD, b.USD) })
		share := 0.0
		if bill.TotalUSD > 0 {
			share = 100 * top.USD / bill.TotalUSD
		}
		sizes = append(sizes, fmt.Sprintf("%s: **%s/month**%s (%d workers; largest: %s %s, %.0f%%; DynamoDB %s)",
			scBillLabel(bill), scUSD(bill.TotalUSD), scGoal(bill), bill.Workers, top.Name, scUSD(top.USD), share, scUSD(bill.DynamoDBUSD)))
	}
	b.WriteString("Monthly bill of the stack as `cdk synth` makes it with its defaults, with the git server and load balancer " +
		"(serving) and without — " + strings.Join(sizes, "; ") + ".\n\n")
	return b.String()
}

// scBillLabel names a bill: its fleet size, and serving when the stack serves the mirrors.
func scBillLabel(b results.StoreCostBill) string {
	if b.Serving {
		return fmtInt(b.Repos) + " repos, serving"
	}
	return fmtInt(b.Repos) + " repos"
}

// scGoal says whether a bill meets its goal.
func scGoal(b results.StoreCostBill) string {
	switch {
	case b.GoalUSD == 0:
		return ""
	case b.TotalUSD <= b.GoalUSD:
		return fmt.Sprintf(" (goal ≤ %s: met)", scUSD(b.GoalUSD))
	}
	return fmt.Sprintf(" (goal ≤ %s: **missed**)", scUSD(b.GoalUSD))
}

// scStackTable is what each bill took from the synthesized template.
func scStackTable(bills []results.StoreCostBill) string {
	var b strings.Builder
	b.WriteString("What each bill read from the synthesized template (`infra/stackfacts`):\n\n| stack |")
	b.WriteString(scSizeHeader(bills))
	row := func(label string, f func(results.StoreCostStack) string) {
		b.WriteString("| " + label + " |")
		for _, bill := range bills {
			b.WriteString(" " + f(bill.Stack) + " |")
		}
		b.WriteString("\n")
	}
	spot := func(on bool) string {
		if on {
			return "Spot"
		}
		return "on-demand"
	}
	yes := func(on bool) string {
		if on {
			return "yes"
		}
		return "no"
	}
	row("CDK context", func(s results.StoreCostStack) string { return "`" + s.Context + "`" })
	row("worker task", func(s results.StoreCostStack) string {
		return fmt.Sprintf("%s vCPU / %s GB, %s, %d–%d", scNum(s.WorkerVCPU), scNum(s.WorkerGB), spot(s.WorkerSpot), s.WorkerMin, s.WorkerMax)
	})
	row("on-demand twin (fallback)", func(s results.StoreCostStack) string { return yes(s.OnDemandTwin) })
	row("git server task", func(s results.StoreCostStack) string {
		if s.ServeTasks == 0 {
			return "—"
		}
		return fmt.Sprintf("%s vCPU / %s GB, %s, %d", scNum(s.ServeVCPU), scNum(s.ServeGB), spot(s.ServeSpot), s.ServeTasks)
	})
	row("public IP per task / NAT gateways", func(s results.StoreCostStack) string {
		return fmt.Sprintf("%s / %d", yes(s.PublicTaskIPs), s.NATGateways)
	})
	row("load balancers (public IPs)", func(s results.StoreCostStack) string { return fmt.Sprintf("%d (%d)", s.LoadBalancers, s.LBPublicIPs) })
	row("DynamoDB gateway endpoint", func(s results.StoreCostStack) string { return yes(s.DynamoEndpoint) })
	row("alarms (metrics)", func(s results.StoreCostStack) string { return fmt.Sprintf("%d (%d)", s.Alarms, s.AlarmMetrics) })
	row("custom metrics / dashboards", func(s results.StoreCostStack) string { return fmt.Sprintf("%d / %d", s.CustomMetrics, s.Dashboards) })
	row("Container Insights", func(s results.StoreCostStack) string { return yes(s.Insights) })
	row("EFS to IA / Archive after", func(s results.StoreCostStack) string {
		return fmt.Sprintf("%d / %d days", s.EFSIADays, s.EFSArchiveDays)
	})
	b.WriteString("\n")
	return b.String()
}

func scCmp(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func scUnitsTable(ms []results.StoreCostMeasurement) string {
	var b strings.Builder
	b.WriteString("| event | repos | workers | events | moved | DynamoDB Local RCU / WCU | AWS rules RRU / WRU | of which index WRU | calls (writes) | Scheduler API calls | local ms |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range ms {
		moved := "—"
		if m.Moved > 0 {
			moved = fmtInt(m.Moved)
		}
		name := m.Name
		if m.Note != "" {
			name += " (" + m.Note + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s / %s | **%s / %s** | %s | %d (%d) | %s | %s |\n",
			scCell(name), fmtInt(m.Repos), m.Workers, fmtInt(m.Count), moved,
			scNum(m.Total.LocalRCU), scNum(m.Total.LocalWCU), scNum(m.Total.AWSRCU), scNum(m.Total.AWSWCU),
			scNum(m.Total.AWSIndexWCU), m.Total.Calls, m.Total.WriteCalls, scNum(m.SchedulerAPICalls), scNum(m.WallMillis))
	}
	b.WriteString("\n*local ms* is wall time against DynamoDB Local with the meter's extra reads, not AWS latency. " +
		"A tick that moves repos also reads and writes in proportion to what it moves; *moved* is the repos it reassigned.\n\n")
	return b.String()
}

// scOpsDetails splits each event by store operation ("Method/API").
func scOpsDetails(ms []results.StoreCostMeasurement) string {
	var b strings.Builder
	b.WriteString("<details><summary>Split by store operation</summary>\n\n")
	for _, m := range ms {
		if len(m.Ops) == 0 {
			continue
		}
		fmt.Fprintf(&b, "**%s** (`%s`)\n\n| operation | calls | DynamoDB Local RCU / WCU | AWS rules RRU / WRU | index WRU | bytes |\n|---|---:|---:|---:|---:|---:|\n",
			scCell(m.Name), m.Key)
		for _, op := range m.Ops {
			fmt.Fprintf(&b, "| `%s` | %d | %s / %s | %s / %s | %s | %s |\n", op.Op, op.Calls, scNum(op.LocalRCU), scNum(op.LocalWCU),
				scNum(op.AWSRCU), scNum(op.AWSWCU), scNum(op.AWSIndexWCU), scNum(op.Bytes))
		}
		b.WriteString("\n")
	}
	b.WriteString("</details>\n\n")
	return b.String()
}

// scComponents is every component key in order of first appearance, with its name.
func scComponents(bills []results.StoreCostBill, dynamo bool) ([]string, map[string]string) {
	var keys []string
	names := map[string]string{}
	for _, bill := range bills {
		cs := bill.Components
		if dynamo {
			cs = bill.DynamoDB
		}
		for _, c := range cs {
			if _, ok := names[c.Key]; !ok {
				keys = append(keys, c.Key)
				names[c.Key] = c.Name
			}
		}
	}
	return keys, names
}

func scComponent(cs []results.StoreCostComponent, key string) (results.StoreCostComponent, bool) {
	for _, c := range cs {
		if c.Key == key {
			return c, true
		}
	}
	return results.StoreCostComponent{}, false
}

func scSizeHeader(bills []results.StoreCostBill) string {
	var b strings.Builder
	for _, bill := range bills {
		fmt.Fprintf(&b, " %s |", scBillLabel(bill))
	}
	b.WriteString("\n|---|")
	for range bills {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	return b.String()
}

func scBillTable(bills []results.StoreCostBill) string {
	var b strings.Builder
	b.WriteString("USD per month:\n\n| component |")
	b.WriteString(scSizeHeader(bills))
	row := func(label string, f func(results.StoreCostBill) string) {
		b.WriteString("| " + label + " |")
		for _, bill := range bills {
			b.WriteString(" " + f(bill) + " |")
		}
		b.WriteString("\n")
	}
	row("workers (Fargate tasks)", func(x results.StoreCostBill) string { return strconv.Itoa(x.Workers) })
	row("polls per repo per day", func(x results.StoreCostBill) string { return scNum(x.PollsPerDay) })
	row("store writes per repo per day", func(x results.StoreCostBill) string { return scNum(x.WritesPerRepoDay) })
	keys, names := scComponents(bills, false)
	for _, k := range keys {
		row(names[k], func(x results.StoreCostBill) string {
			if c, ok := scComponent(x.Components, k); ok {
				return scUSD(c.USD)
			}
			return "—"
		})
	}
	row("**total**", func(x results.StoreCostBill) string { return "**" + scUSD(x.TotalUSD) + "**" })
	row("goal", func(x results.StoreCostBill) string {
		if x.GoalUSD == 0 {
			return "—"
		}
		if x.TotalUSD <= x.GoalUSD {
			return "≤ " + scUSD(x.GoalUSD) + ": met"
		}
		return "≤ " + scUSD(x.GoalUSD) + ": **missed**"
	})
	b.WriteString("\n")
	return b.String()
}

// scPlain are the bills without serving: the DynamoDB figures do not depend on it.
func scPlain(bills []results.StoreCostBill) []results.StoreCostBill {
	var out []results.StoreCostBill
	for _, b := range bills {
		if !b.Serving {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return bills
	}
	return out
}

func scDynamoTable(bills []results.StoreCostBill) string {
	var b strings.Builder
	b.WriteString("The DynamoDB line, broken down (USD per month):\n\n| DynamoDB part |")
	b.WriteString(scSizeHeader(bills))
	keys, names := scComponents(bills, true)
	for _, k := range keys {
		b.WriteString("| " + names[k] + " |")
		for _, bill := range bills {
			if c, ok := scComponent(bill.DynamoDB, k); ok {
				b.WriteString(" " + scUSD(c.USD) + " |")
			} else {
				b.WriteString(" — |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("| **DynamoDB total** |")
	for _, bill := range bills {
		b.WriteString(" **" + scUSD(bill.DynamoDBUSD) + "** |")
	}
	b.WriteString("\n\n")
	return b.String()
}

// scBillDetails gives the quantities behind each figure.
func scBillDetails(bills []results.StoreCostBill) string {
	var b strings.Builder
	b.WriteString("<details><summary>Quantities behind each figure</summary>\n\n")
	for _, bill := range bills {
		fmt.Fprintf(&b, "**%s**\n\n| component | USD | quantities |\n|---|---:|---|\n", scBillLabel(bill))
		for _, c := range bill.Components {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Name, scUSD(c.USD), scCell(c.Detail))
		}
		for _, c := range bill.DynamoDB {
			fmt.Fprintf(&b, "| DynamoDB: %s | %s | %s |\n", c.Name, scUSD(c.USD), scCell(c.Detail))
		}
		b.WriteString("\n")
	}
	b.WriteString("</details>\n\n")
	return b.String()
}

// scBillChart draws $/month by component per fleet size, on a log axis: the sizes span
// two orders of magnitude. Components under a cent at every size get no bar.
func scBillChart(r *Report, bills []results.StoreCostBill) (string, error) {
	keys, names := scComponents(bills, false)
	ch := plot.Bars{Title: "Monthly AWS bill by component", YLabel: "USD per month (log)", LogY: true}
	for _, bill := range bills {
		ch.Groups = append(ch.Groups, scBillLabel(bill))
	}
	var left []string
	for _, k := range keys {
		s := plot.BarSeries{Name: names[k]}
		top := 0.0
		for _, bill := range bills {
			c, _ := scComponent(bill.Components, k)
			s.Values = append(s.Values, c.USD)
			top = math.Max(top, c.USD)
		}
		if top < 0.01 {
			left = append(left, names[k])
			continue
		}
		ch.Series = append(ch.Series, s)
	}
	md, err := r.Plot("storecost-bill.svg", "Monthly AWS bill by component for each fleet size", ch)
	if err != nil {
		return "", err
	}
	if len(left) > 0 {
		md += "\n*Not drawn (under $0.01 at every size):* " + strings.Join(left, ", ") + ".\n"
	}
	return md + "\n", nil
}

// scBaseline compares this design's DynamoDB cost with the naive one at the bill's
// poll rate, at the rate unthrottled workers reach, and over a range of poll rates.
func scBaseline(r *Report, v results.StoreCost) (string, error) {
	var b strings.Builder
	b.WriteString("A naive design writes the repo record after every poll; this one writes only when something changed, " +
		"or when the record is older than the checkpoint interval (invariant 6). Both costs use the measured units of a " +
		"poll's `ReportFetch` (a checkpoint write and a change write are the same `UpdateItem`).\n\n")
	b.WriteString("| | polls / repo / day | DynamoDB, this design | DynamoDB, naive | naive ÷ this |\n|---|---:|---:|---:|---:|\n")
	for _, bill := range scPlain(v.Bills) {
		fmt.Fprintf(&b, "| %s repos, as billed above | %s | %s | %s | %s |\n", fmtInt(bill.Repos), scNum(bill.PollsPerDay),
			scUSD(bill.DynamoDBUSD), scUSD(bill.NaiveDynamoDBUSD), scRatio(bill.NaiveDynamoDBUSD, bill.DynamoDBUSD))
	}
	for _, bill := range scPlain(v.Bills) {
		u := bill.Unthrottled
		fmt.Fprintf(&b, "| %s repos, workers unthrottled (poll writes only) | %s | %s | %s | %s |\n", fmtInt(bill.Repos),
			scNum(u.PollsPerDay), scUSD(u.PollWritesUSD), scUSD(u.NaiveUSD), scRatio(u.NaiveUSD, u.PollWritesUSD))
	}
	b.WriteString("\n*Unthrottled*: the same workers polling as fast as they can (the deployed default sets no rate limit), " +
		"capped by the minimum interval.\n\n")
	s := v.Sensitivity
	if len(s.PollsPerDay) == 0 {
		return b.String(), nil
	}
	ch := plot.Line{Title: fmt.Sprintf("DynamoDB cost of poll writes, %s repos", fmtInt(s.Repos)),
		XLabel: "polls per repo per day (log)", YLabel: "USD per month (log)", LogX: true, LogY: true,
		Series: []plot.Series{
			{Name: "this design (changes + checkpoints)", X: s.PollsPerDay, Y: s.OursUSD},
			{Name: "naive (every poll writes)", X: s.PollsPerDay, Y: s.NaiveUSD, Dash: true},
		}}
	md, err := r.Plot("storecost-baseline.svg", "DynamoDB cost of poll writes against the poll rate, this design and the naive one", ch)
	if err != nil {
		return "", err
	}
	b.WriteString(md + "\n")
	fmt.Fprintf(&b, "| polls / repo / day |")
	for _, p := range s.PollsPerDay {
		b.WriteString(" " + scNum(p) + " |")
	}
	b.WriteString("\n|---|")
	for range s.PollsPerDay {
		b.WriteString("---:|")
	}
	b.WriteString("\n| this design |")
	for _, x := range s.OursUSD {
		b.WriteString(" " + scUSD(x) + " |")
	}
	b.WriteString("\n| naive |")
	for _, x := range s.NaiveUSD {
		b.WriteString(" " + scUSD(x) + " |")
	}
	b.WriteString("\n\n")
	return b.String(), nil
}

func scPct(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) }

func scRatio(a, b float64) string {
	if b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f×", a/b)
}

// scUSD formats dollars: cents below $1000, whole dollars with separators above.
func scUSD(x float64) string {
	switch {
	case x == 0:
		return "$0"
	case math.Abs(x) < 0.01:
		v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 2, 64), 64)
		return "$" + strconv.FormatFloat(v, 'f', -1, 64)
	case math.Abs(x) < 1000:
		return "$" + strconv.FormatFloat(x, 'f', 2, 64)
	}
	return "$" + fmtInt(int(math.Round(x)))
}

// scPrice formats a unit price with the digits it has, at least cents.
func scPrice(x float64) string {
	cents := func(v float64) string {
		t := strconv.FormatFloat(v, 'f', -1, 64)
		switch i := strings.IndexByte(t, '.'); {
		case i < 0:
			t += ".00"
		case len(t)-i == 2:
			t += "0"
		}
		return t
	}
	if x != 0 && math.Abs(x) < 0.001 {
		return "$" + cents(math.Round(x*1e12)/1e6) + " per million"
	}
	return "$" + cents(x)
}

// scNum formats a figure with at most two decimals (two significant digits below 0.1).
func scNum(x float64) string {
	switch a := math.Abs(x); {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "—"
	case a >= 10000:
		return fmtInt(int(math.Round(x)))
	case a > 0 && a < 0.1:
		v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 2, 64), 64)
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(math.Round(x*100)/100, 'f', -1, 64)
}

// scCell keeps text from breaking a table row.
func scCell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}
