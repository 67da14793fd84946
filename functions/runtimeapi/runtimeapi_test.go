package runtimeapi

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

var (
	echoOnce sync.Once
	echoBin  string
	echoErr  error
	echoDir  string
)

// echo builds testdata/echo once per test binary.
func echo(t *testing.T) string {
	t.Helper()
	echoOnce.Do(func() {
		echoDir, echoErr = tempDir()
		if echoErr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			echoBin, echoErr = Build(ctx, echoDir, "./testdata/echo")
		}
	})
	if echoErr != nil {
		t.Fatal(echoErr)
	}
	return echoBin
}

// The protocol as aws-lambda-go speaks it: invocations in order with their context,
// answers and function errors, the SIGTERM registration, an environment that is the
// function's and Lambda's only.
func TestInvokeABuiltFunction(t *testing.T) {
	t.Setenv("ECHO_GREETING", "from the test process") // must not leak into the function
	f, err := Start(Config{Binary: echo(t), Name: "echo", Env: map[string]string{"ECHO_GREETING": "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for i, in := range []string{`{"n":1}`, `{"n":2}`} {
		res, err := f.Invoke(ctx, []byte(in))
		if err != nil || res.Error != nil {
			t.Fatalf("invoke %d: %v %v", i, err, res.Error)
		}
		var out struct {
			In          json.RawMessage
			ARN         string
			Request     string
			Stream      string
			Greeting    string
			Home        string
			DeadlineSet bool `json:"deadline_set"`
		}
		if err := json.Unmarshal(res.Payload, &out); err != nil {
			t.Fatal(err)
		}
		if string(out.In) != in || out.ARN != f.ARN || !strings.HasSuffix(out.Request, "00"+string(rune('1'+i))) ||
			out.Greeting != "hello" || out.Home != "" || !out.DeadlineSet || !strings.Contains(out.Stream, "[$LATEST]") {
			t.Errorf("invoke %d answered %s", i, res.Payload)
		}
	}
	res, err := f.Invoke(ctx, []byte(`{"Fail":"no such repo"}`))
	if err != nil || res.Error == nil || res.Error.Message != "no such repo" || res.Error.Type == "" {
		t.Fatalf("failing invocation: %v, %+v", err, res.Error)
	}
	// Still serving after a function error, as Lambda's environment is.
	if res, err := f.Invoke(ctx, []byte(`{}`)); err != nil || res.Error != nil {
		t.Fatalf("after an error: %v %v", err, res.Error)
	}
	f.Close()
	if !strings.Contains(f.Stdout(), "sigterm") {
		t.Errorf("no SIGTERM handler ran at shutdown; stdout %q stderr %q", f.Stdout(), f.Stderr())
	}
}

// A function that exits at start-up fails the invocation with its output.
func TestInitFailure(t *testing.T) {
	f, err := Start(Config{Binary: echo(t), Env: map[string]string{"ECHO_FAIL_INIT": "MIRRORFLEET_TABLE is not set"}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = f.Invoke(ctx, []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "MIRRORFLEET_TABLE is not set") || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("err %v", err)
	}
}

// An HTTP API event for a path with a query string carries it as API Gateway does: the
// path alone in rawPath and requestContext.http.path, the query in rawQueryString and,
// decoded, in queryStringParameters (repeated names joined by commas).
func TestHTTPEventQuery(t *testing.T) {
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(HTTPEvent("GET", "/v1/repos?limit=2&cursor=a%2Bb&state=ok&state=gone", "", Operator), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.RawPath != "/v1/repos" || ev.RequestContext.HTTP.Path != "/v1/repos" || ev.RawQueryString != "limit=2&cursor=a%2Bb&state=ok&state=gone" {
		t.Errorf("path %q / %q, query %q", ev.RawPath, ev.RequestContext.HTTP.Path, ev.RawQueryString)
	}
	if q := ev.QueryStringParameters; q["limit"] != "2" || q["cursor"] != "a+b" || q["state"] != "ok,gone" {
		t.Errorf("queryStringParameters %v", q)
	}
	var plain events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(HTTPEvent("GET", "/v1/status", "", nil), &plain); err != nil || plain.RawQueryString != "" || plain.QueryStringParameters != nil {
		t.Errorf("no query: %q %v (%v)", plain.RawQueryString, plain.QueryStringParameters, err)
	}
}
