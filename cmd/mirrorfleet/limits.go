package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
	"github.com/mirrorfleet/mirrorfleet/shared/membudget"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
	"golang.org/x/term"
)

// limitFlags adds the flags of what an upstream or a client may make the fleet hold:
// fetch limits, per-host politeness, HTTP server limits.
func limitFlags(fs *flag.FlagSet, cfg *fleet.Config) {
	ml := mirror.DefaultLimits()
	byteFlag(fs, &cfg.Fetch.MaxRefBytes, "max-ref-bytes", ml.MaxRefBytes, "a ref advertisement may be this many `bytes`")
	fs.IntVar(&cfg.Fetch.MaxRefs, "max-refs", ml.MaxRefs, "a ref advertisement may hold this many refs")
	byteFlag(fs, &cfg.Fetch.MaxPackBytes, "max-pack-bytes", ml.MaxPackBytes, "one fetch may receive this many `bytes` (see also --max-pack-bytes-for)")
	fs.Func("max-pack-bytes-for", "`URL=SIZE`: --max-pack-bytes for one repo, or for every repo under a URL ending in /; repeat or comma-separate",
		func(v string) error {
			m, err := cloud.ParseByteOverrides(v)
			if err != nil {
				return err
			}
			if cfg.Fetch.PackBytesFor == nil {
				cfg.Fetch.PackBytesFor = map[string]int64{}
			}
			for k, n := range m {
				cfg.Fetch.PackBytesFor[k] = n
			}
			return nil
		})
	fs.Int64Var(&cfg.Fetch.MaxPackObjects, "max-pack-objects", ml.MaxPackObjects, "a pack may declare this many objects")
	byteFlag(fs, &cfg.Fetch.MaxObjectBytes, "max-object-bytes", ml.MaxObjectBytes, "one object of a pack may declare this many `bytes`")
	byteFlag(fs, &cfg.Fetch.MinRate, "min-rate", ml.MinRate, "a transfer slower than this many `bytes` a second over --rate-window is cut")
	fs.DurationVar(&cfg.Fetch.RateWindow, "rate-window", ml.RateWindow, "the window --min-rate is measured over")

	wd := worker.DefaultConfig()
	fs.IntVar(&cfg.HostConcurrency, "host-concurrency", wd.HostConcurrency, "fetches of one upstream host at a time, per worker (-1: no limit)")
	fs.Float64Var(&cfg.HostRate, "host-rate", wd.HostRate, "fetch starts a second on one upstream host, per worker (-1: no limit)")
	fs.DurationVar(&cfg.HostPause, "host-pause", wd.HostPause, "how long a host that answers 429 or 503 without Retry-After is left alone")

	hl := httpguard.DefaultLimits()
	fs.Func("allow-host", "a Host `name` the API, /metrics and the status page answer besides loopback ones (\"*\": any); repeat or comma-separate",
		func(v string) error {
			for _, h := range strings.Split(v, ",") {
				if h = strings.TrimSpace(h); h != "" {
					cfg.AllowHosts = append(cfg.AllowHosts, h)
				}
			}
			return nil
		})
	fs.IntVar(&cfg.HTTP.MaxConns, "max-conns", hl.MaxConns, "open API connections at once; more wait to be accepted")
	fs.DurationVar(&cfg.HTTP.ReadHeaderTimeout, "http-header-timeout", hl.ReadHeaderTimeout, "a request's headers must arrive within this")
	fs.DurationVar(&cfg.HTTP.IdleTimeout, "http-idle-timeout", hl.IdleTimeout, "an idle keep-alive connection is closed after this")
	fs.DurationVar(&cfg.HTTP.BodyTimeout, "http-body-timeout", hl.BodyTimeout, "an API request's body must arrive within this")
	fs.DurationVar(&cfg.HTTP.ResponseTimeout, "http-response-timeout", hl.ResponseTimeout, "an API request must be answered within this")
	fs.IntVar(&cfg.HTTP.MaxHeaderBytes, "http-max-header-bytes", hl.MaxHeaderBytes, "request headers over this many bytes get 431")
}

// pollBudgetFlag is --poll-budget: polls per repo per day, averaged over the fleet, or
// none.
func pollBudgetFlag(fs *flag.FlagSet, p *float64) {
	fs.Func("poll-budget", "polls per repo per day, averaged over the fleet: the workers poll no more than that on average "+
		"over an hour, the policy choosing which repos; first clones and the fetches a hook, a feed or a sync asks for are "+
		"not counted. A `number`, or none (the default): poll as fast as the per-host limits and --min-interval allow",
		func(v string) error {
			b, err := parsePollBudget(v)
			*p = b
			return err
		})
}

// parsePollBudget reads --poll-budget: "" or none is no budget.
func parsePollBudget(v string) (float64, error) {
	if v = strings.TrimSpace(v); v == "" || v == "none" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("want polls per repo per day (e.g. 0.5) or none, not %q", v)
	}
	return f, nil
}

// byteFlag is an int64 flag that takes sizes: 1048576, 512M, 8G, 1.5TiB.
func byteFlag(fs *flag.FlagSet, p *int64, name string, def int64, usage string) {
	*p = def
	fs.Func(name, fmt.Sprintf("%s (default %s)", usage, sizeString(def)), func(v string) error {
		n, err := cloud.ParseBytes(v)
		if err != nil {
			return err
		}
		*p = n
		return nil
	})
}

// memoryBudgetFlag is --memory-budget: a size, or "none".
func memoryBudgetFlag(fs *flag.FlagSet, p *int64) {
	fs.Func("memory-budget", fmt.Sprintf("memory the workers' fetches may use together, a `size` (e.g. 384M) or \"none\"; GOMEMLIMIT follows it unless set (default %.0f%% of the cgroup memory limit, else %s)",
		100*membudget.ContainerShare, sizeString(membudget.DefaultBudget)), func(v string) error {
		if v == "none" {
			*p = -1
			return nil
		}
		n, err := cloud.ParseBytes(v)
		if err != nil {
			return err
		}
		if n <= 0 {
			return fmt.Errorf("want a positive size or \"none\"")
		}
		*p = n
		return nil
	})
}

// sizeString writes n with the largest binary suffix that divides it.
func sizeString(n int64) string {
	for _, u := range []struct {
		s string
		n int64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.n && n%u.n == 0 {
			return fmt.Sprintf("%d%s", n/u.n, u.s)
		}
	}
	return fmt.Sprint(n)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return term.IsTerminal(int(f.Fd()))
}
