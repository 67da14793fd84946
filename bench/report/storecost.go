package main

import (
	"cmp"
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
	chart, err := scBillChart(r, v.Bills)
	if err != nil {
		return "", v.Meta, err
	}
	sens, err := scSensitivity(r, v.Sensitivity)
	if err != nil {
		return "", v.Meta, err
	}
	cross, err := scCrossover(r, v.Crossover)
	if err != nil {
		return "", v.Meta, err
	}
	type ops struct {
		M results.StoreCostMeasurement
		T mdTable
	}
	var opTables []ops
	for _, m := range v.Measurements {
		if len(m.Ops) > 0 {
			opTables = append(opTables, ops{M: m, T: scOpsTable(m)})
		}
	}
	type price struct {
		P      results.StoreCostPrice
		Status string
	}
	var prices []price
	for _, p := range v.Prices {
		status := "confirmed"
		if !p.Confirmed {
			status = "*unconfirmed*"
		}
		if p.Note != "" {
			status += ": " + p.Note
		}
		prices = append(prices, price{P: p, Status: status})
	}
	taken := ""
	if len(v.Prices) > 0 {
		taken = v.Prices[0].Taken
	}
	for i := range prices {
		if prices[i].P.Taken != taken {
			prices[i].Status += " (taken " + prices[i].P.Taken + ")"
		}
	}
	md, err := render("storecost", struct {
		V                   results.StoreCost
		H                   scHeadlineFigures
		Units               mdTable
		Ops                 []ops
		Chart               string
		Bill, Stack, Dynamo mdTable
		Details             []scDetail
		Baseline            [][]string
		Sensitivity         *scSensitivityFigures
		Taken               string
		Prices              []price
		Previous, EFS       mdTable
		Staleness, Tiers    mdTable
		Goals, EFSOps, VM   mdTable
		Crossover           *scCrossoverFigures
		MirrorBytes         string
	}{v, scHeadline(v), scUnitsTable(v.Measurements), opTables, chart, scBillTable(v.Bills), scStackTable(v.Bills),
		scDynamoTable(scPlain(v.Bills)), scBillDetails(v.Bills), scBaseline(v), sens, taken, prices,
		scPreviousTable(v.Bills), scEFSTable(v.Bills), scStalenessTable(v.Bills), scTiersTable(v.Tiers),
		scGoalsTable(v), scEFSOpsTable(v.EFSOps), scVMTable(v.Alternative), cross, fmtInt(int(v.EFSOpsMirrorBytes))})
	return md, v.Meta, err
}

// scHeadlineFigures states the per-operation figures and the bill in a few sentences.
type scHeadlineFigures struct {
	Ops      []string
	NoChange string
	Naive    string
	Sizes    []string
}

func scHeadline(v results.StoreCost) scHeadlineFigures {
	var h scHeadlineFigures
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
	for _, k := range []struct{ key, what string }{
		{"idle_tick", "a quiet coordinator tick"}, {"heartbeat", "a heartbeat"},
		{"poll_nochange", "a no-change poll"}, {"poll_change", "a poll that found a change"},
		{"add_repo", "adding a repo"},
	} {
		if m, ok := find(k.key); ok {
			h.Ops = append(h.Ops, fmt.Sprintf("%s %s RRU + %s WRU", k.what, scNum(m.Total.AWSRCU), scNum(m.Total.AWSWCU)))
		}
	}
	if m, ok := find("poll_nochange"); ok {
		if m.Total.Calls == 0 {
			h.NoChange = fmt.Sprintf(" The %s no-change polls observed made no store call at all.", fmtInt(m.Count))
		} else {
			h.NoChange = fmt.Sprintf(" The %s no-change polls observed made %s store calls each on average.", fmtInt(m.Count), scNum(float64(m.Total.Calls)))
		}
	}
	if bill := v.Bills[0]; bill.NaiveDynamoDBUSD > 0 && bill.DynamoDBUSD > 0 {
		u := bill.Unthrottled
		h.Naive = fmt.Sprintf("at the billed %s polls a day, DynamoDB costs %s of what the naive design costs at %s repos (%s against %s)",
			scNum(bill.PollsPerDay), scPct(bill.DynamoDBUSD/bill.NaiveDynamoDBUSD), fmtInt(bill.Repos), scUSD(bill.DynamoDBUSD),
			scUSD(bill.NaiveDynamoDBUSD))
		if u.NaiveUSD > 0 {
			h.Naive += fmt.Sprintf("; with the workers unthrottled (%s polls a day) the poll writes cost %s against the naive %s (%s)",
				scNum(u.PollsPerDay), scUSD(u.PollWritesUSD), scUSD(u.NaiveUSD), scPct(u.PollWritesUSD/u.NaiveUSD))
		}
	}
	for _, bill := range v.Bills {
		top := slices.MaxFunc(bill.Components, func(a, b results.StoreCostComponent) int { return cmp.Compare(a.USD, b.USD) })
		share := 0.0
		if bill.TotalUSD > 0 {
			share = 100 * top.USD / bill.TotalUSD
		}
		h.Sizes = append(h.Sizes, fmt.Sprintf("%s: **%s/month**%s (%s polls per repo a day, %d workers; largest: %s %s, %.0f%%; DynamoDB %s)",
			scBillLabel(bill), scUSD(bill.TotalUSD), scGoal(bill), scNum(bill.PollsPerDay), bill.Workers, top.Name, scUSD(top.USD), share, scUSD(bill.DynamoDBUSD)))
	}
	return h
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
func scStackTable(bills []results.StoreCostBill) mdTable {
	t := scSizeTable("stack", bills)
	row := func(label string, f func(results.StoreCostStack) string) {
		r := []string{label}
		for _, bill := range bills {
			r = append(r, f(bill.Stack))
		}
		t.Rows = append(t.Rows, r)
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
		if s.ServeInWorkers {
			return "a container of each worker task"
		}
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
		back := ""
		if s.EFSBackOnRead {
			back = ", back on a read"
		}
		return fmt.Sprintf("%d / %d days%s", s.EFSIADays, s.EFSArchiveDays, back)
	})
	row("scrub every / KMS keys", func(s results.StoreCostStack) string {
		return fmt.Sprintf("%s days / %d", scNum(s.ScrubDays), s.KMSKeys)
	})
	row("stale-repos alarm", func(s results.StoreCostStack) string { return scNum(s.StaleAfterH) + " h" })
	return t
}

func scUnitsTable(ms []results.StoreCostMeasurement) mdTable {
	t := mdTable{Header: []string{"event", "repos", "workers", "events", "moved", "DynamoDB Local RCU / WCU", "AWS rules RRU / WRU",
		"of which index WRU", "calls (writes)", "Scheduler API calls", "local ms"}, Align: scAlign(1, 10)}
	for _, m := range ms {
		moved := "—"
		if m.Moved > 0 {
			moved = fmtInt(m.Moved)
		}
		name := m.Name
		if m.Note != "" {
			name += " (" + m.Note + ")"
		}
		t.Rows = append(t.Rows, []string{scCell(name), fmtInt(m.Repos), strconv.Itoa(m.Workers), fmtInt(m.Count), moved,
			scNum(m.Total.LocalRCU) + " / " + scNum(m.Total.LocalWCU), "**" + scNum(m.Total.AWSRCU) + " / " + scNum(m.Total.AWSWCU) + "**",
			scNum(m.Total.AWSIndexWCU), fmt.Sprintf("%d (%d)", m.Total.Calls, m.Total.WriteCalls), scNum(m.SchedulerAPICalls), scNum(m.WallMillis)})
	}
	return t
}

// scOpsTable splits an event by store operation ("Method/API").
func scOpsTable(m results.StoreCostMeasurement) mdTable {
	t := mdTable{Header: []string{"operation", "calls", "DynamoDB Local RCU / WCU", "AWS rules RRU / WRU", "index WRU", "bytes"},
		Align: scAlign(1, 5)}
	for _, op := range m.Ops {
		t.Rows = append(t.Rows, []string{"`" + op.Op + "`", strconv.Itoa(op.Calls), scNum(op.LocalRCU) + " / " + scNum(op.LocalWCU),
			scNum(op.AWSRCU) + " / " + scNum(op.AWSWCU), scNum(op.AWSIndexWCU), scNum(op.Bytes)})
	}
	return t
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

// mdTable is a Markdown table: a header, each column's alignment row cell ("---",
// "---:") and the rows; the "table" template prints it.
type mdTable struct {
	Header, Align []string
	Rows          [][]string
}

// scAlign is left columns left-aligned, then right ones right-aligned.
func scAlign(left, right int) []string {
	a := slices.Repeat([]string{"---"}, left)
	return append(a, slices.Repeat([]string{"---:"}, right)...)
}

// scSizeTable is a table with one column per bill.
func scSizeTable(first string, bills []results.StoreCostBill) mdTable {
	t := mdTable{Header: []string{first}, Align: scAlign(1, len(bills))}
	for _, bill := range bills {
		t.Header = append(t.Header, scBillLabel(bill))
	}
	return t
}

func scBillTable(bills []results.StoreCostBill) mdTable {
	t := scSizeTable("component", bills)
	row := func(label string, f func(results.StoreCostBill) string) {
		r := []string{label}
		for _, bill := range bills {
			r = append(r, f(bill))
		}
		t.Rows = append(t.Rows, r)
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
	return t
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

func scDynamoTable(bills []results.StoreCostBill) mdTable {
	t := scSizeTable("DynamoDB part", bills)
	keys, names := scComponents(bills, true)
	for _, k := range keys {
		r := []string{names[k]}
		for _, bill := range bills {
			if c, ok := scComponent(bill.DynamoDB, k); ok {
				r = append(r, scUSD(c.USD))
			} else {
				r = append(r, "—")
			}
		}
		t.Rows = append(t.Rows, r)
	}
	total := []string{"**DynamoDB total**"}
	for _, bill := range bills {
		total = append(total, "**"+scUSD(bill.DynamoDBUSD)+"**")
	}
	t.Rows = append(t.Rows, total)
	return t
}

// scDetail gives the quantities behind each figure of one bill.
type scDetail struct {
	Label string
	Rows  [][]string
}

func scBillDetails(bills []results.StoreCostBill) []scDetail {
	var out []scDetail
	for _, bill := range bills {
		d := scDetail{Label: scBillLabel(bill)}
		for _, c := range bill.Components {
			d.Rows = append(d.Rows, []string{c.Name, scUSD(c.USD), scCell(c.Detail)})
		}
		for _, c := range bill.DynamoDB {
			d.Rows = append(d.Rows, []string{"DynamoDB: " + c.Name, scUSD(c.USD), scCell(c.Detail)})
		}
		out = append(out, d)
	}
	return out
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
// poll rate and at the rate unthrottled workers reach.
func scBaseline(v results.StoreCost) [][]string {
	var rows [][]string
	for _, bill := range scPlain(v.Bills) {
		rows = append(rows, []string{fmtInt(bill.Repos) + " repos, as billed above", scNum(bill.PollsPerDay),
			scUSD(bill.DynamoDBUSD), scUSD(bill.NaiveDynamoDBUSD), scRatio(bill.NaiveDynamoDBUSD, bill.DynamoDBUSD)})
	}
	for _, bill := range scPlain(v.Bills) {
		u := bill.Unthrottled
		rows = append(rows, []string{fmtInt(bill.Repos) + " repos, workers unthrottled (poll writes only)",
			scNum(u.PollsPerDay), scUSD(u.PollWritesUSD), scUSD(u.NaiveUSD), scRatio(u.NaiveUSD, u.PollWritesUSD)})
	}
	return rows
}

// scSensitivityFigures is the naive baseline over a range of poll rates: a chart and
// its table.
type scSensitivityFigures struct {
	Chart string
	T     mdTable
}

func scSensitivity(r *Report, s results.StoreCostSensitivity) (*scSensitivityFigures, error) {
	if len(s.PollsPerDay) == 0 {
		return nil, nil
	}
	ch := plot.Line{Title: fmt.Sprintf("DynamoDB cost of poll writes, %s repos", fmtInt(s.Repos)),
		XLabel: "polls per repo per day (log)", YLabel: "USD per month (log)", LogX: true, LogY: true,
		Series: []plot.Series{
			{Name: "this design (changes + checkpoints)", X: s.PollsPerDay, Y: s.OursUSD},
			{Name: "naive (every poll writes)", X: s.PollsPerDay, Y: s.NaiveUSD, Dash: true},
		}}
	md, err := r.Plot("storecost-baseline.svg", "DynamoDB cost of poll writes against the poll rate, this design and the naive one", ch)
	if err != nil {
		return nil, err
	}
	t := mdTable{Header: []string{"polls / repo / day"}, Align: scAlign(1, len(s.PollsPerDay))}
	ours, naive := []string{"this design"}, []string{"naive"}
	for _, p := range s.PollsPerDay {
		t.Header = append(t.Header, scNum(p))
	}
	for _, x := range s.OursUSD {
		ours = append(ours, scUSD(x))
	}
	for _, x := range s.NaiveUSD {
		naive = append(naive, scUSD(x))
	}
	t.Rows = [][]string{ours, naive}
	return &scSensitivityFigures{Chart: md, T: t}, nil
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

// scPreviousTable sets the previous model's bill beside the honest one, line by line,
// for every bill that carries both: a column pair per bill.
func scPreviousTable(bills []results.StoreCostBill) mdTable {
	var with []results.StoreCostBill
	for _, b := range bills {
		if len(b.Previous) > 0 {
			with = append(with, b)
		}
	}
	t := mdTable{Header: []string{"component"}, Align: scAlign(1, 2*len(with))}
	if len(with) == 0 {
		return t
	}
	for _, b := range with {
		t.Header = append(t.Header, scBillLabel(b)+": previous", "honest")
	}
	var keys []string
	names := map[string]string{}
	for _, b := range with {
		for _, cs := range [][]results.StoreCostComponent{b.Previous, b.Components} {
			for _, c := range cs {
				if _, ok := names[c.Key]; !ok {
					keys = append(keys, c.Key)
					names[c.Key] = c.Name
				}
			}
		}
	}
	cell := func(cs []results.StoreCostComponent, k string) string {
		if c, ok := scComponent(cs, k); ok {
			return scUSD(c.USD)
		}
		return "—"
	}
	r := []string{"workers"}
	for _, b := range with {
		r = append(r, strconv.Itoa(b.PreviousWorkers), strconv.Itoa(b.Workers))
	}
	t.Rows = append(t.Rows, r)
	for _, k := range keys {
		r := []string{names[k]}
		for _, b := range with {
			r = append(r, cell(b.Previous, k), cell(b.Components, k))
		}
		t.Rows = append(t.Rows, r)
	}
	r = []string{"**total**"}
	for _, b := range with {
		r = append(r, "**"+scUSD(b.PreviousTotalUSD)+"**", "**"+scUSD(b.TotalUSD)+"**")
	}
	t.Rows = append(t.Rows, r)
	return t
}

// scEFSTable is each bill's month on EFS: storage by class and the reads by source.
func scEFSTable(bills []results.StoreCostBill) mdTable {
	var with []results.StoreCostBill
	for _, b := range bills {
		if b.EFS != nil {
			with = append(with, b)
		}
	}
	t := scSizeTable("GB a month", with)
	row := func(label string, f func(e *results.StoreCostEFS) string) {
		r := []string{label}
		for _, b := range with {
			r = append(r, f(b.EFS))
		}
		t.Rows = append(t.Rows, r)
	}
	row("stored: Standard / IA / Archive", func(e *results.StoreCostEFS) string {
		return scNum(e.StandardGB) + " / " + scNum(e.IAGB) + " / " + scNum(e.ArchiveGB)
	})
	sources := scUnion(with, func(e *results.StoreCostEFS) (out []string) {
		for _, r := range e.Reads {
			out = append(out, r.Source)
		}
		return out
	})
	for _, src := range sources {
		row("read by "+src+": Standard / IA / Archive", func(e *results.StoreCostEFS) string {
			for _, r := range e.Reads {
				if r.Source == src {
					return scNum(r.StandardGB) + " / " + scNum(r.IAGB) + " / " + scNum(r.ArchiveGB)
				}
			}
			return "—"
		})
	}
	row("written; moved to IA / Archive", func(e *results.StoreCostEFS) string {
		return scNum(e.WriteGB) + "; " + scNum(e.ToIAGB) + " / " + scNum(e.ToArchiveGB)
	})
	row("changes / scrubs a month", func(e *results.StoreCostEFS) string {
		return fmtInt(int(e.Changes)) + " / " + fmtInt(int(e.ScrubsPerMonth))
	})
	row("metadata operations metered: read / write", func(e *results.StoreCostEFS) string {
		return scNum(e.MetadataReadGB) + " / " + scNum(e.MetadataWriteGB)
	})
	row("32 KiB minimum of data operations: read / write", func(e *results.StoreCostEFS) string {
		return scNum(e.ReadMinimumGB) + " / " + scNum(e.WriteMinimumGB)
	})
	ops := scUnion(with, func(e *results.StoreCostEFS) (out []string) {
		for _, o := range e.Operations {
			out = append(out, o.Op)
		}
		return out
	})
	for _, op := range ops {
		row("`"+op+"` a month", func(e *results.StoreCostEFS) string {
			for _, o := range e.Operations {
				if o.Op == op {
					return fmtInt(int(math.Round(o.Count)))
				}
			}
			return "—"
		})
	}
	return t
}

// scUnion is every name keys gives of the bills' months on EFS, in order of first
// appearance.
func scUnion(bills []results.StoreCostBill, keys func(*results.StoreCostEFS) []string) []string {
	var out []string
	for _, b := range bills {
		for _, k := range keys(b.EFS) {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

// scGoalsTable is each goal of issue 39 against the bills: the bill, the poll budget it
// assumes and the freshness that budget gives; and the stack against the one-VM
// alternative from 10,000 repos up.
func scGoalsTable(v results.StoreCost) mdTable {
	t := mdTable{Header: []string{"goal", "bill", "", "poll budget (polls / repo / day)", "mean lag (h)", "p50 lag (h)", "p99 lag (h)", "freshness"},
		Align: []string{"---", "---:", "---", "---:", "---:", "---:", "---:", "---:"}}
	for _, b := range v.Bills {
		if b.GoalUSD == 0 {
			continue
		}
		verdict := "met"
		if b.TotalUSD > b.GoalUSD {
			verdict = "**missed**"
		}
		r := []string{"≤ " + scUSD(b.GoalUSD) + " at " + scBillLabel(b), scUSD(b.TotalUSD), verdict, scNum(b.PollsPerDay)}
		if f := b.Freshness; f != nil {
			r = append(r, scNum(f.LagMeanH), scNum(f.LagP50H), scNum(f.LagP99H), fmt.Sprintf("%.4f", f.Freshness))
		} else {
			r = append(r, "—", "—", "—", "—")
		}
		t.Rows = append(t.Rows, r)
	}
	if c := v.Crossover; c != nil && len(c.Points) > 0 {
		verdict := "**missed**"
		if c.FleetCheaperFrom > 0 && c.FleetCheaperFrom <= 10_000 {
			verdict = "met"
		}
		from := "at no size measured"
		if c.FleetCheaperFrom > 0 {
			from = "from " + fmtInt(c.FleetCheaperFrom) + " repos"
		}
		t.Rows = append(t.Rows, []string{"cheaper than one VM from 10,000 repos up", "cheaper " + from, verdict, "", "", "", "", ""})
	}
	return t
}

// scEFSOpsTable is what each mirror operation makes EFS meter, counted from its system
// calls.
func scEFSOpsTable(ops []results.StoreCostEFSOp) mdTable {
	t := mdTable{Header: []string{"operation", "metadata reads / writes", "data reads (bytes)", "data writes (bytes)", "files mapped",
		"metered at the read price", "metered at the write price", "system calls"}, Align: append(scAlign(1, 6), "---")}
	for _, op := range ops {
		var calls []string
		for _, c := range op.Calls {
			calls = append(calls, fmt.Sprintf("%s %d", c.Call, c.Count))
		}
		t.Rows = append(t.Rows, []string{scCell(op.Name) + " (`" + op.Key + "`)", fmt.Sprintf("%d / %d", op.MetaReads, op.MetaWrites),
			fmt.Sprintf("%d (%s)", op.DataReads, fmtInt(int(op.DataReadBytes))), fmt.Sprintf("%d (%s)", op.DataWrites, fmtInt(int(op.DataWriteBytes))),
			strconv.Itoa(op.Mappings), scKiB(op.MeteredReadBytes), scKiB(op.MeteredWriteBytes), strings.Join(calls, ", ")})
	}
	return t
}

func scKiB(b int64) string { return fmtInt(int(math.Round(float64(b)/1024))) + " KiB" }

// scVMTable is the one-VM alternative at each billed size and volume type, beside the
// stack's bill.
func scVMTable(vms []results.StoreCostVM) mdTable {
	t := mdTable{Header: []string{"repos", "VM", "volumes", "instance", "EBS (mirrors)", "root, IPv4", "VM total", "the stack", "cheaper"},
		Align: append([]string{"---:", "---", "---:"}, scAlign(0, 5)...)}
	t.Align = append(t.Align, "---")
	for _, v := range vms {
		c := map[string]float64{}
		for _, x := range v.Components {
			c[x.Key] = x.USD
		}
		cheaper := "the stack"
		if v.TotalUSD <= v.FleetUSD {
			cheaper = "**the VM**"
		}
		t.Rows = append(t.Rows, []string{fmtInt(v.Repos), v.Instance + " + " + v.VolumeType,
			fmt.Sprintf("%d × %s GiB", v.Volumes, fmtInt(int(v.ProvisionedGiB)/max(v.Volumes, 1))), scUSD(c["instance"]), scUSD(c["volumes"]),
			scUSD(c["root"] + c["ipv4"]), "**" + scUSD(v.TotalUSD) + "**", scUSD(v.FleetUSD), cheaper})
	}
	return t
}

// scCrossoverFigures are the stack against the cheapest VM over a range of sizes: a
// chart and its table.
type scCrossoverFigures struct {
	Chart string
	T     mdTable
	From  string
}

func scCrossover(r *Report, c *results.StoreCostCrossover) (*scCrossoverFigures, error) {
	if c == nil || len(c.Points) == 0 {
		return nil, nil
	}
	var xs, fleet, vm []float64
	t := mdTable{Header: []string{"repos", "the stack (no serving)", "the cheapest VM", "VM", "cheaper"}, Align: append(scAlign(0, 3), "---", "---")}
	for _, p := range c.Points {
		xs = append(xs, float64(p.Repos))
		fleet = append(fleet, p.FleetUSD)
		vm = append(vm, p.VMUSD)
		cheaper := "the stack"
		if p.VMUSD <= p.FleetUSD {
			cheaper = "**the VM**"
		}
		t.Rows = append(t.Rows, []string{fmtInt(p.Repos), scUSD(p.FleetUSD), scUSD(p.VMUSD), p.VM, cheaper})
	}
	ch := plot.Line{Title: "The stack against one VM running mirrorfleet run", XLabel: "repos (log)", YLabel: "USD per month (log)",
		LogX: true, LogY: true, Series: []plot.Series{{Name: "the stack (no serving)", X: xs, Y: fleet}, {Name: "the cheapest VM", X: xs, Y: vm, Dash: true}}}
	md, err := r.Plot("storecost-vm.svg", "Monthly cost of the stack and of the cheapest one-VM alternative against the fleet size", ch)
	if err != nil {
		return nil, err
	}
	from := "at no size measured"
	if c.FleetCheaperFrom > 0 {
		from = "from " + fmtInt(c.FleetCheaperFrom) + " repos up"
	}
	return &scCrossoverFigures{Chart: md, T: t, From: from}, nil
}

// scStalenessTable sets what each billed fleet shows against the stack's thresholds.
func scStalenessTable(bills []results.StoreCostBill) mdTable {
	t := mdTable{Header: []string{"fleet", "workers", "polls / repo / day", "p99 staleness (h)", "scale out above (h)", "alarm above (h)", ""},
		Align: scAlign(1, 6)}
	for _, b := range scPlain(bills) {
		s := b.Staleness
		verdict := "quiet"
		switch {
		case s.AlarmHours > 0 && s.TailHours > s.AlarmHours:
			verdict = "**in ALARM**"
		case s.TailHours > s.ScaleOutHours:
			verdict = "**scales out**"
		}
		t.Rows = append(t.Rows, []string{fmtInt(b.Repos) + " repos", strconv.Itoa(b.Workers), scNum(s.PollsPerDay), scNum(s.TailHours),
			scNum(s.ScaleOutHours), scNum(s.AlarmHours), verdict})
	}
	return t
}

// scTiersTable is the storage tiers the model compares (ADR 24).
func scTiersTable(tiers []results.StoreCostTier) mdTable {
	t := mdTable{Header: []string{"repos", "storage", "storage lines", "bill total", "goal", "what"}, Align: []string{"---:", "---", "---:", "---:", "---", "---"}}
	for _, x := range tiers {
		name := x.Name
		if x.Deployed {
			name = "**" + name + "** (deployed)"
		}
		goal := "—"
		if x.GoalUSD > 0 {
			goal = "≤ " + scUSD(x.GoalUSD) + ": met"
			if x.TotalUSD > x.GoalUSD {
				goal = "≤ " + scUSD(x.GoalUSD) + ": **missed**"
			}
		}
		t.Rows = append(t.Rows, []string{fmtInt(x.Repos), name, scUSD(x.StorageUSD), scUSD(x.TotalUSD), goal, scCell(x.Description)})
	}
	return t
}
