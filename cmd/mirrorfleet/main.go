// Command mirrorfleet runs the local fleet (`mirrorfleet run`) and is the operator's CLI
// against a fleet's API (`mirrorfleet repos add ...`, `workers`, `ring`, `status`).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/buildinfo"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/events"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
	"github.com/mirrorfleet/mirrorfleet/shared/listsync"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/serve/packcache"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

const usage = `mirrorfleet keeps large collections of git mirrors fresh.

Usage:
  mirrorfleet run [flags]                 the local fleet: coordinator, workers, API
  mirrorfleet serve [flags]               the git front alone (read-only smart HTTP over a
                                          mirrors root; the serving service on AWS)
  mirrorfleet worker                      one worker process against DynamoDB, configured
                                          from the environment (see worker/README.md)
  mirrorfleet init-aws [--table T]        create the DynamoDB table and schedule group
                                          (LocalStack, DynamoDB Local: AWS_ENDPOINT_URL)
  mirrorfleet healthcheck --file F | --url U
                                          container health check: exit 0 when F was
                                          touched recently, or U answers 200
  mirrorfleet repos add URL... | --file F add repos (bulk adds show progress)
  mirrorfleet repos ls [--state S] [--host H] [--limit N]
                                          list repos, by URL
  mirrorfleet repos show ID|URL           one repo: state, last error, mirror path, clone URL
  mirrorfleet repos rm ID|URL [-y]        stop mirroring a repo and delete its mirror (no undo; asks first)
  mirrorfleet repos sync ID|URL           fetch a repo now
  mirrorfleet workers [--all]             the workers and their health (dead ones with --all)
  mirrorfleet ring                        the consistent-hash ring
  mirrorfleet status                      fleet summary
  mirrorfleet list                        the repo list kept in git: commit, bad lines, held purge
  mirrorfleet list confirm COMMIT         let the held purge of COMMIT go ahead
  mirrorfleet backup FILE                 copy the running fleet's store to FILE (consistent)
  mirrorfleet restore [--data D] FILE     put a backup in place of a stopped fleet's store
  mirrorfleet smoke --repo URL [--aws]    check a fleet end to end: add the repo, wait until
                                          it is ok, clone it through its clone URL, read the
                                          serving front's metrics (make smoke)
  mirrorfleet version [-o json]           the version and commit of this binary
  mirrorfleet config example              a commented config file with every setting of
                                          run's (mirrorfleet run --config FILE)

Client commands find the fleet through --api, $MIRRORFLEET_URL, the config file
($XDG_CONFIG_HOME/mirrorfleet/config: url, token or token_file) or http://127.0.0.1:8080,
and its token through --token, $MIRRORFLEET_TOKEN, the config file or <--data>/token
(default ./.mirrorfleet/token); -o table|json. Against the AWS stack's API (IAM auth)
they sign with AWS SigV4 instead: --aws, $MIRRORFLEET_AWS or aws = true in the config
file, with the AWS SDK's default credentials and region. 'mirrorfleet repos add -h'
shows one command's flags.
Run 'mirrorfleet run -h' for the fleet's flags.
`

func main() {
	if packcache.IsHook(os.Args) { // git upload-pack running the pack cache (hidden)
		packcache.RunHook()
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var err error
	switch args[0] {
	case "run":
		err = runFleet(args[1:], stderr)
	case "serve":
		err = runServe(args[1:], stdout, stderr)
	case "worker":
		err = runWorker(args[1:], stderr)
	case "init-aws":
		err = runInitAWS(args[1:], stdout, stderr)
	case "healthcheck":
		err = runHealthcheck(args[1:], stdout, stderr)
	case "version", "--version":
		err = runVersion(args[1:], stdout, stderr)
	case "restore":
		err = runRestore(args[1:], stdout, stderr)
	case "config":
		err = runConfig(args[1:], stdout, stderr)
	case "repos", "workers", "ring", "status", "list", "backup", "smoke":
		err = runClient(args, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "mirrorfleet: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errUsageShown) {
		return 2
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "mirrorfleet: %v\n", err)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "mirrorfleet: %v\n", err)
		return 1
	}
	return 0
}

// cliCommand is how to run this binary from the fleet's working directory, as the
// start-up hint prints it: its name when PATH finds this same binary (make install), else
// its path, relative when it is under the directory (make run's build/host/mirrorfleet).
func cliCommand(getwd func() (string, error), executable func() (string, error), lookPath func(string) (string, error)) string {
	exe, err := executable()
	if err != nil {
		return "mirrorfleet"
	}
	if onPath, err := lookPath("mirrorfleet"); err == nil {
		a, errA := os.Stat(onPath)
		b, errB := os.Stat(exe)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return "mirrorfleet"
		}
	}
	if wd, err := getwd(); err == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
			if !strings.Contains(rel, "/") {
				rel = "./" + rel
			}
			return rel
		}
	}
	return exe
}

// runConfig is `mirrorfleet config example`.
func runConfig(args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(stderr, "mirrorfleet config example: print a config file for 'mirrorfleet run --config FILE' with every key, commented out at its default")
		return flag.ErrHelp
	}
	if len(args) != 1 || args[0] != "example" {
		return usageError{"config takes one subcommand: example"}
	}
	r := newRunFlags(io.Discard)
	exampleConfig(stdout, r.fs, runGroups())
	return nil
}

// runVersion prints the binary's version and commit (shared/buildinfo).
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("o", "text", "output: text or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"version takes no arguments"}
	}
	in := buildinfo.Get()
	switch *format {
	case "text":
		_, err := fmt.Fprintln(stdout, in)
		return err
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(in)
	}
	return usageError{fmt.Sprintf("-o %q: text or json", *format)}
}

// errUsageShown is a usage error whose message and usage are printed already.
var errUsageShown = errors.New("usage error")

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

// runFlags are `mirrorfleet run`'s flags, bound to the fleet's configuration.
type runFlags struct {
	fs       *flag.FlagSet
	cfg      fleet.Config
	config   string
	logLevel string
	sf       *serveFlags
	ff       *feedFlags
}

func newRunFlags(stderr io.Writer) *runFlags {
	r := &runFlags{}
	d := fleet.Defaults()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	r.fs = fs
	cfg := &r.cfg
	fs.StringVar(&r.config, "config", "", "a TOML `file` of settings, keyed by these flags' names (default $MIRRORFLEET_CONFIG; 'mirrorfleet config example' writes one)")
	fs.StringVar(&cfg.Data, "data", d.Data, "data directory (store, token, mirrors)")
	fs.StringVar(&cfg.Listen, "listen", d.Listen, "API listen address")
	fs.IntVar(&cfg.Workers, "workers", d.Workers, "in-process workers")
	fs.IntVar(&cfg.Fetchers, "fetchers", d.Fetchers, "concurrent fetches per worker")
	memoryBudgetFlag(fs, &cfg.MemoryBudget)
	fs.StringVar(&cfg.Token, "token", "", "API bearer token (default: generated into <data>/token)")
	fs.BoolVar(&cfg.AllowPrivateHosts, "allow-private-hosts", false, "allow repos on loopback/private addresses (cloud metadata stays blocked)")
	fs.Func("case-insensitive-host", "a `host` whose repository paths are case-insensitive, besides github.com and gitlab.com: Org/Repo and org/repo there are one repo; repeat or comma-separate",
		func(v string) error {
			for _, h := range strings.Split(v, ",") {
				if h = strings.ToLower(strings.TrimSpace(h)); h == "" {
					continue
				}
				if strings.ContainsAny(h, "/: ") {
					return fmt.Errorf("%q: want a host name (no scheme, port or path)", h)
				}
				cfg.CaseInsensitiveHosts = append(cfg.CaseInsensitiveHosts, h)
			}
			return nil
		})
	fs.DurationVar(&cfg.Tick, "tick", d.Tick, "coordinator tick interval")
	fs.DurationVar(&cfg.Heartbeat, "heartbeat", d.Heartbeat, "worker heartbeat interval")
	fs.DurationVar(&cfg.Grace, "grace", d.Grace, "silence before a worker's repos move")
	fs.DurationVar(&cfg.Warmup, "warmup", d.Warmup, "wait on first start before assigning (0s: none)")
	fs.DurationVar(&cfg.MinInterval, "min-interval", d.MinInterval, "minimum time between two polls of one repo")
	pollBudgetFlag(fs, &cfg.PollBudget)
	wd := worker.DefaultConfig()
	fs.DurationVar(&cfg.MaintainEvery, "maintain-every", wd.MaintainEvery, "how often each mirror is considered for maintenance (one unchanged since its last runs no git and reads no pack; -1s: never)")
	fs.DurationVar(&cfg.ScrubEvery, "scrub-every", wd.ScrubEvery, "period of each mirror's full run (bitmap, connectivity check: reads its packs whole), spread over the fleet by repo id; also after a failed run")
	fs.StringVar(&cfg.PriorityPolicy, "policy", "bayes", "when a repo is polled next: bayes (each repo's push rate from its commits and history, with a prior learned from the fleet), rate (from whether polls found changes) or cbrt (cube root of the time since its last commit)")
	fs.StringVar(&cfg.ReposFile, "repos-file", "", "file of repo URLs to add at start (one per line, # comments)")
	ld := listsync.Defaults()
	cfg.List.PurgeThreshold = ld.PurgeThreshold
	fs.StringVar(&cfg.List.Repo, "list-repo", "", "git repository (https://) holding the list of repos to mirror; empty: none")
	fs.StringVar(&cfg.List.Branch, "list-branch", "", "branch of the list repository (default: its HEAD)")
	fs.Func("list-path", "list file, or directory of *.txt files (a `path` in the list repository); repeat or comma-separate (default \""+listsync.DefaultPath+"\")",
		func(v string) error {
			cfg.List.Paths = append(cfg.List.Paths, listsync.SplitPaths(v)...)
			return nil
		})
	fs.DurationVar(&cfg.List.Interval, "list-interval", ld.Interval, "time between two fetches of the list repository")
	fs.Func("list-purge-threshold", fmt.Sprintf("`percent` of the list's repos one change may remove before it waits for 'mirrorfleet list confirm' (default %g)", ld.PurgeThreshold),
		func(v string) error {
			p, err := listsync.ParsePercent(v)
			cfg.List.PurgeThreshold = p
			return err
		})
	fs.StringVar(&cfg.List.Dir, "list-dir", "", "where the list repository's clone is kept (default <data>/list)")
	byteFlag(fs, &cfg.List.MaxBytes, "list-max-bytes", listsync.DefaultMaxBytes, "the list files may hold this many `bytes` in all; a larger list is not applied")
	fs.IntVar(&cfg.List.MaxURLs, "list-max-urls", listsync.DefaultMaxURLs, "the list may hold this many valid URLs; a longer list is not applied")
	limitFlags(fs, cfg)
	fs.StringVar(&cfg.CloneBaseURL, "clone-base-url", "", "base of the clone URLs (default http://<listen address>)")
	fs.StringVar(&cfg.Site.Abbr, "site-abbr", "", "the mirror site's short name (e.g. EXAMPLE); serves /mirrorz.json, for MirrorZ's listing of mirror sites (docs/operations.md)")
	fs.StringVar(&cfg.Site.Name, "site-name", "", "the mirror site's full name in /mirrorz.json")
	hookFlags(fs, &cfg.WebhookSecret, &cfg.WebhookSecretFor)
	r.ff = addFeedFlags(fs, &cfg.FeedEvery)
	r.sf = addServeFlags(fs, &cfg.Serve)
	fs.StringVar(&cfg.Serve.PackCache.Dir, "pack-cache-dir", "", "pack cache directory, on local disk (default <data>/packcache)")
	fs.Func("notify-url", "POST every mirror.updated event as JSON to this http(s) `URL` (repeatable; private addresses allowed, cloud metadata never; docs/events.md)",
		func(v string) error {
			if err := events.CheckNotifyURL(urlpolicy.Policy{}, v); err != nil {
				return err
			}
			cfg.Events.NotifyURLs = append(cfg.Events.NotifyURLs, v)
			return nil
		})
	fs.StringVar(&cfg.Events.NotifySecret, "notify-secret", "", "signs the --notify-url POSTs: X-Mirrorfleet-Signature: sha256=<hex HMAC-SHA256(secret, body)> (default $MIRRORFLEET_NOTIFY_SECRET)")
	fs.IntVar(&cfg.Events.Backlog, "events-backlog", events.DefaultBacklog, "events kept for GET /v1/events resumes (Last-Event-ID)")
	fs.IntVar(&cfg.Events.Streams, "event-streams", api.DefaultEventStreams, "open GET /v1/events streams at most; more get 503")
	fs.IntVar(&cfg.Events.PerClient, "event-streams-per-client", api.DefaultEventStreamsPerClient, "open GET /v1/events streams of one client address; more get 429")
	fs.StringVar(&cfg.Events.Token, "events-token", "", "a `token` GET /v1/events needs (Authorization: Bearer, or ?access_token= from a browser's EventSource); it grants the stream only (none: the stream is read like the other reads)")
	corsFlag(fs, &cfg.CORSOrigins)
	fs.StringVar(&r.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Usage = func() {
		printGrouped(stderr, fs, "Usage: mirrorfleet run [flags]\n\nThe local fleet: coordinator, workers, API, git front and status page in one process.\nEvery flag can also be set as $MIRRORFLEET_<FLAG> (--host-rate: $MIRRORFLEET_HOST_RATE)\nor as a key of the --config file; the command line wins, then the environment, then\nthe file.\n", runGroups(),
			"\nOn AWS the worker and serving tasks take these settings as the same MIRRORFLEET_*\nvariables, set by the stack (infra/README.md).\n")
	}
	return r
}

// parse reads the command line, then fills what it left unset from the environment and
// the config file, and checks the result.
func (r *runFlags) parse(args []string, getenv func(string) string) (fleet.Config, error) {
	fs, cfg := r.fs, &r.cfg
	if err := fs.Parse(args); err != nil {
		return fleet.Config{}, err
	}
	if fs.NArg() > 0 {
		return fleet.Config{}, usageError{fmt.Sprintf("run takes no arguments, got %q", fs.Args())}
	}
	path := r.config
	if path == "" {
		path = getenv("MIRRORFLEET_CONFIG")
	}
	if err := applySettings(fs, path, getenv); err != nil {
		return fleet.Config{}, usageError{err.Error()}
	}
	if err := r.sf.finish(&cfg.Serve); err != nil {
		return fleet.Config{}, err
	}
	feedSources, err := r.ff.finish()
	if err != nil {
		return fleet.Config{}, usageError{err.Error()}
	}
	cfg.Feeds = feedSources
	if cfg.Warmup == 0 {
		cfg.Warmup = coordinator.NoWarmup
	}
	if cfg.Events.NotifySecret != "" && len(cfg.Events.NotifyURLs) == 0 {
		return fleet.Config{}, usageError{"notify-secret needs notify-url"}
	}
	if _, ok := priority.ByName(cfg.PriorityPolicy); !ok {
		return fleet.Config{}, usageError{fmt.Sprintf("--policy %q: want bayes, rate or cbrt", cfg.PriorityPolicy)}
	}
	if err := cfg.List.Validate(); err != nil {
		return fleet.Config{}, usageError{err.Error()}
	}
	if !cfg.List.Enabled() && (cfg.List.Branch != "" || len(cfg.List.Paths) > 0) {
		return fleet.Config{}, usageError{"--list-branch and --list-path need --list-repo"}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(r.logLevel)); err != nil {
		return fleet.Config{}, usageError{fmt.Sprintf("--log-level: %v", err)}
	}
	cfg.Log = slog.New(slog.NewTextHandler(fs.Output(), &slog.HandlerOptions{Level: level}))
	return *cfg, nil
}

func runFleet(args []string, stderr io.Writer) error {
	rf := newRunFlags(stderr)
	cfg, err := rf.parse(args, os.Getenv)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rf.sf.resolve(ctx, &cfg.Serve, cfg.Log)
	f, err := fleet.Start(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "\nmirrorfleet is running.\n  status page: http://%s/\n  API:         http://%s/v1/  (spec at /openapi.yaml)\n  mirrors:     %s\n  clone:       %s/git/<host>/<path>  (git clone; index at %s/git/; %s)\n",
		f.Addr(), f.Addr(), fleet.MirrorsDir(cfg.Data), f.CloneBase, f.CloneBase, f.Git.Path)
	if f.TokenGenerated {
		// Shown on a terminal only: stderr may be a log collector, and the token in a log
		// is a token anyone reading the logs has.
		if isTerminal(stderr) {
			fmt.Fprintf(stderr, "  API token (generated, saved in %s; shown once):\n    %s\n", fleet.TokenPath(cfg.Data), f.Token)
		} else {
			fmt.Fprintf(stderr, "  API token:   generated and saved in %s (readable by you only; not shown: stderr is not a terminal)\n", fleet.TokenPath(cfg.Data))
		}
	}
	if f.List != nil {
		lc := f.List.Config()
		fmt.Fprintf(stderr, "  repo list:   %s (%s, every %s; `mirrorfleet list` shows it)\n", lc.Repo, strings.Join(lc.Paths, ", "), lc.Interval)
	}
	// The CLI finds a fleet elsewhere than its default address only if told.
	where := "--data " + cfg.Data
	if api := "http://" + f.Addr(); api != defaultAPI {
		where = "--api " + api + " " + where
	}
	fmt.Fprintf(stderr, "Add a repo:  %s repos add https://github.com/git/git %s\nStop with Ctrl-C.\n\n", cliCommand(os.Getwd, os.Executable, exec.LookPath), where)
	<-ctx.Done()
	stop()
	fmt.Fprintln(stderr, "shutting down…")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return f.Stop(sctx)
}

// runWorker is one fetch worker against a DynamoDB table (AWS, LocalStack or DynamoDB
// Local via AWS_ENDPOINT_URL), configured like the ECS task.
func runWorker(args []string, stderr io.Writer) error {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" {
			fmt.Fprintln(stderr, "mirrorfleet worker takes its configuration from the environment: MIRRORFLEET_TABLE, AWS_REGION, AWS_ENDPOINT_URL, MIRRORFLEET_MIRROR_ROOT, ... (worker/README.md)")
			return flag.ErrHelp
		}
		return usageError{fmt.Sprintf("worker takes no arguments (configure it with MIRRORFLEET_* variables), got %q", args)}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	cfg, err := cloud.WorkerConfigFromEnv(ctx)
	if err != nil {
		return err
	}
	return cloud.RunWorker(ctx, cfg)
}
