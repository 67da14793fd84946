package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// CloudWatch's unit names (MetricDatum.Unit).
var cloudWatchUnits = map[string]bool{}

func init() {
	for _, u := range strings.Fields(`Seconds Microseconds Milliseconds Bytes Kilobytes Megabytes Gigabytes
		Terabytes Bits Kilobits Megabits Gigabits Terabits Percent Count Bytes/Second Kilobytes/Second
		Megabytes/Second Gigabytes/Second Terabytes/Second Bits/Second Kilobits/Second Megabits/Second
		Gigabits/Second Terabits/Second Count/Second None`) {
		cloudWatchUnits[u] = true
	}
}

// emfValue is one metric value found in an EMF object.
type emfValue struct {
	name   string
	dims   string // "k=v,..." of the dimension set
	values []float64
}

// validateEMF checks one line against the structure the EMF specification requires
// and returns the metric values it carries.
func validateEMF(line []byte, wantTS int64) ([]emfValue, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value on the line")
	}
	aws, ok := root["_aws"].(map[string]any)
	if !ok {
		return nil, errors.New("_aws missing or not an object")
	}
	ts, ok := aws["Timestamp"].(json.Number)
	if !ok {
		return nil, errors.New("_aws.Timestamp missing or not a number")
	}
	ms, err := ts.Int64()
	if err != nil || ms < 1e12 || ms != wantTS {
		return nil, fmt.Errorf("_aws.Timestamp %s: want integer milliseconds %d", ts, wantTS)
	}
	directives, ok := aws["CloudWatchMetrics"].([]any)
	if !ok || len(directives) == 0 {
		return nil, errors.New("_aws.CloudWatchMetrics missing or empty")
	}
	var out []emfValue
	for _, d := range directives {
		dir, ok := d.(map[string]any)
		if !ok {
			return nil, errors.New("metric directive is not an object")
		}
		if ns, ok := dir["Namespace"].(string); !ok || ns == "" || len(ns) > 255 {
			return nil, fmt.Errorf("Namespace %v", dir["Namespace"])
		} else if ns != Namespace {
			return nil, fmt.Errorf("Namespace %q, want %q", ns, Namespace)
		}
		sets, ok := dir["Dimensions"].([]any)
		if !ok {
			return nil, errors.New("Dimensions missing or not an array")
		}
		var dimStrs []string
		for _, s := range sets {
			set, ok := s.([]any)
			if !ok {
				return nil, errors.New("dimension set is not an array")
			}
			if len(set) > 30 {
				return nil, fmt.Errorf("dimension set of %d keys (max 30)", len(set))
			}
			var kv []string
			for _, k := range set {
				key, ok := k.(string)
				if !ok {
					return nil, fmt.Errorf("dimension key %v is not a string", k)
				}
				v, ok := root[key].(string)
				if !ok || v == "" || len(v) > 1024 {
					return nil, fmt.Errorf("dimension %q has no string value at top level (%v)", key, root[key])
				}
				kv = append(kv, key+"="+v)
			}
			dimStrs = append(dimStrs, strings.Join(kv, ","))
		}
		metrics, ok := dir["Metrics"].([]any)
		if !ok || len(metrics) == 0 || len(metrics) > 100 {
			return nil, fmt.Errorf("Metrics: %d definitions (want 1..100)", len(metrics))
		}
		seen := map[string]bool{}
		for _, m := range metrics {
			def, ok := m.(map[string]any)
			if !ok {
				return nil, errors.New("metric definition is not an object")
			}
			name, ok := def["Name"].(string)
			if !ok || name == "" || len(name) > 255 || seen[name] {
				return nil, fmt.Errorf("metric Name %v missing, too long or repeated", def["Name"])
			}
			seen[name] = true
			if u, ok := def["Unit"]; ok {
				if us, _ := u.(string); !cloudWatchUnits[us] {
					return nil, fmt.Errorf("%s: unit %v is not a CloudWatch unit", name, u)
				}
			}
			var vals []float64
			switch v := root[name].(type) {
			case json.Number:
				f, err := v.Float64()
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				vals = []float64{f}
			case []any:
				if len(v) == 0 || len(v) > 100 {
					return nil, fmt.Errorf("%s: array of %d values (want 1..100)", name, len(v))
				}
				for _, x := range v {
					n, ok := x.(json.Number)
					if !ok {
						return nil, fmt.Errorf("%s: array member %v is not a number", name, x)
					}
					f, _ := n.Float64()
					vals = append(vals, f)
				}
			default:
				return nil, fmt.Errorf("metric %s has no numeric value at top level (%v)", name, root[name])
			}
			for _, ds := range dimStrs {
				out = append(out, emfValue{name: name, dims: ds, values: vals})
			}
		}
	}
	return out, nil
}

// readEMF validates every line of out and sums the values per metric and dimensions.
func readEMF(t *testing.T, out []byte, wantTS int64) (sums map[string]float64, counts map[string]int, lines []map[string]any) {
	t.Helper()
	sums, counts = map[string]float64{}, map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		vals, err := validateEMF(sc.Bytes(), wantTS)
		if err != nil {
			t.Fatalf("invalid EMF line: %v\n%s", err, sc.Bytes())
		}
		for _, v := range vals {
			for _, x := range v.values {
				sums[v.name+"|"+v.dims] += x
				counts[v.name+"|"+v.dims]++
			}
		}
		var m map[string]any
		_ = json.Unmarshal(sc.Bytes(), &m)
		lines = append(lines, m)
	}
	return sums, counts, lines
}

func TestEMF(t *testing.T) {
	clk := clock.NewVirtual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var buf bytes.Buffer
	e := NewEMF(&buf, "prod", clk)
	rec := func(s ...Sample) {
		t.Helper()
		if err := e.Record(s...); err != nil {
			t.Fatal(err)
		}
	}
	rec(FromReport(coordinator.Report{Leader: true, Term: 3, Moved: 5, WorkersByState: map[store.WorkerState]int{store.WorkerActive: 4}}, 2*time.Second, nil)...)
	rec(FromReport(coordinator.Report{Leader: true, Term: 4, Moved: 1, WorkersByState: map[store.WorkerState]int{store.WorkerActive: 3, store.WorkerDead: 1}}, time.Second, nil)...)
	rec(ReposByStateSamples(map[store.RepoState]int{store.RepoOK: 90, store.RepoPending: 10})...)
	rec(Staleness{P50: time.Minute, P99: time.Hour, Max: 2 * time.Hour, Repos: 100}.Samples()...)
	for i := range 250 { // more fetch durations than one EMF array holds
		rec(Fetch(i%10 != 0, time.Duration(i)*time.Millisecond, 100)...)
	}
	rec(Queue("w1", 7), Queue("w2", 9))
	clk.Advance(time.Minute)
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	ts := clk.Now().UnixMilli()
	sums, counts, lines := readEMF(t, buf.Bytes(), ts)
	want := map[string]float64{
		"Ticks|Fleet=prod":                        2,
		"TickDuration|Fleet=prod":                 3,
		"LeaderTerm|Fleet=prod":                   4, // the last value
		"ReposMoved|Fleet=prod":                   6,
		"WorkersByState|Fleet=prod,State=active":  3,
		"WorkersByState|Fleet=prod,State=dead":    1,
		"WorkersByState|Fleet=prod,State=suspect": 0,
		"ReposByState|Fleet=prod,State=ok":        90,
		"ReposByState|Fleet=prod,State=pending":   10,
		"ReposByState|Fleet=prod,State=overflow":  0,
		"StalenessP50|Fleet=prod":                 60,
		"StalenessP99|Fleet=prod":                 3600,
		"StalenessMax|Fleet=prod":                 7200,
		"FetchSuccesses|Fleet=prod":               225,
		"FetchFailures|Fleet=prod":                25,
		"BytesFetched|Fleet=prod":                 25000,
		"FetchDuration|Fleet=prod":                249 * 250 / 2 / 1000.0,
		"QueueDepth|Fleet=prod":                   16, // w1 and w2: one value each
	}
	for k, v := range want {
		if got, ok := sums[k]; !ok || got < v-1e-9 || got > v+1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if counts["FetchDuration|Fleet=prod"] != 250 || counts["TickDuration|Fleet=prod"] != 2 {
		t.Errorf("histogram observations: %d fetches, %d ticks", counts["FetchDuration|Fleet=prod"], counts["TickDuration|Fleet=prod"])
	}
	workers := map[string]bool{}
	for _, l := range lines {
		if w, ok := l[DimWorker].(string); ok {
			workers[w] = true
			if _, ok := l[QueueDepth]; !ok {
				t.Errorf("Worker property on a line without QueueDepth: %v", l)
			}
		}
	}
	if !workers["w1"] || !workers["w2"] {
		t.Errorf("QueueDepth lines do not name their workers: %v", workers)
	}

	// The next interval: counters report 0, gauges and histograms nothing.
	buf.Reset()
	clk.Advance(time.Minute)
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	sums, _, _ = readEMF(t, buf.Bytes(), clk.Now().UnixMilli())
	for k, v := range sums {
		name := strings.Split(k, "|")[0]
		if d, _ := Lookup(name); d.Kind != Counter || v != 0 {
			t.Errorf("idle interval reported %s = %v", k, v)
		}
	}
	for _, c := range []string{Ticks, FetchSuccesses, FetchFailures, BytesFetched} {
		if _, ok := sums[c+"|Fleet=prod"]; !ok {
			t.Errorf("idle counter %s not reported as 0", c)
		}
	}
	if v, ok := sums[ReposMoved+"|Fleet=prod"]; ok {
		t.Errorf("idle sparse counter ReposMoved written (%v): a billed hour with no event", v)
	}
}

// A sparse counter is written in the intervals that counted something and in no
// other: not as the 0 a tick records when it moved nothing, not as an idle 0 later.
// Every hour with a data point is an hour CloudWatch bills.
func TestEMFSparseCountersOnlyWithEvents(t *testing.T) {
	clk := clock.NewVirtual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var buf bytes.Buffer
	e := NewEMF(&buf, "prod", clk)
	interval := func(samples ...Sample) map[string]float64 {
		t.Helper()
		buf.Reset()
		if err := e.Record(samples...); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
		if err := e.Flush(); err != nil {
			t.Fatal(err)
		}
		sums, _, _ := readEMF(t, buf.Bytes(), clk.Now().UnixMilli())
		return sums
	}
	quiet := FromReport(coordinator.Report{Leader: true, Term: 1, WorkersByState: map[store.WorkerState]int{store.WorkerActive: 1}}, time.Second, nil)
	sparse := []string{ReposMoved + "|Fleet=prod", ReposOffOwner + "|Fleet=prod", ServeRequests + "|Fleet=prod,Status=2xx",
		ServeBytes + "|Fleet=prod", ServeRejected + "|Fleet=prod", MirrorsRecloned + "|Fleet=prod"}
	absent := func(step string, sums map[string]float64) {
		t.Helper()
		for _, k := range sparse {
			if v, ok := sums[k]; ok {
				t.Errorf("%s: %s written (%v) without an event", step, k, v)
			}
		}
	}
	sums := interval(quiet...)
	absent("a tick that moved nothing", sums)
	if sums[Ticks+"|Fleet=prod"] != 1 {
		t.Errorf("Ticks = %v, want 1", sums[Ticks+"|Fleet=prod"])
	}

	busy := FromReport(coordinator.Report{Leader: true, Term: 1, Moved: 3, SweepFound: 1}, time.Second, nil)
	busy = append(busy, ServeRequest(200, 1000)...)
	busy = append(busy, ServeRequest(503, 10)...)
	busy = append(busy, Maintenance(time.Second, true)...)
	sums = interval(busy...)
	for k, want := range map[string]float64{sparse[0]: 3, sparse[1]: 1, sparse[2]: 1, sparse[3]: 1010, sparse[4]: 1, sparse[5]: 1} {
		if sums[k] != want {
			t.Errorf("interval with events: %s = %v, want %v", k, sums[k], want)
		}
	}

	sums = interval()
	absent("the idle interval after", sums)
	if _, ok := sums[Ticks+"|Fleet=prod"]; !ok {
		t.Error("idle Ticks not written as 0: scheduled work reads as 0, not as missing")
	}
}

func TestEMFNothingRecordedNothingWritten(t *testing.T) {
	var buf bytes.Buffer
	if err := NewEMF(&buf, "", nil).Flush(); err != nil || buf.Len() != 0 {
		t.Errorf("Flush of nothing = %v, wrote %q", err, buf.String())
	}
}

// One object holds at most 100 metrics; more go to further objects of the same
// dimensions. No real group has that many metrics yet, so this packs a synthetic one.
func TestEMFPackSplitsAt100Metrics(t *testing.T) {
	g := &group{dims: map[string]string{DimFleet: "f"}, props: map[string]string{}, dimKeys: []string{DimFleet}}
	for i := range 250 {
		g.entries = append(g.entries, entry{Def{Name: fmt.Sprintf("M%03d", i), Unit: UnitCount}, float64(i)})
	}
	g.entries = append(g.entries, entry{Def{Name: "M000", Unit: UnitCount}, []float64{1, 2}}) // a repeated name
	objs := pack(g, 1893456000000)
	if len(objs) != 3 {
		t.Fatalf("%d objects, want 3", len(objs))
	}
	total := 0
	for _, o := range objs {
		line, _ := json.Marshal(o)
		vals, err := validateEMF(line, 1893456000000)
		if err != nil {
			t.Fatal(err)
		}
		total += len(vals)
	}
	if total != 251 {
		t.Errorf("%d metric values across objects, want 251", total)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestEMFWriteErrorReturned(t *testing.T) {
	e := NewEMF(failWriter{}, "f", nil)
	_ = e.Record(Sample{Name: Ticks, Value: 1})
	if err := e.Flush(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Flush = %v", err)
	}
}
