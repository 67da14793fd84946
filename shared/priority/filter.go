package priority

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Belief is a repo's current belief about its rate (a distribution over the grid's
// rates), filtered forward poll by poll under the prior: each silence decays it and may
// have seen a change of behaviour (a new rate drawn from the fleet's weights at the
// prior's hazard), and each push weighs it by the rate. It is what a decision reads: a
// dormant repo that pushes is believed awake at that poll, and one that falls silent
// loses its rate as the silence grows, however old its evidence. The windowed evidence
// beside it (Stats) is what a prior is learned from (Fit) and what a belief starts from
// at a repo's first clone. Its zero value is unset: a repo folded before beliefs were
// kept, whose next poll starts one from its evidence.
//
// It is kept as two likelihoods, not yet weighed by any prior, so that a prior learned
// later weighs what the repo showed (a fleet's first repos are cloned under the default
// prior; a weighed belief would keep its mark for as long as the repo stays quiet):
// Stay, what the repo showed if its behaviour never changed, which the repo's class
// weights weigh, and Moved, what it showed since a change, which the fleet's weights a
// change draws from weigh. The belief is classWeights·Stay + Weights·Moved, scaled to
// sum to 1.
type Belief struct {
	Stay, Moved [gridSize]float32
}

// IsZero reports whether b is unset.
func (b Belief) IsZero() bool { return b == Belief{} }

// beliefBytes is the stored size of a belief: Stay then Moved, each rate's value as a
// float32.
const beliefBytes = 2 * 4 * gridSize

// legacyBeliefBytes is the size of a belief stored already weighed, before the split:
// it is read as unset, and the repo's next poll starts one from its evidence.
const legacyBeliefBytes = 4 * gridSize

// maxLikelihood bounds a stored value: a likelihood scaled so that the belief sums to
// 1, so at most 1 over the least weight it is divided by (minSplitWeight).
const maxLikelihood = 1 / minSplitWeight

// Bytes is b's stored form: Stay then Moved as little-endian float32s; nil when unset.
func (b Belief) Bytes() []byte {
	if b.IsZero() {
		return nil
	}
	out := make([]byte, 0, beliefBytes)
	for _, part := range [...]*[gridSize]float32{&b.Stay, &b.Moved} {
		for _, v := range part {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	return out
}

// BeliefFromBytes reads a belief Bytes stored; empty, or one stored before the split,
// is unset. A belief that is not one (wrong size, a value out of range, nothing left)
// is an error.
func BeliefFromBytes(data []byte) (Belief, error) {
	var b Belief
	switch len(data) {
	case 0, legacyBeliefBytes:
		return b, nil
	case beliefBytes:
	default:
		return b, fmt.Errorf("priority: belief of %d bytes, want %d", len(data), beliefBytes)
	}
	for i, part := range [...]*[gridSize]float32{&b.Stay, &b.Moved} {
		for k := range part {
			v := math.Float32frombits(binary.LittleEndian.Uint32(data[4*(i*gridSize+k):]))
			if !(v >= 0 && v <= maxLikelihood) {
				return Belief{}, fmt.Errorf("priority: belief holds %v, out of [0, %g]", v, maxLikelihood)
			}
			part[k] = v
		}
	}
	if b.IsZero() {
		return Belief{}, fmt.Errorf("priority: belief holds nothing")
	}
	return b, nil
}

// MarshalJSON writes b as its stored form in base64.
func (b Belief) MarshalJSON() ([]byte, error) {
	return json.Marshal(base64.StdEncoding.EncodeToString(b.Bytes()))
}

// UnmarshalJSON reads what MarshalJSON writes.
func (b *Belief) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("priority: belief: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("priority: belief: %w", err)
	}
	*b, err = BeliefFromBytes(raw)
	return err
}

// split is a belief in its two parts (Belief), in the arithmetic's precision.
type split struct {
	stay, moved belief
}

func (b *Belief) get() (sp split) {
	for k := range gridSize {
		sp.stay[k], sp.moved[k] = float64(b.Stay[k]), float64(b.Moved[k])
	}
	return sp
}

func (b *Belief) set(sp *split) {
	for k := range gridSize {
		b.Stay[k] = float32(min(sp.stay[k], maxLikelihood))
		b.Moved[k] = float32(min(sp.moved[k], maxLikelihood))
	}
	if b.IsZero() { // cannot happen for a normalised belief; kept set regardless
		b.Stay[0], b.Moved[0] = 1, 1
	}
}

// splitOf is belief b, of a repo of class weights wc in a fleet of weights wf, as
// likelihoods: what it holds at a rate its class weighs at all is taken as shown under
// no change; the rest as shown since one.
func splitOf(b, wc, wf *belief) (sp split) {
	for k := range gridSize {
		switch {
		case wc[k] >= minSplitWeight:
			sp.stay[k] = b[k] / wc[k]
		case wf[k] >= minSplitWeight:
			sp.moved[k] = b[k] / wf[k]
		}
	}
	return sp
}

// minSplitWeight is the least weight splitOf divides by, so that no likelihood grows
// past what a float32 holds.
const minSplitWeight = 1e-20

// weighed is sp's belief under class weights wc and fleet weights wf, and its sum.
func (sp *split) weighed(wc, wf *belief) (b belief, sum float64) {
	for k := range gridSize {
		b[k] = wc[k]*sp.stay[k] + wf[k]*sp.moved[k]
		sum += b[k]
	}
	return b, sum
}

// read is the belief sp holds under class weights wc and fleet weights wf: normalised.
func (sp *split) read(wc, wf *belief) belief {
	b, sum := sp.weighed(wc, wf)
	if !(sum > 0) {
		b = belief{}
		b[0] = 1
		return b
	}
	scaleBelief(&b, sum, gridSize)
	return b
}

// scale divides both parts by sum, dropping what is too small to matter.
func (sp *split) scale(sum float64) {
	scaleBelief(&sp.stay, sum, gridSize)
	scaleBelief(&sp.moved, sum, gridSize)
}

// started is the belief s's evidence gives: its windowed posterior under p, split.
func (p *Prior) started(s *Stats) split {
	b, _ := p.posterior(evidenceOf(s))
	return splitOf(&b, p.weightsOf(classOf(s)), &p.Weights)
}

// dormant sets sp to the dormant rate alone, under class weights wc and fleet weights
// wf.
func (sp *split) dormant(wc, wf *belief) {
	var one belief
	one[0] = 1
	*sp = splitOf(&one, wc, wf)
}

// filter moves belief sp of a repo of class weights wc over a poll's interval, from to
// now, through its pushes (bursts of its commits, in order; a change with no new commit
// is a push at now) under p. A push dated outside the interval (a commit made before
// the poll before, pushed since) is taken at its nearer end.
func (p *Prior) filter(sp *split, wc *belief, from, now time.Time, pushes []time.Time, changed bool) {
	at := from
	if changed && len(pushes) == 0 {
		pushes = []time.Time{now}
	}
	for _, t := range pushes {
		if t.Before(from) {
			t = from
		} else if t.After(now) {
			t = now
		}
		p.filterQuiet(sp, wc, t.Sub(at).Hours()/24)
		at = t
		for k := range gridSize {
			sp.stay[k] *= gridRates[k]
			sp.moved[k] *= gridRates[k]
		}
		if _, sum := sp.weighed(wc, &p.Weights); sum > 0 {
			sp.scale(sum)
		} else {
			sp.dormant(wc, &p.Weights)
		}
	}
	p.filterQuiet(sp, wc, now.Sub(at).Hours()/24)
}

// filterQuiet moves sp over days without a push. The quiet is cut into steps that
// halve towards its end (the last two equal), so a long one keeps the chance of a recent
// change; a change in a step is placed at its middle: the old rate was quiet for the
// half before, the new one for the half after. A change draws from the fleet's weights:
// it moves its share of the belief into Moved. The rates a step's decays leave nothing
// of (past its live ones) end it at 0 and add nothing to its sums, so its loops stop
// there.
func (p *Prior) filterQuiet(sp *split, wc *belief, days float64) {
	if !(days > 0) {
		return
	}
	steps := quietSteps(days)
	var half [maxQuietSteps]belief
	var lives [maxQuietSteps]int
	halfDecays(days, steps, &half, &lives)
	hazard := p.Hazard
	st, mv, wf := &sp.stay, &sp.moved, &p.Weights
	step := days // halved before each step but the last, which equals the one before
	for j := range steps {
		if j < steps-1 {
			step /= 2
		}
		h, live := &half[j], lives[j]
		rho := -math.Expm1(-hazard * step)
		var b0, b1 float64 // the chance the old rate was quiet up to a change at mid-step
		for k := 0; k < live; k += 2 {
			b0 += (wc[k]*st[k] + wf[k]*mv[k]) * h[k]
			b1 += (wc[k+1]*st[k+1] + wf[k+1]*mv[k+1]) * h[k+1]
		}
		inject := rho * (b0 + b1)
		clear(st[live:])
		clear(mv[live:])
		var s0, s1 float64
		for k := 0; k < live; k += 2 {
			st[k] *= (1 - rho) * h[k] * h[k]
			st[k+1] *= (1 - rho) * h[k+1] * h[k+1]
			mv[k] = h[k] * ((1-rho)*mv[k]*h[k] + inject)
			mv[k+1] = h[k+1] * ((1-rho)*mv[k+1]*h[k+1] + inject)
			s0 += wc[k]*st[k] + wf[k]*mv[k]
			s1 += wc[k+1]*st[k+1] + wf[k+1]*mv[k+1]
		}
		sum := s0 + s1
		if !(sum > 0) {
			sp.dormant(wc, wf) // nothing left at any rate: only the dormant could be this quiet
			return
		}
		scaleBelief(st, sum, live)
		scaleBelief(mv, sum, live)
	}
}

// The cut of a quiet into steps: one step for a quiet under half a day, a step more
// each time it doubles, at most maxQuietSteps.
const (
	quietStepsPerDay = 2
	maxQuietSteps    = 10
)

// scaleBelief divides b's first n rates by sum (past them b is 0, and stays so), and
// drops the probabilities too small to matter, which would otherwise sink into
// subnormal numbers, whose arithmetic is very slow. It multiplies by the inverse: a
// filter scales at every step.
func scaleBelief(b *belief, sum float64, n int) {
	inv := 1 / sum
	for k := range b[:n] {
		if b[k] *= inv; b[k] < minBelief {
			b[k] = 0
		}
	}
}

// minBelief is the least probability a belief keeps.
const minBelief = 1e-200

// beliefRate is the rate a repo of belief b is polled for: its expected rate, raised by
// the tail guard.
func beliefRate(b *belief) float64 {
	return max(dotOf(b, &gridBelief), GuardRate*dotOf(b, &activeRates))
}

// rate is beliefRate of the belief b holds under class weights wc and fleet weights wf
// (split.read), scaling the rate rather than the belief. It reads b as stored: a
// decision needs no split of it.
func (b *Belief) rate(wc, wf *belief) float64 {
	var w belief
	sum := 0.0
	for k := range gridSize {
		w[k] = wc[k]*float64(b.Stay[k]) + wf[k]*float64(b.Moved[k])
		sum += w[k]
	}
	if !(sum > 0) {
		return 0 // dormant
	}
	return beliefRate(&w) / sum
}

// quietSteps is how many steps filterQuiet cuts a quiet of days into.
func quietSteps(days float64) int {
	return min(maxQuietSteps, 1+int(math.Log2(1+days*quietStepsPerDay)))
}

// halfDecays sets half[j] to the decays over half of step j of a quiet of days cut in
// steps, from the last (the shortest) back: each step before it is twice as long, so
// its half-decay is the square of the next's; the last two steps are equal. live[j] is
// how many rates half[j] leaves above 0 (decays); half must be 0 when called.
func halfDecays(days float64, steps int, half *[maxQuietSteps]belief, live *[maxQuietSteps]int) {
	last := days / math.Exp2(float64(steps-1))
	live[steps-1] = decaysOver(last/2, &half[steps-1])
	for j := steps - 2; j >= 0; j-- {
		if j == steps-2 {
			half[j], live[j] = half[j+1], live[j+1]
			continue
		}
		n := 0
		for k := range live[j+1] {
			if d := half[j+1][k] * half[j+1][k]; d >= minDecay {
				half[j][k] = d
				n = k + 1
			} // else 0, as decays makes it: no subnormal arithmetic
		}
		live[j] = n + n%2
	}
}
