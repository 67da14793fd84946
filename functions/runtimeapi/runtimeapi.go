// Package runtimeapi runs a Lambda function's built bootstrap binary in a test, the
// way Lambda's provided.al2023 runtime does: an in-process implementation of the
// Lambda Runtime API (the small HTTP protocol at AWS_LAMBDA_RUNTIME_API that
// aws-lambda-go's lambda.Start polls: /2018-06-01/runtime/invocation/next, then
// /response or /error per invocation, /init/error when start-up fails) and of the
// Extensions API registration aws-lambda-go makes to receive SIGTERM. The binary gets
// exactly the environment the test gives plus what Lambda itself sets, and nothing of
// the test process's.
//
// It is not Lambda: one execution environment, invocations one at a time, no timeout
// enforcement, no freezing between invocations.
//
// Reference: https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html
package runtimeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/logtest"
)

// Function is a running bootstrap binary and the Runtime API it polls.
type Function struct {
	Name string // AWS_LAMBDA_FUNCTION_NAME
	ARN  string // the invoked function ARN each invocation carries

	srv     *httptest.Server
	queue   chan *invocation
	mu      sync.Mutex
	current map[string]*invocation // by request id, until answered
	initErr []byte
	seq     int

	cmd            *exec.Cmd
	stdout, stderr logtest.Buffer
	exited         chan struct{}
	waitErr        error
}

type invocation struct {
	id       string
	payload  []byte
	deadline time.Time
	done     chan Result
}

// Result is what the function answered to one invocation.
type Result struct {
	Payload []byte         // the response (nil after an error)
	Error   *FunctionError // the error the function reported, if it did
}

// FunctionError is an error the function reported (POST .../error), as Lambda would
// return it to the caller (X-Amz-Function-Error).
type FunctionError struct {
	Type    string `json:"errorType"`
	Message string `json:"errorMessage"`
}

func (e *FunctionError) Error() string { return e.Type + ": " + e.Message }

// Config names the function and its environment.
type Config struct {
	Binary string // path of the bootstrap binary (built for the host)
	Name   string // function name; default "function"
	Region string // AWS_REGION; default us-east-1
	// Env is the function's own environment (what the stack sets) plus any overrides a
	// test needs (endpoints, credentials of a local service).
	Env map[string]string
	// MemoryMB is AWS_LAMBDA_FUNCTION_MEMORY_SIZE; default 512.
	MemoryMB int
}

// lambdaEnv is what Lambda sets in every execution environment of a provided runtime.
func (c Config) lambdaEnv(runtimeAPI string) map[string]string {
	return map[string]string{
		"AWS_LAMBDA_RUNTIME_API":          runtimeAPI,
		"AWS_LAMBDA_FUNCTION_NAME":        c.Name,
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(c.MemoryMB),
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + c.Name,
		"AWS_LAMBDA_LOG_STREAM_NAME":      time.Now().UTC().Format("2006/01/02") + "/[$LATEST]0123456789abcdef0123456789abcdef",
		"AWS_REGION":                      c.Region,
		"AWS_DEFAULT_REGION":              c.Region,
		"AWS_EXECUTION_ENV":               "AWS_Lambda_provided.al2023",
		"_HANDLER":                        "bootstrap",
		"LAMBDA_TASK_ROOT":                "/var/task",
		"LAMBDA_RUNTIME_DIR":              "/var/runtime",
		"TZ":                              ":UTC",
		"LANG":                            "en_US.UTF-8",
		"PATH":                            "/usr/local/bin:/usr/bin:/bin",
	}
}

// Start runs the binary against a new Runtime API. Stop it with Close.
func Start(c Config) (*Function, error) {
	if c.Name == "" {
		c.Name = "function"
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.MemoryMB == 0 {
		c.MemoryMB = 512
	}
	f := &Function{Name: c.Name, ARN: fmt.Sprintf("arn:aws:lambda:%s:123456789012:function:%s", c.Region, c.Name),
		queue: make(chan *invocation, 16), current: map[string]*invocation{}, exited: make(chan struct{})}
	f.srv = httptest.NewServer(f.routes())
	env := c.lambdaEnv(strings.TrimPrefix(f.srv.URL, "http://"))
	maps.Copy(env, c.Env)
	f.cmd = exec.Command(c.Binary)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		f.cmd.Env = append(f.cmd.Env, k+"="+env[k])
	}
	f.cmd.Stdout, f.cmd.Stderr = &f.stdout, &f.stderr
	if err := f.cmd.Start(); err != nil {
		f.srv.Close()
		return nil, fmt.Errorf("runtimeapi: start %s: %w", c.Binary, err)
	}
	go func() {
		f.waitErr = f.cmd.Wait()
		close(f.exited)
	}()
	return f, nil
}

// Stdout is what the function wrote to stdout (EMF metrics, for ours).
func (f *Function) Stdout() string { return f.stdout.String() }

// Stderr is what it wrote to stderr (its logs).
func (f *Function) Stderr() string { return f.stderr.String() }

// Invoke sends payload as the next invocation and waits for the function's answer. It
// fails if the function reported an init error or exited, saying why.
func (f *Function) Invoke(ctx context.Context, payload []byte) (Result, error) {
	f.mu.Lock()
	f.seq++
	inv := &invocation{id: fmt.Sprintf("8476a536-e9f4-11e8-9739-%012d", f.seq), payload: payload,
		deadline: time.Now().Add(time.Minute), done: make(chan Result, 1)}
	f.current[inv.id] = inv
	f.mu.Unlock()
	select {
	case f.queue <- inv:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	select {
	case r := <-inv.done:
		return r, nil
	case <-f.exited:
		return Result{}, f.deadErr()
	case <-ctx.Done():
		return Result{}, fmt.Errorf("runtimeapi: %s did not answer: %w\nstderr:\n%s", f.Name, ctx.Err(), f.Stderr())
	}
}

func (f *Function) deadErr() error {
	f.mu.Lock()
	initErr := f.initErr
	f.mu.Unlock()
	msg := fmt.Sprintf("runtimeapi: %s exited (%v)", f.Name, f.waitErr)
	if initErr != nil {
		msg += "; init error " + string(initErr)
	}
	return fmt.Errorf("%s\nstderr:\n%s", msg, f.Stderr())
}

// Close stops the function (SIGTERM, as Lambda does at shutdown with an extension
// registered, then SIGKILL) and the Runtime API.
func (f *Function) Close() {
	if f.cmd.Process != nil {
		_ = f.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-f.exited:
		case <-time.After(2 * time.Second):
			_ = f.cmd.Process.Kill()
			<-f.exited
		}
	}
	f.srv.Close()
}

// routes serve the Runtime API and the Extensions API registration.
func (f *Function) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		select {
		case inv := <-f.queue:
			h := w.Header()
			h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
			h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(inv.deadline.UnixMilli(), 10))
			h.Set("Lambda-Runtime-Invoked-Function-Arn", f.ARN)
			h.Set("Lambda-Runtime-Trace-Id", "Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Parent=9a9197af755a6419;Sampled=0")
			h.Set("Content-Type", "application/json")
			_, _ = w.Write(inv.payload)
		case <-r.Context().Done():
		}
	})
	answer := func(w http.ResponseWriter, r *http.Request, isErr bool) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 6<<20)) // Lambda's synchronous payload limit
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		inv, ok := f.current[r.PathValue("id")]
		delete(f.current, r.PathValue("id"))
		f.mu.Unlock()
		if !ok {
			http.Error(w, `{"errorMessage":"unknown request id","errorType":"InvalidRequestID"}`, http.StatusBadRequest)
			return
		}
		res := Result{Payload: body}
		if isErr {
			fe := &FunctionError{}
			if json.Unmarshal(body, fe) != nil || fe.Type == "" {
				fe.Type = r.Header.Get("Lambda-Runtime-Function-Error-Type")
				fe.Message = string(body)
			}
			res = Result{Error: fe}
		}
		inv.done <- res
		w.WriteHeader(http.StatusAccepted)
	}
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", func(w http.ResponseWriter, r *http.Request) { answer(w, r, false) })
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", func(w http.ResponseWriter, r *http.Request) { answer(w, r, true) })
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		f.mu.Lock()
		f.initErr = body
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	})
	// An extension that registers for no events (aws-lambda-go does so to get SIGTERM at
	// shutdown) has its /next call block until the environment shuts down.
	mux.HandleFunc("POST /2020-01-01/extension/register", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Lambda-Extension-Name") == "" {
			http.Error(w, "Lambda-Extension-Name missing", http.StatusBadRequest)
			return
		}
		w.Header().Set("Lambda-Extension-Identifier", "e7e3d3a4-0000-4000-8000-000000000001")
		_ = json.NewEncoder(w).Encode(map[string]string{"functionName": f.Name, "functionVersion": "$LATEST", "handler": "bootstrap"})
	})
	mux.HandleFunc("GET /2020-01-01/extension/event/next", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	return mux
}
