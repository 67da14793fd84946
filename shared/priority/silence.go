package priority

import (
	"math"
	"sync/atomic"
	"weak"
)

// silenceSteps is how finely a silence is cut to place a possible change in it: halves,
// so the last step is 1/2^(silenceSteps−1) of it.
const silenceSteps = 8

// A silence of S days is walked in steps that halve towards the present: the last
// seven are those of S rounded down to a grid of silenceGrid points an octave (S_q:
// S_q/4, S_q/8, …, S_q/128, S_q/128), and the first takes the rest, S − S_q/2, about
// half. Silences that round alike share all but their first step, so what the walk
// needs of those (tail) is computed once per prior and grid point and kept with the
// prior, while the first step is each repo's own. Rounding moves where a change may be
// placed by under 2.2% of the silence; the silence's length is counted whole.
const silenceGrid = 32

// The grid points a prior keeps tails for: silences from 2^(tailFirst/silenceGrid)
// days (under two minutes) to 2^(tailEnd/silenceGrid) (90 years); others are walked
// without keeping their tail.
const (
	tailFirst = -10 * silenceGrid
	tailEnd   = 15 * silenceGrid
)

// silence is a repo's own part of the walk of its silence: its length, its grid
// point and its shape, its first step and the decays over it. It depends on the
// silence alone.
type silence struct {
	days  float64
	q     int
	sh    *shape
	step0 float64
	f0    belief
	// live is how many rates, from the slowest, the first step leaves any weight on
	// (even, for the loops that take rates in pairs): the faster ones decay to 0 in it
	// and stay 0, so a walk need not multiply or add them.
	live int
}

// cut sets s to the walk of a silence of days (> 0).
func (s *silence) cut(days float64) {
	s.days = days
	s.q = int(math.Floor(silenceGrid * math.Log2(days)))
	sq := math.Exp2(float64(s.q) / silenceGrid)
	if sq > days { // rounding of the logarithm
		s.q--
		sq = math.Exp2(float64(s.q) / silenceGrid)
	}
	s.step0 = days - sq/2
	s.live = decaysOver(s.step0, &s.f0)
	s.sh = shapeOf(s.q)
}

// decaysOver sets f[k] to e^(−gridRates[k]·days) and returns how many rates hold them
// above 0 (decays).
func decaysOver(days float64, f *belief) (live int) {
	var base [3]float64
	for k := range base {
		base[k] = math.Exp(-gridRates[k] * days)
	}
	return decays(base, f)
}

// shape is the steps of a silence past its first, for a grid point: each step's length,
// the decays of every rate over it (f) and how many rates they leave above 0 (live),
// and each candidate hazard's chance of a change in it (rho). It depends on the grid
// point alone, so it is computed once for all priors (shapes). Entries [0] are the
// first step's, which is each repo's own: unused.
type shape struct {
	step [silenceSteps]float64
	f    [silenceSteps]belief
	live [silenceSteps]int
	rho  [silenceSteps][len(hazards)]float64
}

// shapes keeps the shapes of the grid points as they are first needed: a table of a
// function of the grid point, the same for every caller.
var shapes [tailEnd - tailFirst]atomic.Pointer[shape]

// shapeOf is the shape of grid point q.
func shapeOf(q int) *shape {
	if q < tailFirst || q >= tailEnd {
		return newShape(q)
	}
	slot := &shapes[q-tailFirst]
	if sh := slot.Load(); sh != nil {
		return sh
	}
	sh := newShape(q)
	if !slot.CompareAndSwap(nil, sh) {
		return slot.Load()
	}
	return sh
}

func newShape(q int) *shape {
	sh := new(shape)
	sq := math.Exp2(float64(q) / silenceGrid)
	for j := 1; j < silenceSteps; j++ {
		sh.step[j] = sq / math.Exp2(float64(min(j, silenceSteps-2)+1))
		if j == silenceSteps-1 {
			sh.f[j], sh.live[j] = sh.f[j-1], sh.live[j-1] // the last two steps are equal
		} else {
			sh.live[j] = decaysOver(sh.step[j], &sh.f[j])
		}
		for h, hz := range hazardsPerDay {
			sh.rho[j][h] = stepChange(hz, sh.step[j])
		}
	}
	return sh
}

// stepChange is the chance of a change of behaviour in a step of days at hazard per day.
func stepChange(hazard, days float64) float64 { return -math.Expm1(-hazard * days) }

// tail is what walking a silence at every hazard of a view needs past its first step,
// under a prior: the shape, the fleet's weights decayed from the start of step m to the
// end (fresh; 0 past the shape's live[m]), the sums of the weights decayed over steps
// m…j (omega[j][m]), what fresh reads of the rates and of the active ones, and each
// hazard's chance of a change in each step (rhoByStep; of none: 1−rho). Entries [0]
// are the first step's: unused.
type tail struct {
	*shape
	fresh         [silenceSteps]belief
	omega         [silenceSteps][silenceSteps]float64
	rates, active [silenceSteps]float64
	rhoByStep     [silenceSteps][viewHazards]float64
}

// tailCache keeps a prior's tails by grid point, and a weak reference to it (self), as
// memos name their prior, made once: weak.Make looks its pointer up at every call. It
// belongs to the prior it was made for (owner): a copy of a prior, changed or not,
// makes its own.
type tailCache struct {
	owner *Prior
	self  weak.Pointer[Prior]
	slots [tailEnd - tailFirst]atomic.Pointer[tail]
}

// tailOf is the tail of grid point q under p: kept, or made anew.
func (p *Prior) tailOf(q int) *tail {
	c := p.tails
	if c == nil || c.owner != p || q < tailFirst || q >= tailEnd {
		t := new(tail)
		p.fillTail(t, q)
		return t
	}
	slot := &c.slots[q-tailFirst]
	if t := slot.Load(); t != nil {
		return t
	}
	t := new(tail)
	p.fillTail(t, q)
	if !slot.CompareAndSwap(nil, t) {
		return slot.Load()
	}
	return t
}

// withTails gives p a cache of tails of its own; p must not change after.
func (p *Prior) withTails() *Prior {
	p.tails = &tailCache{owner: p, self: weak.Make(p)}
	return p
}

// ref is a weak reference to p: weak references compare equal when made from the same
// prior.
func (p *Prior) ref() weak.Pointer[Prior] {
	if c := p.tails; c != nil && c.owner == p {
		return c.self
	}
	return weak.Make(p)
}

// fillTail fills t for grid point q. Past a step's live rates its decays are 0, and so
// is everything decayed over it: the loops stop there.
func (p *Prior) fillTail(t *tail, q int) {
	t.shape = shapeOf(q)
	for j := 1; j < silenceSteps; j++ {
		copy(t.rhoByStep[j][:], t.shape.rho[j][:])
		t.rhoByStep[j][ownHazard] = stepChange(p.Hazard, t.step[j])
	}
	for m := silenceSteps - 1; m >= 1; m-- {
		for k := range gridSize {
			if m == silenceSteps-1 {
				t.fresh[m][k] = p.Weights[k] * t.f[m][k]
			} else {
				t.fresh[m][k] = t.fresh[m+1][k] * t.f[m][k]
			}
		}
		live := t.live[m]
		t.rates[m], t.active[m] = dotUpTo(&t.fresh[m], &gridBelief, live), dotUpTo(&t.fresh[m], &activeRates, live)
		v := p.Weights
		for j := m; j < silenceSteps; j++ {
			var s0, s1 float64
			for k := 0; k < live; k += 2 {
				v[k] *= t.f[j][k]
				v[k+1] *= t.f[j][k+1]
				s0 += v[k]
				s1 += v[k+1]
			}
			t.omega[j][m] = s0 + s1
		}
	}
}

// walk is the belief after a silence, from stay (the belief the evidence before it
// gives), at hazard changes per day, and the chance that the repo changed in it: the
// repo may have changed at any moment of the silence, and after a change only the
// silence since constrains its new rate. The silence is walked in steps that halve
// towards the present (a change is placed at a step's start), so a repo silent for
// years keeps the chance of having woken up recently.
func (p *Prior) walk(stay belief, s *silence, hazard float64) (belief, float64) {
	t := s.sh
	var moved belief
	total := 1.0 // of stay and moved: the belief is normalised at the end
	for j := range silenceSteps {
		factor, step := &t.f[j], t.step[j]
		if j == 0 {
			factor, step = &s.f0, s.step0
		}
		rho := -math.Expm1(-hazard * step)
		inject := rho * total // a change draws from Weights whatever the belief was
		var t0, t1 float64
		for k := 0; k < gridSize; k += 2 {
			moved[k] = factor[k] * ((1-rho)*moved[k] + inject*p.Weights[k])
			moved[k+1] = factor[k+1] * ((1-rho)*moved[k+1] + inject*p.Weights[k+1])
			stay[k] *= factor[k] * (1 - rho)
			stay[k+1] *= factor[k+1] * (1 - rho)
			t0 += stay[k] + moved[k]
			t1 += stay[k+1] + moved[k+1]
		}
		total = t0 + t1
	}
	if total == 0 {
		var b belief
		b[0] = 1
		return b, 1
	}
	changed := 0.0
	for k := range gridSize {
		stay[k] = (stay[k] + moved[k]) / total
		changed += moved[k] / total
	}
	return stay, changed
}

// walkAll is walk at every hazard of a view (v). A walk is linear in the belief it
// starts from and in the fleet's weights a change injects: after it, the repo is either
// where it started, decayed over the whole silence and by the chance of no change in
// any step, or it changed at the start of some step m and decayed since: weights
// W·Π_{i≥m} f_i. Only the amounts injected depend on the hazard, through the totals
// along the way; those are sums of the same decayed beliefs over partial products of the
// steps, computed once for every hazard (and, past the first step, once per prior: tail).
// It computes in v's own arrays: a view is large, and copies of it add up.
func (p *Prior) walkAll(stay *belief, s *silence, v *view) {
	const n = silenceSteps
	t := p.tailOf(s.q)
	// sigma[j]: Σ stay·Π_{i≤j} f_i; omega0[j]: Σ W·Π_{0≤i≤j} f_i.
	var sigma, omega0 [n]float64
	a, b := &v.decayed, &v.fresh0
	*a, *b = *stay, p.Weights
	live := s.live // past it a and b are 0 after the first step
	clear(a[live:])
	clear(b[live:])
	for j := range n {
		f := &t.f[j]
		if j == 0 {
			f = &s.f0
		}
		// Two sums each, so that the additions need not wait for one another.
		var sa0, sa1, sb0, sb1 float64
		for k := 0; k < live; k += 2 {
			a[k] *= f[k]
			a[k+1] *= f[k+1]
			b[k] *= f[k]
			b[k+1] *= f[k+1]
			sa0 += a[k]
			sa1 += a[k+1]
			sb0 += b[k]
			sb1 += b[k+1]
		}
		sigma[j], omega0[j] = sa0+sa1, sb0+sb1
	}
	v.live, v.tail = live, t
	// Every hazard's totals step by step: the hazards innermost, so that their chains of
	// products and sums, independent of one another, overlap.
	hs := p.viewHazardsPerDay()
	nh := v.hazards()
	var rho0 [viewHazards]float64
	for h, hz := range hs[:nh] {
		rho0[h] = stepChange(hz, s.step0)
	}
	keep, total, coef := &v.coefStay, &v.total, &v.coefFresh
	for h := range viewHazards {
		keep[h], total[h] = 1, 1
	}
	clear(coef[nh:]) // each computed hazard's are set step by step
	for j := range n {
		rho := &rho0
		if j > 0 {
			rho = &t.rhoByStep[j]
		}
		omega := &t.omega[j]
		for h := range nh {
			// c[m]: what step m's change weighs after step j.
			inject := rho[h] * total[h]
			st := 1 - rho[h]
			keep[h] *= st
			c := &coef[h]
			for m := range j {
				c[m] *= st
			}
			c[j] = inject
			tot := keep[h]*sigma[j] + c[0]*omega0[j]
			for m := 1; m <= j; m++ {
				tot += c[m] * omega[m]
			}
			total[h] = tot
		}
	}
}
