package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// smokeFlags are the smoke command's own flags.
type smokeFlags struct {
	repo    string
	timeout time.Duration
	metrics string
}

// serveMetric is the counter the git front keeps of the requests it answered
// (shared/metrics ServeRequests, by status class): a clone through the serving URL
// raises it where the clone was served.
const serveMetric = "mirrorfleet_serve_requests_total"

// smoke checks a deployed fleet end to end: it adds repo through the API, waits until
// the repo is ok, clones it through its clone URL with git, and reads the serving
// front's /metrics for the requests the clone made. Every wait ends by ctx (the
// --timeout).
func (c *client) smoke(ctx context.Context, f smokeFlags) error {
	if f.repo == "" {
		return usageError{"smoke needs --repo URL: a small public repository the fleet may mirror"}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	begin := time.Now()
	say := func(format string, a ...any) { fmt.Fprintf(c.out, "smoke: "+format+"\n", a...) }

	var repo api.Repo
	if err := c.do(ctx, http.MethodPost, "/v1/repos", map[string]any{"url": f.repo}, &repo); err != nil {
		return fmt.Errorf("smoke: add %s: %w", f.repo, err)
	}
	say("added %s as %s (%s)", repo.URL, repo.ID, repo.State)

	// Wait until a worker has mirrored it.
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for repo.State != store.RepoOK {
		select {
		case <-ctx.Done():
			return fmt.Errorf("smoke: %s is still %s after %s (last error: %q): %w", repo.ID, repo.State,
				time.Since(begin).Round(time.Second), repo.LastError, ctx.Err())
		case <-tick.C:
		}
		if err := c.do(ctx, http.MethodGet, repoPath(repo.ID), nil, &repo); err != nil {
			return fmt.Errorf("smoke: %w", err)
		}
	}
	say("%s is ok after %s", repo.ID, time.Since(begin).Round(time.Second))
	if repo.CloneURL == nil || *repo.CloneURL == "" {
		return errors.New("smoke: the repo has no clone_url: the API is not told where the mirrors are served (MIRRORFLEET_CLONE_BASE_URL; serving=false on AWS)")
	}
	cloneURL := *repo.CloneURL

	// Clone it through the serving URL.
	git, err := gitcmd.Find(ctx)
	if err != nil {
		return fmt.Errorf("smoke: %w", err)
	}
	dir, err := os.MkdirTemp("", "mirrorfleet-smoke-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// Within the smoke's own deadline (ctx), as a user's clone would run.
	gitRun := func(dir string, args ...string) ([]byte, error) {
		return git.Output(ctx, gitcmd.Cmd{Args: args, Dir: dir, Timeout: f.timeout})
	}
	clone := dir + "/clone.git"
	if _, err := gitRun(dir, "clone", "--mirror", "-q", cloneURL, clone); err != nil {
		return fmt.Errorf("smoke: clone through the serving URL: %w", err)
	}
	refs, err := gitRun(clone, "for-each-ref", "--format=%(refname)")
	if err != nil {
		return fmt.Errorf("smoke: %w", err)
	}
	n := len(strings.Fields(string(refs)))
	if n == 0 {
		return fmt.Errorf("smoke: the clone of %s has no refs", cloneURL)
	}
	if _, err := gitRun(clone, "fsck", "--connectivity-only", "--no-progress"); err != nil {
		return fmt.Errorf("smoke: the clone of %s is not whole: %w", cloneURL, err)
	}
	say("cloned %s: %d refs, connected", cloneURL, n)

	// The front counted the clone's requests.
	metricsURL := f.metrics
	if metricsURL == "" {
		i := strings.Index(cloneURL, "/git/")
		if i < 0 {
			return fmt.Errorf("smoke: clone URL %s has no /git/ path; pass --metrics", cloneURL)
		}
		metricsURL = cloneURL[:i] + "/metrics"
	}
	// Behind a load balancer with several git servers a scrape reaches one of them; a
	// few tries find the one that served the clone.
	var last error
	for try := 0; try < 8; try++ {
		v, err := c.scrape(ctx, metricsURL, serveMetric)
		if err == nil && v > 0 {
			say("%s: %s %s", metricsURL, serveMetric, strconv.FormatFloat(v, 'f', -1, 64))
			say("passed in %s", time.Since(begin).Round(time.Second))
			return nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("%s is %v", serveMetric, v)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("smoke: %s: %v: %w", metricsURL, last, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("smoke: %s: no scrape counted the clone: %v", metricsURL, last)
}

// scrape reads a Prometheus text exposition and sums the samples of metric.
func (c *client) scrape(ctx context.Context, u, metric string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	sum, seen := 0.0, false
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric) {
			continue
		}
		rest := line[len(metric):]
		if rest != "" && rest[0] != '{' && rest[0] != ' ' {
			continue // another metric with this one's name as prefix
		}
		fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", u, line, err)
		}
		sum, seen = sum+v, true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !seen {
		return 0, fmt.Errorf("%s has no %s", u, metric)
	}
	return sum, nil
}
