//go:build integration

package localstack

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/mirrorfleet/mirrorfleet/functions/runtimeapi"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/sigv4test"
)

// maxPayload is API Gateway's request payload limit.
const maxPayload = 10 << 20

// gateway is the stack's HTTP API in front of the API Lambda, as a client over HTTP
// sees it: a request becomes an API Gateway HTTP API event (payload format 2.0) for the
// function under the Runtime API emulator, and the function's answer the response.
// Like the stack's routes, every route takes IAM authorization but the forges' hook
// route (POST /v1/hooks/{forge}): a request must carry a SigV4 signature for
// execute-api in the tier's region by the tier's credentials, checked by recomputing it
// with the AWS SDK's signer (sigv4test), and is refused with API Gateway's 403 and
// {"message": ...} otherwise. A verified request's event carries the caller's IAM
// identity, as API Gateway's IAM authorizer puts it there. It is not API Gateway: no
// IAM policies (the one set of credentials is allowed everything), no throttling.
type gateway struct {
	URL   string
	t     *testing.T
	fn    *runtimeapi.Function
	creds aws.Credentials

	mu              sync.Mutex
	signed, refused int // requests that passed IAM authorization, and those refused
}

// startGateway serves fn over HTTP on a loopback port, verifying signatures made with
// the tier's credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
func startGateway(t *testing.T, fn *lambda) *gateway {
	t.Helper()
	g := &gateway{t: t, fn: fn.fn, creds: aws.Credentials{AccessKeyID: os.Getenv("AWS_ACCESS_KEY_ID"),
		SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY")}}
	if g.creds.AccessKeyID == "" || g.creds.SecretAccessKey == "" {
		t.Fatal("the gateway needs the tier's credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (run.sh sets them)")
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	g.URL = srv.URL
	return g
}

// counts is how many requests passed IAM authorization and how many were refused.
func (g *gateway) counts() (signed, refused int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.signed, g.refused
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPayload+1))
	if err != nil {
		g.answer(w, http.StatusBadRequest, "Bad Request")
		return
	}
	if len(body) > maxPayload {
		g.answer(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
		return
	}
	public, _ := path.Match("/v1/hooks/*", r.URL.Path)
	public = public && r.Method == http.MethodPost
	var id *runtimeapi.IAMIdentity
	if !public {
		if r.Header.Get("Authorization") == "" {
			g.refuse(w, "Forbidden")
			return
		}
		if err := sigv4test.Verify(r, body, g.creds, "execute-api", region, time.Now()); err != nil {
			g.refuse(w, err.Error())
			return
		}
		a, _ := sigv4test.Parse(r.Header.Get("Authorization"))
		caller := *runtimeapi.Operator
		caller.AccessKey = a.AccessKey
		id = &caller
		g.mu.Lock()
		g.signed++
		g.mu.Unlock()
	}

	// API Gateway passes the request's headers, lower-cased, repeated ones joined.
	headers := map[string]string{"host": r.Host}
	for k, vs := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	target := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second) // the stack's integration timeout
	defer cancel()
	res, err := g.fn.Invoke(ctx, runtimeapi.HTTPEventWith(r.Method, target, string(body), headers, id))
	if err == nil && res.Error != nil {
		err = res.Error
	}
	var out struct {
		StatusCode      int               `json:"statusCode"`
		Headers         map[string]string `json:"headers"`
		Body            string            `json:"body"`
		IsBase64Encoded bool              `json:"isBase64Encoded"`
	}
	if err == nil {
		err = json.Unmarshal(res.Payload, &out)
	}
	b := []byte(out.Body)
	if err == nil && out.IsBase64Encoded {
		b, err = base64.StdEncoding.DecodeString(out.Body)
	}
	if err == nil && out.StatusCode == 0 {
		err = errors.New("no statusCode")
	}
	if err != nil {
		g.t.Logf("gateway: %s %s: the API function failed: %v", r.Method, r.URL, err)
		g.answer(w, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	for k, v := range out.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(out.StatusCode)
	_, _ = w.Write(b)
}

// refuse answers as API Gateway's IAM authorizer does: 403 with its message.
func (g *gateway) refuse(w http.ResponseWriter, msg string) {
	g.mu.Lock()
	g.refused++
	g.mu.Unlock()
	g.answer(w, http.StatusForbidden, msg)
}

// answer is API Gateway's own answer: {"message": msg}.
func (g *gateway) answer(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}
