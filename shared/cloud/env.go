// Package cloud is the AWS wiring shared by the Lambda functions (functions/coordinator,
// functions/api) and the ECS worker (worker/): configuration from environment variables
// with validation that names the variable at fault, DynamoDB and Scheduler clients built
// from the default AWS configuration, and the worker process runner. The domain code
// (shared/coordinator, shared/worker, shared/api) knows nothing of it.
package cloud

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
)

// Environment variables shared by every binary.
// The names are deployenv's, the contract with the CDK stack.
const (
	EnvTable             = deployenv.Table             // DynamoDB table (required)
	EnvFleet             = deployenv.Fleet             // Fleet dimension of the metrics
	EnvLogLevel          = deployenv.LogLevel          // debug, info, warn, error
	EnvAllowPrivateHosts = deployenv.AllowPrivateHosts // let repos on private addresses through the URL policy
	// EnvCaseInsensitiveHosts: hosts, besides github.com and gitlab.com, whose paths are
	// case-insensitive (urlpolicy.Policy.CaseInsensitiveHosts).
	EnvCaseInsensitiveHosts = deployenv.CaseInsensitiveHosts
)

// Environment variables of `mirrorfleet serve`, the git front (besides EnvTable,
// EnvFleet, EnvLogLevel, EnvMirrorRoot, EnvMetricsInterval and EnvCloneBaseURL).
const (
	EnvServeListen    = deployenv.ServeListen    // listen address; default :8080
	EnvPackCacheDir   = deployenv.PackCacheDir   // pack cache directory, local disk
	EnvPackCacheBytes = deployenv.PackCacheBytes // pack cache bound; default 10G
	EnvServeToken     = deployenv.ServeToken     // optional token every read needs
	EnvTrustedProxy   = deployenv.TrustedProxy   // the load balancer's networks (CIDR, comma-separated)
	// EnvServeQueuePerClient and EnvServeQueueWait: a client's requests past its share
	// wait in a queue this long (per client) for up to this long, then get 429.
	EnvServeQueuePerClient = deployenv.ServeQueuePerClient
	EnvServeQueueWait      = deployenv.ServeQueueWait
)

// DefaultFleet is the Fleet dimension when MIRRORFLEET_FLEET is unset.
const DefaultFleet = "mirrorfleet"

// envReader reads variables and collects every problem, so one start reports all the
// misconfigured variables at once rather than one per deploy.
type envReader struct {
	get  func(string) string
	errs []error
}

func newEnv(get func(string) string) *envReader {
	if get == nil {
		get = os.Getenv
	}
	return &envReader{get: get}
}

func (e *envReader) raw(name string) string { return strings.TrimSpace(e.get(name)) }

// hosts reads comma-separated host names (lower-cased; no scheme, port or path).
func (e *envReader) hosts(name string) []string {
	var out []string
	for _, h := range strings.Split(e.raw(name), ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h == "" {
			continue
		}
		if strings.ContainsAny(h, "/: ") {
			e.fail(name, h, "want host names, comma-separated (no scheme, port or path)")
			continue
		}
		out = append(out, h)
	}
	return out
}

func (e *envReader) fail(name, v, format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf("%s=%q: %s", name, v, fmt.Sprintf(format, args...)))
}

func (e *envReader) str(name, def string) string {
	if v := e.raw(name); v != "" {
		return v
	}
	return def
}

func (e *envReader) required(name, what string) string {
	v := e.raw(name)
	if v == "" {
		e.errs = append(e.errs, fmt.Errorf("%s is not set: %s", name, what))
	}
	return v
}

// duration reads a positive Go duration.
func (e *envReader) duration(name string, def time.Duration) time.Duration {
	v := e.raw(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.fail(name, v, "not a duration (Go syntax: 500ms, 10s, 5m, 1h30m)")
		return def
	}
	if d <= 0 {
		e.fail(name, v, "must be greater than zero")
		return def
	}
	return d
}

func (e *envReader) integer(name string, def, lo, hi int) int {
	v := e.raw(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.fail(name, v, "not an integer")
		return def
	}
	if n < lo || n > hi {
		e.fail(name, v, "must be from %d to %d", lo, hi)
		return def
	}
	return n
}

func (e *envReader) boolean(name string, def bool) bool {
	v := e.raw(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.fail(name, v, "not a boolean (1, true, 0, false)")
		return def
	}
	return b
}

// bytes reads a size in bytes: a plain integer, or one with a binary suffix (K, M, G, T,
// optionally followed by "i" and/or "B": 500G, 1.5TiB).
func (e *envReader) bytes(name string, def int64) int64 {
	v := e.raw(name)
	if v == "" {
		return def
	}
	n, err := ParseBytes(v)
	if err != nil {
		e.fail(name, v, "%v", err)
		return def
	}
	return n
}

// float reads a number; a negative one means "no limit" where the caller says so.
func (e *envReader) float(name string, def float64) float64 {
	v := e.raw(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		e.fail(name, v, "not a number")
		return def
	}
	return f
}

func (e *envReader) logLevel() slog.Level {
	v := e.raw(EnvLogLevel)
	if v == "" {
		return slog.LevelInfo
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(v)); err != nil {
		e.fail(EnvLogLevel, v, "not a log level (debug, info, warn, error)")
		return slog.LevelInfo
	}
	return l
}

// arn checks the rough shape arn:partition:service:region:account:resource; the service
// itself refuses a wrong one later, but only at the first timer, minutes after a deploy.
func (e *envReader) arn(name, v string) {
	if v == "" {
		return
	}
	parts := strings.SplitN(v, ":", 6)
	if len(parts) < 6 || parts[0] != "arn" || parts[1] == "" || parts[2] == "" || parts[5] == "" {
		e.fail(name, v, "not an ARN (arn:aws:<service>:<region>:<account>:<resource>)")
	}
}

func (e *envReader) err(what string) error {
	if len(e.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s configuration from the environment is invalid:\n%w", what, errors.Join(e.errs...))
}

// ParseBytes reads a byte count: "1073741824", "512M", "500G", "1.5TiB" (deployenv's
// syntax, which the stack checks its settings with).
func ParseBytes(s string) (int64, error) { return deployenv.ParseBytes(s) }

// ParseByteOverrides reads per-repo sizes: "URL=SIZE[,URL=SIZE...]", a URL being a
// repo URL or a prefix of repo URLs ending in "/".
func ParseByteOverrides(s string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndexByte(item, '=')
		if i <= 0 {
			return nil, fmt.Errorf("%q is not URL=SIZE (e.g. https://github.com/torvalds/linux=20G)", item)
		}
		u, size := strings.TrimSpace(item[:i]), strings.TrimSpace(item[i+1:])
		if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			return nil, fmt.Errorf("%q: %q is not an http(s) repo URL or URL prefix", item, u)
		}
		n, err := ParseBytes(size)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		if n <= 0 {
			return nil, fmt.Errorf("%q: the size must be positive", item)
		}
		out[u] = n
	}
	return out, nil
}

// NewLogger returns the JSON logger every binary uses: CloudWatch Logs indexes JSON
// fields, so a query can filter on worker, repo or term.
func NewLogger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}
