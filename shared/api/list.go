package api

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// ListSync serves the list-sync routes: GET /v1/list and POST /v1/list/confirm. Package
// listsync implements it. It is an interface here, not a call into listsync, because
// listsync uses this package's ListStatus types and errors for its status.
type ListSync interface {
	// ListStatus reports the list sync's configuration and its last applied state.
	ListStatus(ctx context.Context) (ListStatus, error)
	// ConfirmPurge lets the held purge of commit (a full hash or a prefix of at least
	// MinCommitPrefix hex digits) go ahead at the next sync. Returning an *Error picks the
	// response (409 when nothing is held or another commit's purge is).
	ConfirmPurge(ctx context.Context, commit string) (ListStatus, error)
}

// MinCommitPrefix is the shortest commit prefix POST /v1/list/confirm accepts.
const MinCommitPrefix = 7

// ListStatus is the body of GET /v1/list. Every field is always present; what does not
// apply is null (or empty), as in the rest of the API.
type ListStatus struct {
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
	Entries    int           `json:"entries"`
	LastChange *ListChange   `json:"last_change"`
	BadLines   []ListBadLine `json:"bad_lines"`
	BadTotal   int           `json:"bad_lines_total"`
	// BadByCode counts the bad lines by why they were skipped: a URL policy reason
	// (malformed, scheme, ...), too_long or duplicate. Only the first bad lines are
	// kept in BadLines; these counts cover them all.
	BadByCode map[string]int `json:"bad_lines_by_code"`
	HeldPurge *ListHeldPurge `json:"held_purge"`
	Pending   []string       `json:"pending"`
	// LastAttemptAt and LastError are what the coordinator that serves this API knows
	// of its own last attempt; null where the API runs apart from the coordinator.
	LastAttemptAt *time.Time `json:"last_attempt_at"`
	LastError     *string    `json:"last_error"`
}

// ListChange is what the last recorded sync did.
type ListChange struct {
	// Mode is "diff" (the list files diffed against the last applied commit) or "full"
	// (the whole list compared with the stored list repos: first sync, rewritten
	// history, a held purge, a configuration change).
	Mode    string `json:"mode"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
}

// ListBadLine is a skipped line of the list.
type ListBadLine struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Text   string `json:"text"`
	Reason string `json:"reason"`
}

// ListHeldPurge is a removal held by purge protection until confirmed.
type ListHeldPurge struct {
	Commit           string    `json:"commit"`
	Remove           int       `json:"remove"`
	Of               int       `json:"of"`
	Percent          float64   `json:"percent"`
	ThresholdPercent float64   `json:"threshold_percent"`
	Since            time.Time `json:"since"`
	Sample           []string  `json:"sample"`
	Confirmed        bool      `json:"confirmed"`
}

// NotConfiguredListStatus is the answer of GET /v1/list when no list repository is set.
func NotConfiguredListStatus() ListStatus {
	return ListStatus{
		Message: "no list repository is configured (start the coordinator with --list-repo URL, or MIRRORFLEET_LIST_REPO)",
		Paths:   []string{}, BadLines: []ListBadLine{}, Pending: []string{}, BadByCode: map[string]int{},
	}
}

func (s *server) getList(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.List == nil {
		writeJSON(w, http.StatusOK, NotConfiguredListStatus())
		return nil
	}
	st, err := s.cfg.List.ListStatus(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

type confirmRequest struct {
	Commit *string `json:"commit"`
}

func (s *server) confirmList(w http.ResponseWriter, r *http.Request) error {
	var req confirmRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.Commit == nil {
		e := badRequest("invalid_request", `request body needs "commit": the commit of the held purge (GET /v1/list shows it)`)
		e.Field = "commit"
		return e
	}
	c := strings.ToLower(strings.TrimSpace(*req.Commit))
	if !isHex(c) || len(c) < MinCommitPrefix || len(c) > 64 {
		e := badRequest("invalid_request", "commit %q is not a commit hash (or a prefix of at least %d hex digits)", truncate(*req.Commit, 80), MinCommitPrefix)
		e.Field = "commit"
		return e
	}
	if s.cfg.List == nil {
		return &Error{Status: http.StatusConflict, Code: "conflict", Message: "no list repository is configured, so there is no purge to confirm"}
	}
	st, err := s.cfg.List.ConfirmPurge(r.Context(), c)
	if err != nil {
		return err
	}
	s.poke() // the coordinator applies the confirmed purge at its next tick
	writeJSON(w, http.StatusAccepted, st)
	return nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return s != ""
}
