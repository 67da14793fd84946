package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/awsranges"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/health"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/serve"
	"github.com/mirrorfleet/mirrorfleet/shared/serve/packcache"
)

// serveFlags are the git front's flags shared by `run` and `serve`; finish turns
// them into the front's configuration after parsing.
type serveFlags struct {
	allow      string
	cacheBytes string
	// envTrusted is $MIRRORFLEET_TRUSTED_PROXY, taken when no --trusted-proxy is given.
	envTrusted string
	trusted    func(string) error
	// cloudFront: the trusted proxies include CloudFront's origin-facing servers, read
	// from rangesURL when the front starts (resolve).
	cloudFront bool
	rangesURL  string
	backoff    time.Duration // the wait after a failed read, doubled each time; 0: rangesBackoff
	fs         *flag.FlagSet
}

func addServeFlags(fs *flag.FlagSet, c *serve.Config) *serveFlags {
	sf := &serveFlags{fs: fs}
	fs.StringVar(&c.Token, "serve-token", "", "token every git read needs, as the password (default $"+cloud.EnvServeToken+"; empty: public reads)")
	fs.StringVar(&sf.allow, "serve-allow", "", "comma-separated client networks (CIDR) that may read without the token; with no token, only they may read")
	fs.StringVar(&sf.cacheBytes, "pack-cache-bytes", envOr(cloud.EnvPackCacheBytes, "10G"), "pack cache size bound (512M, 10G, ...)")
	fs.DurationVar(&c.PackCache.TTL, "pack-cache-ttl", packcache.DefaultTTL, "a cached pack unused for this long is removed")
	fs.IntVar(&c.PackCache.MaxEntries, "pack-cache-max-entries", packcache.DefaultMaxEntries, "files in the pack cache (entries, locks, partly written ones); past it the least recently used go")
	fs.IntVar(&c.MaxPerRepo, "serve-max-per-repo", serve.DefaultMaxPerRepo, "git processes at once for one repo; past it, 429")
	fs.IntVar(&c.MaxTotal, "serve-max-total", serve.DefaultMaxTotal, "git processes at once in all; past it, 503")
	fs.IntVar(&c.MaxPerClient, "serve-max-per-client", serve.DefaultMaxPerClient, "git requests at once from one client address; past it they wait in the client's queue")
	fs.IntVar(&c.QueuePerClient, "serve-queue-per-client", serve.DefaultQueuePerClient, "git requests of one client address that may wait for a place; past it, 429 at once ($"+cloud.EnvServeQueuePerClient+" sets it too)")
	fs.IntVar(&c.Queue, "serve-queue", serve.DefaultQueue, "git requests that may wait for a place, of all clients; past it, refused at once")
	fs.DurationVar(&c.QueueWait, "serve-queue-wait", serve.DefaultQueueWait, "how long a git request waits for a place before 429 or 503 with Retry-After ($"+cloud.EnvServeQueueWait+" sets it too)")
	trusted := func(v string) error {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			if p == deployenv.TrustedCloudFront {
				sf.cloudFront = true
				continue
			}
			pfx, err := netip.ParsePrefix(p)
			if err != nil {
				return err
			}
			c.TrustedProxies = append(c.TrustedProxies, pfx)
		}
		return nil
	}
	fs.Func("trusted-proxy", "a proxy's network (`CIDR`, e.g. the load balancer's subnets), or "+deployenv.TrustedCloudFront+
		" (CloudFront's origin-facing servers), whose X-Forwarded-For names the client; repeat or comma-separate (default $"+cloud.EnvTrustedProxy+")", trusted)
	fs.StringVar(&sf.rangesURL, "aws-ip-ranges", awsranges.URL, "where AWS publishes its IP ranges (for --trusted-proxy "+deployenv.TrustedCloudFront+")")
	if v := os.Getenv(cloud.EnvTrustedProxy); v != "" {
		sf.envTrusted = v
	}
	sf.trusted = trusted
	return sf
}

func (sf *serveFlags) finish(c *serve.Config) error {
	secretFromEnv(&c.Token, cloud.EnvServeToken)
	set := map[string]bool{}
	sf.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if v := os.Getenv(cloud.EnvServeQueuePerClient); v != "" && !set["serve-queue-per-client"] {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return usageError{fmt.Sprintf("$%s %q: want a count", cloud.EnvServeQueuePerClient, v)}
		}
		c.QueuePerClient = n
	}
	if v := os.Getenv(cloud.EnvServeQueueWait); v != "" && !set["serve-queue-wait"] {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return usageError{fmt.Sprintf("$%s %q: want a duration such as 30s", cloud.EnvServeQueueWait, v)}
		}
		c.QueueWait = d
	}
	if len(c.TrustedProxies) == 0 && sf.envTrusted != "" {
		if err := sf.trusted(sf.envTrusted); err != nil {
			return usageError{fmt.Sprintf("$%s %q: %v", cloud.EnvTrustedProxy, sf.envTrusted, err)}
		}
	}
	n, err := cloud.ParseBytes(sf.cacheBytes)
	if err != nil || n <= 0 {
		return usageError{fmt.Sprintf("--pack-cache-bytes %q: want a size such as 512M or 10G", sf.cacheBytes)}
	}
	c.PackCache.MaxBytes = n
	for _, p := range strings.Split(sf.allow, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			return usageError{fmt.Sprintf("--serve-allow %q: %v", p, err)}
		}
		c.Allow = append(c.Allow, pfx)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("the pack cache runs this binary as git's pack-objects hook, but its path is unknown: %w", err)
	}
	c.Hook = []string{self, packcache.Arg}
	return nil
}

// Reading CloudFront's ranges: tries, and the bound of each.
const (
	rangesTries   = 3
	rangesTimeout = 10 * time.Second
	rangesBackoff = 2 * time.Second
)

// resolve adds CloudFront's origin-facing ranges to the trusted proxies when they were
// asked for. Without them the front still serves, but counts every client behind one
// CloudFront server as one client (its per-client bound then limits them together): a
// fetch that fails is logged as an error, not fatal.
func (sf *serveFlags) resolve(ctx context.Context, c *serve.Config, log *slog.Logger) {
	if !sf.cloudFront {
		return
	}
	client := &http.Client{Timeout: rangesTimeout}
	wait := cmp.Or(sf.backoff, rangesBackoff)
	var err error
	for try := range rangesTries {
		var ranges []netip.Prefix
		if ranges, err = awsranges.Fetch(ctx, client, sf.rangesURL, awsranges.CloudFrontOriginFacing); err == nil {
			c.TrustedProxies = append(c.TrustedProxies, ranges...)
			log.Info("trusting CloudFront's origin-facing servers in X-Forwarded-For", "ranges", len(ranges))
			return
		}
		if try < rangesTries-1 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait *= 2
		}
	}
	log.Error("CloudFront's origin-facing ranges could not be read: clients behind one CloudFront server share one per-client limit",
		"url", sf.rangesURL, "err", err)
}

// runServe is the git front alone: the serving service on AWS, over the mirrors'
// file system mounted read-only.
func runServe(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg serve.Config
	fs.StringVar(&cfg.Root, "root", envOr(cloud.EnvMirrorRoot, cloud.DefaultMirrorRoot), "mirrors root (read-only is fine)")
	listen := fs.String("listen", envOr(cloud.EnvServeListen, ":8080"), "listen address")
	fs.StringVar(&cfg.PackCache.Dir, "pack-cache-dir", envOr(cloud.EnvPackCacheDir, filepath.Join(os.TempDir(), "mirrorfleet-packcache")), "pack cache directory, on local disk")
	table := fs.String("table", os.Getenv(cloud.EnvTable), "DynamoDB table of the fleet, for the /git/ index (empty: no index)")
	fs.StringVar(&cfg.BaseURL, "clone-base-url", os.Getenv(cloud.EnvCloneBaseURL), "base of the clone URLs the index shows (default: http://<listen address>; never the request's Host)")
	maxConns := fs.Int("max-conns", httpguard.DefaultLimits().MaxConns, "open connections at once; more wait to be accepted")
	emfEvery := fs.Duration("emf-interval", time.Minute, "how often CloudWatch EMF metrics go to stdout (0: never)")
	sf := addServeFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("serve takes no arguments, got %q", fs.Args())}
	}
	if err := sf.finish(&cfg); err != nil {
		return err
	}
	log := cloud.NewLogger(slog.LevelInfo)
	cfg.Log = log
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sf.resolve(ctx, &cfg, log)
	git, err := gitcmd.Find(ctx)
	if err != nil {
		return err
	}
	cfg.Git = git.Path
	if *table != "" {
		st, err := cloud.OpenDynamoStore(ctx, "", *table)
		if err != nil {
			return err
		}
		defer st.Close()
		cfg.Index = st
	}
	prom := metrics.NewPrometheus()
	emf := metrics.NewEMF(stdout, envOr(cloud.EnvFleet, cloud.DefaultFleet), nil)
	cfg.Metrics = teeSink{prom, emf}
	git.Metrics = cfg.Metrics // the health check's; the front counts its own
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	ln = httpguard.Listener(ln, *maxConns)
	if cfg.BaseURL == "" {
		cfg.BaseURL = "http://" + ln.Addr().String()
	}
	front, err := serve.New(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	defer front.Close()

	mux := http.NewServeMux()
	mux.Handle(serve.Prefix, front)
	mux.Handle("GET /metrics", front.Guard(prom.Handler())) // what is served, and how often, is the token's to see
	mux.Handle("GET /healthz", health.New(nil, health.Git(git.CheckRuns), health.MirrorsRoot(cfg.Root)))
	// No WriteTimeout: a clone may stream for as long as it reads; the front sets
	// per-request deadlines instead.
	srv := httpguard.Server(mux, httpguard.Limits{IdleTimeout: 2 * time.Minute})
	var wg sync.WaitGroup
	if *emfEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clock.Every(ctx, *emfEvery, nil, func() {
				if err := emf.Flush(); err != nil {
					log.Warn("metrics", "err", err)
				}
			})
		}()
	}
	log.Info("serving git", "listen", ln.Addr().String(), "root", cfg.Root, "git", git.Version.String(),
		"pack_cache", cfg.PackCache.Dir, "pack_cache_bytes", cfg.PackCache.MaxBytes, "index", *table != "", "token", cfg.Token != "")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	wg.Wait()
	if *emfEvery > 0 {
		_ = emf.Flush()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// teeSink records to every sink.
type teeSink []serve.Sink

func (t teeSink) Record(s ...metrics.Sample) error {
	var errs []error
	for _, k := range t {
		errs = append(errs, k.Record(s...))
	}
	return errors.Join(errs...)
}
