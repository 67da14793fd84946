package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// bulkChunk is how many URLs one add request carries; progress is shown per chunk.
const bulkChunk = 500

type client struct {
	base   string
	token  string
	http   *http.Client
	out    io.Writer
	errOut io.Writer
	json   bool
}

func runClient(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	apiURL := fs.String("api", envOr("MIRRORFLEET_API", "http://127.0.0.1:8080"), "API base URL")
	token := fs.String("token", os.Getenv("MIRRORFLEET_TOKEN"), "API bearer token (default $MIRRORFLEET_TOKEN, else <data>/token)")
	data := fs.String("data", ".mirrorfleet", "data directory to read a generated token from")
	output := fs.String("o", "table", "output: table or json")
	file := fs.String("file", "", "repos add: read URLs from this file (one per line, # comments)")
	state := fs.String("state", "", "repos ls: only repos in this state")
	// Flags may follow the sub-command words: parse words and flags in any order.
	var words []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		words = append(words, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if *output != "table" && *output != "json" {
		return usageError{fmt.Sprintf("-o must be table or json, not %q", *output)}
	}
	if *token == "" {
		if b, err := os.ReadFile(filepath.Join(*data, "token")); err == nil {
			*token = strings.TrimSpace(string(b))
		}
	}
	c := &client{base: strings.TrimRight(*apiURL, "/"), token: *token, http: &http.Client{Timeout: 60 * time.Second},
		out: stdout, errOut: stderr, json: *output == "json"}
	ctx := context.Background()
	switch args[0] {
	case "workers":
		return c.workers(ctx)
	case "ring":
		return c.ring(ctx)
	case "status":
		return c.status(ctx)
	case "list":
		return c.listCmd(ctx, words)
	}
	if len(words) == 0 {
		return usageError{"repos needs a sub-command: add, ls, show, rm or sync"}
	}
	sub, ids := words[0], words[1:]
	one := func() (string, error) {
		if len(ids) != 1 {
			return "", usageError{fmt.Sprintf("repos %s takes one repo id", sub)}
		}
		return ids[0], nil
	}
	switch sub {
	case "add":
		return c.add(ctx, ids, *file)
	case "ls", "list":
		return c.list(ctx, *state)
	case "show":
		id, err := one()
		if err != nil {
			return err
		}
		return c.show(ctx, id)
	case "rm", "delete":
		id, err := one()
		if err != nil {
			return err
		}
		return c.simple(ctx, http.MethodDelete, "/v1/repos/"+url.PathEscape(id), "delete requested for "+id)
	case "sync":
		id, err := one()
		if err != nil {
			return err
		}
		return c.simple(ctx, http.MethodPost, "/v1/repos/"+url.PathEscape(id)+"/sync", "sync requested for "+id)
	}
	return usageError{fmt.Sprintf("unknown repos sub-command %q", sub)}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// apiError is the API's error body.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (c *client) do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, fmt.Errorf("bad --api %q: %w", c.base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("cannot reach the API at %s (is `mirrorfleet run` running?): %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode >= 400 {
		var e apiError
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			msg := fmt.Sprintf("%s (%d %s)", e.Error.Message, resp.StatusCode, e.Error.Code)
			if resp.StatusCode == http.StatusUnauthorized && c.token == "" {
				msg += "; pass --token, set MIRRORFLEET_TOKEN, or point --data at the fleet's data directory"
			}
			return resp.StatusCode, fmt.Errorf("%s", msg)
		}
		return resp.StatusCode, fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if c.json && out == nil {
		_, err = c.out.Write(append(bytes.TrimRight(b, "\n"), '\n'))
		return resp.StatusCode, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode response: %w", err)
		}
	}
	return resp.StatusCode, nil
}

func (c *client) printJSON(v any) error {
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (c *client) table(header string, rows [][]string) error {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func (c *client) simple(ctx context.Context, method, path, done string) error {
	var out map[string]any
	if _, err := c.do(ctx, method, path, nil, &out); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(out)
	}
	fmt.Fprintln(c.out, done)
	return nil
}

type addResult struct {
	URL    string `json:"url"`
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (c *client) add(ctx context.Context, urls []string, file string) error {
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("--file: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line != "" && !strings.HasPrefix(line, "#") {
				urls = append(urls, line)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return fmt.Errorf("--file: %w", err)
		}
	}
	if len(urls) == 0 {
		return usageError{"repos add needs URLs or --file"}
	}
	var all []addResult
	created, exists, failed := 0, 0, 0
	for start := 0; start < len(urls); start += bulkChunk {
		end := min(start+bulkChunk, len(urls))
		var resp struct {
			Results []addResult `json:"results"`
		}
		if _, err := c.do(ctx, http.MethodPost, "/v1/repos", map[string]any{"urls": urls[start:end]}, &resp); err != nil {
			return fmt.Errorf("after %d of %d URLs: %w", start, len(urls), err)
		}
		for _, r := range resp.Results {
			switch r.Status {
			case "created":
				created++
			case "exists":
				exists++
			default:
				failed++
			}
		}
		all = append(all, resp.Results...)
		if len(urls) > bulkChunk {
			fmt.Fprintf(c.errOut, "\radded %d/%d (%d new, %d existing, %d refused)", end, len(urls), created, exists, failed)
		}
	}
	if len(urls) > bulkChunk {
		fmt.Fprintln(c.errOut)
	}
	if c.json {
		return c.printJSON(map[string]any{"results": all, "created": created, "exists": exists, "errors": failed})
	}
	var rows [][]string
	for _, r := range all {
		msg := ""
		if r.Error != nil {
			msg = r.Error.Message
		}
		if len(all) <= 50 || r.Error != nil {
			rows = append(rows, []string{r.Status, r.ID, r.URL, msg})
		}
	}
	if err := c.table("STATUS\tID\tURL\tERROR", rows); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%d created, %d already present, %d refused\n", created, exists, failed)
	if failed > 0 {
		return fmt.Errorf("%d URLs refused", failed)
	}
	return nil
}

type repoJSON struct {
	ID            string     `json:"id"`
	URL           string     `json:"url"`
	State         string     `json:"state"`
	Owner         string     `json:"owner"`
	LastSuccessAt *time.Time `json:"last_success_at"`
	LastCommitAt  *time.Time `json:"last_commit_at"`
	FetchFailCnt  int        `json:"fetch_fail_cnt"`
	CloneFailCnt  int        `json:"clone_fail_cnt"`
	LastError     string     `json:"last_error"`
	CloneURL      *string    `json:"clone_url"`
}

func (c *client) list(ctx context.Context, state string) error {
	var rows [][]string
	var raw []json.RawMessage
	cursor := ""
	for {
		q := url.Values{"limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if state != "" {
			q.Set("state", state)
		}
		var page struct {
			Repos      []json.RawMessage `json:"repos"`
			NextCursor string            `json:"next_cursor"`
		}
		if _, err := c.do(ctx, http.MethodGet, "/v1/repos?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		for _, m := range page.Repos {
			raw = append(raw, m)
			var r repoJSON
			if err := json.Unmarshal(m, &r); err != nil {
				return err
			}
			clone := "-"
			if r.CloneURL != nil {
				clone = *r.CloneURL
			}
			rows = append(rows, []string{r.ID, r.State, r.Owner, ago(r.LastSuccessAt), errKind(r.LastError), r.URL, clone})
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if c.json {
		return c.printJSON(map[string]any{"repos": raw})
	}
	if err := c.table("ID\tSTATE\tOWNER\tLAST SUCCESS\tLAST ERROR\tURL\tCLONE URL", rows); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%d repos\n", len(rows))
	return nil
}

func (c *client) show(ctx context.Context, id string) error {
	var m map[string]any
	if _, err := c.do(ctx, http.MethodGet, "/v1/repos/"+url.PathEscape(id), nil, &m); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(m)
	}
	keys := []string{"id", "url", "clone_url", "source", "state", "owner", "owner_epoch", "salt", "priority", "created_at",
		"last_fetch_at", "last_success_at", "last_change_at", "last_commit_at", "fetch_fail_cnt", "clone_fail_cnt",
		"size_bytes", "last_error", "sync_requested"}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	for _, k := range keys {
		if v, ok := m[k]; ok && v != nil && v != "" {
			fmt.Fprintf(tw, "%s\t%v\n", k, v)
		}
	}
	return tw.Flush()
}

func (c *client) workers(ctx context.Context) error {
	var resp struct {
		Workers []struct {
			ID        string  `json:"id"`
			Slot      int     `json:"slot"`
			State     string  `json:"state"`
			Age       float64 `json:"heartbeat_age_seconds"`
			DiskUsed  int64   `json:"disk_used"`
			DiskTotal int64   `json:"disk_total"`
			Fetching  int     `json:"fetching"`
			QueueLen  int     `json:"queue_len"`
		} `json:"workers"`
	}
	if c.json {
		_, err := c.do(ctx, http.MethodGet, "/v1/workers", nil, nil)
		return err
	}
	if _, err := c.do(ctx, http.MethodGet, "/v1/workers", nil, &resp); err != nil {
		return err
	}
	var rows [][]string
	for _, w := range resp.Workers {
		disk := "-"
		if w.DiskTotal > 0 {
			disk = fmt.Sprintf("%.0f%%", 100*float64(w.DiskUsed)/float64(w.DiskTotal))
		}
		rows = append(rows, []string{w.ID, fmt.Sprint(w.Slot), w.State, fmt.Sprintf("%.0fs ago", w.Age), fmt.Sprint(w.QueueLen), fmt.Sprint(w.Fetching), disk})
	}
	return c.table("ID\tSLOT\tSTATE\tHEARTBEAT\tQUEUE\tFETCHING\tDISK", rows)
}

func (c *client) ring(ctx context.Context) error {
	var resp struct {
		Version int64 `json:"version"`
		Tokens  int   `json:"tokens"`
		Members []struct {
			ID    string  `json:"id"`
			Slot  int     `json:"slot"`
			Share float64 `json:"share"`
		} `json:"members"`
	}
	if c.json {
		_, err := c.do(ctx, http.MethodGet, "/v1/ring", nil, nil)
		return err
	}
	if _, err := c.do(ctx, http.MethodGet, "/v1/ring", nil, &resp); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "ring version %d, %d members, %d virtual nodes\n", resp.Version, len(resp.Members), resp.Tokens)
	var rows [][]string
	for _, m := range resp.Members {
		rows = append(rows, []string{m.ID, fmt.Sprint(m.Slot), fmt.Sprintf("%.2f%%", 100*m.Share)})
	}
	return c.table("MEMBER\tSLOT\tSHARE", rows)
}

func (c *client) status(ctx context.Context) error {
	var resp struct {
		Leader struct {
			ID   string `json:"id"`
			Term int64  `json:"term"`
		} `json:"leader"`
		RingVersion    int64          `json:"ring_version"`
		WorkersByState map[string]int `json:"workers_by_state"`
		ReposByState   map[string]int `json:"repos_by_state"`
		ReposTotal     int            `json:"repos_total"`
		Stalest        []repoJSON     `json:"stalest"`
	}
	if c.json {
		_, err := c.do(ctx, http.MethodGet, "/v1/status", nil, nil)
		return err
	}
	if _, err := c.do(ctx, http.MethodGet, "/v1/status", nil, &resp); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "leader %s (term %d), ring version %d\n", orDash(resp.Leader.ID), resp.Leader.Term, resp.RingVersion)
	fmt.Fprintf(c.out, "workers: %s\n", counts(resp.WorkersByState))
	fmt.Fprintf(c.out, "repos:   %d (%s)\n", resp.ReposTotal, counts(resp.ReposByState))
	if len(resp.Stalest) > 0 {
		fmt.Fprintln(c.out, "\nstalest:")
		var rows [][]string
		for _, r := range resp.Stalest {
			rows = append(rows, []string{r.ID, r.State, ago(r.LastSuccessAt), errKind(r.LastError), r.URL})
		}
		return c.table("ID\tSTATE\tLAST SUCCESS\tLAST ERROR\tURL", rows)
	}
	return nil
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range []string{"active", "joining", "suspect", "draining", "dead", "pending", "cloning", "ok", "failing", "gone", "overflow", "deleting"} {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
		}
	}
	return strings.Join(parts, ", ")
}

func ago(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "never"
	}
	return time.Since(*t).Round(time.Second).String() + " ago"
}

// errKind is the kind that leads a repo's last error (over_limit, timeout, ...): the
// whole message is in `repos show`.
func errKind(e string) string {
	if e == "" {
		return "-"
	}
	kind, _, _ := strings.Cut(e, ":")
	return kind
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// listCmd runs `mirrorfleet list [status]` and `mirrorfleet list confirm COMMIT`.
func (c *client) listCmd(ctx context.Context, words []string) error {
	if len(words) == 0 || (words[0] == "status" && len(words) == 1) {
		if c.json {
			_, err := c.do(ctx, http.MethodGet, "/v1/list", nil, nil)
			return err
		}
		var st api.ListStatus
		if _, err := c.do(ctx, http.MethodGet, "/v1/list", nil, &st); err != nil {
			return err
		}
		return c.printList(st)
	}
	if words[0] == "confirm" {
		if len(words) != 2 {
			return usageError{"list confirm takes one commit: the held purge's, as `mirrorfleet list` shows it"}
		}
		if c.json {
			_, err := c.do(ctx, http.MethodPost, "/v1/list/confirm", map[string]string{"commit": words[1]}, nil)
			return err
		}
		var st api.ListStatus
		if _, err := c.do(ctx, http.MethodPost, "/v1/list/confirm", map[string]string{"commit": words[1]}, &st); err != nil {
			return err
		}
		if h := st.HeldPurge; h != nil {
			fmt.Fprintf(c.out, "confirmed: the purge of %d list repos from commit %s goes ahead at the coordinator's next tick\n", h.Remove, short(h.Commit))
		} else {
			fmt.Fprintln(c.out, "confirmed")
		}
		return nil
	}
	return usageError{fmt.Sprintf("unknown list sub-command %q; use `mirrorfleet list` or `mirrorfleet list confirm COMMIT`", strings.Join(words, " "))}
}

func (c *client) printList(st api.ListStatus) error {
	if !st.Configured {
		fmt.Fprintln(c.out, st.Message)
		return nil
	}
	branch := "HEAD"
	if st.Branch != nil {
		branch = *st.Branch
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "repository\t%s (%s: %s)\n", deref(st.Repo), branch, strings.Join(st.Paths, ", "))
	if st.Commit != nil {
		change := ""
		if lc := st.LastChange; lc != nil {
			change = fmt.Sprintf(", last change %s +%d -%d", lc.Mode, lc.Added, lc.Removed)
		}
		fmt.Fprintf(tw, "commit\t%s, applied %s%s\n", *st.Commit, ago(st.AppliedAt), change)
	} else {
		fmt.Fprintf(tw, "commit\tnone applied yet\n")
	}
	fmt.Fprintf(tw, "entries\t%d URLs, %d bad lines\n", st.Entries, st.BadTotal)
	if st.PurgeThresholdPercent != nil && st.IntervalSeconds != nil {
		fmt.Fprintf(tw, "settings\tpurge threshold %g%%, fetched every %s\n", *st.PurgeThresholdPercent, time.Duration(*st.IntervalSeconds*float64(time.Second)))
	}
	if len(st.Pending) > 0 {
		fmt.Fprintf(tw, "pending\t%s\n", strings.Join(st.Pending, " "))
	}
	if st.LastError != nil {
		fmt.Fprintf(tw, "last error\t%s\n", *st.LastError)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if h := st.HeldPurge; h != nil {
		state := "PURGE HELD"
		if h.Confirmed {
			state = "PURGE CONFIRMED (applied at the next tick)"
		}
		fmt.Fprintf(c.out, "\n%s: commit %s would delete %d of %d list repos (%.1f%%, threshold %g%%), since %s\n",
			state, h.Commit, h.Remove, h.Of, h.Percent, h.ThresholdPercent, ago(&h.Since))
		for _, u := range h.Sample {
			fmt.Fprintf(c.out, "  e.g. %s\n", u)
		}
		if !h.Confirmed {
			fmt.Fprintf(c.out, "confirm with:  mirrorfleet list confirm %s\n", h.Commit)
		}
	}
	if len(st.BadLines) > 0 {
		fmt.Fprintln(c.out, "\nbad lines (skipped):")
		var rows [][]string
		for _, b := range st.BadLines {
			rows = append(rows, []string{fmt.Sprintf("%s:%d", b.File, b.Line), b.Reason, b.Text})
		}
		if err := c.table("WHERE\tREASON\tLINE", rows); err != nil {
			return err
		}
		if st.BadTotal > len(st.BadLines) {
			fmt.Fprintf(c.out, "and %d more\n", st.BadTotal-len(st.BadLines))
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func short(c string) string { return c[:min(len(c), 12)] }
