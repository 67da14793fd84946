package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/shared/api"
)

// TestRemoveAsks: on a terminal repos rm deletes only after "y"; without one it needs -y.
func TestRemoveAsks(t *testing.T) {
	deletes := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodDelete {
			deletes++
			w.WriteHeader(http.StatusAccepted)
			_ = json.NewEncoder(w).Encode(api.Accepted{ID: "0123456789abcdef", Status: "deleting"})
			return
		}
		_ = json.NewEncoder(w).Encode(api.Repo{ID: "0123456789abcdef", URL: "https://example.org/a"})
	}))
	defer srv.Close()
	run := func(answer string, tty, yes bool) (string, error) {
		var out, errOut bytes.Buffer
		c := &client{in: strings.NewReader(answer), inTTY: tty, base: srv.URL, http: srv.Client(), out: &out, errOut: &errOut}
		err := c.remove(context.Background(), "0123456789abcdef", yes)
		return errOut.String(), err
	}
	if q, err := run("n\n", true, false); err == nil || deletes != 0 || !strings.Contains(q, "[y/N]") {
		t.Fatalf("answer n: %v, %d deletes, asked %q", err, deletes, q)
	}
	if _, err := run("\n", true, false); err == nil || deletes != 0 {
		t.Fatalf("no answer: %v, %d deletes", err, deletes)
	}
	if _, err := run("y\n", true, false); err != nil || deletes != 1 {
		t.Fatalf("answer y: %v, %d deletes", err, deletes)
	}
	if _, err := run("y\n", false, false); err == nil || !strings.Contains(err.Error(), "-y") || deletes != 1 {
		t.Fatalf("no terminal, no -y: %v, %d deletes", err, deletes)
	}
	if _, err := run("", false, true); err != nil || deletes != 2 {
		t.Fatalf("-y: %v, %d deletes", err, deletes)
	}
}
