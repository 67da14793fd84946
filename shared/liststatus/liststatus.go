// Package liststatus is what the list sync reports of itself (GET /v1/list) and its
// refusals, without HTTP: package listsync fills it, package api serves it.
package liststatus

import (
	"fmt"
	"time"
)

// MinCommitPrefix is the shortest commit prefix POST /v1/list/confirm accepts.
const MinCommitPrefix = 7

// Status is the body of GET /v1/list. Every field is always present; what does not
// apply is null (or empty), as in the rest of the API.
type Status struct {
	Configured bool `json:"configured"`
	// Message says in one sentence what the list sync is doing, for people.
	Message string  `json:"message"`
	Repo    *string `json:"repo"`
	// Branch is null when the list follows the repository's HEAD.
	Branch                *string  `json:"branch"`
	Paths                 []string `json:"paths"`
	IntervalSeconds       *float64 `json:"interval_seconds"`
	PurgeThresholdPercent *float64 `json:"purge_threshold_percent"`
	// Commit is the last applied commit; null before the first sync.
	Commit    *string    `json:"commit"`
	AppliedAt *time.Time `json:"applied_at"`
	// Entries counts the distinct valid URLs in the list at Commit.
	Entries    int       `json:"entries"`
	LastChange *Change   `json:"last_change"`
	BadLines   []BadLine `json:"bad_lines"`
	BadTotal   int       `json:"bad_lines_total"`
	// BadByCode counts the bad lines by why they were skipped: a URL policy reason
	// (malformed, scheme, ...), too_long or duplicate. Only the first bad lines are
	// kept in BadLines; these counts cover them all.
	BadByCode map[string]int `json:"bad_lines_by_code"`
	HeldPurge *HeldPurge     `json:"held_purge"`
	Pending   []string       `json:"pending"`
	// LastAttemptAt and LastError are what the coordinator that serves this API knows
	// of its own last attempt; null where the API runs apart from the coordinator.
	LastAttemptAt *time.Time `json:"last_attempt_at"`
	LastError     *string    `json:"last_error"`
}

// Change is what the last recorded sync did.
type Change struct {
	// Mode is "diff" (the list files diffed against the last applied commit) or "full"
	// (the whole list compared with the stored list repos: first sync, rewritten
	// history, a held purge, a configuration change).
	Mode    string `json:"mode"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
}

// BadLine is a skipped line of the list.
type BadLine struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Text   string `json:"text"`
	Reason string `json:"reason"`
}

// HeldPurge is a removal held by purge protection until confirmed.
type HeldPurge struct {
	Commit           string    `json:"commit"`
	Remove           int       `json:"remove"`
	Of               int       `json:"of"`
	Percent          float64   `json:"percent"`
	ThresholdPercent float64   `json:"threshold_percent"`
	Since            time.Time `json:"since"`
	Sample           []string  `json:"sample"`
	Confirmed        bool      `json:"confirmed"`
}

// NotConfigured is the answer of GET /v1/list when no list repository is set.
func NotConfigured() Status {
	return Status{
		Message: "no list repository is configured (start the coordinator with --list-repo URL, or MIRRORFLEET_LIST_REPO)",
		Paths:   []string{}, BadLines: []BadLine{}, Pending: []string{}, BadByCode: map[string]int{},
	}
}

// Kind is why a confirmation was refused.
type Kind int

const (
	Conflict Kind = iota // nothing (or something else) to confirm: 409
	Invalid              // the request itself is wrong: 400
)

// Error is a refusal; Message is meant for people as is.
type Error struct {
	Kind    Kind
	Field   string // the request field at fault, if any
	Message string
}

func (e *Error) Error() string { return e.Message }

// Conflictf is a Conflict refusal.
func Conflictf(format string, args ...any) *Error {
	return &Error{Kind: Conflict, Message: fmt.Sprintf(format, args...)}
}
