package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/listsync"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// Store is what the API Lambda needs: the API's reads and writes, the list sync's
// status and confirmation, and the owners' signal items (ADR 21).
type Store interface {
	api.Store
	listsync.ViewStore
	AddSignals(ctx context.Context, worker string, sig store.Signals) error
}

// HookSecrets supplies the webhooks' secrets (Secrets Manager, cached); nil: the hooks
// answer 403.
type HookSecrets func(ctx context.Context) (api.HookSecrets, error)

// HandlerFunc is the Lambda handler: API Gateway HTTP API events, payload format 2.0.
type HandlerFunc func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// NewHandler serves the shared HTTP handler (shared/api) behind API Gateway. Every /v1
// route needs an IAM identity in the request context (IAMAuth), but for the reads when
// cfg.PublicReads, and the forges' webhooks at /v1/hooks/{forge}, which their signature
// authenticates (api.NewHooks, with secrets); each request is logged with its caller.
// A hook or a sync request rings the repo's owner through its signal item (Ringer).
func NewHandler(cfg cloud.APIConfig, st Store, clk clock.Clock, log *slog.Logger, secrets HookSecrets) HandlerFunc {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	policy := urlpolicy.Policy{AllowPrivateHosts: cfg.AllowPrivateHosts, CaseInsensitiveHosts: cfg.CaseInsensitiveHosts}
	ring := Ringer{Store: st, Log: log}
	ac := api.Config{Store: st, Policy: policy,
		Auth: IAMAuth, ReadsNeedAuth: !cfg.PublicReads, CloneBaseURL: cfg.CloneBaseURL, Clock: clk, Log: log,
		Ring:            ring.Sync,
		CORSOrigins:     cfg.CORSOrigins,
		Site:            api.Site{Abbr: cfg.SiteAbbr, Name: cfg.SiteName},
		HeartbeatChecks: true} // no worker runs here: their heartbeats say when repos were polled
	if cfg.List.Enabled() {
		ac.List = listsync.View{Config: cfg.List, Store: st}
	}
	hc := api.HookConfig{Store: st, Policy: policy, Ring: ring.Hook, Log: log}
	if secrets != nil {
		hc.Secrets = secrets
	}
	mux := http.NewServeMux()
	mux.Handle(api.HookPrefix, api.NewHooks(hc))
	mux.Handle("/", api.New(ac))
	adapter := httpadapter.NewV2(logRequests(mux, log))
	adapter.StripBasePath(cfg.BasePath)
	return adapter.ProxyWithContext
}

// CallerIdentity returns the IAM identity API Gateway verified (SigV4) for the request.
// It is read from the request context, where the adapter's ProxyWithContext put the
// event's requestContext; a client cannot set it (unlike the adapter's header-based
// variant, whose header we drop — see logRequests).
func CallerIdentity(ctx context.Context) (*events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription, bool) {
	rc, ok := core.GetAPIGatewayV2ContextFromContext(ctx)
	if !ok || rc.Authorizer == nil || rc.Authorizer.IAM == nil || rc.Authorizer.IAM.UserARN == "" {
		return nil, false
	}
	return rc.Authorizer.IAM, true
}

// IAMAuth accepts requests that carry an IAM identity. The routes are IAM-protected in
// API Gateway already; this is defence in depth against a route deployed without it.
func IAMAuth(r *http.Request) error {
	if _, ok := CallerIdentity(r.Context()); ok {
		return nil
	}
	return &api.Error{Status: http.StatusUnauthorized, Code: "unauthorized",
		Message: "no IAM identity in the request: sign the request with AWS SigV4 (the API's routes use IAM authorization)"}
}

// logRequests logs each request with the caller's identity, and fixes what the shared
// handler says to an unauthenticated client: here the scheme is SigV4, not Bearer.
func logRequests(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		r.Header.Del(core.APIGwContextHeader) // never trust a client-supplied context
		r.Header.Del(core.APIGwStageVarsHeader)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		attrs := []any{"method", r.Method, "path", r.URL.Path, "status", sw.status, "took", time.Since(start)}
		if rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context()); ok {
			attrs = append(attrs, "request_id", rc.RequestID, "source_ip", rc.HTTP.SourceIP)
		}
		if id, ok := CallerIdentity(r.Context()); ok {
			attrs = append(attrs, "user_arn", id.UserARN, "account_id", id.AccountID)
		} else {
			attrs = append(attrs, "user_arn", "")
		}
		level := slog.LevelInfo
		if sw.status >= 500 {
			level = slog.LevelError
		}
		log.Log(r.Context(), level, "api request", attrs...)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		if h := w.Header(); strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
			h.Set("WWW-Authenticate", "AWS4-HMAC-SHA256")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}
