package priority

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var day0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func days(d float64) time.Duration { return time.Duration(d * 24 * float64(time.Hour)) }

// polled folds polls every step days from from to to, a push an hour before each poll
// when pushing; it returns the stats and the day of the last poll.
func polled(s Stats, from, to time.Time, step float64, pushing bool, p *Prior) (Stats, time.Time) {
	prev := from
	for now := from.Add(days(step)); !now.After(to); now = now.Add(days(step)) {
		poll := Poll{Prev: prev, Now: now, Changed: pushing}
		if pushing {
			poll.Commits = []time.Time{now.Add(-time.Hour)}
		}
		s = Fold(s, poll, p)
		prev = now
	}
	return s, prev
}

func rateOf(s Stats) float64 {
	p := DefaultPrior()
	return s.Belief.rate(p.weightsOf(classOf(&s)), &p.Weights)
}

// A repo quiet for years that pushes is believed awake at the poll that shows it: its
// rate is that of a repo that changed behaviour and pushed once, not of a dormant one;
// the windowed evidence alone moves it far less until its window is judged.
func TestABeliefWakesAtThePollThatShowsIt(t *testing.T) {
	p := DefaultPrior()
	s := Fold(Stats{}, Poll{Now: day0, Since: day0.Add(-days(365)), LastCommitAt: day0.Add(-days(5 * 365))}, p)
	s, last := polled(s, day0, day0.Add(days(360)), 60, false, p)
	asleep := rateOf(s)
	now := last.Add(days(60))
	woke := Fold(s, Poll{Prev: last, Now: now, Changed: true, Commits: []time.Time{now.Add(-days(2))}}, p)
	awake := rateOf(woke)
	windowed := p.guarded(woke)
	t.Logf("rate asleep %.3g/day, after the push %.3g/day (windowed evidence: %.3g/day)", asleep, awake, windowed)
	if awake < 20*asleep {
		t.Fatalf("a push after years of quiet moved the rate from %.3g to %.3g a day only", asleep, awake)
	}
	if awake < 2*windowed {
		t.Fatalf("the belief after the push (%.3g/day) is no quicker than the windowed evidence (%.3g/day)", awake, windowed)
	}
	// The decision is the belief's.
	if got, want := (Bayes{}).Next(Input{Cloned: true, Stats: woke, Prior: p}), stepDays(awake); got != want {
		t.Fatalf("Bayes steps %v days after the push, want the belief's %v", got, want)
	}
}

// A repo that pushed daily and falls silent loses its rate as the silence grows.
func TestABeliefSlowsAsASilenceGrows(t *testing.T) {
	p := DefaultPrior()
	s := Fold(Stats{}, Poll{Now: day0, Since: day0.Add(-days(365)), Changed: true, Commits: []time.Time{day0.Add(-time.Hour)}}, p)
	s, last := polled(s, day0, day0.Add(days(120)), 1, true, p)
	busy := rateOf(s)
	s, last = polled(s, last, last.Add(days(14)), 1, false, p)
	twoWeeks := rateOf(s)
	s, _ = polled(s, last, last.Add(days(60)), 1, false, p)
	later := rateOf(s)
	t.Logf("rate pushing daily %.3g/day, after two quiet weeks %.3g, after ten %.3g", busy, twoWeeks, later)
	if busy < 0.5 || twoWeeks > busy/4 || later > twoWeeks/2 {
		t.Fatalf("rates %.3g, %.3g, %.3g a day: want a daily pusher's rate to fall with its silence", busy, twoWeeks, later)
	}
}

// Whatever the polls, a belief stays a probability: no NaN, nothing negative, summing
// to 1, even across a silence no rate of it survives.
func TestABeliefStaysAProbability(t *testing.T) {
	p := DefaultPrior()
	w := p.weightsOf(classRoot)
	other := logNormal(0.6, math.Log(0.1), 1.5)
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(what string, sp split) {
		t.Helper()
		for k := range gridSize {
			if !(sp.stay[k] >= 0 && sp.moved[k] >= 0) {
				t.Fatalf("%s: belief holds %v, %v", what, sp.stay[k], sp.moved[k])
			}
		}
		if _, sum := sp.weighed(w, &p.Weights); math.Abs(sum-1) > 1e-9 {
			t.Fatalf("%s: belief sums to %v", what, sum)
		}
		b := sp.read(&other, &p.Weights)
		if math.Abs(sumOf(&b)-1) > 1e-9 {
			t.Fatalf("%s: belief read under other weights sums to %v", what, sumOf(&b))
		}
	}
	for range 200 {
		var b belief
		b[rng.IntN(gridSize)] = 1
		sp := splitOf(&b, w, &p.Weights)
		from := day0
		for range 20 {
			now := from.Add(days(math.Exp(rng.NormFloat64() * 3)))
			var commits []time.Time
			for range rng.IntN(4) {
				commits = append(commits, from.Add(time.Duration(rng.Int64N(int64(now.Sub(from))+1))))
			}
			p.filter(&sp, w, from, now, commits, len(commits) > 0)
			check("after random polls", sp)
			from = now
		}
	}
	var fast belief
	fast[gridSize-1] = 1
	sp := splitOf(&fast, w, &p.Weights)
	p.filter(&sp, w, day0, day0.Add(days(3650)), nil, false)
	check("a fast belief after ten quiet years", sp)
	if b := sp.read(w, &p.Weights); b.mean() > 0.01 {
		t.Fatalf("a repo pushing 26 times a day, then quiet for ten years, believed at %.3g a day", b.mean())
	}
}

// A poll's commits are pushes as Sessions counts them, each at its newest commit; the
// filter takes one dated outside the poll's interval at its nearer end.
func TestPushTimes(t *testing.T) {
	h := func(x float64) time.Time { return day0.Add(time.Duration(x * float64(time.Hour))) }
	commits := []time.Time{h(30), h(1), h(2), h(20), h(-5)}
	got := bursts(commits)
	// 1 and 2 are one push; -5 is six hours before 1.
	want := []time.Time{h(-5), h(2), h(20), h(30)}
	if len(got) != len(want) {
		t.Fatalf("push times %v, want %v", got, want)
	}
	for k := range want {
		if !got[k].Equal(want[k]) {
			t.Fatalf("push times %v, want %v", got, want)
		}
	}
	if n := Sessions(commits); n != len(want) {
		t.Fatalf("Sessions = %d, want %d", n, len(want))
	}
	p := DefaultPrior()
	b := splitOf(&p.Weights, &p.Weights, &p.Weights)
	clamped := b
	p.filter(&b, &p.Weights, h(0), h(25), got, true)
	p.filter(&clamped, &p.Weights, h(0), h(25), []time.Time{h(0), h(2), h(20), h(25)}, true)
	if b != clamped {
		t.Fatalf("pushes outside the interval filtered to %v, want them at its ends: %v", b, clamped)
	}
}

// A belief is stored in 304 bytes and read back bit for bit, in its binary form and in
// JSON; one stored before the split (152 bytes) is read as unset; what is not a belief
// is refused with an error.
func TestBeliefStoredForm(t *testing.T) {
	s := Fold(Stats{}, Poll{Now: day0, Changed: true, Commits: []time.Time{day0.Add(-days(3)), day0.Add(-days(1))}}, nil)
	if s.Belief.IsZero() {
		t.Fatal("a first clone left no belief")
	}
	raw := s.Belief.Bytes()
	if len(raw) != beliefBytes {
		t.Fatalf("stored belief of %d bytes", len(raw))
	}
	back, err := BeliefFromBytes(raw)
	if err != nil || back != s.Belief {
		t.Fatalf("belief read back as %v, %v", back, err)
	}
	js, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var got Stats
	if err := json.Unmarshal(js, &got); err != nil || got != s {
		t.Fatalf("stats %s read back as %+v, %v", js, got, err)
	}
	if js, _ := json.Marshal(Stats{Polls: 1}); strings.Contains(string(js), `"b"`) {
		t.Fatalf("stats without a belief stored one: %s", js)
	}
	if b, err := BeliefFromBytes(nil); err != nil || !b.IsZero() {
		t.Fatalf("no bytes read as %v, %v; want no belief", b, err)
	}
	bad := func(what string, data []byte) {
		t.Helper()
		if _, err := BeliefFromBytes(data); err == nil {
			t.Fatalf("%s read as a belief", what)
		}
	}
	if b, err := BeliefFromBytes(raw[:legacyBeliefBytes]); err != nil || !b.IsZero() {
		t.Fatalf("a belief stored before the split read as %v, %v; want it unset", b, err)
	}
	bad("3 bytes", []byte{1, 2, 3})
	for _, v := range []float32{float32(math.NaN()), -0.5, float32(math.Inf(1)), 2 * maxLikelihood} {
		var b Belief
		b.Moved[0], b.Stay[1] = v, 1
		bad(fmt.Sprint("a belief holding ", v), b.Bytes())
		b.Moved[0], b.Stay[0] = 1, v
		bad(fmt.Sprint("a belief holding ", v), b.Bytes())
	}
	bad("a belief of zeros", make([]byte, beliefBytes))
	if err := json.Unmarshal([]byte(`{"b":"AAEC"}`), &got); err == nil {
		t.Fatal("stats with a 3-byte belief read")
	}
}

// Stats kept before beliefs were are polled for their windowed evidence, and their next
// poll starts a belief from it.
func TestStatsWithoutABeliefStartOneAtTheirNextPoll(t *testing.T) {
	p := DefaultPrior()
	s := Fold(Stats{}, Poll{Now: day0, Since: day0.Add(-days(365)), Changed: true, Commits: []time.Time{day0.Add(-days(10)), day0.Add(-days(40))}}, p)
	s.Belief = Belief{}
	in := Input{Old: 1, Cloned: true, Stats: s, Prior: p}
	if s.Seconds >= NewSpan.Seconds() {
		t.Fatalf("a first clone's stats cover %v s of polls", s.Seconds)
	}
	if got, want := (Bayes{}).Next(in), 1+newStepDays(p.guarded(s)); got != want {
		t.Fatalf("Next without a belief = %v, want the windowed evidence's %v", got, want)
	}
	next := Fold(s, Poll{Prev: day0, Now: day0.Add(days(1))}, p)
	if next.Belief.IsZero() {
		t.Fatal("a poll of stats without a belief left none")
	}
	b, _ := p.posterior(evidenceOf(&s))
	w := p.weightsOf(classOf(&s))
	started := splitOf(&b, w, &p.Weights)
	p.filter(&started, w, day0, day0.Add(days(1)), nil, false)
	var want Belief
	want.set(&started)
	if next.Belief != want {
		t.Fatalf("belief %v, want the evidence's posterior filtered over the poll %v", next.Belief, want)
	}
}

// FoldEvidence is Fold without the belief: the same evidence, and no belief kept, even
// one the stats had.
func TestFoldEvidenceKeepsNoBelief(t *testing.T) {
	p := DefaultPrior()
	clone := Poll{Now: day0, Since: day0.Add(-days(365)), Changed: true, Commits: []time.Time{day0.Add(-days(3)), day0.Add(-days(20))}}
	poll := Poll{Prev: day0, Now: day0.Add(days(2)), Changed: true, Commits: []time.Time{day0.Add(days(1))}}
	with, without := Fold(Stats{}, clone, p), FoldEvidence(Stats{}, clone, p)
	if with.Belief.IsZero() || !without.Belief.IsZero() {
		t.Fatalf("clone: belief %v with Fold, %v with FoldEvidence", with.Belief, without.Belief)
	}
	with.Belief = Belief{}
	if with != without {
		t.Fatalf("clone: evidence %+v with Fold, %+v with FoldEvidence", with, without)
	}
	kept := Fold(Stats{}, clone, p)
	next, evidence := Fold(kept, poll, p), FoldEvidence(kept, poll, p)
	if !evidence.Belief.IsZero() {
		t.Fatal("FoldEvidence kept a belief the stats had")
	}
	next.Belief = Belief{}
	if next != evidence {
		t.Fatalf("poll: evidence %+v with Fold, %+v with FoldEvidence", next, evidence)
	}
}

func sumOf(b *belief) (s float64) {
	for _, v := range b {
		s += v
	}
	return s
}

// A belief is weighed by the prior it is read under: what a repo showed under no
// change counts the same whichever prior was current when it was shown, so a repo
// cloned under the default prior is read, once the fleet has learned its own, as if it
// had been cloned under that. (With no hazard, nothing in it came from a change.)
func TestABeliefIsReadUnderTheNewestPrior(t *testing.T) {
	first := Prior{Weights: logNormal(1.0/3, math.Log(0.01), 2)}
	learned := Prior{Weights: logNormal(0.6, math.Log(0.1), 1.5)}
	history := func(p *Prior) Stats {
		s := Fold(Stats{}, Poll{Now: day0, Since: day0.Add(-days(365)), Changed: true,
			Commits: []time.Time{day0.Add(-days(30)), day0.Add(-days(200))}}, p)
		s, last := polled(s, day0, day0.Add(days(40)), 10, false, p)
		return Fold(s, Poll{Prev: last, Now: last.Add(days(10)), Changed: true, Commits: []time.Time{last.Add(days(4))}}, p)
	}
	read := func(s Stats, p *Prior) belief {
		sp := s.Belief.get()
		return sp.read(p.weightsOf(classOf(&s)), &p.Weights)
	}
	then, now := history(&first), history(&learned)
	got, want, old := read(then, &learned), read(now, &learned), read(then, &first)
	t.Logf("rate under the first prior %.4g/day; read under the learned one %.4g; filtered under it %.4g", old.mean(), got.mean(), want.mean())
	for k := range gridSize {
		if math.Abs(got[k]-want[k]) > 1e-5*max(want[k], 1e-3) {
			t.Fatalf("rate %d: %v read under the learned prior, %v filtered under it", k, got[k], want[k])
		}
	}
	if math.Abs(old.mean()-want.mean()) < 0.1*want.mean() {
		t.Fatalf("the two priors give the same rate, %v and %v: the test tells nothing", old.mean(), want.mean())
	}
}

// Fit weighs a repo's filtered belief, not its windowed evidence, when it has one: the
// fleet's repos that a poll has just shown woke up count as awake at once.
func TestFitReadsTheFilteredBelief(t *testing.T) {
	p := DefaultPrior()
	// Repos whose windowed evidence shows a year of silence, and whose belief, filtered
	// through the pushes of their last polls, a push a day.
	var stats []Stats
	for range 300 {
		s := Stats{Events: 0, Exposure: 365 * 86400, WinSeconds: 10 * 86400}
		awake := splitOf(&p.Weights, &p.Weights, &p.Weights)
		for d := range 10 {
			at := day0.Add(days(float64(d)))
			p.filter(&awake, &p.Weights, at, at.Add(days(1)), []time.Time{at.Add(12 * time.Hour)}, true)
		}
		s.Belief.set(&awake)
		stats = append(stats, s)
	}
	withBeliefs := Fit(stats, nil, day0, nil)
	for i := range stats {
		stats[i].Belief = Belief{}
	}
	windowed := Fit(stats, nil, day0, nil)
	t.Logf("fitted mean rate %.3g/day from the beliefs, %.3g from the windowed evidence", withBeliefs.Mean(), windowed.Mean())
	if withBeliefs.Mean() < 0.3 || windowed.Mean() > 0.05 {
		t.Fatalf("fitted mean %.3g/day with the beliefs of a push a day, %.3g/day on a year of silence", withBeliefs.Mean(), windowed.Mean())
	}
}
