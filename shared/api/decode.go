package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decodeBody decodes exactly one JSON value from the request body into v, refusing
// non-JSON content types, bodies over MaxBodyBytes, unknown fields and trailing data,
// each with a message that says what is wrong. It is strict where encoding/json is
// lenient, so what is stored is exactly what the client sent: the body must be valid
// UTF-8 with no lone UTF-16 surrogate escapes (encoding/json would replace either
// with U+FFFD), no object may repeat a key (encoding/json keeps the last), and field
// names must match in case (encoding/json matches "URL" to "url").
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return &Error{Status: http.StatusRequestTimeout, Code: "timeout",
				Message: "the request body did not arrive in time; send it whole, at once"}
		}
		return fmt.Errorf("read request body: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, dec)
	}
	// A second value, or garbage, after the first is refused: a client that sent it
	// meant something we would silently ignore.
	if _, err := dec.Token(); err != io.EOF {
		off := dec.InputOffset()
		return &Error{Status: http.StatusBadRequest, Code: "invalid_json", Offset: &off,
			Message: fmt.Sprintf("unexpected data after the JSON value at byte offset %d; send exactly one JSON object", off)}
	}
	return strictJSON(body, jsonFields(v))
}

// checkContentType accepts the JSON types, no Content-Type at all, and the two types
// plain HTTP clients send by default (`curl -d` sends application/x-www-form-urlencoded,
// a browser's fetch text/plain): the body is read as JSON in every case, and a body that
// is not JSON is a 400 saying so. Types that announce another format (multipart, XML)
// are a 415.
func checkContentType(ct string) error {
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
	case mt == "application/json", strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"):
		return nil
	case mt == "application/x-www-form-urlencoded", mt == "text/plain":
		return nil
	}
	return &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
		Message: fmt.Sprintf("Content-Type %q is not JSON; send application/json (or no Content-Type)", ct)}
}

// strictJSON checks what encoding/json lets through (see decodeBody) in a body that
// has decoded. fields are the target's field names, for the case check.
func strictJSON(body []byte, fields []string) error {
	if !utf8.Valid(body) {
		off := int64(invalidUTF8At(body))
		e := badRequest("invalid_json", "request body is not valid UTF-8 (at byte offset %d); send UTF-8 JSON", off)
		e.Offset = &off
		return e
	}
	if off, ok := loneSurrogate(body); ok {
		o := int64(off)
		e := badRequest("invalid_json", "request body escapes a lone UTF-16 surrogate (\\uD800-\\uDFFF) at byte offset %d, which is not a character", o)
		e.Offset = &o
		return e
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	// One set of keys per open object; nil for an open array.
	var open []map[string]bool
	expectKey := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return badRequest("invalid_json", "invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				open = append(open, map[string]bool{})
				expectKey = true
				continue
			case '[':
				open = append(open, nil)
			default:
				open = open[:len(open)-1]
			}
		case string:
			if expectKey {
				keys := open[len(open)-1]
				if keys[t] {
					e := &Error{Status: http.StatusBadRequest, Code: "duplicate_field", Field: t,
						Message: fmt.Sprintf("field %q appears twice in one object; send it once", t)}
					return e
				}
				keys[t] = true
				if len(open) == 1 {
					if err := checkCase(t, fields); err != nil {
						return err
					}
				}
				expectKey = false
				continue
			}
		}
		// After a value inside an object, the next token is a key.
		expectKey = len(open) > 0 && open[len(open)-1] != nil
	}
}

// checkCase refuses a top-level field that matches a known one only without case.
func checkCase(key string, fields []string) error {
	for _, f := range fields {
		if key != f && strings.EqualFold(key, f) {
			e := badRequest("unknown_field", "unknown field %q in the request body: field names are case-sensitive; did you mean %q?", key, f)
			e.Field = key
			return e
		}
	}
	return nil
}

// jsonFields lists the JSON names of the fields of the struct v points to.
func jsonFields(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case name == "":
			out = append(out, f.Name)
		default:
			out = append(out, name)
		}
	}
	return out
}

func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// loneSurrogate finds a \uXXXX escape of a UTF-16 surrogate that is not a high one
// followed by a low one, in the strings of a body that is valid JSON.
func loneSurrogate(b []byte) (int, bool) {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case !in:
			in = c == '"'
		case c == '"':
			in = false
		case c == '\\':
			r, ok := hex4(i)
			if !ok {
				i++ // a one-character escape
				continue
			}
			switch {
			case r >= 0xD800 && r < 0xDC00:
				if lo, ok := hex4(i + 6); !ok || lo < 0xDC00 || lo > 0xDFFF {
					return i, true
				}
				i += 11
			case r >= 0xDC00 && r <= 0xDFFF:
				return i, true
			default:
				i += 5
			}
		}
	}
	return 0, false
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
	case errors.As(err, &se) && se.Offset <= 1:
		off := se.Offset
		e := badRequest("invalid_json", `request body is not JSON (%s); send a JSON object, e.g. {"url": "https://github.com/git/git"}`, strings.TrimPrefix(se.Error(), "json: "))
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
