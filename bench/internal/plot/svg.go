package plot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Canvas size. Everything is laid out in these units; the viewBox lets
// viewers scale the image.
const (
	width  = 720.0
	height = 420.0
)

// Okabe–Ito colours, ordered so that the first few stay apart for every kind
// of colour blindness and the pale yellow comes last.
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"}

func colour(i int) string { return palette[i%len(palette)] }

// nShapes marker shapes; it is prime to len(palette) apart from 2, so the
// first 24 series differ in colour or shape.
const nShapes = 6

const (
	inkColour  = "#333333"
	gridColour = "#e3e3e3"
	mutedInk   = "#666666"
)

// num prints a coordinate with at most two decimals so that output is stable
// and small.
func num(v float64) string {
	v = math.Round(v*100) / 100
	if v == 0 {
		v = 0 // no "-0"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

// textWidth estimates how wide s is at size px. Nothing can measure text
// here, so this errs wide (DejaVu Sans, the widest common sans-serif).
func textWidth(s string, size float64) float64 {
	w := 0.0
	for _, r := range s {
		switch {
		case strings.ContainsRune("iljIft.,:;'|!()[] ", r):
			w += 0.34
		case strings.ContainsRune("mwMW@%", r):
			w += 0.92
		case r >= 'A' && r <= 'Z':
			w += 0.72
		case r >= '0' && r <= '9':
			w += 0.64
		case r < 0x80:
			w += 0.6
		case r >= 0x1100:
			w += 1.0 // CJK and other wide scripts
		default:
			w += 0.7
		}
	}
	return w * size
}

// truncate shortens s with an ellipsis so that it fits in maxW px.
func truncate(s string, size, maxW float64) string {
	if textWidth(s, size) <= maxW {
		return s
	}
	r := []rune(s)
	for len(r) > 0 && textWidth(string(r)+"…", size) > maxW {
		r = r[:len(r)-1]
	}
	return strings.TrimRight(string(r), " ") + "…"
}

type canvas struct{ b bytes.Buffer }

func newCanvas(title string) *canvas {
	c := &canvas{}
	c.printf(`<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%s" height="%s" viewBox="0 0 %s %s" font-family="sans-serif" font-size="12">`+"\n",
		num(width), num(height), num(width), num(height))
	if title != "" {
		c.printf("<title>%s</title>\n", esc(title))
	}
	// An opaque background keeps dark text readable on dark page themes.
	c.printf(`<rect width="%s" height="%s" fill="#ffffff"/>`+"\n", num(width), num(height))
	if title != "" {
		c.text(width/2, 24, truncate(title, 15, width-24), `text-anchor="middle" font-size="15" font-weight="bold"`)
	}
	return c
}

func (c *canvas) printf(format string, args ...any) { fmt.Fprintf(&c.b, format, args...) }

func (c *canvas) bytes() []byte {
	c.printf("</svg>\n")
	return c.b.Bytes()
}

func (c *canvas) line(x1, y1, x2, y2 float64, stroke string, w float64) {
	c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"/>`+"\n",
		num(x1), num(y1), num(x2), num(y2), stroke, num(w))
}

// text writes s at (x, y); attrs are extra attributes, already valid XML.
func (c *canvas) text(x, y float64, s, attrs string) {
	if attrs != "" {
		attrs = " " + attrs
	}
	c.printf(`<text x="%s" y="%s"%s>%s</text>`+"\n", num(x), num(y), attrs, esc(s))
}

func (c *canvas) marker(shape int, x, y float64, fill string) {
	const edge = `stroke="#ffffff" stroke-width="1"`
	poly := func(pts ...float64) {
		var b strings.Builder
		for i := 0; i < len(pts); i += 2 {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(num(x + pts[i]))
			b.WriteByte(',')
			b.WriteString(num(y + pts[i+1]))
		}
		c.printf(`<polygon points="%s" fill="%s" %s/>`+"\n", b.String(), fill, edge)
	}
	switch shape % nShapes {
	case 0:
		c.printf(`<circle cx="%s" cy="%s" r="4" fill="%s" %s/>`+"\n", num(x), num(y), fill, edge)
	case 1:
		c.printf(`<rect x="%s" y="%s" width="7" height="7" fill="%s" %s/>`+"\n", num(x-3.5), num(y-3.5), fill, edge)
	case 2:
		poly(0, -5, 4.6, 3.2, -4.6, 3.2)
	case 3:
		poly(0, -5, 5, 0, 0, 5, -5, 0)
	case 4:
		poly(0, 5, 4.6, -3.2, -4.6, -3.2)
	case 5:
		const a, t = 5.0, 1.7
		poly(-t, -a, t, -a, t, -t, a, -t, a, t, t, t, t, a, -t, a, -t, t, -a, t, -a, -t, -t, -t)
	}
}

// plotArea is the rectangle the data is drawn in.
type plotArea struct{ left, top, right, bottom float64 }

func (p plotArea) x(f float64) float64 { return p.left + f*(p.right-p.left) }
func (p plotArea) y(f float64) float64 { return p.bottom - f*(p.bottom-p.top) }

// legendItem is one legend entry; bar entries get a filled square, line
// entries a stroke with the series' marker.
type legendItem struct {
	name   string
	colour string
	shape  int
	dash   bool
	bar    bool
}

const (
	legendFont   = 12.0
	legendRow    = 18.0
	legendSwatch = 30.0  // swatch plus the gap before the name
	legendMaxW   = 200.0 // wider legends go below the plot
)

// legend is the legend's placement: to the right of the plot when it is
// narrow and short enough, else in rows below the x axis.
type legend struct {
	items []legendItem
	right bool
	w     float64   // width of the right-hand column
	rows  [][]int   // below: item indices per row
	rowW  []float64 // below: width of each row
}

func planLegend(all []legendItem, maxRows float64) legend {
	var lg legend
	for _, it := range all {
		if it.name != "" {
			lg.items = append(lg.items, it)
		}
	}
	if len(lg.items) == 0 {
		return lg
	}
	w := 0.0
	for _, it := range lg.items {
		w = math.Max(w, legendSwatch+textWidth(it.name, legendFont))
	}
	if w <= legendMaxW && float64(len(lg.items)) <= maxRows {
		lg.right, lg.w = true, w
		return lg
	}
	avail := width - 40
	var row []int
	rowW := 0.0
	for i := range lg.items {
		lg.items[i].name = truncate(lg.items[i].name, legendFont, avail-legendSwatch)
		iw := legendSwatch + textWidth(lg.items[i].name, legendFont)
		if len(row) > 0 && rowW+16+iw > avail {
			lg.rows, lg.rowW = append(lg.rows, row), append(lg.rowW, rowW)
			row, rowW = nil, 0
		}
		if len(row) > 0 {
			rowW += 16
		}
		row, rowW = append(row, i), rowW+iw
	}
	lg.rows, lg.rowW = append(lg.rows, row), append(lg.rowW, rowW)
	return lg
}

// rightSpace is what the legend needs to the right of the plot.
func (lg legend) rightSpace() float64 {
	if lg.right {
		return lg.w + 36
	}
	return 24
}

// belowSpace is what the legend needs at the bottom of the canvas.
func (lg legend) belowSpace() float64 {
	if lg.right || len(lg.rows) == 0 {
		return 0
	}
	return float64(len(lg.rows))*legendRow + 6
}

func (lg legend) draw(c *canvas, p plotArea) {
	if lg.right {
		x := p.right + 24
		for i, it := range lg.items {
			c.swatch(it, x, p.top+8+float64(i)*legendRow)
		}
		return
	}
	y := height - lg.belowSpace() + legendRow/2
	for r, row := range lg.rows {
		x := (width - lg.rowW[r]) / 2
		for _, i := range row {
			it := lg.items[i]
			c.swatch(it, x, y)
			x += legendSwatch + textWidth(it.name, legendFont) + 16
		}
		y += legendRow
	}
}

// swatch draws one legend entry with its vertical centre at y.
func (c *canvas) swatch(it legendItem, x, y float64) {
	if it.bar {
		c.printf(`<rect x="%s" y="%s" width="14" height="12" fill="%s"/>`+"\n", num(x+4), num(y-6), it.colour)
	} else {
		dash := ""
		if it.dash {
			dash = ` stroke-dasharray="5 3"`
		}
		c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"%s/>`+"\n",
			num(x), num(y), num(x+22), num(y), it.colour, dash)
		c.marker(it.shape, x+11, y, it.colour)
	}
	c.text(x+legendSwatch, y+4, it.name, "")
}

// yAxisSpace is the room left of the plot for the y tick labels and title.
func yAxisSpace(a axis, label bool) float64 {
	w := 0.0
	for _, l := range a.labels {
		w = math.Max(w, textWidth(l, tickFont))
	}
	if label {
		return w + 34
	}
	return w + 16
}

// drawYAxis draws the horizontal grid, the y tick labels and the axis title.
func drawYAxis(c *canvas, p plotArea, a axis, label string) {
	for _, t := range a.ticks {
		c.line(p.left, p.y(a.tickFrac(t)), p.right, p.y(a.tickFrac(t)), gridColour, 1)
	}
	for _, t := range a.minor {
		y := p.y(a.tickFrac(t))
		c.line(p.left-3, y, p.left, y, inkColour, 1)
	}
	for i, t := range a.ticks {
		y := p.y(a.tickFrac(t))
		c.line(p.left-5, y, p.left, y, inkColour, 1)
		c.text(p.left-8, y+4, a.labels[i], `text-anchor="end" font-size="11" fill="`+inkColour+`"`)
	}
	if label != "" {
		x, y := p.left-yAxisSpace(a, true)+16, (p.top+p.bottom)/2
		s := truncate(label, 12, p.bottom-p.top)
		c.printf(`<text transform="translate(%s,%s) rotate(-90)" text-anchor="middle">%s</text>`+"\n", num(x), num(y), esc(s))
	}
}

// noData marks an empty chart so that it does not look broken.
func noData(c *canvas, p plotArea) {
	c.text((p.left+p.right)/2, (p.top+p.bottom)/2, "no data", `text-anchor="middle" fill="`+mutedInk+`"`)
}
