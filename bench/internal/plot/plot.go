// Package plot draws the report's charts as SVG with gonum.org/v1/plot. It keeps the
// report's two chart kinds small: a line chart (Line) and a grouped bar chart (Bars).
// What a chart shows is computed apart from the drawing (Line.drawn, Bars.drawn), so
// that it can be checked without reading SVG.
package plot

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Series is one line of a line chart. X and Y have the same length.
type Series struct {
	Name string
	X, Y []float64
	Dash bool // draw dashed (used for reference lines such as an optimum)
}

// Line is a line chart with markers at the data points.
type Line struct {
	Title, XLabel, YLabel string
	LogX, LogY            bool
	Series                []Series
}

// BarSeries is one colour of a grouped bar chart: one value per group.
type BarSeries struct {
	Name   string
	Values []float64
}

// Bars is a grouped bar chart: for each group, one bar per series.
type Bars struct {
	Title, YLabel string
	LogY          bool
	Groups        []string
	Series        []BarSeries
}

// The canvas: 720 × 420 px, the legend on the right.
const (
	width  = 7.5 * vg.Inch
	height = 4.375 * vg.Inch
	// legendName is the longest legend name drawn whole (in runes).
	legendName = 40
	// maxLabelledBars: only this many bars get their value printed above them.
	maxLabelledBars = 12
)

// palette is a colour-blind-safe set (Okabe and Ito, then grey and wine), one colour per
// series.
var palette = []color.RGBA{
	{0x00, 0x72, 0xb2, 0xff}, {0xd5, 0x5e, 0x00, 0xff}, {0x00, 0x9e, 0x73, 0xff}, {0xcc, 0x79, 0xa7, 0xff},
	{0xe6, 0x9f, 0x00, 0xff}, {0x56, 0xb4, 0xe9, 0xff}, {0x00, 0x00, 0x00, 0xff}, {0xf0, 0xe4, 0x42, 0xff},
	{0x99, 0x99, 0x99, 0xff}, {0x88, 0x22, 0x55, 0xff},
}

func colour(i int) color.RGBA { return palette[i%len(palette)] }

var shapes = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}, draw.RingGlyph{}, draw.PlusGlyph{}}

// usable says whether v can be placed on an axis at all.
func usable(v float64, log bool) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!log || v > 0)
}

// drawnSeries is what a line chart draws for one series: its runs of usable points
// (the line is broken where a point could not be placed).
type drawnSeries struct {
	Name   string
	Dash   bool
	Colour color.RGBA
	Runs   []plotter.XYs
}

// drawn is what the chart draws, series by series. Points with a NaN or infinite
// coordinate, or a non-positive one on a log axis, are left out and break the line.
func (l Line) drawn() []drawnSeries {
	out := make([]drawnSeries, len(l.Series))
	for i, s := range l.Series {
		d := drawnSeries{Name: s.Name, Dash: s.Dash, Colour: colour(i)}
		var run plotter.XYs
		for j := range min(len(s.X), len(s.Y)) {
			if !usable(s.X[j], l.LogX) || !usable(s.Y[j], l.LogY) {
				if len(run) > 0 {
					d.Runs = append(d.Runs, run)
				}
				run = nil
				continue
			}
			run = append(run, plotter.XY{X: s.X[j], Y: s.Y[j]})
		}
		if len(run) > 0 {
			d.Runs = append(d.Runs, run)
		}
		out[i] = d
	}
	return out
}

// Plot builds the chart and its legend.
func (l Line) Plot() (*plot.Plot, plot.Legend, error) {
	p := newPlot(l.Title, l.XLabel, l.YLabel)
	scale(&p.X, l.LogX)
	scale(&p.Y, l.LogY)
	p.Add(grid())
	leg := newLegend()
	var xe, ye extent
	for i, d := range l.drawn() {
		style := draw.LineStyle{Color: d.Colour, Width: vg.Points(2)}
		if d.Dash {
			style.Dashes = []vg.Length{vg.Points(7), vg.Points(4)}
		}
		glyph := draw.GlyphStyle{Color: d.Colour, Radius: vg.Points(3), Shape: shapes[i%len(shapes)]}
		for _, run := range d.Runs {
			ln, pts, err := plotter.NewLinePoints(run)
			if err != nil {
				return nil, leg, fmt.Errorf("series %q: %w", d.Name, err)
			}
			ln.LineStyle, pts.GlyphStyle = style, glyph
			p.Add(ln, pts)
			for _, q := range run {
				xe.add(q.X)
				ye.add(q.Y)
			}
		}
		leg.Add(legendText(d.Name), &plotter.Line{LineStyle: style}, &plotter.Scatter{GlyphStyle: glyph})
	}
	lineRange(&p.X, xe, l.LogX)
	lineRange(&p.Y, ye, l.LogY)
	if !xe.ok {
		noData(p)
	}
	return p, leg, nil
}

// SVG draws the chart as a standalone SVG document.
func (l Line) SVG() ([]byte, error) { return render(l.Plot, len(l.Series)) }

// drawnBar is one bar: its group, its series and its value.
type drawnBar struct {
	Group, Series int
	Value         float64
}

// drawn is the bars the chart draws, group by group. Missing, NaN and infinite values
// (and non-positive ones on a log axis) get no bar.
func (b Bars) drawn() []drawnBar {
	var out []drawnBar
	for g := range b.groups() {
		for s, ser := range b.Series {
			if g < len(ser.Values) && usable(ser.Values[g], b.LogY) {
				out = append(out, drawnBar{Group: g, Series: s, Value: ser.Values[g]})
			}
		}
	}
	return out
}

func (b Bars) groups() int {
	n := len(b.Groups)
	for _, s := range b.Series {
		n = max(n, len(s.Values))
	}
	return n
}

// Plot builds the chart and its legend.
func (b Bars) Plot() (*plot.Plot, plot.Legend, error) {
	p := newPlot(b.Title, "", b.YLabel)
	scale(&p.Y, b.LogY)
	p.Add(grid())
	leg := newLegend()
	bars := b.drawn()
	var ye extent
	for _, d := range bars {
		ye.add(d.Value)
	}
	labelled := len(bars) > 0 && len(bars) <= maxLabelledBars
	lo, hi := barRange(ye, b.LogY, labelled)
	base := 0.0
	if b.LogY {
		base = lo
	}
	nG := b.groups()
	inner := 0.8
	if len(b.Series) == 1 {
		inner = 0.6
	}
	w := inner / float64(max(len(b.Series), 1))
	for s, ser := range b.Series {
		r := &barRects{colour: colour(s), base: base, width: w, groups: nG}
		for _, d := range bars {
			if d.Series == s {
				r.bars = append(r.bars, barRect{x: float64(d.Group) - inner/2 + (float64(s)+0.5)*w, value: d.Value})
			}
		}
		p.Add(r)
		leg.Add(legendText(ser.Name), r)
	}
	if labelled {
		var xys plotter.XYs
		var ls []string
		for _, d := range bars {
			xys = append(xys, plotter.XY{X: float64(d.Group) - inner/2 + (float64(d.Series)+0.5)*w, Y: d.Value})
			ls = append(ls, valueLabel(d.Value))
		}
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: ls})
		if err != nil {
			return nil, leg, err
		}
		for i := range lab.TextStyle {
			lab.TextStyle[i].XAlign, lab.TextStyle[i].YAlign = draw.XCenter, draw.YBottom
			lab.TextStyle[i].Font.Size = vg.Points(8)
			lab.Offset.Y = vg.Points(2)
		}
		p.Add(lab)
	}
	names := make([]string, nG)
	longest := 0
	for g := range names {
		if g < len(b.Groups) {
			names[g] = b.Groups[g]
		}
		longest = max(longest, len([]rune(names[g])))
	}
	if nG > 0 {
		p.NominalX(names...)
	}
	p.X.Min, p.X.Max = -0.5, float64(max(nG, 1))-0.5
	if longest*nG > 80 {
		// Names that do not fit under their group are slanted.
		p.X.Tick.Label.Rotation = math.Pi / 6
		p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	}
	p.Y.Min, p.Y.Max = lo, hi
	if !ye.ok {
		noData(p)
	}
	return p, leg, nil
}

// SVG draws the chart as a standalone SVG document.
func (b Bars) SVG() ([]byte, error) { return render(b.Plot, len(b.Series)) }

// barRects draws one series' bars from base to their value: gonum's own bar chart
// grows from zero, which a log axis cannot place.
type barRects struct {
	colour color.RGBA
	base   float64
	width  float64 // in groups
	groups int
	bars   []barRect
}

type barRect struct{ x, value float64 }

func (r *barRects) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, b := range r.bars {
		x0, x1 := trX(b.x-r.width/2), trX(b.x+r.width/2)
		y0, y1 := trY(r.base), trY(b.value)
		pts := c.ClipPolygonY([]vg.Point{{X: x0, Y: y0}, {X: x0, Y: y1}, {X: x1, Y: y1}, {X: x1, Y: y0}})
		c.FillPolygon(r.colour, pts)
	}
}

func (r *barRects) DataRange() (xmin, xmax, ymin, ymax float64) {
	ymin, ymax = r.base, r.base
	for _, b := range r.bars {
		ymin, ymax = math.Min(ymin, b.value), math.Max(ymax, b.value)
	}
	return -0.5, float64(r.groups) - 0.5, ymin, ymax
}

// Thumbnail draws the legend's swatch.
func (r *barRects) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}}
	c.FillPolygon(r.colour, c.ClipPolygonY(pts))
}

func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xlabel, ylabel
	p.Title.TextStyle.Font = font.From(sans, 13)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 11)
		a.Tick.Label.Font = font.From(sans, 10)
		a.Padding = 0
	}
	return p
}

func newLegend() plot.Legend {
	l := plot.NewLegend()
	l.TextStyle.Font = font.From(sans, 10)
	l.Top, l.Left = true, true
	l.Padding = vg.Points(3)
	return l
}

// sans is the charts' font: one of the fonts gonum ships, so no system font is needed.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

func grid() *plotter.Grid {
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{Y: 0xe8}
	g.Horizontal.Color = color.Gray{Y: 0xe8}
	return g
}

// scale makes a an axis with logarithmic or linear scale and short tick labels.
func scale(a *plot.Axis, log bool) {
	if log {
		a.Scale = plot.LogScale{}
		a.Tick.Marker = shortTicks{plot.TickerFunc(logTicks)}
		return
	}
	a.Tick.Marker = shortTicks{plot.DefaultTicks{}}
}

// logTicks marks every power of ten in [lo, hi], labelled, and 2..9 × 10^k between,
// unlabelled. (gonum's LogTicks truncates log10 and can miss the first decade.)
func logTicks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	first, last := int(math.Floor(math.Log10(lo)+1e-9)), int(math.Ceil(math.Log10(hi)-1e-9))
	for k := first; k <= last; k++ {
		d := math.Pow10(k)
		for m := 1; m < 10; m++ {
			v := d * float64(m)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 {
				t.Label = "x" // relabelled by shortTicks
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// shortTicks relabels another ticker's labelled ticks with short numbers (1k, 10M).
type shortTicks struct{ plot.Ticker }

func (s shortTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := s.Ticker.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label == "" {
			continue
		}
		if k := math.Log10(ts[i].Value); ts[i].Value > 0 && math.Abs(k-math.Round(k)) < 1e-9 {
			ts[i].Label = logLabel(int(math.Round(k)))
		} else {
			ts[i].Label = valueLabel(ts[i].Value)
		}
	}
	return ts
}

// extent is the range of the usable values seen.
type extent struct {
	min, max float64
	ok       bool
}

func (e *extent) add(v float64) {
	if !e.ok {
		e.min, e.max, e.ok = v, v, true
		return
	}
	e.min, e.max = math.Min(e.min, v), math.Max(e.max, v)
}

// lineRange sets a line chart axis to the data plus a little padding, which is not
// allowed to cross zero on a linear axis; a log axis ends on whole decades.
func lineRange(a *plot.Axis, e extent, log bool) {
	switch {
	case !e.ok && log:
		a.Min, a.Max = 1, 10
	case !e.ok:
		a.Min, a.Max = 0, 1
	case log:
		lo, hi := math.Floor(math.Log10(e.min)), math.Ceil(math.Log10(e.max))
		if lo == hi {
			lo, hi = lo-1, hi+1
		}
		a.Min, a.Max = math.Pow(10, lo), math.Pow(10, hi)
	default:
		lo, hi := e.min, e.max
		if lo == hi {
			d := math.Max(math.Abs(lo)*0.1, 1)
			lo, hi = lo-d, hi+d
		}
		pad := 0.05 * (hi - lo)
		nlo, nhi := lo-pad, hi+pad
		if e.min >= 0 && nlo < 0 {
			nlo = 0
		}
		if e.max <= 0 && nhi > 0 {
			nhi = 0
		}
		a.Min, a.Max = nlo, nhi
	}
}

// barRange is a bar chart's value axis. Linear bars grow from zero; log bars from a
// whole decade below the smallest value so it stays visible. With value labels the top
// gets headroom for them.
func barRange(e extent, log, labelled bool) (lo, hi float64) {
	if !e.ok {
		if log {
			return 1, 10
		}
		return 0, 1
	}
	head := 0.04
	if labelled {
		head = 0.08
	}
	if log {
		lmin, lmax := math.Log10(e.min), math.Log10(e.max)
		l := math.Floor(lmin - 0.1*math.Max(lmax-lmin, 1))
		h := math.Ceil(lmax)
		h = math.Max(h, lmax+(head+0.02)*(h-l))
		return math.Pow(10, l), math.Pow(10, h)
	}
	lo, hi = math.Min(0, e.min), math.Max(0, e.max)
	if lo == hi {
		hi = 1
	}
	span := hi - lo
	if hi > 0 {
		hi += head * span
	}
	if lo < 0 {
		lo -= head * span
	}
	return lo, hi
}

// noData says so in the title of a chart with nothing to draw.
func noData(p *plot.Plot) {
	if p.Title.Text == "" {
		p.Title.Text = "no data"
		return
	}
	p.Title.Text += " (no data)"
}

func legendText(s string) string {
	r := []rune(s)
	if len(r) <= legendName {
		return s
	}
	return string(r[:legendName-1]) + "…"
}

// render builds a chart and draws it with its legend (of entries names) to the right.
func render(build func() (*plot.Plot, plot.Legend, error), entries int) ([]byte, error) {
	p, leg, err := build()
	if err != nil {
		return nil, err
	}
	c := vgsvg.New(width, height)
	dc := draw.New(c)
	legW := vg.Length(0)
	if entries > 0 {
		legW = leg.Rectangle(dc).Size().X + vg.Points(12)
	}
	p.Draw(draw.Crop(dc, 0, -legW, 0, 0))
	if legW > 0 {
		lc := draw.Crop(dc, width-legW+vg.Points(6), 0, 0, -vg.Points(30))
		leg.Draw(lc)
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	return buf.Bytes(), nil
}

// valueLabel prints v short: 1.5, 1200, 910k, 3.2M, 0.01.
func valueLabel(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e4:
		for _, p := range siPrefixes {
			if a >= p.factor {
				return sig3(v/p.factor) + p.suffix
			}
		}
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return sig3(v)
}

var siPrefixes = []struct {
	factor float64
	suffix string
}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}}

// sig3 prints v with three significant digits and no trailing zeros; tiny values in
// exponent form (1e-5).
func sig3(v float64) string {
	a := math.Abs(v)
	if a == 0 {
		return "0"
	}
	if a < 1e-4 {
		return strings.Replace(strconv.FormatFloat(v, 'g', 2, 64), "e-0", "e-", 1)
	}
	dec := max(0, 2-int(math.Floor(math.Log10(a))))
	s := strconv.FormatFloat(v, 'f', dec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// logLabel prints the power of ten 10^k short: 0.01, 1, 1k, 10M, 1e-5.
func logLabel(k int) string {
	switch {
	case k >= 0 && k < 15:
		v := math.Pow10(k)
		for _, p := range siPrefixes {
			if v >= p.factor {
				return "1" + strings.Repeat("0", k-int(math.Round(math.Log10(p.factor)))) + p.suffix
			}
		}
		return "1" + strings.Repeat("0", k)
	case k < 0 && k >= -4:
		return "0." + strings.Repeat("0", -k-1) + "1"
	default:
		return "1e" + strconv.Itoa(k)
	}
}
