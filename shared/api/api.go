// Package api is mirrorfleet's HTTP API (shared/api/openapi.yaml) and status page. The same
// http.Handler serves the local all-in-one process and, behind API Gateway, the AWS
// deployment: it only sees the Store seam, a URL policy and an auth function.
//
// Every response of the /v1 routes is JSON; every error is
// {"error":{"code":"...","message":"..."}}. The routes are listed once, in routes, which
// both New and the OpenAPI test read, so the document cannot drift from the handler.
package api

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// Store is the part of the store the API uses.
type Store interface {
	CreateRepo(ctx context.Context, r store.Repo) (store.Repo, bool, error)
	GetRepo(ctx context.Context, id string) (store.Repo, error)
	ListRepos(ctx context.Context, cursor string, limit int) ([]store.Repo, string, error)
	ListStalest(ctx context.Context, limit int) ([]store.Repo, error)
	RequestDelete(ctx context.Context, id string) error
	RequestSync(ctx context.Context, id string) error
	CountRepos(ctx context.Context) (map[store.RepoState]int, error)
	ListWorkers(ctx context.Context) ([]store.Worker, error)
	GetRing(ctx context.Context) (store.Ring, error)
	GetElection(ctx context.Context) (store.Election, error)
}

// Config configures the handler. Store is required; everything else has a default.
type Config struct {
	Store Store
	// Policy decides which repository URLs are accepted; only its Normalize output is
	// ever stored.
	Policy urlpolicy.Policy
	// Auth authorizes a request that needs it: every write, and with ReadsNeedAuth every
	// /v1 read. A nil Auth is BearerAuth(Token). Returning an *Error picks the response
	// (e.g. 403); any other error is a 401 whose message is err.Error().
	Auth func(*http.Request) error
	// Token is the bearer token writes need when Auth is nil. With both unset every
	// write is refused: an API without a token configured is read-only, never open.
	Token string
	// ReadsNeedAuth makes the /v1 reads need Auth too (deployments reachable from
	// outside), and the status page's data: without Auth the page shows only a token
	// prompt. By default reads are open, as the local API listens on 127.0.0.1.
	// /openapi.yaml is always open.
	ReadsNeedAuth bool
	// Poke, if set, is called after a write that the coordinator should act on (a repo
	// created, a delete or sync requested) so it ticks now rather than at its next
	// period. It must not block.
	Poke func()
	// Clock defaults to the wall clock.
	Clock clock.Clock
	// Log defaults to discarding.
	Log *slog.Logger
	// MaxBulk bounds the URLs of one bulk add; default 10000.
	MaxBulk int
	// NextPoll, if set, estimates when a repo is fetched next: only its worker knows
	// (no-change polls write nothing to the store), so the local fleet, whose workers run
	// in the same process, asks them. Nil: HeartbeatChecks' estimate, else null.
	NextPoll func(id string) (time.Time, bool)
	// PollStretch, if set, is the factor the repo's worker puts on its poll step now
	// (worker.PollStretchOf): above 1 while its own or its organization's push webhooks,
	// or a forge's change feed, cover it. Only its worker knows; nil: absent.
	PollStretch func(id string) (float64, bool)
	// LastChecked, if set, is when a repo's worker last polled it, changed or not: a
	// no-change poll writes the store only at its checkpoint (6 h), so the local fleet
	// asks its in-process workers.
	LastChecked func(id string) (time.Time, bool)
	// HeartbeatChecks makes a server with no workers in process (the API Lambda) read
	// the workers' records once per request that shows repos: their heartbeats carry
	// each worker's latest unwritten polls (last_checked_at) and its queue length and
	// fetch rate (next_poll_at, tunasync's next_schedule_ts, as an estimate). Without
	// it and without LastChecked, last_checked_at is the stored last fetch.
	HeartbeatChecks bool
	// CloneBaseURL is the base of every repo's clone_url: <base>/git/<mirror path>
	// (locally http://<listen address>; on AWS the serving load balancer). Empty:
	// clone_url is null.
	CloneBaseURL string
	// Site describes the fleet as a mirror site for /mirrorz.json; without an Abbr the
	// route answers 404.
	Site Site
	// Backup, if set, serves GET /v1/backup: a consistent copy of the store written to w
	// (the local fleet's bbolt file). Nil (DynamoDB, which has point-in-time recovery):
	// the route answers 404.
	Backup func(ctx context.Context, w io.Writer) (int64, error)
	// List serves /v1/list and /v1/list/confirm; nil means no list repository is
	// configured (GET /v1/list says so).
	List ListSync
	// Ring, if set, tells a repo's owner to fetch it now when a sync is requested (the
	// fast path beside the durable request the coordinator carries). Must not block long.
	Ring func(ctx context.Context, id string)
	// Events serves GET /v1/events (Server-Sent Events); nil: the route answers 404
	// no_event_stream (AWS, where the events go to EventBridge).
	Events EventStream
	// EventStreams bounds the open event streams (503 past it); default
	// DefaultEventStreams. EventHeartbeat is the keep-alive comment's period, and
	// EventWriteTimeout how long one write to a stream may take before the stream is
	// cut (a client that stopped reading).
	EventStreams      int
	EventHeartbeat    time.Duration
	EventWriteTimeout time.Duration
	// EventStreamsPerClient bounds one client address's open streams (429 past it,
	// at once: a stream is held for hours, so none waits); default
	// DefaultEventStreamsPerClient. A client is httpguard.ClientAddr's, with
	// TrustedProxies.
	EventStreamsPerClient int
	TrustedProxies        []netip.Prefix
	// EventsToken, if set, is needed for GET /v1/events whatever ReadsNeedAuth says:
	// as Authorization: Bearer, or as ?access_token= (a browser's EventSource cannot
	// send headers). The API token in the header is taken too. A token in a URL ends up
	// in logs and histories, so this one grants the stream only.
	EventsToken string
	// CORSOrigins are the origins (scheme://host[:port], or "*") whose pages may read
	// /v1/events and /tunasync.json: their answers carry Access-Control-Allow-Origin for
	// such an Origin, and a preflight (OPTIONS) is answered. None: browsers keep other
	// origins' pages from reading them.
	CORSOrigins []string
}

// DefaultMaxBulk is Config.MaxBulk's default.
const DefaultMaxBulk = 10000

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 1 << 20

//go:embed openapi.yaml
var openapiYAML []byte

//go:embed ui
var uiFS embed.FS

type server struct {
	cfg     Config
	auth    func(*http.Request) error
	log     *slog.Logger
	mux     *http.ServeMux
	streams *httpguard.Limiter // open event streams, per client address
	cors    map[string]bool    // allowed origins ("*": any)
}

// route is one (method, path) the handler serves. Path is in OpenAPI form; the ServeMux
// pattern is derived from it.
type route struct {
	Method string
	Path   string
	// Write routes need auth always; /v1 reads need it with ReadsNeedAuth.
	Write bool
	// Query lists the query parameters a /v1 route accepts; any other is a 400. Pages
	// ignore what they do not use, as browsers and people append things.
	Query []string
	// Data marks a read of fleet data outside /v1 (/tunasync.json): it has the /v1
	// reads' access (auth with ReadsNeedAuth) and their query checks.
	Data bool
	// CORS marks a read other origins' pages may make when Config.CORSOrigins allows.
	CORS bool
	h    func(*server, http.ResponseWriter, *http.Request) error
}

// routes is the single list of routes, read by New and by the OpenAPI test.
var routes = []route{
	{Method: "GET", Path: "/v1/repos", Query: []string{"cursor", "limit", "state"}, h: (*server).listRepos},
	{Method: "POST", Path: "/v1/repos", Write: true, h: (*server).createRepos},
	{Method: "GET", Path: "/v1/repos/{id}", h: (*server).getRepo},
	{Method: "DELETE", Path: "/v1/repos/{id}", Write: true, h: (*server).deleteRepo},
	{Method: "POST", Path: "/v1/repos/{id}/sync", Write: true, h: (*server).syncRepo},
	{Method: "GET", Path: "/v1/workers", h: (*server).listWorkers},
	{Method: "GET", Path: "/v1/ring", h: (*server).getRing},
	{Method: "GET", Path: "/v1/status", h: (*server).getStatus},
	{Method: "GET", Path: "/v1/events", Query: []string{"last_event_id", "access_token"}, CORS: true, h: (*server).streamEvents},
	{Method: "GET", Path: "/v1/list", h: (*server).getList},
	{Method: "GET", Path: "/v1/backup", Write: true, h: (*server).backup},
	{Method: "POST", Path: "/v1/list/confirm", Write: true, h: (*server).confirmList},
	{Method: "GET", Path: "/tunasync.json", Data: true, CORS: true, Query: []string{"cursor", "limit"}, h: (*server).tunasync},
	{Method: "GET", Path: "/mirrorz.json", Data: true, CORS: true, Query: []string{"cursor", "limit"}, h: (*server).mirrorz},
	{Method: "GET", Path: "/openapi.yaml", h: (*server).openapi},
	{Method: "GET", Path: "/", h: (*server).page},
	{Method: "GET", Path: "/ui/{file}", h: (*server).asset},
}

func (rt route) pattern() string {
	p := rt.Path
	if strings.HasSuffix(p, "/") {
		p += "{$}" // "/" is the page, not a catch-all
	}
	return rt.Method + " " + p
}

// New returns the API handler. It panics if cfg.Store is nil, a programming error.
func New(cfg Config) http.Handler {
	if cfg.Store == nil {
		panic("api: Config.Store is nil")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBulk <= 0 {
		cfg.MaxBulk = DefaultMaxBulk
	}
	if cfg.EventStreams <= 0 {
		cfg.EventStreams = DefaultEventStreams
	}
	if cfg.EventHeartbeat <= 0 {
		cfg.EventHeartbeat = DefaultEventHeartbeat
	}
	if cfg.EventWriteTimeout <= 0 {
		cfg.EventWriteTimeout = DefaultEventWriteTimeout
	}
	if cfg.EventStreamsPerClient <= 0 {
		cfg.EventStreamsPerClient = DefaultEventStreamsPerClient
	}
	s := &server{cfg: cfg, auth: cfg.Auth, log: cfg.Log, mux: http.NewServeMux(), cors: map[string]bool{},
		streams: httpguard.NewLimiter(httpguard.PoolLimits{Total: cfg.EventStreams, PerClient: cfg.EventStreamsPerClient})}
	for _, o := range cfg.CORSOrigins {
		s.cors[strings.TrimRight(o, "/")] = true
	}
	if s.auth == nil {
		s.auth = BearerAuth(cfg.Token)
	}
	for _, rt := range routes {
		s.mux.Handle(rt.pattern(), s.wrap(rt))
	}
	return s
}

// ServeHTTP routes through the mux but answers its misses (404, 405) in JSON: the mux
// writes those as plain text, so they are captured and rewritten.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer s.recoverPanic(w, r)
	if r.Method == http.MethodOptions && s.preflight(w, r) {
		return
	}
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r) // ServeHTTP, not h: it sets PathValue
		return
	}
	c := &capture{header: http.Header{}}
	h.ServeHTTP(c, r)
	if c.status == http.StatusMethodNotAllowed {
		allow := c.header.Get("Allow")
		w.Header().Set("Allow", allow)
		s.writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
			Message: fmt.Sprintf("method %s is not allowed on %s; allowed: %s", truncate(r.Method, 20), truncate(r.URL.Path, 200), allow)})
		return
	}
	s.writeError(w, r, &Error{Status: http.StatusNotFound, Code: "not_found",
		Message: fmt.Sprintf("no route for %s %s; see /openapi.yaml", truncate(r.Method, 20), truncate(r.URL.Path, 200))})
}

// wrap adds what every route shares: auth, query checks, error responses.
func (s *server) wrap(rt route) http.Handler {
	isAPI := strings.HasPrefix(rt.Path, "/v1/") || rt.Data
	needAuth := rt.Write || (s.cfg.ReadsNeedAuth && isAPI)
	if rt.Path == "/v1/events" && s.cfg.EventsToken != "" {
		needAuth = false // the stream checks its own token (streamAuth)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.CORS {
			s.allowOrigin(w, r)
		}
		if needAuth {
			if err := s.auth(r); err != nil {
				var ae *Error
				if !errors.As(err, &ae) {
					ae = &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: err.Error()}
				}
				if ae.Status == http.StatusUnauthorized {
					w.Header().Set("WWW-Authenticate", `Bearer realm="mirrorfleet"`)
				}
				s.writeError(w, r, ae)
				return
			}
		}
		if isAPI {
			if err := checkQuery(r, rt.Query); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		if err := rt.h(s, w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// allowOrigin lets the request's Origin read the answer when it is allowed.
func (s *server) allowOrigin(w http.ResponseWriter, r *http.Request) {
	if len(s.cors) == 0 {
		return
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	switch {
	case origin == "":
	case s.cors[origin]:
		h.Set("Access-Control-Allow-Origin", origin)
	case s.cors["*"]:
		h.Set("Access-Control-Allow-Origin", "*")
	}
}

// preflight answers a CORS preflight (OPTIONS) of a route other origins may read, and
// reports whether the request was one.
func (s *server) preflight(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	for _, rt := range routes {
		if rt.CORS && rt.Path == r.URL.Path {
			s.allowOrigin(w, r)
			h := w.Header()
			if h.Get("Access-Control-Allow-Origin") != "" {
				h.Set("Access-Control-Allow-Methods", rt.Method)
				h.Set("Access-Control-Allow-Headers", "Authorization, Last-Event-ID")
				h.Set("Access-Control-Max-Age", "600")
			}
			w.WriteHeader(http.StatusNoContent)
			return true
		}
	}
	return false
}

func checkQuery(r *http.Request, allowed []string) error {
	q, err := parseQuery(r)
	if err != nil {
		return err
	}
	for k := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			msg := fmt.Sprintf("unknown query parameter %q", k)
			if len(allowed) > 0 {
				msg += "; allowed: " + strings.Join(allowed, ", ")
			} else {
				msg += "; this route takes none"
			}
			return &Error{Status: http.StatusBadRequest, Code: "invalid_parameter", Message: msg, Field: k}
		}
	}
	return nil
}

func (s *server) recoverPanic(w http.ResponseWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v) // the documented way to abort a response; let net/http handle it
	}
	// The response may be half written; writing the error is the best left to do.
	s.writeError(w, r, fmt.Errorf("panic: %v\n%s", v, debug.Stack()))
}

// capture is a ResponseWriter that keeps only the status and headers.
type capture struct {
	header http.Header
	status int
}

func (c *capture) Header() http.Header { return c.header }
func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return len(p), nil
}
func (c *capture) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}
