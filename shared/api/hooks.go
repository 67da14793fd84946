package api

import (
	"container/list"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
	"github.com/mirrorfleet/mirrorfleet/shared/repos"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// HookStore is what the webhook receiver needs of the store.
type HookStore interface {
	GetRepo(ctx context.Context, id string) (store.Repo, error)
	RequestSync(ctx context.Context, id string) error
}

// HookConfig configures the forges' push webhooks at POST /v1/hooks/{forge}.
type HookConfig struct {
	Store  HookStore
	Policy urlpolicy.Policy
	// Secret is the shared secret of every hook; SecretFor overrides it for the repos of
	// one upstream host. With neither set the hooks answer 403 and fetch nothing.
	Secret    string
	SecretFor map[string]string
	// Secrets, if set, supplies the secrets per delivery in place of Secret and
	// SecretFor (on AWS: read from Secrets Manager and cached). An error answers 503,
	// so the forge delivers again later; no secret at all answers 403.
	Secrets func(ctx context.Context) (HookSecrets, error)
	// Ring, if set, tells the repo's owner to fetch it now (the fast path); the durable
	// request (Store.RequestSync) is made either way, so a repo moving between owners is
	// fetched by the new one. ownerLevel is whether the forge marked the hook as set on
	// the repo's organization (or user), so that it covers all the organization's repos
	// (worker.AskOwnerHook). It must not block for long.
	Ring func(ctx context.Context, id string, ownerLevel bool)
	// Poke asks the coordinator to act on the durable request now.
	Poke func()
	// MaxBody bounds a delivery (413 past it); default MaxHookBody.
	MaxBody int64
	// Replays is how many delivery ids are remembered to drop a forge's redeliveries;
	// default DefaultHookReplays.
	Replays int
	// Deliveries pass two bounds (httpguard.Limiter). Before its body is read, a delivery
	// takes a place among InFlight (in all) and PerClient (of its client address,
	// httpguard.ClientAddr with TrustedProxies); past them it waits in its client's
	// queue (ClientQueue) up to Wait, then gets 429 (its address) or 503 (all) with
	// Retry-After. Its body must arrive within BodyTimeout (408). Only then does it take
	// one of the Concurrent slots that handle deliveries, waiting up to Wait (503 past
	// it): a slow body holds a place of its own address, never a slot. A flood holds
	// at most InFlight × MaxBody in memory.
	Concurrent     int
	InFlight       int
	PerClient      int
	ClientQueue    int
	Wait           time.Duration
	BodyTimeout    time.Duration
	TrustedProxies []netip.Prefix
	Log            *slog.Logger
}

// MaxHookBody is a delivery's default size bound. GitHub caps its payloads at 25 MB but
// a push names at most 20 commits (2,048 with the compare API); a megabyte holds that.
const MaxHookBody = 1 << 20

// DefaultHookReplays bounds the remembered delivery ids (a few MB at most).
const DefaultHookReplays = 65536

// Defaults of HookConfig's bounds. A forge delivers from a few addresses (GitHub's
// hook ranges), so one address may have many deliveries in flight and more waiting;
// an address sending slow bodies holds its own places only.
const (
	DefaultHookConcurrent  = 32
	DefaultHookInFlight    = 128 // 128 MiB of bodies at most
	DefaultHookPerClient   = 16
	DefaultHookClientQueue = 64
	DefaultHookWait        = 5 * time.Second
	DefaultHookBodyTimeout = 5 * time.Second
)

// HookSecrets are the webhooks' secrets: Secret for every repo, SecretFor[host] for the
// repos of one upstream host instead.
type HookSecrets struct {
	Secret    string            `json:"secret,omitempty"`
	SecretFor map[string]string `json:"secret_for,omitempty"`
}

// Enabled reports whether any secret is configured.
func (s HookSecrets) Enabled() bool { return s.Secret != "" || len(s.SecretFor) > 0 }

// secretFor is the secret for a repo on host.
func (s HookSecrets) secretFor(host string) string {
	if v, ok := s.SecretFor[strings.ToLower(host)]; ok {
		return v
	}
	return s.Secret
}

// vouchedFor keeps the URLs on hosts whose secret is secret.
func (s HookSecrets) vouchedFor(secret string, urls []string) []string {
	var out []string
	for _, u := range urls {
		pu, err := url.Parse(u)
		if err == nil && pu.Hostname() != "" && s.secretFor(pu.Hostname()) == secret {
			out = append(out, u)
		}
	}
	return out
}

// Enabled reports whether any secret is configured (or may be, through Secrets).
func (c HookConfig) Enabled() bool {
	return c.Secrets != nil || HookSecrets{Secret: c.Secret, SecretFor: c.SecretFor}.Enabled()
}

// secrets are the secrets in force for one delivery.
func (c HookConfig) secrets(ctx context.Context) (HookSecrets, error) {
	if c.Secrets != nil {
		return c.Secrets(ctx)
	}
	return HookSecrets{Secret: c.Secret, SecretFor: c.SecretFor}, nil
}

// HookPrefix is where the hooks are served.
const HookPrefix = "/v1/hooks/"

// HookRoute is the route NewHooks serves, as openapi.yaml documents it.
const HookRoute = "POST /v1/hooks/{forge}"

type hooks struct {
	cfg     HookConfig
	log     *slog.Logger
	mu      sync.Mutex
	seen    map[string]*list.Element // delivery ids, most recent at the front of order
	order   *list.List
	maxSeen int
	flight  *httpguard.Limiter // deliveries being read or handled, per client address
	slots   *httpguard.Limiter // deliveries being handled, their bodies read
}

// NewHooks serves POST /v1/hooks/{github,gitlab,gitea}. A delivery is authenticated by
// its signature alone (no API token): GitHub's X-Hub-Signature-256, GitLab's
// X-Gitlab-Token, Gitea's and Forgejo's X-Gitea-Signature / X-Forgejo-Signature.
// A signed push for a mirrored repo asks its owner to fetch it at once; the answer is
// the same 202 whether or not the repo is mirrored, so it tells nobody which are.
func NewHooks(cfg HookConfig) http.Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = MaxHookBody
	}
	if cfg.Replays <= 0 {
		cfg.Replays = DefaultHookReplays
	}
	for _, d := range []struct {
		v *int
		d int
	}{{&cfg.Concurrent, DefaultHookConcurrent}, {&cfg.InFlight, DefaultHookInFlight},
		{&cfg.PerClient, DefaultHookPerClient}, {&cfg.ClientQueue, DefaultHookClientQueue}} {
		if *d.v <= 0 {
			*d.v = d.d
		}
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultHookWait
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultHookBodyTimeout
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &hooks{cfg: cfg, log: log, seen: map[string]*list.Element{}, order: list.New(), maxSeen: cfg.Replays,
		flight: httpguard.NewLimiter(httpguard.PoolLimits{Total: cfg.InFlight, PerClient: cfg.PerClient,
			QueuePerClient: cfg.ClientQueue, QueueTotal: 2 * cfg.InFlight}),
		slots: httpguard.NewLimiter(httpguard.PoolLimits{Total: cfg.Concurrent, QueuePerClient: cfg.InFlight})}
}

// forge is one dialect of push webhook.
type forge struct {
	name string
	// event is the delivery's event name, "" when the header is missing.
	event func(h http.Header) string
	// pushLike are the events that may move refs.
	pushLike map[string]bool
	ping     string // answered 200 once signed ("" none)
	delivery func(h http.Header) string
	// verify checks the delivery against secret.
	verify func(h http.Header, body []byte, secret string) bool
	// urls are the repo URLs a payload names, clone and web.
	urls func(p hookPayload) []string
	// ownerLevel is whether the delivery says the hook is set on the repo's owner (an
	// organization or a user), not on the repo; nil when the forge does not say.
	ownerLevel func(h http.Header) bool
}

// installedOn reads the header GitHub, Gitea and Forgejo send naming where the hook is
// set ("repository", "organization", "user" on Gitea and Forgejo, "system", ...): an
// organization's or a user's hook covers all of its repos. GitHub sends
// X-GitHub-Hook-Installation-Target-Type; Gitea sends it too, besides its own.
func installedOn(headers ...string) func(h http.Header) bool {
	return func(h http.Header) bool {
		for _, name := range headers {
			switch strings.ToLower(h.Get(name)) {
			case "organization", "user":
				return true
			}
		}
		return false
	}
}

// hookPayload is the part of the three forges' push payloads read here.
type hookPayload struct {
	Repository struct {
		CloneURL   string `json:"clone_url"`
		HTMLURL    string `json:"html_url"`
		GitHTTPURL string `json:"git_http_url"`
		Homepage   string `json:"homepage"`
	} `json:"repository"`
	Project struct {
		GitHTTPURL string `json:"git_http_url"`
		WebURL     string `json:"web_url"`
	} `json:"project"`
}

func hmacHex(secret string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return []byte(hex.EncodeToString(m.Sum(nil)))
}

var forges = map[string]forge{
	"github": {
		name:     "GitHub",
		event:    func(h http.Header) string { return h.Get("X-GitHub-Event") },
		pushLike: map[string]bool{"push": true, "create": true, "delete": true},
		ping:     "ping",
		delivery: func(h http.Header) string { return h.Get("X-GitHub-Delivery") },
		verify: func(h http.Header, body []byte, secret string) bool {
			sig, ok := strings.CutPrefix(h.Get("X-Hub-Signature-256"), "sha256=")
			return ok && hmac.Equal([]byte(strings.ToLower(sig)), hmacHex(secret, body))
		},
		urls:       func(p hookPayload) []string { return []string{p.Repository.CloneURL, p.Repository.HTMLURL} },
		ownerLevel: installedOn("X-GitHub-Hook-Installation-Target-Type"),
	},
	// GitLab's deliveries do not say whether a group's hook or a project's sent them
	// (no header or payload field): its owners are learned from hooks of two repos.
	"gitlab": {
		name:     "GitLab",
		event:    func(h http.Header) string { return h.Get("X-Gitlab-Event") },
		pushLike: map[string]bool{"Push Hook": true, "Tag Push Hook": true},
		delivery: func(h http.Header) string {
			if id := h.Get("Idempotency-Key"); id != "" {
				return id
			}
			return h.Get("X-Gitlab-Event-UUID")
		},
		verify: func(h http.Header, _ []byte, secret string) bool {
			return subtle.ConstantTimeCompare([]byte(h.Get("X-Gitlab-Token")), []byte(secret)) == 1
		},
		urls: func(p hookPayload) []string {
			return []string{p.Project.GitHTTPURL, p.Project.WebURL, p.Repository.GitHTTPURL, p.Repository.Homepage}
		},
	},
	"gitea": {
		name: "Gitea",
		event: func(h http.Header) string {
			if e := h.Get("X-Gitea-Event"); e != "" {
				return e
			}
			return h.Get("X-Forgejo-Event")
		},
		pushLike: map[string]bool{"push": true, "create": true, "delete": true},
		delivery: func(h http.Header) string {
			if id := h.Get("X-Gitea-Delivery"); id != "" {
				return id
			}
			return h.Get("X-Forgejo-Delivery")
		},
		verify: func(h http.Header, body []byte, secret string) bool {
			sig := h.Get("X-Gitea-Signature")
			if sig == "" {
				sig = h.Get("X-Forgejo-Signature")
			}
			return sig != "" && hmac.Equal([]byte(strings.ToLower(sig)), hmacHex(secret, body))
		},
		urls:       func(p hookPayload) []string { return []string{p.Repository.CloneURL, p.Repository.HTMLURL} },
		ownerLevel: installedOn("X-Gitea-Hook-Installation-Target-Type", "X-Forgejo-Hook-Installation-Target-Type"),
	},
}

// HookAnswer is the body of every hook answer that is not an error.
type HookAnswer struct {
	// Status is accepted (a signed push: fetched if the repo is mirrored, which the
	// answer does not say), pong (a ping), ignored (an event that moves no refs) or
	// duplicate (a redelivery already taken).
	Status string `json:"status"`
}

func (h *hooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.serve(w, r); err != nil {
		var e *Error
		if !errors.As(err, &e) {
			h.log.Error("webhook: internal error", "path", r.URL.Path, "err", err)
			e = &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error; the server log has the detail"}
		}
		writeJSON(w, e.Status, errorBody{e})
	}
}

func (h *hooks) serve(w http.ResponseWriter, r *http.Request) error {
	name, ok := strings.CutPrefix(r.URL.Path, HookPrefix)
	f, known := forges[name]
	if !ok || !known {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("no webhook at %s: use %sgithub, %sgitlab or %sgitea", r.URL.Path, HookPrefix, HookPrefix, HookPrefix)}
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		return &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: "webhooks are POSTed"}
	}
	keys, err := h.cfg.secrets(r.Context())
	if err != nil {
		h.log.Error("webhook: reading the secrets", "err", err)
		w.Header().Set("Retry-After", "60")
		return &Error{Status: http.StatusServiceUnavailable, Code: "secrets_unavailable", Message: "the webhook secrets cannot be read now; retry"}
	}
	if !keys.Enabled() {
		return &Error{Status: http.StatusForbidden, Code: "hooks_disabled", Message: "webhooks are off: no --webhook-secret is configured"}
	}
	client := httpguard.ClientAddr(r, h.cfg.TrustedProxies)
	release, why := h.flight.Acquire(r.Context(), client, "", h.cfg.Wait)
	if err := refused(w, why, 5,
		&Error{Code: "too_many_from_client", Message: fmt.Sprintf("%d webhook deliveries from your address are in progress and more wait; retry", h.cfg.PerClient)},
		&Error{Code: "busy", Message: fmt.Sprintf("%d webhook deliveries are in progress; retry", h.cfg.InFlight)}); err != nil {
		return err
	}
	defer release()
	event := f.event(r.Header)
	if event == "" {
		return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: f.name + " webhook without its event header"}
	}
	form := false
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		switch {
		case err == nil && mt == "application/json":
		case err == nil && mt == "application/x-www-form-urlencoded" && name == "github":
			form = true // GitHub's other content type: the JSON in a payload= field
		default:
			return &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
				Message: fmt.Sprintf("content type %q: send application/json", ct)}
		}
	}
	// The body's own deadline, from now: a queued delivery's wait does not count.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.cfg.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("a webhook body may be %d bytes at most", h.cfg.MaxBody)}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return &Error{Status: http.StatusRequestTimeout, Code: "body_timeout", Message: fmt.Sprintf("the body did not arrive within %s", h.cfg.BodyTimeout)}
		}
		return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "reading the body: " + err.Error()}
	}
	// Handling takes a slot, only now that the body is here.
	// Forges retry a 5xx delivery later (GitLab, Gitea; GitHub only when asked to).
	releaseSlot, why := h.slots.Acquire(r.Context(), "", "", h.cfg.Wait)
	if err := refused(w, why, 1, nil, &Error{Code: "busy", Message: fmt.Sprintf("%d webhook deliveries are being handled; retry", h.cfg.Concurrent)}); err != nil {
		return err
	}
	defer releaseSlot()
	js := body
	if form {
		v, err := url.ParseQuery(string(body))
		if err != nil || v.Get("payload") == "" {
			return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "a form-encoded GitHub webhook needs a payload field"}
		}
		js = []byte(v.Get("payload"))
	}
	var p hookPayload
	if err := json.Unmarshal(js, &p); err != nil {
		return &Error{Status: http.StatusBadRequest, Code: "bad_json", Message: "the payload is not JSON: " + err.Error()}
	}
	// The secret is chosen by the host the payload names, before the signature is checked:
	// a forged payload only picks which secret it must know.
	urls := nonEmpty(f.urls(p))
	host := ""
	for _, u := range urls {
		if pu, err := url.Parse(u); err == nil && pu.Hostname() != "" {
			host = pu.Hostname()
			break
		}
	}
	secret := keys.secretFor(host)
	if secret == "" || !f.verify(r.Header, body, secret) {
		return &Error{Status: http.StatusUnauthorized, Code: "bad_signature", Message: "the webhook's signature does not match the configured secret"}
	}

	if f.ping != "" && event == f.ping {
		writeJSON(w, http.StatusOK, HookAnswer{Status: "pong"})
		return nil
	}
	if !f.pushLike[event] {
		writeJSON(w, http.StatusAccepted, HookAnswer{Status: "ignored"})
		return nil
	}
	delivery := ""
	if id := f.delivery(r.Header); id != "" {
		delivery = name + "/" + id
		if h.replayed(delivery) {
			writeJSON(w, http.StatusAccepted, HookAnswer{Status: "duplicate"})
			return nil
		}
	}
	if len(urls) == 0 {
		return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: f.name + " push payload names no repository URL"}
	}
	// The signature vouches for the repos of the hosts this secret is for, and no
	// others: a payload signed with one host's secret that names another host's repo
	// must not make the fleet fetch it.
	if id, ok := h.match(r.Context(), keys.vouchedFor(secret, urls)); ok {
		if err := h.cfg.Store.RequestSync(r.Context(), id); err != nil && !errors.Is(err, store.ErrNotFound) {
			h.forget(delivery) // the forge's redelivery must not be taken for a replay
			return fmt.Errorf("request sync of repo %s: %w", id, err)
		}
		if h.cfg.Ring != nil {
			h.cfg.Ring(r.Context(), id, f.ownerLevel != nil && f.ownerLevel(r.Header))
		}
		if h.cfg.Poke != nil {
			h.cfg.Poke()
		}
		h.log.Debug("webhook push", "forge", name, "repo", id)
	}
	writeJSON(w, http.StatusAccepted, HookAnswer{Status: "accepted"})
	return nil
}

// match finds the mirrored repo a payload names.
func (h *hooks) match(ctx context.Context, urls []string) (string, bool) {
	return MatchRepo(ctx, h.cfg.Store, h.cfg.Policy, urls)
}

// MatchRepo finds the mirrored repo that one of urls names (a forge's clone or web URL):
// each through the URL policy and the repo identity (repos.Find: on a host whose paths
// are case-insensitive, a hook for Org/Repo finds the repo added as org/repo), and its
// http/https twin (a forge may name either). Repos being deleted do not match.
func MatchRepo(ctx context.Context, st interface {
	GetRepo(ctx context.Context, id string) (store.Repo, error)
}, policy urlpolicy.Policy, urls []string) (string, bool) {
	for _, raw := range urls {
		n, err := policy.Normalize(raw)
		if err != nil {
			continue
		}
		cands := []string{n}
		if t, ok := strings.CutPrefix(n, "https://"); ok {
			cands = append(cands, "http://"+t)
		} else if t, ok := strings.CutPrefix(n, "http://"); ok {
			cands = append(cands, "https://"+t)
		}
		for _, c := range cands {
			repo, err := repos.Find(ctx, st, policy, c)
			if err == nil && repo.State != store.RepoDeleting {
				return repo.ID, true
			}
		}
	}
	return "", false
}

// replayed records a delivery id and reports whether it was seen before; the oldest
// ids are forgotten past the bound.
func (h *hooks) replayed(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.seen[id]; ok {
		h.order.MoveToFront(e)
		return true
	}
	h.seen[id] = h.order.PushFront(id)
	for h.order.Len() > h.maxSeen {
		old := h.order.Back()
		h.order.Remove(old)
		delete(h.seen, old.Value.(string))
	}
	return false
}

// forget drops a delivery id recorded by replayed.
func (h *hooks) forget(id string) {
	if id == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.seen[id]; ok {
		h.order.Remove(e)
		delete(h.seen, id)
	}
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" && !strings.ContainsRune(s, 0) {
			out = append(out, s)
		}
	}
	return out
}
