package plot

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const svgNS = "http://www.w3.org/2000/svg"

// elem is a parsed element with its attributes and direct text.
type elem struct {
	name string
	attr map[string]string
	text string
}

// parse checks that b is a well-formed SVG document and flattens it.
func parse(t *testing.T, b []byte) []elem {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	var out []elem
	var stack []int
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
			if tok.Name.Space != svgNS {
				t.Fatalf("element %s in namespace %q, want %q", tok.Name.Local, tok.Name.Space, svgNS)
			}
			e := elem{name: tok.Name.Local, attr: map[string]string{}}
			for _, a := range tok.Attr {
				e.attr[a.Name.Local] = a.Value
			}
			out = append(out, e)
			stack = append(stack, len(out)-1)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				out[stack[len(stack)-1]].text += string(tok)
			}
		}
	}
	if len(out) == 0 || out[0].name != "svg" {
		t.Fatalf("root is not <svg>")
	}
	root := out[0].attr
	if root["viewBox"] != "0 0 720 420" || root["font-family"] != "sans-serif" || root["version"] != "1.1" {
		t.Errorf("root attributes = %v", root)
	}
	for _, e := range out {
		for k, v := range e.attr {
			if strings.Contains(v, "NaN") || strings.Contains(v, "Inf") {
				t.Errorf("<%s %s=%q>: non-finite number", e.name, k, v)
			}
		}
	}
	return out
}

func count(es []elem, name string) int {
	n := 0
	for _, e := range es {
		if e.name == name {
			n++
		}
	}
	return n
}

func texts(es []elem) []string {
	var s []string
	for _, e := range es {
		if e.name == "text" {
			s = append(s, e.text)
		}
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

// points reads the vertices of a path written as "Mx,yLx,y...".
func points(t *testing.T, d string) [][2]float64 {
	t.Helper()
	var pts [][2]float64
	for _, f := range regexp.MustCompile(`[ML]`).Split(d, -1) {
		if f == "" {
			continue
		}
		xy := strings.Split(f, ",")
		if len(xy) != 2 {
			t.Fatalf("bad path segment %q in %q", f, d)
		}
		x, err1 := strconv.ParseFloat(xy[0], 64)
		y, err2 := strconv.ParseFloat(xy[1], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad path segment %q", f)
		}
		pts = append(pts, [2]float64{x, y})
	}
	return pts
}

func paths(es []elem) []elem {
	var ps []elem
	for _, e := range es {
		if e.name == "path" {
			ps = append(ps, e)
		}
	}
	return ps
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
	es := parse(t, l.SVG())
	ps := paths(es)
	if len(ps) != len(l.Series) {
		t.Fatalf("%d paths for %d series", len(ps), len(l.Series))
	}
	dashed := 0
	for _, p := range ps {
		if p.attr["stroke-dasharray"] != "" {
			dashed++
		}
	}
	if dashed != 1 {
		t.Errorf("%d dashed paths, want 1", dashed)
	}
	if ps[0].attr["stroke"] == ps[1].attr["stroke"] {
		t.Errorf("series 0 and 1 share colour %s", ps[0].attr["stroke"])
	}
	ts := texts(es)
	for _, want := range []string{"Staleness vs fleet size", "mirrors", "p99 staleness (s)", "round-robin", "optimum", "10", "100", "1k", "10k"} {
		if !has(ts, want) {
			t.Errorf("no text %q in %q", want, ts)
		}
	}
}

// seriesPoints returns the pixel positions of series i's points.
func seriesPoints(t *testing.T, svg []byte, i int) [][2]float64 {
	t.Helper()
	ps := paths(parse(t, svg))
	if len(ps) <= i {
		t.Fatalf("only %d paths", len(ps))
	}
	return points(t, ps[i].attr["d"])
}

func TestLineMonotone(t *testing.T) {
	xs := []float64{1, 2, 5, 10, 50, 200}
	ys := []float64{-3, 0.5, 2, 7, 40, 900}
	for _, tc := range []struct {
		name       string
		logX, logY bool
	}{{"linear", false, false}, {"logx", true, false}, {"logy", false, true}, {"loglog", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			l := Line{LogX: tc.logX, LogY: tc.logY, Series: []Series{{Name: "a", X: xs, Y: ys}}}
			pts := seriesPoints(t, l.SVG(), 0)
			want := len(xs)
			if tc.logY {
				want-- // -3 is skipped
			}
			if len(pts) != want {
				t.Fatalf("%d points, want %d", len(pts), want)
			}
			for j := 1; j < len(pts); j++ {
				if pts[j][0] <= pts[j-1][0] {
					t.Errorf("x pixel %v not right of %v", pts[j][0], pts[j-1][0])
				}
				if pts[j][1] >= pts[j-1][1] {
					t.Errorf("larger value drawn at y=%v, not above y=%v", pts[j][1], pts[j-1][1])
				}
			}
			for _, p := range pts {
				if p[0] < 0 || p[0] > width || p[1] < 0 || p[1] > height {
					t.Errorf("point %v off the canvas", p)
				}
			}
		})
	}
}

func TestLogTicksArePowersOfTen(t *testing.T) {
	for _, r := range [][2]float64{{0.013, 250}, {3, 4}, {1, 1e12}, {1e-6, 1e-2}, {100, 100}} {
		e := extent{min: r[0], max: r[1], ok: true}
		for _, horizontal := range []bool{false, true} {
			a := lineAxis(e, true, 500, horizontal)
			if len(a.ticks) < 2 {
				t.Errorf("%v: %d ticks", r, len(a.ticks))
			}
			if a.frac(r[0]) < 0 || a.frac(r[1]) > 1 {
				t.Errorf("%v: domain [%v, %v] does not cover the data", r, a.lo, a.hi)
			}
			for i, k := range a.ticks {
				if k != math.Trunc(k) {
					t.Errorf("%v: tick 10^%v is not a power of ten", r, k)
				}
				v, err := strconv.ParseFloat(strings.NewReplacer("k", "e3", "M", "e6", "G", "e9", "T", "e12").Replace(a.labels[i]), 64)
				if err != nil || math.Abs(math.Log10(v)-k) > 1e-9 {
					t.Errorf("%v: tick 10^%v labelled %q", r, k, a.labels[i])
				}
			}
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

func TestLinearTicksAreNice(t *testing.T) {
	for _, r := range [][2]float64{{0, 97}, {-3.2, 7.9}, {0.001, 0.0047}, {1000, 1000}, {0, 0}, {12000, 987654}, {-5, -1}} {
		a := linearAxis(r[0], r[1], 330, false)
		if a.lo > r[0] || a.hi < r[1] {
			t.Errorf("%v: axis [%v, %v] does not cover the data", r, a.lo, a.hi)
		}
		if len(a.ticks) < 3 || len(a.ticks) > 12 {
			t.Errorf("%v: %d ticks", r, len(a.ticks))
		}
		step := a.ticks[1] - a.ticks[0]
		m := step / math.Pow(10, math.Floor(math.Log10(step)+1e-9))
		if math.Abs(m-1) > 1e-6 && math.Abs(m-2) > 1e-6 && math.Abs(m-5) > 1e-6 {
			t.Errorf("%v: step %v is not 1, 2 or 5 × 10^k", r, step)
		}
		seen := map[string]bool{}
		for _, l := range a.labels {
			if seen[l] {
				t.Errorf("%v: label %q repeats in %q", r, l, a.labels)
			}
			seen[l] = true
		}
	}
	if got := linearAxis(0, 1, 330, false).labels; !has(got, "0.2") || !has(got, "0") || !has(got, "1") {
		t.Errorf("labels for [0, 1] = %q", got)
	}
	if got := linearAxis(0, 50000, 330, false).labels; !has(got, "50k") {
		t.Errorf("labels for [0, 50000] = %q", got)
	}
}

func TestLinePadsRange(t *testing.T) {
	l := Line{Series: []Series{{X: []float64{0, 10}, Y: []float64{1, 100}}}}
	es := parse(t, l.SVG())
	pts := points(t, paths(es)[0].attr["d"])
	// The y axis must not start at 1 exactly (no padding) nor below 0.
	ts := texts(es)
	if !has(ts, "0") {
		t.Errorf("y axis does not reach 0: %q", ts)
	}
	if has(ts, "-20") || has(ts, "-10") {
		t.Errorf("padding crossed zero: %q", ts)
	}
	if pts[1][1] <= 14 {
		t.Errorf("top point at the canvas edge: %v", pts[1])
	}
}

func TestEscaping(t *testing.T) {
	name := `a<b & "c" 'd'>`
	l := Line{Title: name, XLabel: name, YLabel: name, Series: []Series{{Name: name, X: []float64{1, 2}, Y: []float64{1, 2}}}}
	b := Bars{Title: name, YLabel: name, Groups: []string{name}, Series: []BarSeries{{Name: name, Values: []float64{3}}}}
	for _, svg := range [][]byte{l.SVG(), b.SVG()} {
		es := parse(t, svg)
		n := 0
		for _, e := range es {
			if strings.Contains(e.text, name) {
				n++
			}
		}
		if n < 3 {
			t.Errorf("name survives escaping %d times, want at least 3:\n%s", n, svg)
		}
		if bytes.Contains(svg, []byte("a<b")) {
			t.Errorf("unescaped < in output")
		}
	}
}

func TestDeterministic(t *testing.T) {
	l, b := sampleLine(), sampleBars()
	if !bytes.Equal(l.SVG(), l.SVG()) {
		t.Error("Line.SVG differs between calls")
	}
	if !bytes.Equal(b.SVG(), b.SVG()) {
		t.Error("Bars.SVG differs between calls")
	}
}

func TestLimitedPrecision(t *testing.T) {
	l := Line{Series: []Series{{X: []float64{1.0 / 3, 2.0 / 3, 1}, Y: []float64{math.Pi, math.E, math.Sqrt2}}}}
	for _, svg := range [][]byte{l.SVG(), sampleBars().SVG()} {
		if m := regexp.MustCompile(`\d\.\d{3,}`).Find(svg); m != nil {
			t.Errorf("number with more than two decimals: %s", m)
		}
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
		parse(t, l.SVG())
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
		parse(t, b.SVG())
	}
}

func TestLineGaps(t *testing.T) {
	l := Line{LogY: true, Series: []Series{{Name: "g", X: []float64{1, 2, 3, 4, 5}, Y: []float64{1, 2, math.NaN(), 0, 5}}}}
	d := paths(parse(t, l.SVG()))[0].attr["d"]
	if strings.Count(d, "M") != 2 || len(points(t, d)) != 3 {
		t.Errorf("path %q: want the line broken at the skipped points", d)
	}
}

func bars(es []elem) []elem {
	var r []elem
	for _, e := range es {
		if e.name == "rect" && e.attr["class"] == "bar" {
			r = append(r, e)
		}
	}
	return r
}

func attrF(t *testing.T, e elem, k string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(e.attr[k], 64)
	if err != nil {
		t.Fatalf("<%s %s=%q>: %v", e.name, k, e.attr[k], err)
	}
	return v
}

func TestBars(t *testing.T) {
	b := sampleBars()
	es := parse(t, b.SVG())
	rs := bars(es)
	if len(rs) != 6 {
		t.Fatalf("%d bars, want 6", len(rs))
	}
	// Bars come group by group; within the first series values grow.
	for g := 1; g < 3; g++ {
		if attrF(t, rs[2*g], "height") <= attrF(t, rs[2*(g-1)], "height") {
			t.Errorf("bar for a larger value is not taller")
		}
		if attrF(t, rs[2*g], "x") <= attrF(t, rs[2*(g-1)], "x") {
			t.Errorf("groups not left to right")
		}
	}
	if rs[0].attr["fill"] == rs[1].attr["fill"] {
		t.Errorf("both series have colour %s", rs[0].attr["fill"])
	}
	ts := texts(es)
	for _, want := range []string{"small", "large", "full fetch", "negotiated", "910k", "1200", "0"} {
		if !has(ts, want) {
			t.Errorf("no text %q in %q", want, ts)
		}
	}
}

func TestBarsLog(t *testing.T) {
	b := Bars{LogY: true, Groups: []string{"a", "b", "c"}, Series: []BarSeries{{Name: "s", Values: []float64{10, 0, 1e6}}}}
	es := parse(t, b.SVG())
	rs := bars(es)
	if len(rs) != 2 {
		t.Fatalf("%d bars, want 2 (zero skipped)", len(rs))
	}
	if attrF(t, rs[0], "height") <= 0 || attrF(t, rs[1], "height") <= attrF(t, rs[0], "height") {
		t.Errorf("log bar heights %v, %v", rs[0].attr["height"], rs[1].attr["height"])
	}
	ts := texts(es)
	for _, want := range []string{"1", "10", "100", "1k", "1M"} {
		if !has(ts, want) {
			t.Errorf("no tick %q in %q", want, ts)
		}
	}
}

func TestBarsNegative(t *testing.T) {
	b := Bars{Groups: []string{"up", "down"}, Series: []BarSeries{{Name: "delta", Values: []float64{5, -3}}}}
	rs := bars(parse(t, b.SVG()))
	if len(rs) != 2 {
		t.Fatalf("%d bars", len(rs))
	}
	// Both start at the zero line: the first ends there, the second begins there.
	up, down := rs[0], rs[1]
	if math.Abs(attrF(t, up, "y")+attrF(t, up, "height")-attrF(t, down, "y")) > 0.02 {
		t.Errorf("bars do not meet at zero: %v %v", up.attr, down.attr)
	}
}

func TestBarValueLabels(t *testing.T) {
	few := Bars{Groups: []string{"a", "b"}, Series: []BarSeries{{Name: "s", Values: []float64{1.5, 2.25}}}}
	if ts := texts(parse(t, few.SVG())); !has(ts, "1.5") || !has(ts, "2.25") {
		t.Errorf("no value labels with 2 bars: %q", ts)
	}
	many := Bars{}
	for g := range 7 {
		many.Groups = append(many.Groups, string(rune('a'+g)))
	}
	many.Series = []BarSeries{{Name: "s", Values: []float64{1.5, 2, 3, 4, 5, 6, 7}}, {Name: "t", Values: []float64{1, 2, 3, 4, 5, 6, 7}}}
	if ts := texts(parse(t, many.SVG())); has(ts, "1.5") {
		t.Errorf("value labels with 14 bars: %q", ts)
	}
}

// TestLegendOutsidePlot checks that every legend name is drawn right of or below all
// data points.
func TestLegendOutsidePlot(t *testing.T) {
	long := strings.Repeat("a very long series name ", 4)
	for _, tc := range []struct {
		name  string
		l     Line
		below bool
	}{
		{"right", sampleLine(), false},
		{"below", Line{XLabel: "x", Series: []Series{{Name: long, X: []float64{0, 1}, Y: []float64{0, 1}}, {Name: "b", X: []float64{0, 1}, Y: []float64{1, 0}}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svg := tc.l.SVG()
			es := parse(t, svg)
			maxX, maxY := 0.0, 0.0
			for _, p := range paths(es) {
				for _, q := range points(t, p.attr["d"]) {
					maxX, maxY = math.Max(maxX, q[0]), math.Max(maxY, q[1])
				}
			}
			for _, e := range es {
				if e.name != "text" || !strings.HasPrefix(long, strings.TrimSuffix(e.text, "…")) && !has([]string{"b", "optimum", "round-robin"}, e.text) {
					continue
				}
				x, y := attrF(t, e, "x"), attrF(t, e, "y")
				if tc.below && y <= maxY+30 || !tc.below && x <= maxX {
					t.Errorf("legend text %q at (%v, %v) overlaps data ending at (%v, %v)", e.text, x, y, maxX, maxY)
				}
				if x+textWidth(e.text, legendFont) > width || y > height {
					t.Errorf("legend text %q at (%v, %v) runs off the canvas", e.text, x, y)
				}
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
	for name, svg := range map[string][]byte{"plot-sample-line.svg": sampleLine().SVG(), "plot-sample-bars.svg": sampleBars().SVG()} {
		if err := os.WriteFile(filepath.Join(dir, name), svg, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
