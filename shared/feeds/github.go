package feeds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// GitHubBatch is how many repositories one GraphQL query asks about: 100 top-level
// fields and no connections cost 1 point of the 5,000 a user token has an hour.
const GitHubBatch = 100

// GitHubPointsPerHour is a user token's GraphQL budget when the API has not said yet.
const GitHubPointsPerHour = 5000

// githubReserve is the share of the budget left for other uses of the same token.
const githubReserve = 0.1

// graphqlURL is GitHub's GraphQL endpoint: api.github.com for github.com, /api/graphql
// on a GitHub Enterprise Server.
func (p *Prober) graphqlURL() string {
	if strings.EqualFold(p.src.Web.Host, "github.com") {
		return "https://api.github.com/graphql"
	}
	return p.src.Web.JoinPath("api", "graphql").String()
}

// allowance is how many queries this probe may make: the points left (as GitHub last
// said, else a fresh hour's) spread over the probes until the budget resets, less a
// reserve for the token's other users.
func (p *Prober) allowance() int {
	now := p.clock.Now()
	left, reset := float64(GitHubPointsPerHour), now.Add(time.Hour)
	if p.remaining >= 0 && p.resetAt.After(now) {
		left, reset = float64(p.remaining), p.resetAt
	}
	probes := math.Max(1, math.Ceil(float64(reset.Sub(now))/float64(p.period)))
	return int(left * (1 - githubReserve) / probes)
}

// github asks for pushedAt of the repos, GitHubBatch at a time, starting where the last
// probe stopped, within the allowance; a repo pushed since p.since is a change.
func (p *Prober) github(ctx context.Context, repos []string) ([]Change, error) {
	var names [][2]string // owner, name
	for _, r := range repos {
		if o, n, ok := githubName(r, p.src.Web.Host); ok {
			names = append(names, [2]string{o, n})
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	queries := min(p.allowance(), (len(names)+GitHubBatch-1)/GitHubBatch)
	var out []Change
	for range queries {
		if len(out) >= MaxChanges {
			break // the next probe goes on from the cursor
		}
		if p.cursor >= len(names) {
			p.cursor = 0
		}
		batch := names[p.cursor:min(len(names), p.cursor+GitHubBatch)]
		cs, err := p.githubQuery(ctx, batch)
		// The cursor moves past a batch whatever its answer, so a batch that keeps
		// failing never keeps the repos after it from being asked; a rate limit (the
		// batch was not asked) or a cancelled probe leaves it where it is.
		var rl *RateLimited
		if !errors.As(err, &rl) && ctx.Err() == nil {
			p.cursor += len(batch)
		}
		if err != nil {
			return out, err
		}
		for _, c := range cs {
			if c.At.After(p.since) && len(out) < MaxChanges {
				out = p.fresh(out, c)
			}
		}
	}
	return out, nil
}

// githubName is owner and name of a github repo URL on host ("https://github.com/o/n").
func githubName(raw, host string) (owner, name string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || !strings.EqualFold(u.Host, host) {
		return "", "", false
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return "", "", false
	}
	return parts[0], strings.TrimSuffix(parts[1], ".git"), true
}

// githubQuery asks one batch. The names travel as variables, never spliced into the query.
func (p *Prober) githubQuery(ctx context.Context, batch [][2]string) ([]Change, error) {
	var q strings.Builder
	vars := map[string]string{}
	q.WriteString("query(")
	for k := range batch {
		if k > 0 {
			q.WriteString(",")
		}
		fmt.Fprintf(&q, "$o%d:String!,$n%d:String!", k, k)
	}
	q.WriteString("){rateLimit{cost remaining resetAt}")
	for k, b := range batch {
		fmt.Fprintf(&q, " r%d:repository(owner:$o%d,name:$n%d){url pushedAt}", k, k, k)
		vars[fmt.Sprintf("o%d", k)], vars[fmt.Sprintf("n%d", k)] = b[0], b[1]
	}
	q.WriteString("}")
	body, _ := json.Marshal(map[string]any{"query": q.String(), "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, p.graphqlURL(), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	a, err := p.do(ctx, req)
	if err != nil {
		return nil, err
	}
	var res struct {
		Data   map[string]json.RawMessage `json:"data"`
		Errors []struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Path    []any  `json:"path"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(a.body, &res); err != nil {
		return nil, &BadAnswer{fmt.Sprintf("GitHub GraphQL: %v", err)}
	}
	for _, e := range res.Errors {
		switch {
		case e.Type == "RATE_LIMITED":
			until := p.clock.Now().Add(time.Minute)
			if p.resetAt.After(until) {
				until = p.resetAt
			}
			p.pausedUntil = until
			return nil, &RateLimited{until}
		case len(e.Path) > 0, e.Type == "NOT_FOUND":
			// An error about one repo (gone or renamed: NOT_FOUND; in an organization
			// that enforces SAML SSO the token is not authorized for: FORBIDDEN with
			// saml_failure): its field is null and the rest of the batch stands; the
			// repo's polls find what it is.
		default:
			return nil, &BadAnswer{fmt.Sprintf("GitHub GraphQL error %s: %s", e.Type, snippet([]byte(e.Message)))}
		}
	}
	if res.Data == nil {
		return nil, &BadAnswer{"GitHub GraphQL: no data"}
	}
	if raw, ok := res.Data["rateLimit"]; ok {
		var rl struct {
			Remaining *int      `json:"remaining"`
			ResetAt   time.Time `json:"resetAt"`
		}
		if json.Unmarshal(raw, &rl) == nil && rl.Remaining != nil {
			p.remaining, p.resetAt = *rl.Remaining, rl.ResetAt
		}
	}
	var out []Change
	for k := range batch {
		raw, ok := res.Data[fmt.Sprintf("r%d", k)]
		if !ok || string(raw) == "null" {
			continue
		}
		var r struct {
			URL      string     `json:"url"`
			PushedAt *time.Time `json:"pushedAt"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, &BadAnswer{fmt.Sprintf("GitHub GraphQL r%d: %v", k, err)}
		}
		if r.PushedAt == nil { // an empty repository
			continue
		}
		link := r.URL
		if link == "" {
			link = p.src.Web.JoinPath(batch[k][0], batch[k][1]).String()
		}
		out = append(out, Change{URL: link, At: *r.PushedAt})
	}
	return out, nil
}
