package cloud

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
	"github.com/mirrorfleet/mirrorfleet/shared/listsync"
	"github.com/mirrorfleet/mirrorfleet/shared/secrets"
)

// EnvAPIBasePath is a path prefix API Gateway puts before the API's own paths (a named
// stage, a custom domain's base path mapping); it is stripped before routing.
const EnvAPIBasePath = deployenv.APIBasePath

// EnvPublicReads makes the /v1 reads answer without an IAM identity.
const EnvPublicReads = deployenv.PublicReads

// EnvCloneBaseURL is where the mirrors are served: a repo's clone URL is
// <base>/git/<mirror path>. On AWS the stack sets it to the serving load balancer's URL.
const EnvCloneBaseURL = deployenv.CloneBaseURL

// EnvWebhookSecretARN names the Secrets Manager secret of the forges' webhooks
// (ParseHookSecrets reads its value).
const EnvWebhookSecretARN = deployenv.WebhookSecretARN

// EnvWebhookSecretTTL is how long a value read of that secret is used before it is read
// again (secrets.DefaultTTL when unset).
const EnvWebhookSecretTTL = deployenv.WebhookSecretTTL

// EnvCORSOrigin lists the origins whose pages may read /tunasync.json.
const EnvCORSOrigin = deployenv.CORSOrigin

// APIConfig is the API Lambda's configuration.
type APIConfig struct {
	Table             string
	AllowPrivateHosts bool
	// CaseInsensitiveHosts: hosts, besides github.com and gitlab.com, whose repo paths
	// are case-insensitive (MIRRORFLEET_CASE_INSENSITIVE_HOSTS).
	CaseInsensitiveHosts []string
	BasePath             string
	// PublicReads serves the /v1 reads without an IAM identity (the stack's publicReads:
	// GET routes without IAM auth); writes always need one.
	PublicReads bool
	// CloneBaseURL is where the mirrors are served (http or https, no trailing slash);
	// "" when nothing serves them.
	CloneBaseURL string
	// List lets GET /v1/list report the list sync's configuration and state (not
	// Enabled when MIRRORFLEET_LIST_REPO is unset).
	List     listsync.Config
	LogLevel slog.Level
	// WebhookSecretARN is the ARN (or name) of the secret of the forges' webhooks at
	// /v1/hooks/{forge}; "" leaves the hooks off (403).
	WebhookSecretARN string
	// WebhookSecretTTL is how long a value read of the secret is used before it is read
	// again: a rotated secret is in use within it.
	WebhookSecretTTL time.Duration
	// CORSOrigins are the origins whose pages may read /tunasync.json (api.Config).
	CORSOrigins []string
	// SiteAbbr and SiteName name the fleet in /mirrorz.json (api.Site).
	SiteAbbr, SiteName string
}

// APIConfigFromEnv reads and validates the API's environment.
func APIConfigFromEnv() (APIConfig, error) {
	return apiConfigFrom(os.Getenv)
}

func apiConfigFrom(get func(string) string) (APIConfig, error) {
	e := newEnv(get)
	c := APIConfig{
		Table:                e.required(EnvTable, "the DynamoDB table of the fleet's state"),
		AllowPrivateHosts:    e.boolean(EnvAllowPrivateHosts, false),
		CaseInsensitiveHosts: e.hosts(EnvCaseInsensitiveHosts),
		BasePath:             e.raw(EnvAPIBasePath),
		PublicReads:          e.boolean(EnvPublicReads, false),
		CloneBaseURL:         strings.TrimRight(e.raw(EnvCloneBaseURL), "/"),
		LogLevel:             e.logLevel(),
		WebhookSecretARN:     e.raw(EnvWebhookSecretARN),
		WebhookSecretTTL:     e.duration(EnvWebhookSecretTTL, secrets.DefaultTTL),
		SiteAbbr:             e.raw(deployenv.SiteAbbr),
		SiteName:             e.raw(deployenv.SiteName),
	}
	if c.BasePath != "" && (!strings.HasPrefix(c.BasePath, "/") || strings.ContainsAny(c.BasePath, "?# ")) {
		e.fail(EnvAPIBasePath, c.BasePath, "must be a path starting with /, e.g. /prod")
	}
	for _, o := range strings.Split(e.raw(EnvCORSOrigin), ",") {
		if o = strings.TrimSpace(o); o == "" {
			continue
		}
		if err := httpguard.CheckOrigin(o); err != nil {
			e.fail(EnvCORSOrigin, o, "%v", err)
			continue
		}
		c.CORSOrigins = append(c.CORSOrigins, strings.TrimRight(o, "/"))
	}
	if u := c.CloneBaseURL; u != "" && !validBaseURL(u) {
		e.fail(EnvCloneBaseURL, u, "must be an http:// or https:// URL with a host, e.g. https://git.example.org")
	}
	list, err := listsync.ConfigFromEnv()
	if err != nil {
		e.errs = append(e.errs, err)
	}
	c.List = list
	if err := e.err("API"); err != nil {
		return APIConfig{}, err
	}
	return c, nil
}

// ParseHookSecrets reads the webhook secret's value: either the shared secret itself
// (what the stack generates) or a JSON object {"secret": S, "secret_for": {HOST: S}},
// --webhook-secret and --webhook-secret-for in one. Surrounding white space is not
// part of a plain secret.
func ParseHookSecrets(v string) (api.HookSecrets, error) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, "{") {
		return api.HookSecrets{Secret: v}, nil
	}
	var s api.HookSecrets
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return api.HookSecrets{}, fmt.Errorf("webhook secret: a JSON value must be {\"secret\": ..., \"secret_for\": {HOST: ...}}: %w", err)
	}
	hosts := make(map[string]string, len(s.SecretFor))
	for h, sec := range s.SecretFor {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" || sec == "" || strings.ContainsAny(h, "/: ") {
			return api.HookSecrets{}, fmt.Errorf("webhook secret: secret_for wants a host name (no scheme or port) and a non-empty secret, got %q", h)
		}
		hosts[h] = sec
	}
	s.SecretFor = hosts
	return s, nil
}

// validBaseURL accepts http(s)://host[:port][/path] without query or fragment.
func validBaseURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.RawQuery == "" && u.Fragment == "" && u.User == nil
}
