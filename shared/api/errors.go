package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
)

// Error is an API error: the body {"error": Error} with HTTP status Status. Handlers and
// Auth functions return it to choose the response; any other error is a 500 whose detail
// is logged, never sent.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Reason refines Code: the urlpolicy refusal reason of an invalid_url.
	Reason string `json:"reason,omitempty"`
	// Field names the JSON field or query parameter at fault, when there is one.
	Field string `json:"field,omitempty"`
	// Offset is the byte offset in the body of a JSON syntax error.
	Offset *int64 `json:"offset,omitempty"`
	// Existing is the repo that holds the mirror path of a mirror_path_taken refusal.
	Existing *ExistingRepo `json:"existing,omitempty"`
}

// ExistingRepo names a stored repo in an error.
type ExistingRepo struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func badRequest(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

type errorBody struct {
	Error *Error `json:"error"`
}

// ErrorBody is the body of every error answer, for clients to decode.
type ErrorBody = errorBody

// writeError answers with err as an *Error, or as a 500 that logs the detail under a
// random id the client can quote, so the detail never leaks.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := s.toError(r, err)
	writeJSON(w, ae.Status, errorBody{ae})
}

// toError is err as an *Error; any other error is logged and becomes a 500 naming the
// log entry.
func (s *server) toError(r *http.Request, err error) *Error {
	var ae *Error
	if !errors.As(err, &ae) {
		id := rand.Text()[:12]
		level := slog.LevelError
		if errors.Is(err, context.Canceled) {
			level = slog.LevelDebug // the client went away; nothing is wrong here
		}
		s.log.Log(r.Context(), level, "api: internal error", "id", id, "method", r.Method, "path", r.URL.Path, "err", err)
		ae = &Error{Status: http.StatusInternalServerError, Code: "internal",
			Message: "internal error (id " + id + "); the server log has the detail"}
	}
	return ae
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only our own response types get here, all of which marshal; say so plainly.
		status = http.StatusInternalServerError
		body = []byte(`{"error":{"code":"internal","message":"internal error: response encoding failed"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// BearerAuth returns an Auth function accepting requests with the header
// "Authorization: Bearer <token>". Tokens are compared in constant time (as SHA-256
// digests, so the length does not leak either). An empty token refuses every request.
func BearerAuth(token string) func(*http.Request) error {
	want := sha256.Sum256([]byte(token))
	return func(r *http.Request) error {
		if token == "" {
			return errors.New("this server has no API token configured, so writes are disabled")
		}
		h := r.Header.Get("Authorization")
		if h == "" {
			return errors.New("missing Authorization header; send Authorization: Bearer <token>")
		}
		scheme, got, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return errors.New("the Authorization header must use the Bearer scheme: Authorization: Bearer <token>")
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			return errors.New("invalid bearer token")
		}
		return nil
	}
}

func parseQuery(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("invalid_parameter", "malformed query string: %v", err)
	}
	return q, nil
}

// hexID reports whether id has the form of store.RepoID: 16 lowercase hex digits.
func hexID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}
