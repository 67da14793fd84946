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
type Belief [gridSize]float32

// IsZero reports whether b is unset.
func (b Belief) IsZero() bool { return b == Belief{} }

// beliefBytes is the stored size of a belief: each rate's probability as a float32.
const beliefBytes = 4 * gridSize

// Bytes is b's stored form: its probabilities as little-endian float32s; nil when unset.
func (b Belief) Bytes() []byte {
	if b.IsZero() {
		return nil
	}
	out := make([]byte, 0, beliefBytes)
	for _, v := range b {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
	}
	return out
}

// BeliefFromBytes reads a belief Bytes stored; empty is unset. A belief that is not
// one (wrong size, a value that is not a probability, nothing left) is an error.
func BeliefFromBytes(data []byte) (Belief, error) {
	var b Belief
	if len(data) == 0 {
		return b, nil
	}
	if len(data) != beliefBytes {
		return b, fmt.Errorf("priority: belief of %d bytes, want %d", len(data), beliefBytes)
	}
	sum := 0.0
	for k := range b {
		v := math.Float32frombits(binary.LittleEndian.Uint32(data[4*k:]))
		if !(v >= 0 && v <= 1) {
			return Belief{}, fmt.Errorf("priority: belief holds %v, not a probability", v)
		}
		b[k] = v
		sum += float64(v)
	}
	if sum < 0.5 || sum > 1.5 {
		return Belief{}, fmt.Errorf("priority: belief sums to %v, not 1", sum)
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

func (b *Belief) get() (out belief) {
	for k, v := range b {
		out[k] = float64(v)
	}
	return out
}

func (b *Belief) set(in *belief) {
	for k, v := range in {
		b[k] = float32(v)
	}
	if b.IsZero() { // cannot happen for a normalised belief; kept set regardless
		b[0] = 1
	}
}

// filter moves belief b over a poll's interval, from to now, through its pushes (bursts
// of its commits, in order; a change with no new commit is a push at now) under p. A
// push dated outside the interval (a commit made before the poll before, pushed since)
// is taken at its nearer end.
func (p *Prior) filter(b *belief, from, now time.Time, pushes []time.Time, changed bool) {
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
		p.filterQuiet(b, t.Sub(at).Hours()/24)
		at = t
		for k := range gridSize {
			b[k] *= gridRates[k]
		}
		normalise(b)
	}
	p.filterQuiet(b, now.Sub(at).Hours()/24)
}

// filterQuiet moves b over days without a push. The quiet is cut into steps that
// halve towards its end (the last two equal), so a long one keeps the chance of a recent
// change; a change in a step is placed at its middle: the old rate was quiet for the
// half before, the new one for the half after.
func (p *Prior) filterQuiet(b *belief, days float64) {
	if !(days > 0) {
		return
	}
	steps := quietSteps(days)
	var half [maxQuietSteps]belief
	halfDecays(days, steps, &half)
	hazard := p.Hazard
	for j := range steps {
		step := days / math.Exp2(float64(min(j+1, steps-1)))
		h := &half[j]
		rho := -math.Expm1(-hazard * step)
		var b0, b1 float64 // the chance the old rate was quiet up to a change at mid-step
		for k := 0; k < gridSize; k += 2 {
			b0 += b[k] * h[k]
			b1 += b[k+1] * h[k+1]
		}
		inject := rho * (b0 + b1)
		var s0, s1 float64
		for k := 0; k < gridSize; k += 2 {
			b[k] = h[k] * ((1-rho)*b[k]*h[k] + inject*p.Weights[k])
			b[k+1] = h[k+1] * ((1-rho)*b[k+1]*h[k+1] + inject*p.Weights[k+1])
			s0 += b[k]
			s1 += b[k+1]
		}
		sum := s0 + s1
		if !(sum > 0) {
			*b = belief{}
			b[0] = 1 // nothing left at any rate: only the dormant could be this quiet
			return
		}
		scaleBelief(b, sum)
	}
}

// The cut of a quiet into steps: one step for a quiet under half a day, a step more
// each time it doubles, at most maxQuietSteps.
const (
	quietStepsPerDay = 2
	maxQuietSteps    = 10
)

// normalise scales b to sum to 1; false when it sums to 0.
func normalise(b *belief) bool {
	s := 0.0
	for _, v := range b {
		s += v
	}
	if !(s > 0) {
		return false
	}
	scaleBelief(b, s)
	return true
}

// scaleBelief divides b by sum, and drops the probabilities too small to matter, which
// would otherwise sink into subnormal numbers, whose arithmetic is very slow.
func scaleBelief(b *belief, sum float64) {
	for k := range b {
		if b[k] /= sum; b[k] < minBelief {
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

// quietSteps is how many steps filterQuiet cuts a quiet of days into.
func quietSteps(days float64) int {
	return min(maxQuietSteps, 1+int(math.Log2(1+days*quietStepsPerDay)))
}

// halfDecays sets half[j] to the decays over half of step j of a quiet of days cut in
// steps, from the last (the shortest) back: each step before it is twice as long, so
// its half-decay is the square of the next's; the last two steps are equal.
func halfDecays(days float64, steps int, half *[maxQuietSteps]belief) {
	last := days / math.Exp2(float64(steps-1))
	decaysOver(last/2, &half[steps-1])
	for j := steps - 2; j >= 0; j-- {
		if j == steps-2 {
			half[j] = half[j+1]
			continue
		}
		for k := range gridSize {
			if d := half[j+1][k] * half[j+1][k]; d >= minDecay {
				half[j][k] = d
			} // else 0, as decays makes it: no subnormal arithmetic
		}
	}
}
