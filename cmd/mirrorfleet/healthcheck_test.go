package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

func healthcheck(args ...string) (int, string) {
	var out bytes.Buffer
	code := run(append([]string{"healthcheck"}, args...), &out, &out)
	return code, out.String()
}

// The alive file the worker touches after each accepted heartbeat decides its health.
func TestHealthcheckFile(t *testing.T) {
	alive := filepath.Join(t.TempDir(), "alive")
	if code, out := healthcheck("--file", alive); code != 1 || !strings.Contains(out, "unhealthy") {
		t.Fatalf("no file yet: exit %d %s", code, out)
	}
	st := cloud.AliveStore{Store: heartbeatOnly{}, Path: alive}
	if _, err := st.Heartbeat(context.Background(), "w1", store.Heartbeat{}); err != nil {
		t.Fatal(err)
	}
	if code, out := healthcheck("--file", alive, "--max-age", "1m"); code != 0 {
		t.Fatalf("fresh file: exit %d %s", code, out)
	}
	old := time.Now().Add(-3 * time.Minute)
	if err := os.Chtimes(alive, old, old); err != nil {
		t.Fatal(err)
	}
	if code, out := healthcheck("--file", alive, "--max-age", "2m"); code != 1 || !strings.Contains(out, "last touched") {
		t.Fatalf("stale file: exit %d %s", code, out)
	}
	// A heartbeat the store refused does not touch it.
	refusing := cloud.AliveStore{Store: heartbeatOnly{err: store.ErrNotFound}, Path: alive}
	_, _ = refusing.Heartbeat(context.Background(), "w1", store.Heartbeat{})
	if code, _ := healthcheck("--file", alive, "--max-age", "2m"); code != 1 {
		t.Fatal("a refused heartbeat made the worker healthy")
	}
}

func TestHealthcheckURL(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	if code, out := healthcheck("--url", srv.URL+"/healthz"); code != 0 {
		t.Fatalf("200: exit %d %s", code, out)
	}
	status = http.StatusServiceUnavailable
	if code, out := healthcheck("--url", srv.URL+"/healthz"); code != 1 || !strings.Contains(out, "503") {
		t.Fatalf("503: exit %d %s", code, out)
	}
	if code, _ := healthcheck(); code != 2 {
		t.Fatalf("no flag: exit %d, want a usage error", code)
	}
	if code, _ := healthcheck("--url", "u", "--file", "f"); code != 2 {
		t.Fatalf("both flags: exit %d, want a usage error", code)
	}
}

// heartbeatOnly is a worker store that answers heartbeats only.
type heartbeatOnly struct {
	worker.Store
	err error
}

func (h heartbeatOnly) Heartbeat(context.Context, string, store.Heartbeat) (store.Worker, error) {
	return store.Worker{}, h.err
}
