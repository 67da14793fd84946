package priority

import (
	"math"
	"time"
)

// gridSize is the number of change rates a Prior weighs: dormant and a ladder of rates.
const gridSize = 38

// dormantRate stands for "never changes" (a push every few thousand years). A small
// positive rate rather than zero keeps the likelihood continuous in decayed counts: a
// repo that pushed long ago can still come to look dormant.
const dormantRate = 1e-6

// gridRates are the rates, in pushes per day, a Prior puts weight on: dormant, then
// 1e-4/day (a push every 27 years) up to 26/day in steps of √2 (a repo's rate is read
// to within ±19%, its poll frequency to within ±9%).
var gridRates = func() [gridSize]float64 {
	var g [gridSize]float64
	g[0] = dormantRate
	for k := 1; k < gridSize; k++ {
		g[k] = 1e-4 * math.Exp2(float64(k-1)/2)
	}
	return g
}()

// logGridRates are the logarithms of gridRates.
var logGridRates = func() [gridSize]float64 {
	var l [gridSize]float64
	for k, r := range gridRates {
		l[k] = math.Log(r)
	}
	return l
}()

// belief is a distribution over gridRates.
type belief [gridSize]float64

// Prior is the fleet's belief about change rates before it knows anything of a repo:
// how many repos change at each rate (dormant included), and how often a repo changes
// behaviour. A worker learns it from the repos it owns (Fit), which consistent hashing
// makes a random sample of the fleet. It is read-only once built.
type Prior struct {
	// Weights of the rates in gridRates over all repos; they sum to 1. A repo that
	// changes behaviour draws its new rate from them.
	Weights belief
	// ClassWeights, when Classes is set, are the weights among the repos of each class
	// of what a first clone shows besides its pushes (classOf): whether its history
	// reached the repo's first commit (a repo made and left, or a young one) and, if so,
	// whether that commit is under YoungAge old and whether its making held a run of
	// pushes (Stats.Made). The fleet learns how much each tells.
	ClassWeights [classes]belief
	Classes      bool
	// Hazard is how often a repo draws a new rate from Weights (wakes up, goes quiet,
	// speeds up), per day.
	Hazard float64
	// Repos is how many repos it was learned from; 0 for the built-in prior.
	Repos int
	// At is when it was learned; zero for the built-in prior.
	At time.Time
	// tails keeps what walking a silence needs of this prior (silence.go); nil: none.
	tails *tailCache
}

// DefaultPrior is what a worker believes before it has learned its own: a third of the
// repos dormant, the others log-normal around a push every hundred days with a wide
// spread, and one repo in a thousand changing behaviour a month. Deliberately vague
// about rates: the first clones' histories outweigh it. Its hazard, a change a month
// in a thousand repos, is low: a new fleet judges its first clones' histories with it,
// and a larger one cuts them at chance bursts and drops the years before them. The
// fleet learns its own within its first few hundred polls.
func DefaultPrior() *Prior { return &defaultPrior }

var defaultPrior = Prior{Weights: logNormal(1.0/3, math.Log(0.01), 2), Hazard: 0.001 / 30}

func init() { defaultPrior.withTails() }

// logNormal is a belief with share dormant on the dormant rate and the rest log-normal.
func logNormal(dormant, mu, sigma float64) belief {
	var b belief
	b[0] = dormant
	sum := 0.0
	for k := 1; k < gridSize; k++ {
		z := (logGridRates[k] - mu) / sigma
		b[k] = math.Exp(-z * z / 2)
		sum += b[k]
	}
	for k := 1; k < gridSize; k++ {
		b[k] *= (1 - dormant) / sum
	}
	return b
}

// Mean is the expected rate of a repo nothing is known of, in pushes per day.
func (p *Prior) Mean() float64 { return p.Weights.mean() }

func (b *belief) mean() float64 {
	m := 0.0
	for k, w := range b {
		m += w * gridRates[k]
	}
	return m
}

// Due reports whether a prior should be learned again at now from repos repos: every
// RefitEvery, and sooner while the repos it knows grow by a quarter (a new fleet's
// first clones).
func (p *Prior) Due(now time.Time, repos int) bool {
	if repos == 0 {
		return false
	}
	return p.At.IsZero() || now.Sub(p.At) >= RefitEvery || float64(repos) >= 1.25*float64(p.Repos)+8
}

// RefitEvery is how often a worker learns its prior again once its repos are known.
const RefitEvery = 7 * 24 * time.Hour

// evidence is what a repo's stats say, split as the change-point model needs it.
type evidence struct {
	oldN, oldT float64 // pushes and days before the current window
	winN, winT float64 // pushes and days in the current window
	class      int     // classOf the first clone's history
}

// Evidence is what a repo's stats say of its pushes, all a poll's score reads of them
// (Scores.AddWith): a few numbers, where the stats also carry a belief.
type Evidence struct{ e evidence }

// Evidence is what s says of the repo's pushes.
func (s *Stats) Evidence() Evidence { return Evidence{evidenceOf(s)} }

// evidenceOf reads s's evidence (upgraded, unchanged).
func evidenceOf(s *Stats) evidence {
	events, exposure := s.Events, s.Exposure
	if s.needsUpgrade() {
		events, exposure = s.Changes, s.Seconds
	}
	return evidence{oldN: events, oldT: exposure / 86400, winN: s.WinEvents, winT: s.WinSeconds / 86400, class: classOf(s)}
}

// upgrade reads stats written before pushes were counted: the polls' changes are the
// evidence before the window.
func (s *Stats) upgrade() {
	if s.needsUpgrade() {
		s.Events, s.Exposure = s.Changes, s.Seconds
	}
}

func (s *Stats) needsUpgrade() bool {
	return s.Exposure == 0 && s.WinSeconds == 0 && s.Events == 0 && s.Seconds > 0
}

// likelihood is log(λ^n·e^(−λt)) at every grid rate.
func likelihood(n, t float64) (l [gridSize]float64) {
	for k := range gridSize {
		l[k] = n*logGridRates[k] - gridRates[k]*t
	}
	return l
}

// posterior is a repo's belief about its current rate, and the probability that the
// rate changed during the current window. It weighs two explanations of the evidence:
// the repo kept one rate throughout, or it drew a new one from the prior during the
// window. Under each the belief is the prior times the Poisson likelihood λ^n·e^(−λt).
// A window of pushes is judged as a whole (a change at its start); a silence is walked
// so that a change may have happened at any moment of it (see walk).
func (p *Prior) posterior(e evidence) (b belief, changed float64) {
	var l likelihoods
	likelihoodsOf(e, &l)
	var w weighed
	p.weigh(&l, &w)
	return p.judge(&l, &w, p.Hazard)
}

// likelihoods is what a repo's evidence says of each grid rate before any prior: the
// Poisson likelihoods of its pushes before the current window, in it, and of both, and
// the walk of its silence. They depend on the evidence alone, so a fit weighs them
// under each round's weights without computing them again.
type likelihoods struct {
	silent         bool
	class          int
	winT           float64
	old, win, both scaled
	walk           silence // of a silence
	oldN, oldT     float64 // the evidence old is of
}

// scaled is a likelihood as e^(l−top) at each rate, and top: the likelihoods of rates
// more than negligible below the best are 0.
type scaled struct {
	e   belief
	top float64
}

func scale(l *[gridSize]float64) (s scaled) {
	// The best by plain comparisons, in two halves: likelihoods are never NaN, and the
	// sign of a zero best changes no difference from it, so max's care for both is
	// not needed, and its chain of dependent steps is halved.
	t0, t1 := math.Inf(-1), math.Inf(-1)
	for k := 0; k < gridSize; k += 2 {
		if l[k] > t0 {
			t0 = l[k]
		}
		if l[k+1] > t1 {
			t1 = l[k+1]
		}
	}
	s.top = t0
	if t1 > t0 {
		s.top = t1
	}
	for k, v := range l {
		if d := v - s.top; d > -negligible {
			s.e[k] = math.Exp(d)
		}
	}
	return s
}

func likelihoodsOf(e evidence, l *likelihoods) {
	l.class, l.winT = e.class, e.winT
	lo := likelihood(e.oldN, e.oldT)
	l.old = scale(&lo)
	l.oldN, l.oldT = e.oldN, e.oldT
	l.window(e)
}

// window sets l's likelihoods of the window of e; those before it are l's already.
func (l *likelihoods) window(e evidence) {
	l.class, l.winT = e.class, e.winT
	if e.winN == 0 {
		l.silent = true
		if e.winT > 0 {
			l.walk.cut(e.winT)
		}
		return
	}
	l.silent = false
	lo := likelihood(e.oldN, e.oldT)
	lw := likelihood(e.winN, e.winT)
	var ls [gridSize]float64
	for k := range gridSize {
		ls[k] = lo[k] + lw[k]
	}
	l.win, l.both = scale(&lw), scale(&ls)
}

// weighed is the part of a posterior that does not depend on the hazard, so that
// Scores weighs a repo's evidence once for all its candidate hazards.
type weighed struct {
	silent bool
	// A silence: the belief before it (its walk is the likelihoods').
	stay belief
	// A window of pushes: the beliefs if the repo stayed and if it changed, the log
	// evidence of each explanation's parts, and the window's days.
	win               belief
	mStay, mWin, mOld float64
	winT              float64
}

// weigh weighs likelihoods under the prior's weights.
func (p *Prior) weigh(l *likelihoods, w *weighed) {
	weights := p.weightsOf(l.class)
	w.winT = l.winT
	if l.silent {
		w.silent = true
		w.stay, _ = weigh(weights, &l.old)
		return
	}
	// The repo's class weighs its evidence; after a change it is any repo.
	w.silent = false
	w.stay, w.mStay = weigh(weights, &l.both)
	w.win, w.mWin = weigh(&p.Weights, &l.win)
	_, w.mOld = weigh(weights, &l.old)
}

// The classes of repos a prior weighs apart: what the first clone showed besides the
// pushes.
const (
	classOther     = iota // the history did not reach the first commit
	classRoot             // it did, and that commit is YoungAge old or more
	classYoung            // it did, and that commit is younger
	classRootMade         // classRoot, and its making held MadePushes pushes or more
	classYoungMade        // classYoung, and likewise
	classes
)

// YoungAge is the age under which a repo whose history reaches its first commit is
// weighed as young: a repo a year old that got a commit or two may be starting, one
// that got them years ago was most likely made and left.
const YoungAge = 365 * 24 * time.Hour

// classOf is the class of a repo's stats.
func classOf(s *Stats) int {
	switch {
	case s.Root && s.Young && s.Made:
		return classYoungMade
	case s.Root && s.Young:
		return classYoung
	case s.Root && s.Made:
		return classRootMade
	case s.Root:
		return classRoot
	}
	return classOther
}

// weightsOf is the weights of the repos of a class; all repos' when the prior has no
// classes.
func (p *Prior) weightsOf(class int) *belief {
	if !p.Classes {
		return &p.Weights
	}
	return &p.ClassWeights[class]
}

// judge is the posterior of likelihoods l, weighed as w, at hazard per day.
func (p *Prior) judge(l *likelihoods, w *weighed, hazard float64) (b belief, changed float64) {
	if w.silent {
		if w.winT <= 0 {
			return w.stay, 0
		}
		return p.walk(w.stay, &l.walk, hazard)
	}
	changed = windowChange(w, hazard)
	for k := range gridSize {
		b[k] = changed*w.win[k] + (1-changed)*w.stay[k]
	}
	return b, changed
}

// windowChange is the chance that a repo changed at the start of its window of pushes,
// at hazard per day: with pc the chance of a change in the window, the odds are
// pc/(1−pc) = e^(hazard·days) − 1 times the ratio of the evidence of the two
// explanations.
func windowChange(w *weighed, hazard float64) float64 {
	return changeOdds(w, hazard, math.Exp(w.mStay-w.mOld-w.mWin))
}

// changeOdds is windowChange given e^−(log evidence of a change − of none).
func changeOdds(w *weighed, hazard, against float64) float64 {
	odds := math.Expm1(hazard * w.winT)
	if !(odds > 0) {
		return 0
	}
	return odds / (odds + against)
}

// weigh returns the belief ∝ weights·e^l and log Σ weights·e^l, from l scaled. Rates
// whose likelihood is below e^−negligible of the best are left out: their weight would
// be under 1e-20 of it, and skipping their exponentials makes a posterior a good deal
// cheaper.
func weigh(weights *belief, l *scaled) (b belief, logSum float64) {
	var s0, s1 float64
	for k := 0; k < gridSize; k += 2 {
		b[k] = weights[k] * l.e[k]
		b[k+1] = weights[k+1] * l.e[k+1]
		s0 += b[k]
		s1 += b[k+1]
	}
	sum := s0 + s1
	if sum == 0 || math.IsInf(l.top, -1) {
		return *weights, math.Inf(-1)
	}
	for k := range b {
		b[k] /= sum
	}
	return b, l.top + math.Log(sum)
}

// negligible is how far below the best log-likelihood a rate is left out of a belief.
const negligible = 46

// decays sets f[k] to e^(−gridRates[k]·days) from base, the decays of the first three
// rates. Above the dormant rate each rate is √2 times the one before, so squarings give
// the rest (a squaring doubles the relative error: 2^18 ulp at most, far below what
// matters here). A decay under minDecay is 0: it would weigh nothing against the repos
// that change in the silence, and products of such decays turn subnormal, whose
// arithmetic is very slow. It returns how many rates, from the slowest, hold the
// decays above 0 (live: even, for the loops that take rates in pairs); the faster ones'
// products with anything finite are 0, so a loop may stop there.
func decays(base [3]float64, f *belief) (live int) {
	for k, b := range base {
		if f[k] = floored(b); f[k] != 0 {
			live = k + 1
		}
	}
	// Each rate's decay is the square of the one two below: the odd rates' chain and the
	// even ones', kept in hand rather than read back.
	odd, even := f[1], f[2]
	k := 3
	for ; k+1 < gridSize; k += 2 {
		odd, even = floored(odd*odd), floored(even*even)
		f[k], f[k+1] = odd, even
		switch {
		case even != 0:
			live = k + 2
		case odd != 0:
			live = k + 1
		default: // both chains are 0 from here on
			clear(f[k+2:])
			return live + live%2
		}
	}
	if f[k] = floored(odd * odd); f[k] != 0 {
		live = k + 1
	}
	return live + live%2
}

// floored is a decay, 0 under minDecay.
func floored(d float64) float64 {
	if d < minDecay {
		return 0
	}
	return d
}

// minDecay is the least decay over a step of a silence that is not taken as 0 (e^-69).
const minDecay = 1e-30

// Rate is the expected current change rate of a repo, in pushes per day.
func (p *Prior) Rate(s Stats) float64 {
	b, _ := p.posterior(evidenceOf(&s))
	return b.mean()
}

// hazards are the rates of change of behaviour, per month, a worker chooses from by
// how well each predicts its polls (Scores). They reach down to a change a month in
// 10,000 repos: a dormant repo's expected rate is about the hazard times the share of
// active repos, so a fleet whose repos keep their rates polls its dormant ones less.
var hazards = [...]float64{0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3}

// Scores weighs the candidate hazards by how well each would have predicted the polls
// of a worker's repos: the log-probability it gave, before each poll, to the poll
// finding a push or not. Of all a prior's parts the hazard is the one the repos' own
// evidence cannot tell (a silence fits a repo that stayed dormant and one that changed
// to dormant alike); the surprise of a silent repo's push can. Every poll is scored
// (every poll whose time the push did not choose: the worker's step, worker.Step): a
// poll's score tells the candidates apart by little, and scoring one in eight left a new
// fleet's hazard (or one that faded its scores) to chance, several times the truth, with
// a dormant repo's polls growing with it. A score reads every candidate's posterior off
// the repo's view, computed once for all of them from what the repo's Memo keeps (its
// cost: bench/results/freshness.json, costs).
type Scores struct {
	LogLik [len(hazards)]float64
	Polls  float64
}

// Add scores one successful poll of a repo whose stats were s before it.
func (sc *Scores) Add(prior *Prior, s Stats, p Poll) { sc.AddWith(prior, s.Evidence(), p, nil) }

// AddWith is Add of a repo whose stats showed e before the poll, reading its
// likelihoods and its belief before a silence from m (Memo); m may be nil.
func (sc *Scores) AddWith(prior *Prior, e Evidence, p Poll, m *Memo) {
	if prior == nil || p.Prev.IsZero() {
		return
	}
	days := p.Now.Sub(p.Prev).Hours() / 24
	if days <= 0 {
		return
	}
	scratch := view{candidates: true}
	v := prior.view(e.e, m, &scratch)
	var stay belief // the chance of no push over the poll's interval, at each rate
	live := quietFor(days, &stay)
	r := v.read(&stay, live)
	for h := range hazards {
		quiet := min(max(r.at(v, h), 1e-9), 1-1e-9)
		if p.Changed {
			sc.LogLik[h] += math.Log1p(-quiet)
		} else {
			sc.LogLik[h] += math.Log(quiet)
		}
	}
	sc.Polls++
}

// hazard is the best-scoring hazard per day, the default prior's while too few polls
// have been scored; it moves between neighbouring candidates smoothly (weighted by
// likelihood, in log space).
func (sc *Scores) hazard() float64 {
	if sc == nil || sc.Polls < minScoredPolls {
		return defaultPrior.Hazard
	}
	top := math.Inf(-1)
	for _, l := range sc.LogLik {
		top = max(top, l)
	}
	var sum, logH float64
	for h, l := range sc.LogLik {
		w := math.Exp(l - top)
		sum += w
		logH += w * math.Log(hazards[h])
	}
	return math.Exp(logH/sum) / 30
}

// minScoredPolls is how many polls a worker scores before it trusts its own hazard.
const minScoredPolls = 500

// Fade halves the scores' weight, so the hazard follows a fleet whose repos change; a
// worker fades them each time it learns its prior.
func (sc *Scores) Fade() {
	for h := range sc.LogLik {
		sc.LogLik[h] /= 2
	}
	sc.Polls /= 2
}

// Fit learns a prior from the stats of many repos (empirical Bayes): the hazard from the
// scores (nil: the default's), then the rate weights by EM as the fleet's average belief
// about its repos' current rates (the nonparametric maximum-likelihood mixture on the
// grid), shrunk towards the default by priorRepos pseudo-repos, for all repos and for
// each class of first clone (classOf). A repo's belief about its current rate is its
// filtered one (Belief) when it has one, read under the weights of the round: it knows
// of a change at the poll that showed it, where the windowed posterior, which repos
// without one give, waits for the window to be judged and blurs old rates with new.
// Repos with no evidence are skipped; base (nil: the default) is where EM starts.
func Fit(stats []Stats, base *Prior, now time.Time, sc *Scores) *Prior {
	return FitWith(stats, nil, base, now, sc)
}

// FitWith is Fit reading each repo's likelihoods from its Memo (memos[i] is stats[i]'s;
// nil, or a nil entry: none), which keeps them while its stats do not change. The
// likelihoods do not depend on the prior, so EM's rounds weigh the same ones.
func FitWith(stats []Stats, memos []*Memo, base *Prior, now time.Time, sc *Scores) *Prior {
	if base == nil {
		base = DefaultPrior()
	}
	out := *base
	out.Hazard = sc.hazard()
	// Each repo with evidence, and its memo if any. Without one, its likelihoods are
	// computed again each round: a worker keeps no memos, and holding them for the whole
	// fit would cost it kilobytes per repo.
	type item struct {
		s *Stats
		e evidence // s's, read once
		m *Memo
	}
	var items []item
	for i := range stats {
		s := &stats[i]
		if e := evidenceOf(s); e.oldT+e.winT > 0 {
			it := item{s: s, e: e}
			if memos != nil {
				it.m = memos[i]
			}
			items = append(items, it)
		}
	}
	out.Repos, out.At = len(items), now
	if !out.Classes {
		for c := range out.ClassWeights {
			out.ClassWeights[c] = out.Weights
		}
		out.Classes = true
	}
	var (
		w       weighed
		scratch likelihoods
	)
	rounds := fitRounds
	if base.Repos > 0 && float64(len(items)) < 1.25*float64(base.Repos)+8 {
		// A refit of the same repos a week on: the prior it starts from is already
		// fitted to them, and one round keeps it there.
		rounds = 1
	}
	for range rounds {
		// Each class and all repos together are shrunk towards the default by
		// priorRepos pseudo-repos.
		var all belief
		for k := range gridSize {
			all[k] = priorRepos * defaultPrior.Weights[k]
		}
		var sums [classes]belief
		for c := range sums {
			sums[c] = all
		}
		for _, it := range items {
			class := classOf(it.s)
			var b belief
			if !it.s.Belief.IsZero() {
				sp := it.s.Belief.get()
				b = sp.read(out.weightsOf(class), &out.Weights)
			} else {
				l := &scratch
				if it.m != nil {
					l = it.m.likelihoods(it.e)
				} else {
					likelihoodsOf(it.e, l)
				}
				out.weigh(l, &w)
				b, _ = out.judge(l, &w, out.Hazard)
			}
			for k := range gridSize {
				sums[class][k] += b[k]
				all[k] += b[k]
			}
		}
		for c := range sums {
			out.ClassWeights[c] = normalised(sums[c])
		}
		out.Weights = normalised(all)
	}
	return out.withTails()
}

// normalised is b scaled to sum to 1.
func normalised(b belief) belief {
	total := 0.0
	for _, v := range b {
		total += v
	}
	for k := range b {
		b[k] /= total
	}
	return b
}

// fitRounds is the EM iterations per Fit while a fleet's repos grow; a worker refits
// regularly and starts from its last fit, so a few per round converge over time, and a
// weekly refit of the same repos takes one.
const fitRounds = 3

// priorRepos is how many repos the default prior counts as in a fit: a worker that owns
// a handful of repos keeps close to it.
const priorRepos = 50
