package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// decodeBody decodes exactly one JSON value from the request body into v, refusing
// non-JSON content types, bodies over MaxBodyBytes, unknown fields and trailing data,
// each with a message that says what is wrong.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))) {
			return &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
				Message: fmt.Sprintf("Content-Type %q is not JSON; send application/json", ct)}
		}
	}
	body := http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, dec)
	}
	// A second value, or garbage, after the first is refused: a client that sent it
	// meant something we would silently ignore.
	if _, err := dec.Token(); err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge()
		}
		off := dec.InputOffset()
		return &Error{Status: http.StatusBadRequest, Code: "invalid_json", Offset: &off,
			Message: fmt.Sprintf("unexpected data after the JSON value at byte offset %d; send exactly one JSON object", off)}
	}
	return nil
}

func tooLarge() *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
		Message: fmt.Sprintf("request body exceeds the limit of %d bytes (1 MiB); split a bulk add into smaller requests", MaxBodyBytes)}
}

func jsonError(err error, dec *json.Decoder) error {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return tooLarge()
	case errors.Is(err, io.EOF):
		return badRequest("invalid_json", "request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		off := dec.InputOffset()
		e := badRequest("invalid_json", "request body ends in the middle of the JSON value (after %d bytes)", off)
		e.Offset = &off
		return e
	case errors.As(err, &se):
		off := se.Offset
		e := badRequest("invalid_json", "malformed JSON after %d bytes: %s", off, strings.TrimPrefix(se.Error(), "json: "))
		e.Offset = &off
		return e
	case errors.As(err, &te):
		if te.Field == "" {
			return badRequest("invalid_json", "request body must be a JSON object, not a %s", te.Value)
		}
		e := badRequest("invalid_json", "field %q must be %s, not a %s", te.Field, typeName(te.Type.String()), te.Value)
		e.Field = te.Field
		return e
	}
	// encoding/json has no type for an unknown field; its message is stable.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		e := badRequest("unknown_field", "unknown field %q in the request body", name)
		e.Field = name
		return e
	}
	return badRequest("invalid_json", "invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// typeName turns a Go type into JSON vocabulary for messages.
func typeName(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "string":
		return "a string"
	case "[]string":
		return "an array of strings"
	case "api.createRequest", "api.confirmRequest":
		return "a JSON object"
	}
	return "of type " + goType
}
