package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
)

// iamAuthorizer is the requestContext.authorizer API Gateway sends for a route with IAM
// authorization (as in the HTTP API payload 2.0 sample of the Lambda docs).
const iamAuthorizer = `"authorizer": {
      "iam": {
        "accessKey": "ASIA2ZJZYVUEREEIHAKY",
        "accountId": "123456789012",
        "callerId": "AROA7ZJZYVRE7C3DUXHH6:operator",
        "principalOrgId": "o-abc123",
        "userArn": "arn:aws:sts::123456789012:assumed-role/mirrorfleet-operator/operator",
        "userId": "AROA7ZJZYVRE7C3DUXHH6:operator"
      }
    },`

// event is an HTTP API payload 2.0 event for method and path, with body (JSON text or
// "") and, when auth is set, an IAM identity in the request context.
func event(t *testing.T, method, path, body string, auth bool) events.APIGatewayV2HTTPRequest {
	t.Helper()
	authorizer := ""
	if auth {
		authorizer = iamAuthorizer
	}
	bodyJSON, _ := json.Marshal(body)
	raw := fmt.Sprintf(`{
  "version": "2.0",
  "routeKey": "$default",
  "rawPath": %q,
  "rawQueryString": "",
  "headers": {
    "accept": "application/json",
    "content-type": "application/json",
    "host": "abc123.execute-api.us-east-1.amazonaws.com",
    "user-agent": "aws-cli/2.15",
    "x-amz-date": "20250101T000000Z",
    "x-forwarded-for": "203.0.113.7",
    "x-forwarded-proto": "https"
  },
  "requestContext": {
    "accountId": "123456789012",
    "apiId": "abc123",
    %s
    "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
    "domainPrefix": "abc123",
    "http": {
      "method": %q,
      "path": %q,
      "protocol": "HTTP/1.1",
      "sourceIp": "203.0.113.7",
      "userAgent": "aws-cli/2.15"
    },
    "requestId": "JKJaXmPLvHcESHA=",
    "routeKey": "$default",
    "stage": "$default",
    "time": "01/Jan/2025:00:00:00 +0000",
    "timeEpoch": 1735689600000
  },
  "body": %s,
  "isBase64Encoded": false
}`, path, authorizer, method, path, bodyJSON)
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		t.Fatalf("sample event: %v\n%s", err, raw)
	}
	return ev
}

type stores map[string]func(t *testing.T) Store

// backends: bolt always; DynamoDB Local when it runs.
var backends = stores{
	"bolt": func(t *testing.T) Store {
		st, err := bolt.OpenWith(filepath.Join(t.TempDir(), "api.db"), bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	},
	"dynamodb-local": func(t *testing.T) Store { return dynamotest.Table(t, "mf_api", dynamo.Config{}) },
}

type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func TestAPIThroughAPIGateway(t *testing.T) {
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			var logs bytes.Buffer
			h := NewHandler(cloud.APIConfig{}, st, clock.Real{}, slog.New(slog.NewJSONHandler(&logs, nil)), nil)
			ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "req-1",
				InvokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:mirrorfleet-api"})
			call := func(ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
				t.Helper()
				resp, err := h(ctx, ev)
				if err != nil {
					t.Fatalf("%s %s: handler error %v", ev.RequestContext.HTTP.Method, ev.RawPath, err)
				}
				if ct := resp.Headers["Content-Type"]; !strings.HasPrefix(ct, "application/json") {
					t.Errorf("%s %s: Content-Type %q", ev.RequestContext.HTTP.Method, ev.RawPath, ct)
				}
				return resp
			}

			resp := call(event(t, "GET", "/v1/status", "", true))
			if resp.StatusCode != 200 || !json.Valid([]byte(resp.Body)) {
				t.Fatalf("GET /v1/status: %d %s", resp.StatusCode, resp.Body)
			}

			resp = call(event(t, "POST", "/v1/repos", `{"url":"https://github.com/golang/go"}`, true))
			if resp.StatusCode != 201 {
				t.Fatalf("POST /v1/repos with IAM identity: %d %s", resp.StatusCode, resp.Body)
			}
			var created struct {
				ID, URL, State string
			}
			if err := json.Unmarshal([]byte(resp.Body), &created); err != nil || created.State != string(store.RepoPending) {
				t.Fatalf("created repo %s (%v)", resp.Body, err)
			}
			if r, err := st.GetRepo(t.Context(), created.ID); err != nil || r.URL != created.URL {
				t.Fatalf("stored repo %+v, %v", r, err)
			}
			resp = call(event(t, "POST", "/v1/repos", `{"url":"https://github.com/golang/go"}`, true))
			if resp.StatusCode != 200 {
				t.Errorf("POST of an existing repo: %d %s, want 200", resp.StatusCode, resp.Body)
			}

			// Without an IAM identity: 401 for the write and, since reads need auth, the read.
			for _, ev := range []events.APIGatewayV2HTTPRequest{
				event(t, "POST", "/v1/repos", `{"url":"https://github.com/golang/tools"}`, false),
				event(t, "GET", "/v1/status", "", false),
			} {
				resp = call(ev)
				var e apiError
				if resp.StatusCode != 401 || json.Unmarshal([]byte(resp.Body), &e) != nil || e.Error.Code != "unauthorized" ||
					!strings.Contains(e.Error.Message, "SigV4") {
					t.Errorf("%s %s without identity: %d %s", ev.RequestContext.HTTP.Method, ev.RawPath, resp.StatusCode, resp.Body)
				}
				if got := resp.Headers["Www-Authenticate"]; got != "AWS4-HMAC-SHA256" {
					t.Errorf("WWW-Authenticate %q, want the SigV4 scheme", got)
				}
			}
			if _, err := st.GetRepo(t.Context(), store.RepoID("https://github.com/golang/tools")); err == nil {
				t.Error("an unauthenticated POST created a repo")
			}

			// A client-supplied copy of the adapter's context header changes nothing.
			ev := event(t, "POST", "/v1/repos", `{"url":"https://github.com/golang/tools"}`, false)
			ev.Headers["X-GoLambdaProxy-ApiGw-Context"] = `{"authorizer":{"iam":{"userArn":"arn:aws:iam::1:user/evil"}}}`
			if resp = call(ev); resp.StatusCode != 401 {
				t.Errorf("spoofed context header: %d %s", resp.StatusCode, resp.Body)
			}

			// Malformed bodies: 400 with a JSON error that says what is wrong.
			for body, code := range map[string]string{
				`{"url":`: "invalid_json",
				`{"url":"https://x.org/a","color":"red"}`: "unknown_field",
				`{"url":"file:///etc/passwd"}`:            "invalid_url",
			} {
				resp = call(event(t, "POST", "/v1/repos", body, true))
				var e apiError
				if resp.StatusCode != 400 || json.Unmarshal([]byte(resp.Body), &e) != nil || e.Error.Message == "" {
					t.Errorf("POST %s: %d %s, want 400 with a JSON error", body, resp.StatusCode, resp.Body)
				} else if e.Error.Code != code {
					t.Errorf("POST %s: code %q, want %q: %s", body, e.Error.Code, code, e.Error.Message)
				}
			}

			// The caller is in the log.
			if !strings.Contains(logs.String(), `"user_arn":"arn:aws:sts::123456789012:assumed-role/mirrorfleet-operator/operator"`) ||
				!strings.Contains(logs.String(), `"account_id":"123456789012"`) {
				t.Errorf("caller identity not logged:\n%s", logs.String())
			}
		})
	}
}

// TestPublicReads: with MIRRORFLEET_PUBLIC_READS a read needs no IAM identity; a write
// still does.
func TestPublicReads(t *testing.T) {
	st := backends["bolt"](t)
	h := NewHandler(cloud.APIConfig{PublicReads: true}, st, clock.Real{}, nil, nil)
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "req-2"})
	resp, err := h(ctx, event(t, "GET", "/v1/status", "", false))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("public GET /v1/status without identity: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	resp, err = h(ctx, event(t, "POST", "/v1/repos", `{"url":"https://github.com/golang/go"}`, false))
	if err != nil || resp.StatusCode != 401 {
		t.Fatalf("write without identity under public reads: %d %s %v", resp.StatusCode, resp.Body, err)
	}
}

// TestHooksThroughAPIGateway: a forge's signed push comes without an IAM identity (the
// hook route is public) and is taken: the durable sync request and a hook signal in the
// owner's signal item. A bad signature is 401 and signals nothing; a sync request by an
// operator signals the owner as a sync; a repo with no owner gets only the durable request.
func TestHooksThroughAPIGateway(t *testing.T) {
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			ctx := t.Context()
			secrets := func(context.Context) (api.HookSecrets, error) { return api.HookSecrets{Secret: "hooksecret"}, nil }
			h := NewHandler(cloud.APIConfig{}, st, clock.Real{}, nil, secrets)
			lctx := lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "req-3"})
			add := func(url string) string {
				t.Helper()
				r, _, err := st.CreateRepo(ctx, store.Repo{ID: store.RepoID(url), URL: url, State: store.RepoPending})
				if err != nil {
					t.Fatal(err)
				}
				return r.ID
			}
			owned, orphan := add("https://github.com/org/app"), add("https://github.com/org/lib")
			full := st.(storetest.Store)
			el, err := full.CASElection(ctx, 0, store.Election{Term: 1, VotedFor: "c"})
			if err != nil {
				t.Fatal(err)
			}
			if err := full.Apply(ctx, el.Term, []store.Mutation{store.AssignRepo{ID: owned, Owner: "w1", State: store.RepoOK}}); err != nil {
				t.Fatal(err)
			}
			hook := func(clone, secret, delivery string) events.APIGatewayV2HTTPResponse {
				t.Helper()
				body, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "after": strings.Repeat("a", 40),
					"repository": map[string]any{"clone_url": clone}})
				ev := event(t, "POST", "/v1/hooks/github", string(body), false)
				mac := hmac.New(sha256.New, []byte(secret))
				mac.Write(body)
				ev.Headers["x-github-event"] = "push"
				ev.Headers["x-github-delivery"] = delivery
				ev.Headers["x-hub-signature-256"] = "sha256=" + hex.EncodeToString(mac.Sum(nil))
				resp, err := h(lctx, ev)
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			signals := func() store.Signals {
				t.Helper()
				sig, err := full.GetSignals(ctx, "w1")
				if err != nil {
					t.Fatal(err)
				}
				return sig
			}
			if r := hook("https://github.com/org/app.git", "wrong", "d0"); r.StatusCode != 401 || !signals().Empty() {
				t.Fatalf("forged hook: %d %s, signals %+v", r.StatusCode, r.Body, signals())
			}
			if r := hook("https://github.com/org/app.git", "hooksecret", "d1"); r.StatusCode != 202 || !strings.Contains(r.Body, "accepted") {
				t.Fatalf("signed hook: %d %s", r.StatusCode, r.Body)
			}
			if rp, _ := full.GetRepo(ctx, owned); !rp.SyncRequested {
				t.Error("the signed hook made no durable sync request")
			}
			if sig := signals(); len(sig.Hook) != 1 || sig.Hook[0] != owned || len(sig.Sync) != 0 {
				t.Fatalf("w1's signals after the hook: %+v, want the repo as a hook", sig)
			}
			if r := hook("https://github.com/org/lib", "hooksecret", "d2"); r.StatusCode != 202 {
				t.Fatalf("hook for a repo without owner: %d %s", r.StatusCode, r.Body)
			}
			if rp, _ := full.GetRepo(ctx, orphan); !rp.SyncRequested {
				t.Error("the hook for a repo without owner made no durable request")
			}
			resp, err := h(lctx, event(t, "POST", "/v1/repos/"+owned+"/sync", "", true))
			if err != nil || resp.StatusCode != 202 {
				t.Fatalf("sync: %d %s %v", resp.StatusCode, resp.Body, err)
			}
			if sig := signals(); len(sig.Sync) != 1 || sig.Sync[0] != owned {
				t.Fatalf("w1's signals after the sync: %+v, want the repo as a sync", sig)
			}
		})
	}
}

// Without a webhook secret the hook route answers 403.
func TestHooksOffWithoutASecret(t *testing.T) {
	h := NewHandler(cloud.APIConfig{}, backends["bolt"](t), clock.Real{}, nil, nil)
	ev := event(t, "POST", "/v1/hooks/github", `{}`, false)
	ev.Headers["x-github-event"] = "push"
	resp, err := h(t.Context(), ev)
	if err != nil || resp.StatusCode != 403 {
		t.Fatalf("%d %s %v", resp.StatusCode, resp.Body, err)
	}
}
