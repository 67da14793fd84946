package fleet_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
)

// TestHealthz asks the fleet's /healthz as a load balancer does: by address, under a
// Host the API would refuse, without a token. It is 200 with the checks while the store,
// git and the mirrors answer, and 503 naming the mirrors once their directory is gone.
func TestHealthz(t *testing.T) {
	logs := dumpOnFailure(t)
	data := t.TempDir()
	f := startWith(t, logs, func(c *fleet.Config) { c.Data, c.Workers, c.Warmup = data, 1, -1 })
	get := func() (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+f.Addr()+"/healthz", nil)
		req.Host = "10.0.3.7:8080" // a load balancer's target address, not a loopback name
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("/healthz: %s, body %q is not JSON: %v", resp.Status, b, err)
		}
		return resp.StatusCode, body
	}
	code, body := get()
	checks, _ := body["checks"].(map[string]any)
	if code != 200 || body["status"] != "ok" || checks["store"] != "ok" || checks["git"] != "ok" || checks["mirrors"] != "ok" {
		t.Fatalf("/healthz of a healthy fleet: %d %v", code, body)
	}

	if err := os.RemoveAll(fleet.MirrorsDir(data)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second) // the answer is kept a few seconds
	for {
		code, body = get()
		checks, _ = body["checks"].(map[string]any)
		msg, _ := checks["mirrors"].(string)
		if code == 503 && body["status"] == "unhealthy" && strings.Contains(msg, "mirrors root") && checks["store"] == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz without the mirrors directory: %d %v", code, body)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestHealthzFailsWhenALoopStops: /healthz says whether the fleet's loops turn, not
// only whether its dependencies answer: once a worker stops heartbeating (killed here,
// as a worker stuck on its lock would be) for fleet.StaleAfter(heartbeat), it is 503
// naming the worker, while the coordinator's check stays ok.
func TestHealthzFailsWhenALoopStops(t *testing.T) {
	logs := dumpOnFailure(t)
	f := startWith(t, logs, func(c *fleet.Config) { c.Data, c.Workers, c.Warmup = t.TempDir(), 2, -1 })
	waitRing(t, f, 2)
	get := func() (int, map[string]any) {
		t.Helper()
		resp, err := http.Get("http://" + f.Addr() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		checks, _ := body["checks"].(map[string]any)
		return resp.StatusCode, checks
	}
	if code, checks := get(); code != 200 || checks["coordinator"] != "ok" || checks["workers"] != "ok" {
		t.Fatalf("/healthz of a turning fleet: %d %v", code, checks)
	}
	dead := f.WorkerIDs()[0]
	f.KillWorker(0)
	deadline := time.Now().Add(fleet.StaleAfter(heartbeat) + 30*time.Second)
	for {
		code, checks := get()
		msg, _ := checks["workers"].(string)
		if code == 503 && strings.Contains(msg, dead) && strings.Contains(msg, "no heartbeat") && checks["coordinator"] == "ok" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz with worker %s stopped: %d %v", dead, code, checks)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
