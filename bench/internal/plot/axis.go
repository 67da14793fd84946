package plot

import (
	"math"
	"strconv"
	"strings"
)

// axis maps data values onto [0, 1]. On a log axis lo, hi and the tick
// positions are in log10 units, so the drawing code never deals with scales.
type axis struct {
	log    bool
	lo, hi float64
	ticks  []float64 // labelled ticks
	labels []string
	minor  []float64 // unlabelled ticks (2..9 × 10^k on log axes)
}

// frac is v's position along the axis, 0 at lo and 1 at hi.
func (a axis) frac(v float64) float64 {
	if a.log {
		v = math.Log10(v)
	}
	return (v - a.lo) / (a.hi - a.lo)
}

// tickFrac is the position of a tick, which is already in axis units.
func (a axis) tickFrac(t float64) float64 { return (t - a.lo) / (a.hi - a.lo) }

// usable says whether v can be placed on an axis at all.
func usable(v float64, log bool) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!log || v > 0)
}

// extent is the range of the usable values seen, in data units.
type extent struct {
	min, max float64
	ok       bool
}

func (e *extent) add(v float64) {
	if !e.ok {
		e.min, e.max, e.ok = v, v, true
		return
	}
	e.min = math.Min(e.min, v)
	e.max = math.Max(e.max, v)
}

// Sizes the tick fitting works with: tick labels are drawn at tickFont px.
const (
	tickFont    = 11.0
	labelGapX   = 10.0 // free space between neighbouring x tick labels
	labelPitchY = 18.0 // least distance between y tick labels
)

// fits says whether the labels, spread evenly over length pixels, leave room
// between them.
func fits(labels []string, spacing float64, horizontal bool) bool {
	if !horizontal {
		return spacing >= labelPitchY
	}
	w := 0.0
	for _, l := range labels {
		w = math.Max(w, textWidth(l, tickFont))
	}
	return spacing >= w+labelGapX
}

// linearAxis covers [lo, hi] with round ticks (1, 2 or 5 × 10^k) and ends the
// domain on the outermost ticks. It picks the most ticks whose labels still
// fit in length pixels.
func linearAxis(lo, hi, length float64, horizontal bool) axis {
	if !(hi > lo) {
		switch {
		case lo == 0:
			lo, hi = 0, 1
		default:
			d := math.Abs(lo) * 0.1
			lo, hi = lo-d, hi+d
		}
	}
	per := 45.0
	if horizontal {
		per = 70
	}
	var a axis
	for target := max(2, int(length/per)); target >= 2; target-- {
		a = linearTicks(lo, hi, target)
		if fits(a.labels, length/float64(len(a.ticks)-1), horizontal) {
			break
		}
	}
	return a
}

func linearTicks(lo, hi float64, target int) axis {
	step := niceStep((hi - lo) / float64(target))
	k0 := math.Floor(lo/step + 1e-9)
	k1 := math.Ceil(hi/step - 1e-9)
	if k1 <= k0 {
		k1 = k0 + 1
	}
	a := axis{lo: k0 * step, hi: k1 * step}
	maxAbs := math.Max(math.Abs(a.lo), math.Abs(a.hi))
	for k := k0; k <= k1; k++ {
		// k*step rather than a running sum, so errors do not accumulate.
		t := k * step
		a.ticks = append(a.ticks, t)
		a.labels = append(a.labels, linearLabel(t, step, maxAbs))
	}
	return a
}

// niceStep rounds raw up to 1, 2 or 5 × 10^k.
func niceStep(raw float64) float64 {
	if !(raw > 0) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / p; {
	case f <= 1+1e-9:
		return p
	case f <= 2+1e-9:
		return 2 * p
	case f <= 5+1e-9:
		return 5 * p
	default:
		return 10 * p
	}
}

var siPrefixes = []struct {
	factor float64
	suffix string
}{{1e18, "E"}, {1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}}

// linearLabel prints a tick with no more decimals than its step needs. On
// axes that reach 10 000, ticks from 1000 up take an SI prefix (800k, 1M).
func linearLabel(v, step, maxAbs float64) string {
	unit, suffix := 1.0, ""
	if maxAbs >= 1e4 {
		for _, p := range siPrefixes {
			if math.Abs(v) >= p.factor*(1-1e-9) {
				unit, suffix = p.factor, p.suffix
				break
			}
		}
	}
	dec := int(math.Ceil(-math.Log10(step/unit) - 1e-9))
	s := strconv.FormatFloat(v/unit, 'f', min(max(dec, 0), 15), 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return trimNegZero(s) + suffix
}

func trimNegZero(s string) string {
	if strings.TrimLeft(s, "-0.") == "" {
		return strings.TrimPrefix(s, "-")
	}
	return s
}

// logAxis labels whole decades within [lo, hi] (log10 units), skipping every
// other one (or more) when the labels would collide. The domain is [lo, hi]
// as given; the caller decides the padding.
func logAxis(lo, hi, length float64, horizontal bool) axis {
	if !(hi > lo) {
		lo, hi = math.Floor(lo), math.Floor(lo)+1
	}
	a := axis{log: true, lo: lo, hi: hi}
	k0, k1 := int(math.Ceil(lo-1e-9)), int(math.Floor(hi+1e-9))
	perDecade := length / (hi - lo)
	for stride := 1; ; stride++ {
		a.ticks, a.labels = a.ticks[:0], a.labels[:0]
		for k := k0; k <= k1; k++ {
			if ((k%stride)+stride)%stride == 0 {
				a.ticks = append(a.ticks, float64(k))
				a.labels = append(a.labels, logLabel(k))
			}
		}
		if len(a.ticks) <= 1 || fits(a.labels, perDecade*float64(stride), horizontal) {
			if stride == 1 && perDecade >= 40 {
				for d := int(math.Floor(lo)); d <= k1; d++ {
					for m := 2; m <= 9; m++ {
						if t := float64(d) + math.Log10(float64(m)); t > lo && t < hi {
							a.minor = append(a.minor, t)
						}
					}
				}
			}
			return a
		}
	}
}

// logLabel names 10^k compactly: 0.01, 0.1, 1, 10, 100, 1k, 10k, 1M, ...
func logLabel(k int) string {
	switch {
	case k >= 0 && k < 21:
		suffix := ""
		for _, p := range siPrefixes {
			if math.Pow(10, float64(k)) >= p.factor {
				suffix = p.suffix
				k -= int(math.Round(math.Log10(p.factor)))
				break
			}
		}
		return "1" + strings.Repeat("0", k) + suffix
	case k < 0 && k >= -4:
		return "0." + strings.Repeat("0", -k-1) + "1"
	default:
		return "1e" + strconv.Itoa(k)
	}
}

// valueLabel prints a bar's value to about three significant digits.
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
		return trimNegZero(strconv.FormatFloat(v, 'f', 0, 64))
	}
	return sig3(v)
}

func sig3(v float64) string {
	a := math.Abs(v)
	if a == 0 {
		return "0"
	}
	if a < 1e-4 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	dec := max(0, 2-int(math.Floor(math.Log10(a))))
	s := strconv.FormatFloat(v, 'f', dec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return trimNegZero(s)
}
