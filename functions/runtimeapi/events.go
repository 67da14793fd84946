package runtimeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Build compiles the Go package at pkg (a path go build accepts, e.g. ../coordinator)
// as a Lambda bootstrap for this host — the same flags as `make build`, without the
// cross-compilation — into dir, and returns the binary's path.
func Build(ctx context.Context, dir, pkg string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg), "bootstrap")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", out, pkg)
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("runtimeapi: go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// ScheduledEvent is the event an EventBridge schedule rule sends, as the Lambda
// developer guide shows it ("Invoke a Lambda function on a schedule").
func ScheduledEvent(at time.Time, ruleARN string) []byte {
	b, _ := json.Marshal(map[string]any{
		"version": "0", "account": "123456789012", "region": "us-east-1", "detail": map[string]any{},
		"detail-type": "Scheduled Event", "source": "aws.events", "time": at.UTC().Format(time.RFC3339),
		"id": "cdc73f9d-aea9-11e3-9d5a-835b769c0d9c", "resources": []string{ruleARN},
	})
	return b
}

// IAMIdentity is the caller API Gateway verified with SigV4, as an HTTP API route with
// IAM authorization puts it in requestContext.authorizer.iam.
type IAMIdentity struct {
	AccessKey, AccountID, CallerID, UserARN, UserID string
}

// Operator is a signed caller: an assumed role in the account.
var Operator = &IAMIdentity{AccessKey: "ASIA2ZJZYVUEREEIHAKY", AccountID: "123456789012",
	CallerID: "AROA7ZJZYVRE7C3DUXHH6:operator", UserARN: "arn:aws:sts::123456789012:assumed-role/mirrorfleet-operator/operator",
	UserID: "AROA7ZJZYVRE7C3DUXHH6:operator"}

// HTTPEvent is an API Gateway HTTP API event, payload format 2.0, for method and path
// (with a query string after "?", if any) with a JSON body ("" for none); with id, the
// request was signed and API Gateway verified it (IAM authorization), without, it was
// not.
func HTTPEvent(method, path, body string, id *IAMIdentity) []byte {
	return HTTPEventWith(method, path, body, nil, id)
}

// HTTPEventWith is HTTPEvent with more request headers (lower-case names, as API
// Gateway sends them), e.g. a forge's webhook signature.
func HTTPEventWith(method, path, body string, headers map[string]string, id *IAMIdentity) []byte {
	path, query, _ := strings.Cut(path, "?")
	rc := map[string]any{
		"accountId": "123456789012", "apiId": "abc123", "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
		"domainPrefix": "abc123", "requestId": "JKJaXmPLvHcESHA=", "routeKey": "$default", "stage": "$default",
		"time": "01/Jan/2030:00:00:00 +0000", "timeEpoch": 1893456000000,
		"http": map[string]any{"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "203.0.113.7", "userAgent": "aws-cli/2.15"},
	}
	if id != nil {
		rc["authorizer"] = map[string]any{"iam": map[string]any{"accessKey": id.AccessKey, "accountId": id.AccountID,
			"callerId": id.CallerID, "userArn": id.UserARN, "userId": id.UserID}}
	}
	hdr := map[string]string{"accept": "application/json", "content-type": "application/json",
		"host": "abc123.execute-api.us-east-1.amazonaws.com", "x-forwarded-proto": "https"}
	for k, v := range headers {
		hdr[strings.ToLower(k)] = v
	}
	ev := map[string]any{
		"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": query,
		"headers":        hdr,
		"requestContext": rc, "isBase64Encoded": false,
	}
	if q, err := url.ParseQuery(query); err == nil && len(q) > 0 {
		// API Gateway joins repeated parameters with commas.
		params := map[string]string{}
		for k, vs := range q {
			params[k] = strings.Join(vs, ",")
		}
		ev["queryStringParameters"] = params
	}
	if body != "" {
		ev["body"] = body
	}
	b, _ := json.Marshal(ev)
	return b
}

// HTTPResponse is an API Gateway HTTP API response (payload format 2.0).
type HTTPResponse struct {
	StatusCode int               `json:"statusCode"`
	Headers    map[string]string `json:"headers"`
	Body       string            `json:"body"`
}
