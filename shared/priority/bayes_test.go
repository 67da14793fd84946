package priority

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func TestSessionsCountBurstsOfCommits(t *testing.T) {
	at := func(h float64) time.Time { return t0.Add(time.Duration(h * float64(time.Hour))) }
	for _, c := range []struct {
		hours []float64
		want  int
	}{
		{nil, 0},
		{[]float64{0}, 1},
		{[]float64{0, 0.5, 1, 3.9}, 1},              // gaps under SessionGap (4 h)
		{[]float64{5, 0, 0.2}, 2},                   // any order
		{[]float64{0, 24, 48, 48.1, 100}, 4},        // days apart
		{[]float64{0, 4.01, 8.02, 12.03, 16.04}, 5}, // just over the gap each
	} {
		var ts []time.Time
		for _, h := range c.hours {
			ts = append(ts, at(h))
		}
		if got := Sessions(ts); got != c.want {
			t.Errorf("Sessions(%v h) = %d, want %d", c.hours, got, c.want)
		}
	}
}

// pushes are commit times: one burst every gap back from the end, n of them.
func pushes(end time.Time, gap time.Duration, n int) []time.Time {
	var ts []time.Time
	for k := range n {
		at := end.Add(-time.Duration(k) * gap)
		ts = append(ts, at, at.Add(-10*time.Minute))
	}
	return ts
}

func TestAFirstCloneFoldsItsHistory(t *testing.T) {
	// A year of history, a push every 5 days: about 73 pushes over 365 days.
	s := Fold(Stats{}, Poll{Now: t0, Changed: true, Since: t0.AddDate(-1, 0, 0), Commits: pushes(t0.Add(-time.Hour), 5*24*time.Hour, 73)}, nil)
	// Older windows fade (OldHalfLife), pushes and time alike: the rate stays.
	n, days := s.Events+s.WinEvents, (s.Exposure+s.WinSeconds)/86400
	if math.Abs(n/days-0.2) > 0.02 || days < 200 || days > 366 {
		t.Fatalf("history folded into %+v: %.1f pushes over %.0f days", s, n, days)
	}
	if r := DefaultPrior().Rate(s); r < 0.15 || r > 0.25 {
		t.Fatalf("a repo pushing every 5 days is estimated at %.3f pushes/day", r)
	}
	// A repo whose history starts at its first commit: the making of it is not counted.
	young := Fold(Stats{}, Poll{Now: t0, Changed: true, Since: t0.AddDate(0, 0, -10), FromRoot: true,
		Commits: pushes(t0.AddDate(0, 0, -9), 12*time.Hour, 10)}, nil)
	if young.Events+young.WinEvents != 0 || young.Exposure+young.WinSeconds != 0 {
		t.Fatalf("a repo made 10 days ago counts its making as evidence: %+v", young)
	}
	// A repo quiet for three years, with nothing in the window: a silence of three years.
	quiet := Fold(Stats{}, Poll{Now: t0, Changed: true, Since: t0.AddDate(-1, 0, 0), LastCommitAt: t0.AddDate(-3, 0, 0)}, nil)
	if quiet.WinEvents != 0 || math.Abs(quiet.WinSeconds/86400-3*365) > 2 {
		t.Fatalf("a repo quiet for 3 years folded into %+v", quiet)
	}
	// A clone again (the mirror was lost) keeps what the polls saw.
	if got := Fold(s, Poll{Now: t0, Changed: true}, nil); got != s {
		t.Fatalf("a second clone replaced the stats: %+v", got)
	}
}

// The making of a repo is its first run of work, however long past the first Window it
// went on, and no longer than MaxMaking: a busy young repo's pushes after it count.
func TestAFirstCloneSkipsTheMakingOfARepo(t *testing.T) {
	born := t0.AddDate(-2, 0, 0)
	// Made over 30 days, a push every 2 days, then left for two years.
	made := pushes(born.AddDate(0, 0, 30), 2*24*time.Hour, 16)
	left := Fold(Stats{}, Poll{Now: t0, Changed: true, Since: born, FromRoot: true, Commits: made}, nil)
	if n, days := left.Events+left.WinEvents, (left.Exposure+left.WinSeconds)/86400; n != 0 || days < 690 || days > 700 {
		t.Fatalf("a repo made over 30 days and left for two years: %.1f pushes over %.0f days, want none over about 700", n, days)
	}
	if r := DefaultPrior().Rate(left); r > 1e-3 {
		t.Fatalf("a repo made and left two years ago is estimated at %.2g pushes/day", r)
	}
	// Made 300 days ago and pushed daily since: all but its first MaxMaking are evidence
	// (fading by OldHalfLife, pushes and days alike).
	busy := Fold(Stats{}, Poll{Now: t0, Changed: true, Since: t0.AddDate(0, 0, -300), FromRoot: true,
		Commits: pushes(t0.Add(-time.Hour), 24*time.Hour, 300)}, nil)
	wantDays := 300 - MaxMaking.Hours()/24
	if n, days := busy.Events+busy.WinEvents, (busy.Exposure+busy.WinSeconds)/86400; days < 0.9*wantDays || days > wantDays+1 || math.Abs(n/days-1) > 0.02 {
		t.Fatalf("a busy repo made 300 days ago: %.1f pushes over %.0f days, want about one a day over %.0f (less the fading)", n, days, wantDays)
	}
}

func TestPollsAddPushesAndTimeToTheWindow(t *testing.T) {
	s := Stats{Events: 10, Exposure: 100 * 86400}
	s = Fold(s, Poll{Prev: t0, Now: t0.Add(6 * time.Hour)}, nil)
	if s.WinEvents != 0 || s.WinSeconds != 6*3600 || s.Polls != 1 || s.Changes != 0 {
		t.Fatalf("a poll that saw nothing: %+v", s)
	}
	s = Fold(s, Poll{Prev: t0.Add(6 * time.Hour), Now: t0.Add(12 * time.Hour), Changed: true,
		Commits: []time.Time{t0.Add(6 * time.Hour), t0.Add(11 * time.Hour), t0.Add(11*time.Hour + time.Minute)}}, nil)
	if s.WinEvents != 2 || s.WinSeconds != 12*3600 || s.Changes != 1 {
		t.Fatalf("a poll that brought two bursts: %+v", s)
	}
	s = Fold(s, Poll{Prev: t0.Add(12 * time.Hour), Now: t0.Add(13 * time.Hour), Changed: true}, nil)
	if s.WinEvents != 3 {
		t.Fatalf("refs moved without new commits still count a push: %+v", s)
	}
	// Stats written before pushes were counted read as evidence.
	old := Stats{Polls: 20, Changes: 4, Seconds: 40 * 86400}
	if e := evidenceOf(&old); e.oldN != 4 || e.oldT != 40 {
		t.Fatalf("old stats read as %+v", e)
	}
}

// steady folds a poll every interval for days, with a push every every-th poll.
func steady(s Stats, from time.Time, days, interval time.Duration, every int, prior *Prior) (Stats, time.Time) {
	now := from
	for k := 1; now.Before(from.Add(days)); k++ {
		next := now.Add(interval)
		p := Poll{Prev: now, Now: next}
		if every > 0 && k%every == 0 {
			p.Changed, p.Commits = true, []time.Time{next.Add(-time.Minute)}
		}
		s, now = Fold(s, p, prior), next
	}
	return s, now
}

func TestARepoThatWakesUpIsNoticedAtTheFirstPush(t *testing.T) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.05 / 30}
	// Cloned after two years of silence, then polled daily for two months.
	s := Fold(Stats{}, Poll{Now: t0, Changed: true, Since: t0.AddDate(-1, 0, 0), LastCommitAt: t0.AddDate(-2, 0, 0)}, prior)
	s, now := steady(s, t0, 60*24*time.Hour, 24*time.Hour, 0, prior)
	quiet := prior.Rate(s)
	if quiet > 2e-3 {
		t.Fatalf("a repo silent for two years is estimated at %.2g pushes/day", quiet)
	}
	// One poll brings a push: the estimate jumps at once (a slow repo could have made
	// it too, so not all the way), and a second push a few days later settles it.
	woke := Fold(s, Poll{Prev: now, Now: now.Add(24 * time.Hour), Changed: true, Commits: pushes(now.Add(20*time.Hour), time.Hour, 3)}, prior)
	if r := prior.Rate(woke); r < 10*quiet {
		t.Fatalf("after waking up: %.3g pushes/day, before %.3g", r, quiet)
	}
	if step, before := (Bayes{}).Next(Input{Cloned: true, Stats: woke, Prior: prior}), (Bayes{}).Next(Input{Cloned: true, Stats: s, Prior: prior}); step > before/3 {
		t.Fatalf("the woken repo's step %.1f, quiet %.1f", step, before)
	}
	now = now.Add(24 * time.Hour)
	again := Fold(woke, Poll{Prev: now, Now: now.Add(3 * 24 * time.Hour), Changed: true, Commits: []time.Time{now.Add(48 * time.Hour)}}, prior)
	if r := prior.Rate(again); r < 0.1 {
		t.Fatalf("two pushes in four days after two years of silence: %.3g pushes/day", r)
	}
}

func TestARepoThatGoesQuietIsPolledLess(t *testing.T) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.05 / 30}
	// A push a day for a year (as polls every 6 hours saw it), then nothing for 60 days.
	s, now := steady(Stats{}, t0, 365*24*time.Hour, 6*time.Hour, 4, prior)
	busy := prior.Rate(s)
	if busy < 0.8 || busy > 1.25 {
		t.Fatalf("a repo pushing daily is estimated at %.3f pushes/day", busy)
	}
	s, _ = steady(s, now, 60*24*time.Hour, 6*time.Hour, 0, prior)
	if r := prior.Rate(s); r > busy/10 {
		t.Fatalf("60 days of silence after a year of daily pushes: %.3f pushes/day (was %.3f)", r, busy)
	}
	// Without changes of behaviour a silence of 60 days only lowers a daily repo's rate a little.
	still := *prior
	still.Hazard = 0
	s2, now2 := steady(Stats{}, t0, 365*24*time.Hour, 6*time.Hour, 4, &still)
	s2, _ = steady(s2, now2, 10*24*time.Hour, 6*time.Hour, 0, &still)
	if r := still.Rate(s2); r < busy/2 {
		t.Fatalf("without a hazard 10 silent days took a daily repo to %.3f", r)
	}
}

func TestTheHazardKeepsAQuietRepoWorthAPoll(t *testing.T) {
	s := Stats{WinSeconds: 3 * 365 * 86400} // silent for three years, nothing before
	prev := 0.0
	for _, h := range []float64{0, 0.003, 0.03, 0.3} {
		p := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: h / 30}
		r := p.Rate(s)
		if !(r > prev) {
			t.Fatalf("hazard %g a month: a quiet repo at %.3g pushes/day, not above %.3g", h, r, prev)
		}
		prev = r
	}
	// With a hazard of 30% a month a quiet repo may well have woken: about half the
	// fleet's mean rate (half the draws are dormant), less what its recent silence rules out.
	p := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.3 / 30}
	if r := p.Rate(s); r < 0.05*p.Mean() || r > p.Mean() {
		t.Fatalf("hazard 30%%/month: quiet repo %.3g, fleet mean %.3g", r, p.Mean())
	}
}

func TestFitLearnsThePopulation(t *testing.T) {
	// Half the repos silent for 2–6 years, half pushing at 0.01, 0.1 or 1 a day for a year.
	var stats []Stats
	for i := range 600 {
		switch i % 6 {
		case 0, 1, 2:
			stats = append(stats, Stats{WinSeconds: float64(2+i%5) * 365 * 86400})
		default:
			rate := math.Pow(10, float64(i%6-5)) // 0.01, 0.1, 1
			stats = append(stats, Stats{Events: math.Round(rate * 365), Exposure: 365 * 86400})
		}
	}
	p := Fit(stats, nil, t0, nil)
	if p.Repos != 600 || !p.At.Equal(t0) {
		t.Fatalf("fit from %d repos at %v", p.Repos, p.At)
	}
	low := 0.0 // weight at rates a silence of years cannot tell from dormant
	for k, r := range gridRates {
		if r <= 4e-4 {
			low += p.Weights[k]
		}
	}
	if low < 0.4 || low > 0.6 {
		t.Fatalf("silent repos carry %.2f of the fitted weight, want about half: %v", low, p.Weights)
	}
	want := (0.01 + 0.1 + 1) / 6
	if m := p.Mean(); math.Abs(m-want)/want > 0.25 {
		t.Fatalf("fitted mean %.3f pushes/day, the repos' is %.3f", m, want)
	}
	if p.Hazard != DefaultPrior().Hazard {
		t.Fatalf("without scores the hazard moved: %v", p.Hazard)
	}
	// The same data, the same prior.
	if q := Fit(stats, nil, t0, nil); q.Weights != p.Weights || q.ClassWeights != p.ClassWeights || q.Hazard != p.Hazard || q.Repos != p.Repos {
		t.Fatal("Fit is not deterministic")
	}
	// Due: at once for a new fleet, again when the repos grow by a quarter or a week passes.
	if DefaultPrior().Due(t0, 0) || !DefaultPrior().Due(t0, 1) {
		t.Fatal("the default prior is due only once there are repos")
	}
	if p.Due(t0.Add(time.Hour), 700) || !p.Due(t0.Add(time.Hour), 760) || !p.Due(t0.Add(RefitEvery), 600) {
		t.Fatal("Due rules")
	}
}

func TestScoresPickTheHazardThatPredictsThePolls(t *testing.T) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: DefaultPrior().Hazard}
	quiet := Stats{WinSeconds: 2 * 365 * 86400}
	score := func(wakeEvery int) float64 {
		var sc Scores
		rng := rand.New(rand.NewPCG(1, 2))
		for range 20000 {
			p := Poll{Prev: t0, Now: t0.Add(7 * 24 * time.Hour), Changed: wakeEvery > 0 && rng.IntN(wakeEvery) == 0}
			sc.Add(prior, quiet, p)
		}
		return sc.hazard() * 30
	}
	never, rare, often := score(0), score(400), score(20)
	if !(never < rare && rare < often) || never > 0.003 || often < 0.1 {
		t.Fatalf("hazard learned from quiet repos that never / 1 in 400 / 1 in 20 weeks wake: %.4f %.4f %.4f a month", never, rare, often)
	}
	var few Scores
	few.Add(prior, quiet, Poll{Prev: t0, Now: t0.Add(time.Hour), Changed: true})
	if few.hazard() != DefaultPrior().Hazard {
		t.Fatal("a handful of polls moved the hazard")
	}
}

func TestBayesSteps(t *testing.T) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.01 / 30}
	// Not cloned: the first clone goes first; a failed one waits a typical repo's step per failure.
	if got := (Bayes{}).Next(Input{Old: 3, Prior: prior}); got != 3 {
		t.Fatalf("first clone: %v", got)
	}
	if got := (Bayes{}).Next(Input{Old: 3, CloneFailCnt: 2, Prior: prior}); math.Abs(got-3-2/math.Sqrt(prior.Mean())) > 1e-9 {
		t.Fatalf("after 2 failed clones: %v", got)
	}
	busy := Stats{Events: 365, Exposure: 365 * 86400}
	base := (Bayes{}).Next(Input{Cloned: true, Stats: busy, Prior: prior})
	if math.Abs(base-1) > 0.1 {
		t.Fatalf("a repo pushing daily steps %.3f, want about 1", base)
	}
	if got := (Bayes{}).Next(Input{Cloned: true, FetchFailCnt: 2, Stats: busy, Prior: prior}); math.Abs(got-3*base) > 1e-9 {
		t.Fatalf("after 2 failed fetches: %v, want 3 × %v", got, base)
	}
	// A dead repo is still polled: the step stops at 1/√MinRate.
	dead := Stats{WinSeconds: 10 * 365 * 86400}
	still := &Prior{Weights: prior.Weights}
	if got := (Bayes{}).Next(Input{Cloned: true, Stats: dead, Prior: still}); got > 1/math.Sqrt(MinRate)+1e-9 {
		t.Fatalf("a dead repo steps %v, more than the guard %v", got, 1/math.Sqrt(MinRate))
	}
	// Degenerate stats never give NaN, infinity or a step that goes backwards.
	for _, s := range []Stats{{}, {Events: 1e9, Exposure: 1}, {WinEvents: 5}, {Exposure: 1e12}, {Events: 1e-300, WinSeconds: 1e-300}} {
		for _, p := range []*Prior{nil, prior, still} {
			got := (Bayes{}).Next(Input{Old: 7, Cloned: true, Stats: s, Prior: p})
			if math.IsNaN(got) || math.IsInf(got, 0) || got <= 7 {
				t.Fatalf("stats %+v: next %v", s, got)
			}
		}
	}
}

func TestTheTailGuardLiftsProbablyActiveSlowRepos(t *testing.T) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.003 / 30}
	// Two pushes in three years, the latest 300 days ago: slow, and probably
	// not dead.
	slow := Stats{Events: 2, Exposure: 800 * 86400, WinSeconds: 300 * 86400}
	if r, g := prior.Rate(slow), prior.guarded(slow); !(r < GuardRate/2) || g < GuardRate/2 || g <= r {
		t.Fatalf("slow repo: expected %.2g pushes/day, polled for %.2g; want the guard near %.2g", r, g, GuardRate)
	}
	// A repo silent for eight years is left to its own estimate.
	dead := Stats{WinSeconds: 8 * 365 * 86400}
	if r, g := prior.Rate(dead), prior.guarded(dead); g > 2*r && g > 2*MinRate {
		t.Fatalf("dead repo: expected %.2g, polled for %.2g", r, g)
	}
	// A busy repo is polled for its own rate.
	busy := Stats{Events: 100, Exposure: 100 * 86400}
	if r, g := prior.Rate(busy), prior.guarded(busy); math.Abs(r-g) > 1e-12*r {
		t.Fatalf("busy repo: expected %.3g, polled for %.3g", r, g)
	}
}

// Run with: go test -run '^$' -bench . ./shared/priority/
func BenchmarkBayesNext(b *testing.B) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.01 / 30}
	in := Input{Old: 1, Cloned: true, Stats: Stats{Events: 12, Exposure: 800 * 86400, WinSeconds: 40 * 86400}, Prior: prior}
	for b.Loop() {
		(Bayes{}).Next(in)
	}
}

func BenchmarkFit10000Repos(b *testing.B) {
	var stats []Stats
	for i := range 10000 {
		stats = append(stats, Stats{Events: float64(i % 37), Exposure: float64(100+i%1800) * 86400, WinEvents: float64(i % 3), WinSeconds: float64(i%14) * 86400})
	}
	for b.Loop() {
		Fit(stats, nil, t0, nil)
	}
}

// A first clone that reached the root is a class of its own: where most such repos were
// made and left, a short silent history reads as dormant, while the same silence in a
// repo of the other class keeps the active repos' chance.
func TestFitLearnsWhatReachingTheRootSays(t *testing.T) {
	var stats []Stats
	for i := range 900 {
		switch i % 3 {
		case 0: // made and left: its making (the first window, not counted) and silence since
			stats = append(stats, Stats{Exposure: float64(200+i%300) * 86400, Root: true})
		case 1: // active, long history
			stats = append(stats, Stats{Events: math.Round(0.05 * 365), Exposure: 365 * 86400})
		default: // active, slow, long history: a push in 400 days
			stats = append(stats, Stats{Events: float64(i % 2), Exposure: 365 * 86400})
		}
	}
	p := Fit(stats, nil, t0, nil)
	if !p.Classes {
		t.Fatal("no classes fitted")
	}
	quiet := Stats{Exposure: 300 * 86400, WinSeconds: 60 * 86400}
	rooted := quiet
	rooted.Root = true
	if r, o := p.Rate(rooted), p.Rate(quiet); r >= o/2 {
		t.Fatalf("a quiet repo whose history reached the root: %.2g pushes/day; one whose did not: %.2g", r, o)
	}
	// A prior without classes (the default, or one stored before them) weighs both alike.
	if d := DefaultPrior(); d.Rate(rooted) != d.Rate(quiet) {
		t.Fatal("the default prior tells the classes apart")
	}
	// A root repo that pushes is believed at once.
	busy := rooted
	busy.WinEvents, busy.WinSeconds = 20, 14*86400
	if r := p.Rate(busy); r < 0.3 {
		t.Fatalf("a rooted repo pushing 20 times in 14 days: %.2g pushes/day", r)
	}
}

// Among the repos whose history reached the root, the young ones are a class of their
// own: where the old ones were made and left and the young ones are starting, a young
// repo quiet since its first commit keeps an active repo's chance while an old one with
// the same silence reads as dormant.
func TestFitLearnsWhatAYoungRootSays(t *testing.T) {
	var stats []Stats
	for i := range 900 {
		switch i % 3 {
		case 0: // made years ago and left: silence since
			stats = append(stats, Stats{Exposure: float64(400+i%900) * 86400, Root: true})
		case 1: // young and active: a push every 20 days since it was made
			days := float64(60 + i%300)
			stats = append(stats, Stats{Events: math.Round(days / 20), Exposure: days * 86400, Root: true, Young: true})
		default: // active, long history
			stats = append(stats, Stats{Events: math.Round(0.05 * 365), Exposure: 365 * 86400})
		}
	}
	p := Fit(stats, nil, t0, nil)
	old := Stats{Exposure: 90 * 86400, Root: true}
	young := old
	young.Young = true
	if y, o := p.Rate(young), p.Rate(old); y < 3*o {
		t.Fatalf("a young repo quiet for 90 days since its first commit: %.2g pushes/day; an old one: %.2g", y, o)
	}
}

// The first clone tells a young repo from an old one by when the history it lists
// began, when that is the repo's first commit.
func TestFoldMarksAYoungRoot(t *testing.T) {
	now := t0.Add(1000 * 24 * time.Hour)
	for _, c := range []struct {
		age        time.Duration
		root, want bool
	}{{100 * 24 * time.Hour, true, true}, {400 * 24 * time.Hour, true, false}, {100 * 24 * time.Hour, false, false}} {
		since := now.Add(-c.age)
		s := Fold(Stats{}, Poll{Now: now, Changed: true, Commits: []time.Time{since}, Since: since, FromRoot: c.root}, nil)
		if s.Young != c.want || s.Root != c.root {
			t.Errorf("history of %v, from the root %v: Young %v Root %v", c.age, c.root, s.Young, s.Root)
		}
	}
}

func TestANewRepoIsSteppedFlatter(t *testing.T) {
	prior := &Prior{Weights: logNormal(0.5, math.Log(0.005), 1.6), Hazard: 0.01 / 30}
	step := func(s Stats, polled time.Duration) float64 {
		s.Seconds = polled.Seconds()
		return (Bayes{}).Next(Input{Cloned: true, Stats: s, Prior: prior})
	}
	slow := Stats{Events: 2, Exposure: 1000 * 86400}
	daily := Stats{Events: 365, Exposure: 365 * 86400}
	weeks, settled := NewSpan/2, 2*NewSpan
	// A slow repo is polled more in its first weeks than once its polls cover NewSpan.
	if n, o := step(slow, weeks), step(slow, settled); n >= 0.9*o {
		t.Fatalf("a new slow repo steps %.1f, a settled one %.1f: want the new one polled more", n, o)
	}
	// Around a push a day the two exponents agree.
	if n, o := step(daily, weeks), step(daily, settled); math.Abs(n/o-1) > 0.05 {
		t.Fatalf("a new daily repo steps %.3f, a settled one %.3f: want about equal", n, o)
	}
	// The new step is flatter: slow over daily is a smaller ratio than √ gives.
	if n, o := step(slow, weeks)/step(daily, weeks), step(slow, settled)/step(daily, settled); n >= o {
		t.Fatalf("slow/daily step ratio %.1f new, %.1f settled: want the new one flatter", n, o)
	}
}

// The first clone marks a repo whose making held a run of pushes (Made): a repo worked
// on from its first days, where one begun with a commit or two is not.
func TestFoldMarksARepoMadeInARunOfWork(t *testing.T) {
	now := t0.Add(1000 * 24 * time.Hour)
	born := now.AddDate(-2, 0, 0)
	for _, c := range []struct {
		pushes int
		root   bool
		want   bool
	}{{1, true, false}, {MadePushes - 1, true, false}, {MadePushes, true, true}, {8, true, true}, {8, false, false}} {
		// The pushes a day apart from the first commit on (a making), then two years quiet.
		commits := []time.Time{born}
		for k := 1; k < c.pushes; k++ {
			commits = append(commits, born.Add(time.Duration(k)*24*time.Hour))
		}
		s := Fold(Stats{}, Poll{Now: now, Changed: true, Commits: commits, Since: born, FromRoot: c.root}, nil)
		if s.Made != c.want {
			t.Errorf("a making of %d pushes, from the root %v: Made %v, want %v", c.pushes, c.root, s.Made, c.want)
		}
	}
}

// Among the repos whose history reached the root, those made in a run of work are a
// class of their own: where the repos worked on and left far outnumber the busy ones
// that kept going, a repo quiet for years after a run of work reads as dormant, while
// the same quiet after a commit or two keeps a slow repo's chance.
func TestFitLearnsWhatARunOfWorkSays(t *testing.T) {
	var stats []Stats
	for i := range 1200 {
		days := float64(400 + i%900)
		switch i % 4 {
		case 0, 1: // made in a run of work and left: silence since its making
			stats = append(stats, Stats{Exposure: days * 86400, Root: true, Made: true})
		case 2: // begun with a commit, slow since: a push in about 300 days
			stats = append(stats, Stats{Events: math.Round(days / 300), Exposure: days * 86400, Root: true})
		default: // made in a run of work and kept going: a push every 5 days
			stats = append(stats, Stats{Events: math.Round(days / 5), Exposure: days * 86400, Root: true, Made: true})
		}
	}
	p := Fit(stats, nil, t0, nil)
	begun := Stats{WinSeconds: 500 * 86400, Root: true}
	made := begun
	made.Made = true
	if m, b := p.Rate(made), p.Rate(begun); m > b/3 {
		t.Fatalf("quiet 500 days after a run of work: %.2g pushes/day; after a commit or two: %.2g", m, b)
	}
	// One made in a run of work that keeps pushing is believed at once.
	busy := made
	busy.WinEvents, busy.WinSeconds = 6, 30*86400
	if r := p.Rate(busy); r < 0.1 {
		t.Fatalf("a repo made in a run of work pushing 6 times in 30 days: %.2g pushes/day", r)
	}
}
