//go:build integration

package localstack

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"
)

// ecsAgentFake is a fake of what the ECS agent serves a Fargate task (no emulator runs
// it): the task metadata endpoint v4 (GET <ECS_CONTAINER_METADATA_URI_V4>/task, whose
// TaskARN names the task) and the task role's credentials (the container credential
// provider's URI), the emulator's test credentials with a session token. It counts the
// credential reads per task.
type ecsAgentFake struct {
	url     string
	cluster string

	mu    sync.Mutex
	reads map[string]int
}

func newECSAgentFake(t *testing.T, cluster string) *ecsAgentFake {
	t.Helper()
	e := &ecsAgentFake{cluster: cluster, reads: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v4/{task}/task", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"Cluster": cluster, "LaunchType": "FARGATE", "DesiredStatus": "RUNNING",
			"TaskARN": "arn:aws:ecs:" + region + ":123456789012:task/" + cluster + "/" + r.PathValue("task")})
	})
	mux.HandleFunc("GET /creds/{task}", func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.reads[r.PathValue("task")]++
		e.mu.Unlock()
		writeJSON(w, map[string]string{"AccessKeyId": os.Getenv("AWS_ACCESS_KEY_ID"), "SecretAccessKey": os.Getenv("AWS_SECRET_ACCESS_KEY"),
			"Token": "task-session-" + r.PathValue("task"), "Expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			"RoleArn": "arn:aws:iam::123456789012:role/" + cluster + "-task"})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// env is what ECS gives task's containers (instead of static credentials).
func (e *ecsAgentFake) env(task string) map[string]string {
	return map[string]string{
		"ECS_CONTAINER_METADATA_URI_V4":      e.url + "/v4/" + task,
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": e.url + "/creds/" + task,
		"AWS_EXECUTION_ENV":                  "AWS_ECS_FARGATE",
		"AWS_DEFAULT_REGION":                 region,
	}
}

// credentialReads is how often task read its credentials.
func (e *ecsAgentFake) credentialReads(task string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reads[task]
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
