package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/shared/liststatus"
)

// ListSync serves the list-sync routes: GET /v1/list and POST /v1/list/confirm. Package
// listsync implements it (reporting through package liststatus, so it needs nothing
// of HTTP). Returning a *liststatus.Error picks the response: 400 or 409.
type ListSync interface {
	// ListStatus reports the list sync's configuration and its last applied state.
	ListStatus(ctx context.Context) (ListStatus, error)
	// ConfirmPurge lets the held purge of commit (a full hash or a prefix of at least
	// MinCommitPrefix hex digits) go ahead at the next sync (409 when nothing is held or
	// another commit's purge is).
	ConfirmPurge(ctx context.Context, commit string) (ListStatus, error)
}

// MinCommitPrefix is the shortest commit prefix POST /v1/list/confirm accepts.
const MinCommitPrefix = liststatus.MinCommitPrefix

// The body of GET /v1/list and its parts (package liststatus).
type (
	ListStatus    = liststatus.Status
	ListChange    = liststatus.Change
	ListBadLine   = liststatus.BadLine
	ListHeldPurge = liststatus.HeldPurge
)

// NotConfiguredListStatus is the answer of GET /v1/list when no list repository is set.
func NotConfiguredListStatus() ListStatus { return liststatus.NotConfigured() }

// fromList maps the list sync's refusals to API errors; others pass unchanged.
func fromList(err error) error {
	var le *liststatus.Error
	if !errors.As(err, &le) {
		return err
	}
	if le.Kind == liststatus.Invalid {
		return &Error{Status: http.StatusBadRequest, Code: "invalid_request", Field: le.Field, Message: le.Message}
	}
	return &Error{Status: http.StatusConflict, Code: "conflict", Field: le.Field, Message: le.Message}
}

func (s *server) getList(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.List == nil {
		writeJSON(w, http.StatusOK, NotConfiguredListStatus())
		return nil
	}
	st, err := s.cfg.List.ListStatus(r.Context())
	if err != nil {
		return fromList(err)
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
		return fromList(err)
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
