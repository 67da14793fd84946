// Package plot draws the report's charts as self-contained SVG, with no dependencies.
package plot

import (
	"math"
	"strings"
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

// Vertical layout, in px from the canvas top or from the plot's bottom edge.
const (
	titleSpace   = 40.0 // plot top when there is a title
	noTitleSpace = 14.0
	tickLabelY   = 18.0 // x tick label baseline below the plot
	axisLabelY   = 38.0 // x axis title baseline below the plot
)

// SVG draws the chart as a standalone SVG document. Points with a NaN or
// infinite coordinate, or a non-positive one on a log axis, are left out and
// the series' line is broken there. Each series is one <path>.
func (l Line) SVG() []byte {
	var xe, ye extent
	items := make([]legendItem, len(l.Series))
	for i, s := range l.Series {
		items[i] = legendItem{name: s.Name, colour: colour(i), shape: i % nShapes, dash: s.Dash}
		for j := range min(len(s.X), len(s.Y)) {
			if usable(s.X[j], l.LogX) && usable(s.Y[j], l.LogY) {
				xe.add(s.X[j])
				ye.add(s.Y[j])
			}
		}
	}

	p := plotArea{top: noTitleSpace}
	if l.Title != "" {
		p.top = titleSpace
	}
	below := tickLabelY + 10
	if l.XLabel != "" {
		below = axisLabelY + 10
	}
	lg := planLegend(items, (height-p.top-below)/legendRow)
	p.bottom = height - below - lg.belowSpace()
	p.right = width - lg.rightSpace()
	ya := lineAxis(ye, l.LogY, p.bottom-p.top, false)
	p.left = yAxisSpace(ya, l.YLabel != "")
	xa := lineAxis(xe, l.LogX, p.right-p.left, true)

	c := newCanvas(l.Title)
	drawYAxis(c, p, ya, l.YLabel)
	for _, t := range xa.ticks {
		c.line(p.x(xa.tickFrac(t)), p.top, p.x(xa.tickFrac(t)), p.bottom, gridColour, 1)
	}
	for _, t := range xa.minor {
		x := p.x(xa.tickFrac(t))
		c.line(x, p.bottom, x, p.bottom+3, inkColour, 1)
	}
	for i, t := range xa.ticks {
		x := p.x(xa.tickFrac(t))
		c.line(x, p.bottom, x, p.bottom+5, inkColour, 1)
		c.text(x, p.bottom+tickLabelY, xa.labels[i], `text-anchor="middle" font-size="11" fill="`+inkColour+`"`)
	}
	c.line(p.left, p.top, p.left, p.bottom, inkColour, 1)
	c.line(p.left, p.bottom, p.right, p.bottom, inkColour, 1)
	if l.XLabel != "" {
		c.text((p.left+p.right)/2, p.bottom+axisLabelY, truncate(l.XLabel, 12, p.right-p.left), `text-anchor="middle"`)
	}
	if !xe.ok {
		noData(c, p)
	}

	type pt struct{ x, y float64 }
	pts := make([][]pt, len(l.Series)) // nil marks a gap
	for i, s := range l.Series {
		var d strings.Builder
		move := true
		for j := range min(len(s.X), len(s.Y)) {
			if !usable(s.X[j], l.LogX) || !usable(s.Y[j], l.LogY) {
				move = true
				continue
			}
			x, y := p.x(xa.frac(s.X[j])), p.y(ya.frac(s.Y[j]))
			pts[i] = append(pts[i], pt{x, y})
			if move {
				d.WriteByte('M')
			} else {
				d.WriteByte('L')
			}
			move = false
			d.WriteString(num(x) + "," + num(y))
		}
		if d.Len() == 0 {
			continue
		}
		dash := ""
		if s.Dash {
			dash = ` stroke-dasharray="7 4"`
		}
		c.printf(`<path d="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s/>`+"\n", d.String(), colour(i), dash)
	}
	// Markers go over all lines so that no line hides another series' points.
	for i, ps := range pts {
		for _, q := range ps {
			c.marker(i%nShapes, q.x, q.y, colour(i))
		}
	}
	lg.draw(c, p)
	return c.bytes()
}

// lineAxis scales a line chart axis: the data plus a little padding, which is
// not allowed to cross zero on a linear axis or to hide data on a log one.
func lineAxis(e extent, log bool, length float64, horizontal bool) axis {
	if !e.ok {
		if log {
			return logAxis(0, 1, length, horizontal)
		}
		return linearAxis(0, 1, length, horizontal)
	}
	if log {
		lmin, lmax := math.Log10(e.min), math.Log10(e.max)
		lo, hi := math.Floor(lmin), math.Ceil(lmax)
		if lo == hi {
			lo, hi = lo-1, hi+1
		}
		pad := 0.04 * (hi - lo)
		lo = math.Min(lo, lmin-pad)
		hi = math.Max(hi, lmax+pad)
		return logAxis(lo, hi, length, horizontal)
	}
	lo, hi := e.min, e.max
	pad := 0.05 * (hi - lo)
	nlo, nhi := lo-pad, hi+pad
	if lo >= 0 && nlo < 0 {
		nlo = 0
	}
	if hi <= 0 && nhi > 0 {
		nhi = 0
	}
	return linearAxis(nlo, nhi, length, horizontal)
}

// Bar labels: only this many bars get their value printed above them.
const maxLabelledBars = 12

// SVG draws the chart as a standalone SVG document. Group i shows
// Series[s].Values[i] for each series s; missing, NaN and infinite values
// (and non-positive ones on a log axis) get no bar. Each bar is a
// <rect class="bar">.
func (b Bars) SVG() []byte {
	nG := len(b.Groups)
	for _, s := range b.Series {
		nG = max(nG, len(s.Values))
	}
	var ye extent
	bars := 0
	items := make([]legendItem, len(b.Series))
	for i, s := range b.Series {
		items[i] = legendItem{name: s.Name, colour: colour(i), bar: true}
		for _, v := range s.Values {
			if usable(v, b.LogY) {
				ye.add(v)
				bars++
			}
		}
	}

	p := plotArea{top: noTitleSpace}
	if b.Title != "" {
		p.top = titleSpace
	}
	lg := planLegend(items, (height-p.top-60)/legendRow)
	p.right = width - lg.rightSpace()

	// Group names that do not fit under their group are slanted; the room
	// they take decides the bottom margin, so estimate the plot width first.
	const slant = 0.5 // sin 30°
	estLeft := 60.0
	groupW := (p.right - estLeft) / float64(max(nG, 1))
	names := make([]string, nG)
	slanted := false
	for g := range nG {
		if g < len(b.Groups) {
			names[g] = b.Groups[g]
		}
		if textWidth(names[g], tickFont) > groupW-6 {
			slanted = true
		}
	}
	below := tickLabelY + 10
	if slanted {
		longest := 0.0
		for g := range names {
			// Slanted text runs left; keep the first groups' names on the canvas.
			room := (40+(float64(g)+0.5)*groupW)/0.87 - 4
			names[g] = truncate(names[g], tickFont, math.Min(150, room))
			longest = math.Max(longest, textWidth(names[g], tickFont))
		}
		below = 14 + longest*slant + 14
	}
	p.bottom = height - below - lg.belowSpace()

	labelled := bars > 0 && bars <= maxLabelledBars
	ya := barAxis(ye, b.LogY, labelled, p.bottom-p.top)
	p.left = yAxisSpace(ya, b.YLabel != "")
	groupW = (p.right - p.left) / float64(max(nG, 1))

	c := newCanvas(b.Title)
	drawYAxis(c, p, ya, b.YLabel)
	if !ye.ok {
		noData(c, p)
	}

	inner := groupW * 0.8
	if len(b.Series) == 1 {
		inner = groupW * 0.6
	}
	barW := inner / float64(max(len(b.Series), 1))
	gap := math.Min(2, barW*0.15)
	base := p.bottom
	if !ya.log {
		base = p.y(ya.frac(0))
	}
	type label struct {
		x, y float64
		s    string
	}
	var labels []label
	for g := range nG {
		x0 := p.left + float64(g)*groupW + (groupW-inner)/2
		for s, ser := range b.Series {
			if g >= len(ser.Values) || !usable(ser.Values[g], b.LogY) {
				continue
			}
			v := ser.Values[g]
			x, y := x0+float64(s)*barW+gap/2, p.y(ya.frac(v))
			top, h := math.Min(y, base), math.Abs(y-base)
			c.printf(`<rect class="bar" x="%s" y="%s" width="%s" height="%s" fill="%s"/>`+"\n",
				num(x), num(top), num(barW-gap), num(h), colour(s))
			ly := y - 4
			if y > base {
				ly = y + 12
			}
			labels = append(labels, label{x + (barW-gap)/2, ly, valueLabel(v)})
		}
	}
	for _, l := range labels {
		// Labels wider than a bar and its gap would run into the neighbours.
		if textWidth(l.s, 10) > barW+4 {
			labelled = false
		}
	}
	if labelled {
		for _, l := range labels {
			c.text(l.x, l.y, l.s, `text-anchor="middle" font-size="10" fill="`+inkColour+`"`)
		}
	}
	c.line(p.left, p.top, p.left, p.bottom, inkColour, 1)
	c.line(p.left, p.bottom, p.right, p.bottom, inkColour, 1)
	if base < p.bottom {
		c.line(p.left, base, p.right, base, inkColour, 1)
	}
	for g, name := range names {
		cx := p.left + (float64(g)+0.5)*groupW
		if slanted {
			c.printf(`<text transform="translate(%s,%s) rotate(-30)" text-anchor="end" font-size="11" fill="%s">%s</text>`+"\n",
				num(cx+4), num(p.bottom+14), inkColour, esc(name))
		} else {
			c.text(cx, p.bottom+tickLabelY, name, `text-anchor="middle" font-size="11" fill="`+inkColour+`"`)
		}
	}
	lg.draw(c, p)
	return c.bytes()
}

// barAxis scales a bar chart's value axis. Linear bars grow from zero; log
// bars from a whole decade below the smallest value so it stays visible. With
// value labels the top gets headroom for them.
func barAxis(e extent, log, labelled bool, length float64) axis {
	if !e.ok {
		if log {
			return logAxis(0, 1, length, false)
		}
		return linearAxis(0, 1, length, false)
	}
	head := 0.0
	if labelled {
		head = 0.08
	}
	if log {
		lmin, lmax := math.Log10(e.min), math.Log10(e.max)
		lo := math.Floor(lmin - 0.1*math.Max(lmax-lmin, 1))
		hi := math.Ceil(lmax)
		hi = math.Max(hi, lmax+(head+0.02)*(hi-lo))
		return logAxis(lo, hi, length, false)
	}
	lo, hi := math.Min(0, e.min), math.Max(0, e.max)
	span := hi - lo
	if hi > 0 {
		hi += head * span
	}
	if lo < 0 {
		lo -= head * span
	}
	return linearAxis(lo, hi, length, false)
}
