package results

// Freshness is the poll-scheduling benchmark: lag from upstream commit to mirror under a
// fixed poll budget, for each policy and budget.
type Freshness struct {
	Meta       Meta                `json:"meta"`
	Setup      FreshnessSetup      `json:"setup"`
	Population FreshnessPopulation `json:"population"`
	Runs       []FreshnessRun      `json:"runs"`
	// Drift is the same policies on a population whose repos change behaviour over
	// time; its optimum knows each repo's current rate.
	Drift []FreshnessRun `json:"drift"`
	// ColdStart is the first days of the fleet of Runs: every repo added on day 0, none
	// cloned, nothing learned.
	ColdStart []FreshnessRun `json:"coldstart"`
	// The same policies on the realistic population (PopulationRealistic): repos of every
	// age, dormant repos with long histories.
	PopulationRealistic *FreshnessPopulation `json:"population_realistic,omitempty"`
	RunsRealistic       []FreshnessRun       `json:"runs_realistic,omitempty"`
	ColdStartRealistic  []FreshnessRun       `json:"coldstart_realistic,omitempty"`
	DriftRealistic      []FreshnessRun       `json:"drift_realistic,omitempty"`
	// The default policy with change signals besides its polls (Setup.Signals says each
	// section's signal): webhooks from 30% or 60% of the repos, a change feed covering 70%,
	// on the stationary population (measured as Runs) and the drifting one (as Drift).
	Hooks30      []FreshnessRun      `json:"hooks30,omitempty"`
	Hooks60      []FreshnessRun      `json:"hooks60,omitempty"`
	Hooks30Drift []FreshnessRun      `json:"hooks30_drift,omitempty"`
	Hooks60Drift []FreshnessRun      `json:"hooks60_drift,omitempty"`
	Feed         []FreshnessRun      `json:"feed,omitempty"`
	FeedDrift    []FreshnessRun      `json:"feed_drift,omitempty"`
	Optimum      []FreshnessAnalytic `json:"optimum_analytic"`
	// Bound is the best any policy could do with what a worker can know, computed.
	Bound    []FreshnessBound     `json:"bound"`
	Policies []FreshnessPolicyDoc `json:"policies"`
	// Goals are the default policy's figures against the goals, with their spread over
	// the seeds run (Setup.Seeds).
	Goals []FreshnessGoal `json:"goals,omitempty"`
	// Costs are what the default policy costs a worker.
	Costs FreshnessCosts `json:"costs"`
}

// FreshnessSetup is how the simulation was run.
type FreshnessSetup struct {
	Repos int    `json:"repos"`
	Seed  uint64 `json:"seed"`
	// Seeds are every seed run: the figures are Seed's (the first), and each row, bound
	// and goal has its spread over all of them.
	Seeds          []uint64       `json:"seeds,omitempty"`
	WarmupDays     float64        `json:"warmup_days"`
	WindowDays     float64        `json:"window_days"` // lag, freshness and age are measured on this stretch
	DrainDays      float64        `json:"drain_days"`  // at most: polls go on until every push of a window is mirrored
	MinIntervalMin float64        `json:"min_interval_min"`
	Budgets        []float64      `json:"budgets"`         // polls per repo per day
	DriftPerMonth  float64        `json:"drift_per_month"` // chance a repo draws a new rate, per month
	DriftBudgets   []float64      `json:"drift_budgets"`
	ColdStartDays  float64        `json:"coldstart_days"` // the coldstart section measures days [0, this)
	Batch          FreshnessBatch `json:"batch"`
	// What a worker's mirror lists of commits (fetch's bounds).
	HistoryWindowDays float64 `json:"history_window_days"`
	MaxHistoryCommits int     `json:"max_history_commits"`
	// The default policy's tail guard (priority.MinRate, priority.GuardRate), pushes a day.
	MinRate   float64 `json:"min_rate_per_day,omitempty"`
	GuardRate float64 `json:"guard_rate_per_day,omitempty"`
	// Its step in a repo's first weeks of polls (priority.NewExp, priority.NewSpan):
	// rate^−NewStepExp while the polls cover under NewSpanDays.
	NewStepExp    float64 `json:"new_step_exp,omitempty"`
	NewSpanDays   float64 `json:"new_span_days,omitempty"`
	MaxNewCommits int     `json:"max_new_commits"`
	// The change signals of the signal sections, and how polls fall back for the repos
	// that send them.
	Signals          []FreshnessSignal `json:"signals,omitempty"`
	HookStretch      float64           `json:"hook_stretch,omitempty"`       // a repo that sends hooks: its poll step is this many times the policy's
	FeedStretch      float64           `json:"feed_stretch,omitempty"`       // the same for a repo a feed covers
	OrgMeanRepos     float64           `json:"org_mean_repos,omitempty"`     // repos per organization (coverage is drawn per organization)
	OwnerLevelShare  float64           `json:"owner_level_share,omitempty"`  // of the covered organizations, those whose hook is set on the organization (deliveries say so)
	OwnerRepos       int               `json:"owner_repos,omitempty"`        // an organization counts as hooked once hooks of this many of its repos came (or one owner-level hook)
	SignalMemoryDays float64           `json:"signal_memory_days,omitempty"` // a repo signals "lately" if its latest signal is this recent
}

// FreshnessSignal is one signal section's signal.
type FreshnessSignal struct {
	Section   string  `json:"section"`
	Kind      string  `json:"kind"`  // hooks | feed
	Share     float64 `json:"share"` // of all repos covered
	DelayMinS float64 `json:"delay_min_s,omitempty"`
	DelayMaxS float64 `json:"delay_max_s,omitempty"`
	Loss      float64 `json:"loss,omitempty"`       // share of hook deliveries lost
	PeriodMin float64 `json:"period_min,omitempty"` // a feed's probe period
	Drift     bool    `json:"drift,omitempty"`
}

// DelayDays is how long a signalled push waits for its signal on average: half a feed's
// period, or a hook's mean delivery delay.
func (s FreshnessSignal) DelayDays() float64 {
	if s.Kind == "feed" {
		return s.PeriodMin / 2 / (24 * 60)
	}
	return (s.DelayMinS + s.DelayMaxS) / 2 / 86400
}

// FreshnessBatch is how the simulated pushes carry commits and when those were
// authored (an assumption; the policies see only the commits' times).
type FreshnessBatch struct {
	MeanCommits     float64 `json:"mean_commits"`      // per push: 1 + geometric
	NewestDelayMin  float64 `json:"newest_delay_min"`  // median, log-normal: newest commit before the push
	GapMin          float64 `json:"gap_min"`           // median, log-normal: between commits of a push
	Sigma           float64 `json:"sigma"`             // of both
	BranchShare     float64 `json:"branch_share"`      // pushes that bring an older branch
	BranchDelayDays float64 `json:"branch_delay_days"` // median extra age of its commits (σ = 1)
}

// FreshnessCosts are the worker-side costs of the default policy, measured with
// testing.Benchmark in the same run.
type FreshnessCosts struct {
	Policy string `json:"policy"`
	// Memory the worker holds per owned repo for scheduling: its queue entry and record
	// (with the policy's stats), heap bytes over ReposMeasured repos.
	BytesPerRepo  float64         `json:"bytes_per_repo"`
	ReposMeasured int             `json:"repos_measured"`
	NextNs        float64         `json:"next_ns"`            // one priority decision
	FoldNs        float64         `json:"fold_ns"`            // folding a poll that brought commits into the stats
	ScoreNs       float64         `json:"score_ns,omitempty"` // scoring a poll for the hazard, as a worker does (no Memo)
	FitMs         float64         `json:"fit_ms"`             // learning the prior from ReposMeasured repos
	Walks         []FreshnessWalk `json:"walks"`              // reading commit times from a real mirror
}

// FreshnessWalk is the cost of the mirror's commit walks on one generated repository.
type FreshnessWalk struct {
	Repo          string  `json:"repo"`
	Commits       int     `json:"commits"` // in its history
	Refs          int     `json:"refs"`
	NewCommits    int     `json:"new_commits"` // brought by the measured fetch
	NewWalkMs     float64 `json:"new_walk_ms"` // listing the new commits after the fetch
	NewVisited    int     `json:"new_listed"`
	HistoryMs     float64 `json:"history_ms"` // listing the history after the first clone
	HistoryListed int     `json:"history_listed"`
	FullWalkMs    float64 `json:"full_walk_ms"` // reading every commit of the history, for comparison
}

// FreshnessPopulation describes the simulated repos and how close they come to the
// published figures they were tuned to.
type FreshnessPopulation struct {
	DormantShare       float64 `json:"dormant_share"`
	Sigma              float64 `json:"lognormal_sigma"`
	Mu                 float64 `json:"lognormal_mu"` // ln(commits per day)
	TopFraction        float64 `json:"top_fraction"`
	TargetTopShare     float64 `json:"target_top_share"`
	TargetMonthly      float64 `json:"target_monthly_changed"`
	MeasuredTopShare   float64 `json:"measured_top_share"`       // share of the window's commits made by the top repos
	MeasuredMonthly    float64 `json:"measured_monthly_changed"` // share of repos with a commit in a 30-day stretch
	MedianActivePerDay float64 `json:"median_active_per_day"`
	P99PerDay          float64 `json:"p99_per_day"`
	MaxPerDay          float64 `json:"max_per_day"`
	MeanPerDay         float64 `json:"mean_per_day"` // over all repos
	WindowCommits      int     `json:"window_commits"`
	// Realism is set for the realistic population only.
	Realism *FreshnessRealism `json:"realism,omitempty"`
}

// FreshnessRealism is what makes the realistic population realistic, as assumed and as
// measured on the drawn repos (the sources are in the report).
type FreshnessRealism struct {
	YoungShare            float64 `json:"young_share"` // assumed: created in the last year
	MaxAgeDays            float64 `json:"max_age_days"`
	DormantLifeMedianDays float64 `json:"dormant_life_median_days"` // assumed: a dormant repo's working life ...
	DormantCommitsMedian  float64 `json:"dormant_commits_median"`   // ... and its commits
	// Measured on the drawn repos, at day 0: what a first clone shows.
	MeasuredYoungShare   float64 `json:"measured_young_share"`    // of all repos, under a year old
	ActiveRootShare      float64 `json:"active_root_share"`       // of active repos, a first clone reaches the root commit
	DormantRootShare     float64 `json:"dormant_root_share"`      // of dormant repos, likewise
	DormantYearLongShare float64 `json:"dormant_year_long_share"` // of dormant repos, worked on for over a year
	DormantMedianCommits float64 `json:"dormant_median_commits"`  // commits a dormant repo's first clone lists (median)
	ActiveMedianCommits  float64 `json:"active_median_commits"`   // the same for active repos
}

// FreshnessRun is one policy at one budget.
type FreshnessRun struct {
	Policy        string  `json:"policy"`
	Budget        float64 `json:"budget"`
	LagMeanH      float64 `json:"lag_mean_h"` // commit-weighted, hours
	LagP50H       float64 `json:"lag_p50_h"`
	LagP99H       float64 `json:"lag_p99_h"`
	Freshness     float64 `json:"freshness"`  // time-averaged share of repos up to date
	AgeMeanH      float64 `json:"age_mean_h"` // time-averaged age over repos, hours
	Commits       int     `json:"commits"`
	Censored      int     `json:"censored"` // commits still unmirrored at the end (lag counted to the end)
	Polls         int     `json:"polls"`
	IdlePolls     int     `json:"idle_polls"`               // budget left unused (every repo held by the min interval)
	DormantPolls  float64 `json:"dormant_poll_share"`       // share of polls spent on repos that were not changing then
	ChangingPolls float64 `json:"changed_poll_share"`       // share of polls that found something new
	SignalFetches int     `json:"signal_fetches,omitempty"` // of Polls, fetches made because a hook or a feed named the repo
	// Signal sections: the share of the commits made in repos that send the signal, their
	// mean lag, and the mean lag of the others' commits.
	SignallingCommitShare float64 `json:"signalling_commit_share,omitempty"`
	SignallingLagMeanH    float64 `json:"signalling_lag_mean_h,omitempty"`
	SilentLagMeanH        float64 `json:"silent_lag_mean_h,omitempty"`
	Default               bool    `json:"default,omitempty"` // the policy a worker runs unless told otherwise
	// Pushes that were a repo's first after it changed rate (drift only): their share of
	// the commits and their mean lag. No policy can know of a change before such a push.
	FirstPushShare float64 `json:"first_push_share,omitempty"`
	FirstPushLagH  float64 `json:"first_push_lag_h,omitempty"`
	// What the worker had learned by the end of the last window (learning policies only).
	LearnedHazardPerMonth float64 `json:"learned_hazard_per_month,omitempty"`
	LearnedDormantShare   float64 `json:"learned_dormant_share,omitempty"`
	// Spread is the same row over every seed run (Setup.Seeds), when more than one was.
	Spread *FreshnessRunSpread `json:"spread,omitempty"`
}

// FreshnessRunSpread is a row's figures over the seeds.
type FreshnessRunSpread struct {
	Seeds        int           `json:"seeds"`
	LagMeanH     FreshnessStat `json:"lag_mean_h"`
	LagP99H      FreshnessStat `json:"lag_p99_h"`
	DormantPolls FreshnessStat `json:"dormant_poll_share"`
}

// FreshnessStat is one figure over the seeds: mean, sample standard deviation, extremes.
type FreshnessStat struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

// FreshnessGoal is one goal: the default policy's figure against its target.
type FreshnessGoal struct {
	Goal    string  `json:"goal"`    // what is measured, e.g. "mean / bound"
	Section string  `json:"section"` // the section measured
	Of      string  `json:"of"`      // what it is divided by, e.g. "bound of runs (all evidence)"
	Budget  float64 `json:"budget"`
	Target  float64 `json:"target"` // met at or below
	Value   float64 `json:"value"`  // the first seed's
	// Bound, for a goal against an optimum, is the least any policy could reach with
	// what the fleet knows in the section, in Value's units, the first seed's: a target
	// under it cannot be met by polling better.
	Bound float64 `json:"bound,omitempty"`
	// Spread is over every seed run; Met says every seed met the target, MetMean that
	// their mean did.
	Spread  FreshnessStat `json:"spread"`
	Seeds   int           `json:"seeds"`
	Met     bool          `json:"met"`
	MetMean bool          `json:"met_mean"`
	// PerSeed is each seed's value (in Setup.Seeds' order), against that seed's own
	// reference.
	PerSeed []float64 `json:"per_seed,omitempty"`
}

// FreshnessAnalytic is the closed-form optimum of a section's window: periodic polls at
// f ∝ √λ of each repo's rate at the time (∝ λ^0.4 for optimum04), B·N polls a day
// shared over the repos then changing, the pushes the window saw each waiting half its
// repo's period on average; with constant rates and expected pushes, a mean lag of
// (Σ√λ)² / (2·B·N·Σλ).
type FreshnessAnalytic struct {
	Section  string         `json:"section,omitempty"`
	Policy   string         `json:"policy,omitempty"` // optimum or optimum04
	Budget   float64        `json:"budget"`
	LagMeanH float64        `json:"lag_mean_h"`
	LagP99H  float64        `json:"lag_p99_h,omitempty"`
	Spread   *FreshnessStat `json:"spread,omitempty"` // over every seed run, when more than one was
}

// FreshnessBound is the mean lag of the best static allocation a policy could make
// knowing the population's true prior and every push a repo made over the span it could
// have seen (a first clone's history plus the polls): polls at f ∝ √E[λ | pushes seen],
// in closed form over the pushes of its section's window. Dormant repos are known only
// by their silence. For drift, the belief is filtered forward from the exact push times
// under the true model (the prior and its rate of changes), and the allocation is each
// day's. EvidenceCloned is simulated instead.
type FreshnessBound struct {
	Section string `json:"section"` // runs, coldstart or drift
	// Evidence is what the bound knows of each repo: "" the exact push counts over what
	// a worker could have seen (and, for drift, their times); "all" also whether the
	// first clone reached the root, the span seen and the silence since the newest push;
	// EvidenceCloned the same, run as a policy in the section's simulation;
	// EvidenceFiltered the drift bound so run; EvidenceRates a signal section's optimum.
	Evidence string `json:"evidence,omitempty"`
	// Budget is the budget the bound was computed at (0 in results of before the
	// bounds were per budget: a ratio, the same at every budget).
	Budget   float64 `json:"budget,omitempty"`
	SeenDays float64 `json:"seen_days"`
	// LagMeanH is the bound's mean lag, hours, over the pushes its section's window saw:
	// the reference of the goals read against it. Ratio is that over the closed-form
	// optimum of the same window and budget (Freshness.Optimum).
	LagMeanH     float64 `json:"lag_mean_h,omitempty"`
	Ratio        float64 `json:"ratio"`
	DormantPolls float64 `json:"dormant_poll_share"`
	// SignalFetchShare, for a bound with a signal, is the share of the budget its
	// signal's fetches take: the bound polls with the rest.
	SignalFetchShare float64 `json:"signal_fetch_share,omitempty"`
	// P99 is the p99 of the lag under the bound's allocation (periodic polls at
	// f ∝ √E[λ | evidence]) over the optimum's (f ∝ √λ), and P99Exp04 that with
	// f ∝ E[λ | evidence]^0.4, which trades a little mean for the tail: the least p99 the
	// evidence allows with either. All-evidence bounds only.
	P99      float64 `json:"p99,omitempty"`
	P99Exp04 float64 `json:"p99_exp04,omitempty"`
	// Spread is the ratio over every seed run, when more than one was.
	Spread *FreshnessStat `json:"spread,omitempty"`
}

// EvidenceCloned is the all-evidence bound run as a policy in a section's simulation:
// it knows the population's true E[λ | evidence] but, as any mirror, nothing of a repo
// before its first clone, and clones every repo at the default policy's pacing. It is
// the bound that charges a fleet's first days what they cost: cloning blind.
const EvidenceCloned = "all, cloned"

// EvidenceFiltered is the drift bound run as a policy in a section's simulation: each
// repo's belief filtered from the exact time of every push under the true model, up to
// each poll; it clones every repo blind as EvidenceCloned does.
const EvidenceFiltered = "push times, cloned"

// EvidenceRates is a signal section's optimum in closed form: it knows every repo's
// current rate and which repos the signal covers, and polls each for the pushes the
// signal misses with the budget the signal's fetches leave. Beside the section's bound
// it is what estimating the rates costs.
const EvidenceRates = "rates"

// FreshnessPolicyDoc names and describes a policy for the report.
type FreshnessPolicyDoc struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Uses        string `json:"uses"` // the information it decides from
	Default     bool   `json:"default,omitempty"`
}

// Sections names every section of rows, in the order freshness.json has them.
var Sections = []string{"runs", "drift", "coldstart", "runs_realistic", "coldstart_realistic", "drift_realistic",
	"hooks30", "hooks60", "hooks30_drift", "hooks60_drift", "feed", "feed_drift"}

// Section is the rows of the named section (nil for an unknown name).
func (f *Freshness) Section(name string) *[]FreshnessRun {
	switch name {
	case "runs":
		return &f.Runs
	case "drift":
		return &f.Drift
	case "coldstart":
		return &f.ColdStart
	case "runs_realistic":
		return &f.RunsRealistic
	case "coldstart_realistic":
		return &f.ColdStartRealistic
	case "drift_realistic":
		return &f.DriftRealistic
	}
	return f.SignalSection(name)
}

// SignalSection is the rows of the named signal section (nil for another name).
func (f *Freshness) SignalSection(name string) *[]FreshnessRun {
	switch name {
	case "hooks30":
		return &f.Hooks30
	case "hooks60":
		return &f.Hooks60
	case "hooks30_drift":
		return &f.Hooks30Drift
	case "hooks60_drift":
		return &f.Hooks60Drift
	case "feed":
		return &f.Feed
	case "feed_drift":
		return &f.FeedDrift
	}
	return nil
}

// BoundOf is the bound of section with the evidence given, at budget for a bound
// measured at one (EvidenceCloned).
func (f *Freshness) BoundOf(section, evidence string, budget float64) (FreshnessBound, bool) {
	for _, x := range f.Bound {
		if x.Section == section && x.Evidence == evidence && (x.Budget == 0 || x.Budget == budget) {
			return x, true
		}
	}
	return FreshnessBound{}, false
}

// OptimumOf is the closed-form optimum (policy optimum or optimum04) of section at
// budget.
func (f *Freshness) OptimumOf(section, policy string, budget float64) (FreshnessAnalytic, bool) {
	for _, a := range f.Optimum {
		if a.Section == section && a.Policy == policy && a.Budget == budget {
			return a, true
		}
	}
	return FreshnessAnalytic{}, false
}
