package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/sigv4test"
	"github.com/mirrorfleet/mirrorfleet/shared/api"
)

// The credentials the signing tests put in the environment (the AWS SDK's example key).
var testCreds = aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}

// awsTestEnv gives the process an AWS environment of the test's only: none of the
// machine's credentials, profiles, container or instance roles, and no config file of
// the CLI's; then sets kv.
func awsTestEnv(t *testing.T, kv ...string) {
	t.Helper()
	home := t.TempDir()
	cfg := filepath.Join(home, "config")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_ENDPOINT_URL",
		"MIRRORFLEET_URL", "MIRRORFLEET_API", "MIRRORFLEET_TOKEN", "MIRRORFLEET_AWS"} {
		t.Setenv(k, "")
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("MIRRORFLEET_CONFIG", cfg)
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true") // no instance role off EC2: fail at once
	for i := 0; i+1 < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

// received is a request as the API received it.
type received struct {
	req  *http.Request
	body []byte
}

// recordingAPI answers every request with answer and keeps what it received.
func recordingAPI(t *testing.T, answer any) (*httptest.Server, func() []received) {
	t.Helper()
	var mu sync.Mutex
	var got []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, received{req: r.Clone(context.Background()), body: b})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), got...)
	}
}

// checkSigned fails unless r carries a SigV4 signature of testCreds for execute-api in
// region that the SDK's signer, given the same credentials, computes too.
func checkSigned(t *testing.T, r received, region string) {
	t.Helper()
	h := r.req.Header.Get("Authorization")
	if !strings.HasPrefix(h, "AWS4-HMAC-SHA256 Credential="+testCreds.AccessKeyID+"/") || !strings.Contains(h, "/"+region+"/execute-api/aws4_request") {
		t.Errorf("%s %s: Authorization %q, want AWS4-HMAC-SHA256 for execute-api in %s", r.req.Method, r.req.URL, h, region)
	}
	if r.req.Header.Get("X-Amz-Date") == "" {
		t.Errorf("%s %s: no X-Amz-Date", r.req.Method, r.req.URL)
	}
	if err := sigv4test.Verify(r.req, r.body, testCreds, "execute-api", region, time.Now()); err != nil {
		t.Errorf("%s %s: %v", r.req.Method, r.req.URL, err)
	}
}

// TestAWSSigning: with --aws (or $MIRRORFLEET_AWS, or aws = true in the config file) every
// client command's request is signed with SigV4 for execute-api with the default
// chain's credentials and region, a body included, and carries no bearer token;
// --aws=false wins over the environment. The signature is the one the SDK's signer
// computes from the same credentials over what the server received.
func TestAWSSigning(t *testing.T) {
	awsTestEnv(t, "AWS_ACCESS_KEY_ID", testCreds.AccessKeyID, "AWS_SECRET_ACCESS_KEY", testCreds.SecretAccessKey,
		"AWS_REGION", "eu-west-1", "MIRRORFLEET_TOKEN", "a-bearer-token")
	// One answer for every command: a bulk add's, and a repo's (for repos sync).
	srv, got := recordingAPI(t, map[string]any{"created": 1, "results": []api.BulkResult{{Status: "created", ID: "r1", URL: "https://example.org/a"}},
		"id": "r1", "url": "https://example.org/a"})

	var out, errOut bytes.Buffer
	if code := run([]string{"repos", "add", "--aws", "--api", srv.URL, "https://example.org/a"}, &out, &errOut); code != 0 {
		t.Fatalf("repos add --aws: exit %d: %s%s", code, out.String(), errOut.String())
	}
	rs := got()
	if len(rs) != 1 || rs[0].req.Method != "POST" || !bytes.Contains(rs[0].body, []byte("https://example.org/a")) {
		t.Fatalf("the API received %d requests: %+v", len(rs), rs)
	}
	checkSigned(t, rs[0], "eu-west-1")

	// The environment, then the config file, turn it on; --aws=false turns it off.
	t.Setenv("MIRRORFLEET_AWS", "true")
	if code := run([]string{"status", "--api", srv.URL}, io.Discard, &errOut); code != 0 {
		t.Fatalf("status with MIRRORFLEET_AWS: exit %d: %s", code, errOut.String())
	}
	if code := run([]string{"status", "--api", srv.URL, "--aws=false"}, io.Discard, &errOut); code != 0 {
		t.Fatalf("status --aws=false: exit %d: %s", code, errOut.String())
	}
	t.Setenv("MIRRORFLEET_AWS", "")
	if err := os.WriteFile(os.Getenv("MIRRORFLEET_CONFIG"), []byte("url = \""+srv.URL+"\"\naws = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"repos", "sync", "r1"}, io.Discard, &errOut); code != 0 {
		t.Fatalf("repos sync with aws in the config file: exit %d: %s", code, errOut.String())
	}
	rs = got()
	if len(rs) != 5 {
		t.Fatalf("the API received %d requests, want 5", len(rs))
	}
	checkSigned(t, rs[1], "eu-west-1")
	if h := rs[2].req.Header.Get("Authorization"); h != "Bearer a-bearer-token" {
		t.Errorf("--aws=false: Authorization %q, want the bearer token", h)
	}
	for _, r := range rs[3:] { // repos sync: GET the repo, POST its sync
		checkSigned(t, r, "eu-west-1")
	}
	if rs[4].req.Method != "POST" || !strings.HasSuffix(rs[4].req.URL.Path, "/sync") {
		t.Errorf("the last request is %s %s, want the sync", rs[4].req.Method, rs[4].req.URL)
	}
}

// TestAWSSigningRegionAndHost: the API's execute-api host names its region, which wins
// over the environment's; requests to another host (a clone URL, a metrics scrape) go
// unsigned.
func TestAWSSigningRegionAndHost(t *testing.T) {
	awsTestEnv(t, "AWS_ACCESS_KEY_ID", testCreds.AccessKeyID, "AWS_SECRET_ACCESS_KEY", testCreds.SecretAccessKey,
		"AWS_REGION", "eu-west-1")
	var sent []*http.Request
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = append(sent, r)
		return &http.Response{StatusCode: 200, Status: "200 OK", Body: io.NopCloser(strings.NewReader(`{}`)), Request: r}, nil
	})
	c := &client{base: "https://abc123.execute-api.ap-south-1.amazonaws.com", token: "t", http: &http.Client{Transport: rt}}
	if err := c.signWithAWS(t.Context()); err != nil {
		t.Fatal(err)
	}
	var st api.Status
	if err := c.do(t.Context(), http.MethodGet, "/v1/status", nil, &st); err != nil {
		t.Fatal(err)
	}
	if _, err := c.scrape(t.Context(), "http://serve.example/metrics", serveMetric); err == nil {
		t.Error("a scrape of a page without the metric is no error")
	}
	if len(sent) != 2 {
		t.Fatalf("%d requests sent, want 2", len(sent))
	}
	a, err := sigv4test.Parse(sent[0].Header.Get("Authorization"))
	if err != nil || a.Region != "ap-south-1" || a.Service != "execute-api" {
		t.Errorf("the API request: %+v %v, want signed for execute-api in ap-south-1", a, err)
	}
	if h := sent[1].Header.Get("Authorization"); h != "" {
		t.Errorf("the request to another host carries Authorization %q", h)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAWSSigningWithout: with --aws and no credentials, or no region, the command fails
// at once, saying what is missing and where it was looked for, and sends nothing.
func TestAWSSigningWithout(t *testing.T) {
	srv, got := recordingAPI(t, api.Status{})
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"no credentials", []string{"AWS_REGION", "eu-west-1"},
			[]string{"--aws: no AWS credentials found", "AWS_ACCESS_KEY_ID", "AWS_PROFILE", "instance role"}},
		{"no region", []string{"AWS_ACCESS_KEY_ID", testCreds.AccessKeyID, "AWS_SECRET_ACCESS_KEY", testCreds.SecretAccessKey},
			[]string{"--aws: no AWS region", "AWS_REGION"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			awsTestEnv(t, tc.env...)
			var out, errOut bytes.Buffer
			code := run([]string{"status", "--aws", "--api", srv.URL}, &out, &errOut)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut.String())
				}
			}
		})
	}
	if n := len(got()); n != 0 {
		t.Errorf("the API received %d requests", n)
	}
}
