package priority

import (
	"math"
	"weak"
)

// A view is a repo's posterior under a prior at every candidate hazard of Scores and at
// the prior's own, computed at once: a poll's decision reads the prior's, and the next
// poll's score every candidate's. Each posterior is a mixture of a few beliefs that do
// not depend on the hazard; a view keeps those and each hazard's weights, so what is
// read of a posterior (its mean, its active share, its chance of a quiet interval) costs
// a few dot products. It gives the posteriors walk and judge give, up to rounding.
type view struct {
	kind viewKind
	// candidates: only Scores' candidate hazards are computed, not the prior's own (a
	// score reads those alone).
	candidates bool
	// viewStay: the belief before a silence walked for no time.
	// viewPushes: the beliefs if the repo stayed and if it changed at the window's start,
	// and the chance of a change at each hazard.
	stay, win belief
	changed   [viewHazards]float64
	// viewSilence: the walk of the silence as sums of fixed beliefs: the belief before
	// it decayed over the whole silence (decayed), and the fleet's weights decayed from
	// the start of each step to the end (fresh0 for the first step, the tail's for the
	// others); each hazard weighs them (coefStay, coefFresh) over its total.
	decayed, fresh0 belief
	live            int // past it decayed and fresh0 are 0 (silence.live)
	tail            *tail
	coefStay        [viewHazards]float64
	coefFresh       [viewHazards][silenceSteps]float64
	total           [viewHazards]float64
}

type viewKind uint8

const (
	viewStay viewKind = iota
	viewPushes
	viewSilence
)

// viewHazards are the hazards a view holds: Scores' candidates, then the prior's own.
const viewHazards = len(hazards) + 1

// ownHazard is the index of the prior's own hazard in a view.
const ownHazard = len(hazards)

// viewOf computes the view of evidence e under p.
func (p *Prior) viewOf(e evidence, v *view) {
	var l likelihoods
	likelihoodsOf(e, &l)
	var w weighed
	p.weigh(&l, &w)
	p.viewOfWeighed(&l, &w, v)
}

// viewOfWeighed computes the view of likelihoods l weighed under p as w.
func (p *Prior) viewOfWeighed(l *likelihoods, w *weighed, v *view) {
	switch {
	case !w.silent:
		v.kind = viewPushes
		v.stay, v.win = w.stay, w.win
		against := math.Exp(w.mStay - w.mOld - w.mWin)
		hs := p.viewHazardsPerDay()
		for h, hz := range hs[:v.hazards()] {
			v.changed[h] = changeOdds(w, hz, against)
		}
	default:
		p.viewOfSilence(&w.stay, l, v)
	}
}

// viewOfSilence computes the view of likelihoods l of a silence, from the belief before
// it.
func (p *Prior) viewOfSilence(stay *belief, l *likelihoods, v *view) {
	if l.winT <= 0 {
		v.kind = viewStay
		v.stay = *stay
		return
	}
	v.kind = viewSilence
	p.walkAll(stay, &l.walk, v)
}

// hazards is how many of the view's hazards are computed, from the first.
func (v *view) hazards() int {
	if v.candidates {
		return len(hazards)
	}
	return viewHazards
}

// viewHazardsPerDay are the hazards of a view, per day.
func (p *Prior) viewHazardsPerDay() [viewHazards]float64 {
	var hs [viewHazards]float64
	copy(hs[:], hazardsPerDay[:])
	hs[ownHazard] = p.Hazard
	return hs
}

// hazardsPerDay are the candidate hazards, per day.
var hazardsPerDay = func() (hs [len(hazards)]float64) {
	for h, perMonth := range hazards {
		hs[h] = perMonth / 30
	}
	return hs
}()

// dot is Σ b[k]·x[k] of the posterior at hazard h.
func (v *view) dot(h int, x *belief) float64 {
	r := v.read(x, gridSize)
	return r.at(v, h)
}

// reading is x read off the beliefs a view's posteriors are made of: each hazard's is
// then a weighted sum of these.
type reading struct {
	stay, win, decayed float64
	fresh              [silenceSteps]float64
}

// read reads x, which is 0 past its first live rates (even), off the view.
func (v *view) read(x *belief, live int) (r reading) {
	switch v.kind {
	case viewStay:
		r.stay = dotUpTo(&v.stay, x, live)
	case viewPushes:
		r.stay, r.win = dotUpTo(&v.stay, x, live), dotUpTo(&v.win, x, live)
	default:
		n := min(live, v.live)
		r.decayed = dotUpTo(&v.decayed, x, n)
		r.fresh[0] = dotUpTo(&v.fresh0, x, n)
		for m := 1; m < silenceSteps; m++ {
			switch x {
			case &gridBelief:
				r.fresh[m] = v.tail.rates[m]
			case &activeRates:
				r.fresh[m] = v.tail.active[m]
			default:
				r.fresh[m] = dotUpTo(&v.tail.fresh[m], x, min(live, v.tail.live[m]))
			}
		}
		r.stay = x[0] // what is read when nothing survives the silence: dormant
	}
	return r
}

// at is the reading of the posterior at hazard h.
func (r *reading) at(v *view, h int) float64 {
	switch v.kind {
	case viewStay:
		return r.stay
	case viewPushes:
		c := v.changed[h]
		return c*r.win + (1-c)*r.stay
	}
	if v.total[h] == 0 {
		return r.stay
	}
	s := v.coefStay[h] * r.decayed
	for m := range silenceSteps {
		s += v.coefFresh[h][m] * r.fresh[m]
	}
	return s / v.total[h]
}

// belief is the posterior at hazard h, and the chance that the repo changed.
func (v *view) belief(h int) (b belief, changed float64) {
	switch v.kind {
	case viewStay:
		return v.stay, 0
	case viewPushes:
		c := v.changed[h]
		for k := range gridSize {
			b[k] = c*v.win[k] + (1-c)*v.stay[k]
		}
		return b, c
	}
	t := v.total[h]
	if t == 0 {
		b[0] = 1
		return b, 1
	}
	moved := 0.0
	for k := range gridSize {
		m := v.coefFresh[h][0] * v.fresh0[k]
		for j := 1; j < silenceSteps; j++ {
			m += v.coefFresh[h][j] * v.tail.fresh[j][k]
		}
		b[k] = (v.coefStay[h]*v.decayed[k] + m) / t
		moved += m / t
	}
	return b, moved
}

func dotOf(a, b *belief) float64 { return dotUpTo(a, b, gridSize) }

// dotUpTo is dotOf over the first n rates (n even), where a or b is 0 past them: the
// terms left out are 0, and so is what they would add.
func dotUpTo(a, b *belief, n int) float64 {
	var s0, s1 float64 // two sums, so that the additions need not wait for one another
	for k := 0; k < n; k += 2 {
		s0 += a[k] * b[k]
		s1 += a[k+1] * b[k+1]
	}
	return s0 + s1
}

// activeRates marks the rates that count as active for the tail guard; gridBelief is
// the rates: what a decision reads of a posterior.
var activeRates = func() belief {
	var b belief
	for k, r := range gridRates {
		if r >= GuardRate/4 {
			b[k] = 1
		}
	}
	return b
}()

var gridBelief = belief(gridRates)

// quietFor sets q[k] to the chance of no push in days at each grid rate, and returns
// how many rates, from the slowest, have any (decays).
func quietFor(days float64, q *belief) (live int) { return decaysOver(days, q) }

// Memo keeps what a repo's stats say between its polls: their likelihoods, which
// depend on the stats' evidence alone (those before the window change only when a
// window settles; the belief beside it changes at every poll and is no part of it), and the belief before a silence, weighed from the likelihoods before the
// window, which stays the same while the silence grows under one prior. A score and a
// fit read them. It is only a saving: with or without one, every result is the same. A
// Memo is one repo's; its zero value is empty. It does not keep the prior alive.
type Memo struct {
	e    evidence // what lk is of, when lkOK
	lkOK bool
	// The belief before the window (stay) is of the prior stayOf (zero: none) and
	// class stayClass.
	stayOf    weak.Pointer[Prior]
	stayClass int
	lk        likelihoods // of e, when lkOK
	stay      belief
}

// likelihoods are the likelihoods of evidence e, from m when it holds them. Those of the
// evidence before the window change only when a window settles: a poll that only adds to
// the window computes the window's alone.
func (m *Memo) likelihoods(e evidence) *likelihoods {
	if m.lkOK && m.e == e {
		return &m.lk
	}
	if m.lkOK && m.lk.oldN == e.oldN && m.lk.oldT == e.oldT {
		m.lk.window(e)
	} else {
		likelihoodsOf(e, &m.lk)
		m.stayOf = weak.Pointer[Prior]{}
	}
	m.e, m.lkOK = e, true
	return &m.lk
}

// view is the view of evidence e under p, in v, from what m keeps (m may be nil).
func (p *Prior) view(e evidence, m *Memo, v *view) *view {
	if m == nil {
		p.viewOf(e, v)
		return v
	}
	ref := p.ref()
	l := m.likelihoods(e)
	if l.silent && m.stayOf == ref && m.stayClass == l.class {
		p.viewOfSilence(&m.stay, l, v)
		return v
	}
	var w weighed
	p.weigh(l, &w)
	if l.silent {
		m.stay, m.stayOf, m.stayClass = w.stay, ref, l.class
	}
	p.viewOfWeighed(l, &w, v)
	return v
}
