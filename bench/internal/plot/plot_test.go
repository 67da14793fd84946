package plot

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

const svgNS = "http://www.w3.org/2000/svg"

// text is one <text> of a drawn chart.
type text struct {
	s string
	x float64
}

// parse checks that b is a well-formed SVG document with finite numbers and returns its
// texts.
func parse(t *testing.T, b []byte) []text {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	var out []text
	root := ""
	var cur *text
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
				if tok.Name.Space != svgNS {
					t.Fatalf("root in namespace %q, want %q", tok.Name.Space, svgNS)
				}
			}
			for _, a := range tok.Attr {
				if strings.Contains(a.Value, "NaN") || strings.Contains(a.Value, "Inf") {
					t.Errorf("<%s %s=%q>: non-finite number", tok.Name.Local, a.Name.Local, a.Value)
				}
			}
			if tok.Name.Local == "text" {
				cur = &text{}
				for _, a := range tok.Attr {
					if a.Name.Local == "x" {
						cur.x, _ = strconv.ParseFloat(a.Value, 64)
					}
				}
			}
		case xml.CharData:
			if cur != nil {
				cur.s += string(tok)
			}
		case xml.EndElement:
			if tok.Name.Local == "text" && cur != nil {
				out = append(out, *cur)
				cur = nil
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root is <%s>, not <svg>", root)
	}
	return out
}

func svg(t *testing.T, c interface{ SVG() ([]byte, error) }) []byte {
	t.Helper()
	b, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func texts(t *testing.T, c interface{ SVG() ([]byte, error) }) []string {
	t.Helper()
	var s []string
	for _, x := range parse(t, svg(t, c)) {
		s = append(s, x.s)
	}
	return s
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sampleLine() Line {
	return Line{
		Title:  "Staleness vs fleet size",
		XLabel: "mirrors",
		YLabel: "p99 staleness (s)",
		LogX:   true,
		Series: []Series{
			{Name: "round-robin", X: []float64{10, 100, 1000, 10000}, Y: []float64{12, 30, 95, 410}},
			{Name: "priority <age & size>", X: []float64{10, 100, 1000, 10000}, Y: []float64{8, 15, 40, 120}},
			{Name: "optimum", X: []float64{10, 10000}, Y: []float64{5, 60}, Dash: true},
		},
	}
}

func sampleBars() Bars {
	return Bars{
		Title:  "Fetch cost per tick",
		YLabel: "bytes fetched",
		Groups: []string{"small", "medium", "large"},
		Series: []BarSeries{
			{Name: "full fetch", Values: []float64{1200, 56000, 910000}},
			{Name: "negotiated", Values: []float64{300, 9000, 120000}},
		},
	}
}

func TestLineStructure(t *testing.T) {
	l := sampleLine()
	ds := l.drawn()
	if len(ds) != len(l.Series) {
		t.Fatalf("%d series drawn of %d", len(ds), len(l.Series))
	}
	dashed := 0
	for i, d := range ds {
		if d.Dash {
			dashed++
		}
		if len(d.Runs) != 1 || len(d.Runs[0]) != len(l.Series[i].X) {
			t.Errorf("series %q drawn as %v", d.Name, d.Runs)
		}
		for j, q := range d.Runs[0] {
			if q.X != l.Series[i].X[j] || q.Y != l.Series[i].Y[j] {
				t.Errorf("series %q point %d drawn at %v", d.Name, j, q)
			}
		}
	}
	if dashed != 1 {
		t.Errorf("%d dashed series, want 1", dashed)
	}
	if ds[0].Colour == ds[1].Colour {
		t.Errorf("series 0 and 1 share colour %v", ds[0].Colour)
	}
	ts := texts(t, l)
	for _, want := range []string{"Staleness vs fleet size", "mirrors", "p99 staleness (s)", "round-robin", "optimum", "10", "100", "1k", "10k"} {
		if !has(ts, want) {
			t.Errorf("no text %q in %q", want, ts)
		}
	}
}

// The axes cover every drawn point, on every scale; what a log axis cannot place is
// left out.
func TestLineAxesCoverTheData(t *testing.T) {
	xs := []float64{1, 2, 5, 10, 50, 200}
	ys := []float64{-3, 0.5, 2, 7, 40, 900}
	for _, tc := range []struct {
		name       string
		logX, logY bool
	}{{"linear", false, false}, {"logx", true, false}, {"logy", false, true}, {"loglog", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			l := Line{LogX: tc.logX, LogY: tc.logY, Series: []Series{{Name: "a", X: xs, Y: ys}}}
			p, _, err := l.Plot()
			if err != nil {
				t.Fatal(err)
			}
			ds := l.drawn()
			want := len(xs)
			if tc.logY {
				want-- // -3 is skipped
			}
			if len(ds[0].Runs) != 1 || len(ds[0].Runs[0]) != want {
				t.Fatalf("drawn %v, want one run of %d points", ds[0].Runs, want)
			}
			for _, q := range ds[0].Runs[0] {
				if q.X < p.X.Min || q.X > p.X.Max || q.Y < p.Y.Min || q.Y > p.Y.Max {
					t.Errorf("point %v outside the axes [%v, %v] × [%v, %v]", q, p.X.Min, p.X.Max, p.Y.Min, p.Y.Max)
				}
			}
			if _, ok := p.Y.Scale.(plot.LogScale); ok != tc.logY {
				t.Errorf("y log scale %v, want %v", ok, tc.logY)
			}
			parse(t, svg(t, l))
		})
	}
}

func TestLogTicksArePowersOfTen(t *testing.T) {
	for _, r := range [][2]float64{{0.01, 1000}, {1, 10}, {1, 1e12}, {1e-6, 1e-2}, {0.1, 10}} {
		var labelled int
		for _, tk := range (shortTicks{plot.TickerFunc(logTicks)}).Ticks(r[0], r[1]) {
			if tk.Value < r[0]*(1-1e-9) || tk.Value > r[1]*(1+1e-9) {
				t.Errorf("%v: tick %v outside", r, tk.Value)
			}
			if tk.Label == "" {
				continue
			}
			labelled++
			k := math.Log10(tk.Value)
			if math.Abs(k-math.Round(k)) > 1e-9 {
				t.Errorf("%v: labelled tick %v is not a power of ten", r, tk.Value)
			}
			v, err := strconv.ParseFloat(strings.NewReplacer("k", "e3", "M", "e6", "G", "e9", "T", "e12").Replace(tk.Label), 64)
			if err != nil || math.Abs(math.Log10(v)-k) > 1e-9 {
				t.Errorf("%v: tick %v labelled %q", r, tk.Value, tk.Label)
			}
		}
		if labelled < 2 {
			t.Errorf("%v: %d labelled ticks", r, labelled)
		}
	}
}

func TestLogLabel(t *testing.T) {
	want := map[int]string{-5: "1e-5", -2: "0.01", -1: "0.1", 0: "1", 1: "10", 2: "100", 3: "1k", 4: "10k", 6: "1M", 7: "10M", 9: "1G"}
	for k, s := range want {
		if got := logLabel(k); got != s {
			t.Errorf("logLabel(%d) = %q, want %q", k, got, s)
		}
	}
}

func TestLinearTickLabels(t *testing.T) {
	for _, r := range [][2]float64{{0, 97}, {-3.2, 7.9}, {0.001, 0.0047}, {12000, 987654}, {-5, -1}} {
		seen := map[string]bool{}
		var ls []string
		for _, tk := range (shortTicks{plot.DefaultTicks{}}).Ticks(r[0], r[1]) {
			if tk.Label == "" {
				continue
			}
			ls = append(ls, tk.Label)
			if seen[tk.Label] {
				t.Errorf("%v: label %q repeats", r, tk.Label)
			}
			seen[tk.Label] = true
		}
		if len(ls) < 2 {
			t.Errorf("%v: labels %q", r, ls)
		}
	}
	var ls []string
	for _, tk := range (shortTicks{plot.DefaultTicks{}}).Ticks(0, 50000) {
		ls = append(ls, tk.Label)
	}
	if !has(ls, "50k") || !has(ls, "0") {
		t.Errorf("labels for [0, 50000] = %q", ls)
	}
}

func TestValueLabel(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 1.5: "1.5", 2.25: "2.25", 1200: "1200", 910000: "910k", 56000: "56k",
		3.2e6: "3.2M", 0.01: "0.01", -3: "-3", 1e-5: "1e-5", 1.0 / 3: "0.333"} {
		if got := valueLabel(v); got != want {
			t.Errorf("valueLabel(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestLinePadsRange(t *testing.T) {
	l := Line{Series: []Series{{X: []float64{0, 10}, Y: []float64{1, 100}}}}
	p, _, err := l.Plot()
	if err != nil {
		t.Fatal(err)
	}
	// Padded, but not across zero.
	if p.Y.Min != 0 || p.Y.Max <= 100 {
		t.Errorf("y axis [%v, %v], want [0, >100]", p.Y.Min, p.Y.Max)
	}
}

func TestEscaping(t *testing.T) {
	name := `a<b & "c" 'd'>`
	l := Line{Title: name, XLabel: name, YLabel: name, Series: []Series{{Name: name, X: []float64{1, 2}, Y: []float64{1, 2}}}}
	b := Bars{Title: name, YLabel: name, Groups: []string{name}, Series: []BarSeries{{Name: name, Values: []float64{3}}}}
	for _, c := range []interface{ SVG() ([]byte, error) }{l, b} {
		n := 0
		for _, s := range texts(t, c) {
			if strings.Contains(s, name) {
				n++
			}
		}
		if n < 3 {
			t.Errorf("name survives escaping %d times, want at least 3", n)
		}
		if bytes.Contains(svg(t, c), []byte("a<b")) {
			t.Errorf("unescaped < in output")
		}
	}
}

func TestDeterministic(t *testing.T) {
	l, b := sampleLine(), sampleBars()
	if !bytes.Equal(svg(t, l), svg(t, l)) {
		t.Error("Line.SVG differs between calls")
	}
	if !bytes.Equal(svg(t, b), svg(t, b)) {
		t.Error("Bars.SVG differs between calls")
	}
}

func TestEmptyAndBadInput(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	lines := []Line{
		{},
		{LogX: true, LogY: true},
		{Series: []Series{{}}},
		{Series: []Series{{Name: "nan", X: []float64{nan, 1}, Y: []float64{1, nan}}}},
		{LogY: true, Series: []Series{{Name: "neg", X: []float64{1, 2}, Y: []float64{-1, 0}}}},
		{Series: []Series{{Name: "short", X: []float64{1, 2, 3}, Y: []float64{4}}}},
		{Series: []Series{{Name: "flat", X: []float64{5, 5}, Y: []float64{7, 7}}}},
		{LogX: true, LogY: true, Series: []Series{{Name: "one", X: []float64{100}, Y: []float64{1000}}}},
		{Series: []Series{{Name: "huge", X: []float64{-1e300, 1e300}, Y: []float64{inf, 1e-300}}}},
	}
	for _, l := range lines {
		parse(t, svg(t, l))
	}
	bars := []Bars{
		{},
		{LogY: true},
		{Groups: []string{"a", "b"}},
		{Series: []BarSeries{{Name: "x"}}},
		{Groups: []string{"a"}, Series: []BarSeries{{Name: "x", Values: []float64{nan, inf, 2}}}},
		{LogY: true, Groups: []string{"a", "b"}, Series: []BarSeries{{Name: "x", Values: []float64{0, -5}}}},
		{Groups: []string{"a", "b"}, Series: []BarSeries{{Name: "x", Values: []float64{0, 0}}}},
	}
	for _, b := range bars {
		parse(t, svg(t, b))
	}
	// A chart with nothing to draw says so.
	if ts := texts(t, Line{Title: "t", Series: []Series{{Name: "nan", X: []float64{nan}, Y: []float64{1}}}}); !has(ts, "t (no data)") {
		t.Errorf("empty chart: %q", ts)
	}
}

func TestLineGaps(t *testing.T) {
	l := Line{LogY: true, Series: []Series{{Name: "g", X: []float64{1, 2, 3, 4, 5}, Y: []float64{1, 2, math.NaN(), 0, 5}}}}
	runs := l.drawn()[0].Runs
	if len(runs) != 2 || len(runs[0]) != 2 || len(runs[1]) != 1 || runs[1][0].X != 5 {
		t.Errorf("runs %v: want the line broken at the skipped points", runs)
	}
}

func TestBars(t *testing.T) {
	b := sampleBars()
	ds := b.drawn()
	if len(ds) != 6 {
		t.Fatalf("%d bars, want 6", len(ds))
	}
	// Bars come group by group, one per series, with their values.
	for i, d := range ds {
		if d.Group != i/2 || d.Series != i%2 || d.Value != b.Series[d.Series].Values[d.Group] {
			t.Errorf("bar %d: %+v", i, d)
		}
	}
	p, _, err := b.Plot()
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Min != 0 || p.Y.Max < 910000 {
		t.Errorf("y axis [%v, %v] does not run from zero over the bars", p.Y.Min, p.Y.Max)
	}
	out := string(svg(t, b))
	for _, c := range []string{"#0072B2", "#D55E00"} { // series 0 and 1
		if !strings.Contains(strings.ToUpper(out), "FILL:"+c) {
			t.Errorf("no bar in %s", c)
		}
	}
	ts := texts(t, b)
	for _, want := range []string{"small", "large", "full fetch", "negotiated", "910k", "1200", "0"} {
		if !has(ts, want) {
			t.Errorf("no text %q in %q", want, ts)
		}
	}
}

func TestBarsLog(t *testing.T) {
	b := Bars{LogY: true, Groups: []string{"a", "b", "c"}, Series: []BarSeries{{Name: "s", Values: []float64{10, 0, 1e6}}}}
	ds := b.drawn()
	if len(ds) != 2 || ds[0].Value != 10 || ds[1].Value != 1e6 || ds[1].Group != 2 {
		t.Fatalf("bars %+v, want 10 and 1e6 (zero skipped)", ds)
	}
	p, _, err := b.Plot()
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Min <= 0 || p.Y.Min >= 10 || p.Y.Max < 1e6 {
		t.Errorf("log axis [%v, %v]: the smallest bar must stay visible", p.Y.Min, p.Y.Max)
	}
	ts := texts(t, b)
	for _, want := range []string{"1", "10", "100", "1k", "1M"} {
		if !has(ts, want) {
			t.Errorf("no tick %q in %q", want, ts)
		}
	}
}

func TestBarsNegative(t *testing.T) {
	b := Bars{Groups: []string{"up", "down"}, Series: []BarSeries{{Name: "delta", Values: []float64{5, -3}}}}
	p, _, err := b.Plot()
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Min > -3 || p.Y.Max < 5 {
		t.Errorf("axis [%v, %v] does not hold both bars", p.Y.Min, p.Y.Max)
	}
	if ds := b.drawn(); len(ds) != 2 || ds[1].Value != -3 {
		t.Errorf("bars %+v", ds)
	}
}

func TestBarValueLabels(t *testing.T) {
	few := Bars{Groups: []string{"a", "b"}, Series: []BarSeries{{Name: "s", Values: []float64{1.5, 2.25}}}}
	if ts := texts(t, few); !has(ts, "1.5") || !has(ts, "2.25") {
		t.Errorf("no value labels with 2 bars: %q", ts)
	}
	many := Bars{}
	for g := range 7 {
		many.Groups = append(many.Groups, string(rune('a'+g)))
	}
	many.Series = []BarSeries{{Name: "s", Values: []float64{1.5, 2, 3, 4, 5, 6, 7}}, {Name: "t", Values: []float64{1, 2, 3, 4, 5, 6, 7}}}
	if ts := texts(t, many); has(ts, "1.5") {
		t.Errorf("value labels with 14 bars: %q", ts)
	}
}

// TestLegendOutsidePlot checks that every legend name is drawn right of the plot (of
// every tick label) and on the canvas; long names are shortened.
func TestLegendOutsidePlot(t *testing.T) {
	long := strings.Repeat("a very long series name ", 4)
	for name, l := range map[string]Line{
		"sample": sampleLine(),
		"long":   {XLabel: "x", Series: []Series{{Name: long, X: []float64{0, 1}, Y: []float64{0, 1}}, {Name: "b", X: []float64{0, 1}, Y: []float64{1, 0}}}},
	} {
		t.Run(name, func(t *testing.T) {
			names := map[string]bool{}
			for _, s := range l.Series {
				names[legendText(s.Name)] = true
			}
			legend, maxTick := 0, 0.0
			ts := parse(t, svg(t, l))
			for _, x := range ts {
				if _, err := strconv.ParseFloat(x.s, 64); err == nil {
					maxTick = math.Max(maxTick, x.x)
				}
			}
			for _, x := range ts {
				if !names[x.s] {
					continue
				}
				legend++
				if x.x <= maxTick {
					t.Errorf("legend %q at x=%v, within the plot (ticks reach %v)", x.s, x.x, maxTick)
				}
				if x.x+newLegend().TextStyle.Width(x.s).Points() > width.Points()+1 {
					t.Errorf("legend %q at x=%v runs off the canvas", x.s, x.x)
				}
			}
			if legend != len(l.Series) {
				t.Errorf("%d legend names, want %d", legend, len(l.Series))
			}
		})
	}
}

// TestWriteSamples writes example charts for looking at:
// PLOT_SAMPLES=/tmp go test -run WriteSamples ./bench/internal/plot/
func TestWriteSamples(t *testing.T) {
	dir := os.Getenv("PLOT_SAMPLES")
	if dir == "" {
		t.Skip("PLOT_SAMPLES not set")
	}
	for name, c := range map[string]interface{ SVG() ([]byte, error) }{"plot-sample-line.svg": sampleLine(), "plot-sample-bars.svg": sampleBars()} {
		if err := os.WriteFile(filepath.Join(dir, name), svg(t, c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
