package main

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// signals is a change signal some repos send besides what polls find: a forge's push
// webhooks (delivered seconds after a push, a few lost) or a change feed the worker probes
// (a listing by last activity, which names every repo that changed since the last probe).
type signals struct {
	Section string  // the section of freshness.json it fills
	Share   float64 // of all repos covered (a repo whose forge sends hooks, or whose host has a feed)
	// Hooks: each push is delivered after a delay drawn uniformly in [DelayMin, DelayMax]
	// days, or lost with chance Loss.
	DelayMin, DelayMax, Loss float64
	// Feeds: probed every Period days; a probe names every covered repo pushed since the last.
	Period float64
	Drift  bool // on the drifting population
}

// The sections with signals. Hooks are set up per organization as often as per repo,
// and a feed lists a whole host, so coverage is drawn per organization (repos fall into
// organizations of 1 + geometric(mean orgExtra) repos); a share of 30% covers 30% of the
// repos, and of the active ones, in expectation. An organization covered at 30% is covered
// at 60% (the same draw), so the sections differ only in coverage. Of the hooked
// organizations, ownerLevelShare set one hook on the organization, whose deliveries say
// so (GitHub's and Gitea's installation target header); the others set a hook on each of
// their repos, which the worker learns as the organization's once hooks of ownerRepos of
// them came (worker.OwnerHooks). Which is drawn per organization, once per seed, the same
// for every section.
var signalSections = []signals{
	{Section: "hooks30", Share: 0.3, DelayMin: 1.0 / 86400, DelayMax: 10.0 / 86400, Loss: 0.01},
	{Section: "hooks60", Share: 0.6, DelayMin: 1.0 / 86400, DelayMax: 10.0 / 86400, Loss: 0.01},
	{Section: "hooks30_drift", Share: 0.3, DelayMin: 1.0 / 86400, DelayMax: 10.0 / 86400, Loss: 0.01, Drift: true},
	{Section: "hooks60_drift", Share: 0.6, DelayMin: 1.0 / 86400, DelayMax: 10.0 / 86400, Loss: 0.01, Drift: true},
	{Section: "feed", Share: 0.7, Period: 5.0 / (24 * 60)},
	{Section: "feed_drift", Share: 0.7, Period: 5.0 / (24 * 60), Drift: true},
}

// doc is the section's signal as freshness.json records it.
func (s signals) doc() results.FreshnessSignal {
	d := results.FreshnessSignal{Section: s.Section, Kind: "hooks", Share: s.Share, DelayMinS: s.DelayMin * 86400,
		DelayMaxS: s.DelayMax * 86400, Loss: s.Loss, Drift: s.Drift}
	if s.Period > 0 {
		d = results.FreshnessSignal{Section: s.Section, Kind: "feed", Share: s.Share, PeriodMin: s.Period * 24 * 60, Drift: s.Drift}
	}
	return d
}

// delivery is a signal reaching the worker: repo's pushes up to the time it names are
// there. owner: a hook that says it is set on the repo's organization.
type delivery struct {
	at    float64
	repo  int
	owner bool
}

// ownerLevelShare is the share of hooked organizations whose hook is set on the
// organization.
const ownerLevelShare = 0.5

// orgExtra is the mean number of repos an organization has besides its first.
const orgExtra = 3.0

// orgs assigns the n repos to organizations: org[i] is repo i's.
func orgs(n int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 0x0e6))
	out := make([]int, n)
	org, left := 0, 0
	for _, i := range rng.Perm(n) {
		if left == 0 {
			org++
			left = 1
			for rng.Float64() < orgExtra/(1+orgExtra) {
				left++
			}
		}
		out[i] = org
		left--
	}
	return out
}

// covered draws which repos send the signal: a uniform draw per organization, the same
// for every section of a seed, so a higher share covers a superset.
func covered(org []int, seed uint64, share float64) []bool {
	return perOrganization(org, seed, 0x51611a1, share)
}

// ownerLevel draws which organizations set their hooks on the organization
// (ownerLevelShare of them): ownerLevel[i] is repo i's organization's, the same for every
// section of a seed.
func ownerLevel(org []int, seed uint64) []bool {
	return perOrganization(org, seed, 0x0a9, ownerLevelShare)
}

// perOrganization draws a uniform per organization from the seed's stream and reports,
// for each repo, whether its organization's draw is under share.
func perOrganization(org []int, seed, stream uint64, share float64) []bool {
	rng := rand.New(rand.NewPCG(seed, stream))
	draw := map[int]float64{}
	out := make([]bool, len(org))
	for i, o := range org {
		u, ok := draw[o]
		if !ok {
			u = rng.Float64()
			draw[o] = u
		}
		out[i] = u < share
	}
	return out
}

// deliveries lists every signal the covered repos send up to end, in time order; a
// hook of an organization whose hook is set on it (ownerLvl) says so. A feed coalesces
// by construction (one listing per probe names a repo once).
func (s signals) deliveries(up Upstream, cov, ownerLvl []bool, end float64, rng *rand.Rand) []delivery {
	var out []delivery
	for i, l := range up {
		if !cov[i] {
			continue
		}
		lastProbe := math.Inf(-1)
		for _, p := range l.Pushes {
			if p.At > end {
				break
			}
			if s.Period > 0 {
				probe := math.Ceil(p.At/s.Period) * s.Period
				if probe != lastProbe {
					out = append(out, delivery{at: probe, repo: i})
					lastProbe = probe
				}
				continue
			}
			if rng.Float64() < s.Loss {
				continue
			}
			out = append(out, delivery{p.At + s.DelayMin + rng.Float64()*(s.DelayMax-s.DelayMin), i, ownerLvl[i]})
		}
	}
	slices.SortFunc(out, func(a, b delivery) int { return cmp.Compare(a.at, b.at) })
	return out
}

// signalled is the worker's side: deliveries arriving, each an ask of the worker's
// (worker.Asked: it records a repo's hooks in the worker's state of it), a queue of
// repos to fetch at once (one entry per repo however many signals it got: bursts
// coalesce), what each organization's hooks say (worker.OwnerHooks), and what the
// fleet's hooks announced and missed (one host). How polls fall back is the worker's
// own decision (worker.RepoState.Stretch).
type signalled struct {
	pending []delivery // not yet arrived
	queue   []int      // arrived, to fetch before any poll, oldest first
	queued  []bool
	repos   []worker.RepoState // the worker's state of each repo, its hooks among the rest
	org     []int              // each repo's organization
	owners  map[int]*worker.OwnerHooks
	feed    bool // the signal is a feed (covered repos are known), not hooks
	loss    worker.HookLoss
	cfg     worker.Config
}

// newSignalled delivers ds to the worker holding repos (one per organization in org).
func newSignalled(org []int, ds []delivery, feed bool, repos []worker.RepoState) *signalled {
	return &signalled{pending: ds, queued: make([]bool, len(org)), repos: repos, org: org,
		owners: map[int]*worker.OwnerHooks{}, feed: feed, cfg: worker.DefaultConfig()}
}

// owner is what the worker knows of repo i's organization's hooks (nil: nothing).
func (s *signalled) owner(i int) *worker.OwnerHooks { return s.owners[s.org[i]] }

// ownerOf is owner, made if need be.
func (s *signalled) ownerOf(i int) *worker.OwnerHooks {
	o := s.owners[s.org[i]]
	if o == nil {
		o = &worker.OwnerHooks{}
		s.owners[s.org[i]] = o
	}
	return o
}

// arrive takes in the deliveries made by now; view is what the worker reads when one
// arrives for repo i at day.
func (s *signalled) arrive(now float64, view func(i int, day float64) worker.View) {
	for len(s.pending) > 0 && s.pending[0].at <= now {
		d := s.pending[0]
		s.pending = s.pending[1:]
		ask := worker.AskFeed
		switch {
		case s.feed:
		case d.owner:
			ask = worker.AskOwnerHook
		default:
			ask = worker.AskHook
		}
		worker.Step(&s.cfg, view(d.repo, d.at), &s.repos[d.repo], worker.Asked{By: ask})
		if !s.feed {
			s.ownerOf(d.repo).Saw(strconv.Itoa(d.repo), d.owner, at(d.at))
		}
		if !s.queued[d.repo] {
			s.queued[d.repo] = true
			s.queue = append(s.queue, d.repo)
		}
	}
}

// next is the repo to fetch now because it signalled, if any.
func (s *signalled) next() (int, bool) {
	if len(s.queue) == 0 {
		return 0, false
	}
	i := s.queue[0]
	s.queue = s.queue[1:]
	s.queued[i] = false
	return i, true
}

// coverage is what a section's signal has shown a mirror of the repos it covers by a
// day, under the true model: it is what a bound run as a policy may know of them. A
// feed lists a host the fleet is configured with, so its coverage is known from the
// start. Hooks are an organization's (every repo of a hooked one sends them): an
// organization is known covered from its first delivery; before it, it is covered with
// the chance the model leaves it once its repos' pushes since day 0 all went
// undelivered (Share·Loss^n against 1−Share). A bound that knew the coverage no
// delivery had shown yet would know what only hooks show.
type coverage struct {
	known       func(i int) float64 // the share polls must find of a repo whose coverage is known (signalCharge.missed)
	feed        bool
	org         []int       // each repo's organization
	first       []float64   // each organization's first delivery (+Inf: none)
	pushes      [][]float64 // each organization's push times, ascending
	share, loss float64
}

// shownBy is what the deliveries ds of signal s show of its coverage over the upstream up,
// whose repos fall into organizations as org says (cov: which the signal covers).
func (s signals) shownBy(up Upstream, org []int, cov []bool, ds []delivery) *coverage {
	c := &coverage{known: s.charge(up, cov).missed, feed: s.Period > 0}
	if c.feed {
		return c
	}
	n := slices.Max(org) + 1
	c.org, c.first, c.pushes, c.share, c.loss = org, make([]float64, n), make([][]float64, n), s.Share, s.Loss
	for o := range c.first {
		c.first[o] = math.Inf(1)
	}
	for _, d := range ds {
		o := org[d.repo]
		c.first[o] = min(c.first[o], d.at)
	}
	for i, l := range up {
		for _, p := range l.Pushes {
			c.pushes[org[i]] = append(c.pushes[org[i]], p.At)
		}
	}
	for _, ps := range c.pushes {
		slices.Sort(ps)
	}
	return c
}

// missed is the share of repo i's pushes at day that polls must find, as far as what
// the signal has shown by then tells: the known share once it is known (a feed's from
// the start, a hooked organization's from its first delivery), and for an organization
// not shown yet, the mixture of a covered repo's share and an uncovered one's at the
// chance it is covered.
func (c *coverage) missed(i int, day float64) float64 {
	if c.feed {
		return c.known(i)
	}
	o := c.org[i]
	if c.first[o] <= day {
		return c.known(i)
	}
	n, _ := slices.BinarySearch(c.pushes[o], day) // pushes before day, each undelivered
	lost := c.share * math.Pow(c.loss, float64(n))
	p := lost / (lost + 1 - c.share)
	return p*c.loss + (1 - p)
}

// signalCharge is what a signal leaves to the polls of a bound: the share of each repo's
// pushes polls must find (nil: all of them), the fetches a day the signal's deliveries
// take of the budget (nil: none), and how long a signalled push waits for its signal.
type signalCharge struct {
	section string
	missed  func(i int) float64
	fetches func(day float64) float64
	delay   float64 // days
}

// fetchesPerDay is the signal's fetches a day, averaged over the window's days.
func (c signalCharge) fetchesPerDay(w window) float64 {
	if c.fetches == nil {
		return 0
	}
	sum, n := 0.0, 0
	for day := w.From + 0.5; day < w.To; day++ {
		sum += c.fetches(day)
		n++
	}
	return sum / float64(max(n, 1))
}

// charge is the signal's charge on a bound over the upstream up: a covered repo's
// pushes reach the worker but for the lost hooks (nothing a feed covers is missed), each
// delivery a fetch (a feed's probe names a repo once, however many pushes it made since
// the last).
func (s signals) charge(up Upstream, cov []bool) signalCharge {
	loss := s.Loss
	if s.Period > 0 {
		loss = 0
	}
	return signalCharge{
		section: s.Section,
		missed: func(i int) float64 {
			if cov[i] {
				return loss
			}
			return 1
		},
		fetches: func(day float64) float64 {
			sum := 0.0
			for i, l := range up {
				if !cov[i] {
					continue
				}
				r := l.RateAt(day)
				if s.Period > 0 {
					sum += -math.Expm1(-r*s.Period) / s.Period
				} else {
					sum += (1 - loss) * r
				}
			}
			return sum
		},
		delay: s.doc().DelayDays(),
	}
}
