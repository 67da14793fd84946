package results

// Freshness is the poll-scheduling benchmark: lag from upstream commit to mirror under a
// fixed poll budget, for each policy and budget.
type Freshness struct {
	Meta       Meta                `json:"meta"`
	Setup      FreshnessSetup      `json:"setup"`
	Population FreshnessPopulation `json:"population"`
	Runs       []FreshnessRun      `json:"runs"`
	// Drift is the same policies (but the optimum, which would need to foresee the
	// changes) on a population whose repos change behaviour over time.
	Drift    []FreshnessRun       `json:"drift"`
	Optimum  []FreshnessAnalytic  `json:"optimum_analytic"`
	Policies []FreshnessPolicyDoc `json:"policies"`
}

// FreshnessSetup is how the simulation was run.
type FreshnessSetup struct {
	Repos          int       `json:"repos"`
	Seed           uint64    `json:"seed"`
	WarmupDays     float64   `json:"warmup_days"`
	WindowDays     float64   `json:"window_days"` // lag, freshness and age are measured on this stretch
	DrainDays      float64   `json:"drain_days"`  // polls continue so late commits are still seen
	MinIntervalMin float64   `json:"min_interval_min"`
	Budgets        []float64 `json:"budgets"`         // polls per repo per day
	DriftPerMonth  float64   `json:"drift_per_month"` // chance a repo draws a new rate, per month
	DriftBudgets   []float64 `json:"drift_budgets"`
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
	IdlePolls     int     `json:"idle_polls"`         // budget left unused (every repo held by the min interval)
	DormantPolls  float64 `json:"dormant_poll_share"` // share of polls spent on repos that never change
	ChangingPolls float64 `json:"changed_poll_share"` // share of polls that found something new
}

// FreshnessAnalytic is the closed-form optimum: periodic polls at f ∝ √λ give a mean
// lag of (Σ√λ)² / (2·B·N·Σλ).
type FreshnessAnalytic struct {
	Budget   float64 `json:"budget"`
	LagMeanH float64 `json:"lag_mean_h"`
}

// FreshnessPolicyDoc names and describes a policy for the report.
type FreshnessPolicyDoc struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}
