package fleet_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
)

// TestMetricsEndpoint scrapes /metrics of a running fleet: the coordinator's figures and
// the workers' appear once it has ticked.
func TestMetricsEndpoint(t *testing.T) {
	logs := dumpOnFailure(t)
	f := start(t, t.TempDir(), coordinator.NoWarmup, logs)
	waitRing(t, f, 3)
	var body string
	eventually(t, f, 10*time.Second, "metrics after a tick", func() string {
		resp, err := http.Get("http://" + f.Addr() + "/metrics")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		for _, want := range []string{"mirrorfleet_leader_term 1", "mirrorfleet_ticks_total", `mirrorfleet_workers_by_state{state="active"} 3`, "mirrorfleet_queue_depth{worker="} {
			if !strings.Contains(body, want) {
				return "missing " + want
			}
		}
		return ""
	})
}
