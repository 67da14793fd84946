// Package health answers /healthz: whether the parts a process depends on answer (git
// runs, the mirrors root reads, the store responds). Load balancers poll it every few
// seconds from many nodes, so an answer is kept for a short while rather than rerun.
package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
)

// Check is one named dependency; Run returns nil when it is usable.
type Check struct {
	Name string
	Run  func(ctx context.Context) error
}

// Git checks that git runs: run is e.g. gitcmd.Git.CheckRuns.
func Git(run func(ctx context.Context) error) Check {
	return Check{Name: "git", Run: func(ctx context.Context) error {
		if err := run(ctx); err != nil {
			return fmt.Errorf("git: %w", err)
		}
		return nil
	}}
}

// MirrorsRoot checks that the mirrors root is a readable directory.
func MirrorsRoot(root string) Check {
	return Check{Name: "mirrors", Run: func(context.Context) error {
		f, err := os.Open(root)
		if err != nil {
			return fmt.Errorf("mirrors root: %w", err)
		}
		defer f.Close()
		if _, err := f.Readdirnames(1); err != nil && err != io.EOF {
			return fmt.Errorf("mirrors root: %w", err)
		}
		return nil
	}}
}

// Store checks that a store answers a cheap read (ping is e.g. CountRepos).
func Store(ping func(ctx context.Context) error) Check {
	return Check{Name: "store", Run: func(ctx context.Context) error {
		if err := ping(ctx); err != nil {
			return fmt.Errorf("store: %w", err)
		}
		return nil
	}}
}

// TTL is how long an answer is kept; Timeout bounds one round of checks.
const (
	TTL     = 5 * time.Second
	Timeout = 5 * time.Second
)

// Report is the body of /healthz: status "ok" or "unhealthy", and each check's "ok" or
// its error.
type Report struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// OK reports whether every check passed.
func (r Report) OK() bool { return r.Status == "ok" }

// Checker runs its checks at most once per TTL. It is an http.Handler answering 200 or
// 503 with the Report as JSON.
type Checker struct {
	checks []Check
	clock  clock.Clock

	mu   sync.Mutex
	at   time.Time
	last Report
}

// New returns a Checker of checks; a nil clock is the wall clock.
func New(c clock.Clock, checks ...Check) *Checker {
	if c == nil {
		c = clock.Real{}
	}
	return &Checker{checks: checks, clock: c}
}

// Check runs the checks, or returns the answer of the last TTL.
func (c *Checker) Check(ctx context.Context) Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.clock.Now(); !c.at.IsZero() && now.Sub(c.at) < TTL {
		return c.last
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	rep := Report{Status: "ok", Checks: make(map[string]string, len(c.checks))}
	for _, ch := range c.checks {
		err := ch.Run(ctx)
		if err == nil {
			rep.Checks[ch.Name] = "ok"
			continue
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			// The caller went away mid-check: not an answer about the dependency, so
			// not one to keep.
			return Report{Status: "unhealthy", Checks: map[string]string{ch.Name: err.Error()}}
		}
		rep.Status = "unhealthy"
		rep.Checks[ch.Name] = err.Error()
	}
	c.at, c.last = c.clock.Now(), rep
	return rep
}

func (c *Checker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rep := c.Check(r.Context())
	body, _ := json.Marshal(rep) // a struct of strings always marshals
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	if !rep.OK() {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write(append(body, '\n'))
}
