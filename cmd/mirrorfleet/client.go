package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/mirrorpath"
)

// bulkChunk is how many URLs one add request carries; progress is shown per chunk.
const bulkChunk = 500

type client struct {
	in     io.Reader // answers to questions (repos rm)
	inTTY  bool      // in is a terminal: a person can answer
	base   string
	token  string
	signed bool // requests are signed with SigV4 (--aws), not with the token
	http   *http.Client
	out    io.Writer
	errOut io.Writer
	json   bool
	data   string // --data: the fleet's data directory, as the user named it
}

// command is one client command: its words, its own flags and what it does.
type command struct {
	name  string // "repos add", "workers", ...
	args  string // what follows the name in the usage line
	help  string
	flags func(fs *flag.FlagSet) // its own flags, besides the common ones
	run   func(c *client, ctx context.Context, args []string) error
	nargs func(n int) bool // nil: no arguments
}

// Sub-command flags, set by the flag sets of the commands that have them.
type clientFlags struct {
	file  string
	state string
	host  string
	limit int
	all   bool
	yes   bool
	smoke smokeFlags
}

func commands(f *clientFlags) []command {
	one := func(n int) bool { return n == 1 }
	return []command{
		{name: "repos add", args: "URL... | --file F", help: "add repos (bulk adds show progress)",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&f.file, "file", "", "read URLs from this file (one per line, # comments)")
			},
			nargs: func(int) bool { return true },
			run:   func(c *client, ctx context.Context, a []string) error { return c.add(ctx, a, f.file) }},
		{name: "repos ls", args: "[--state S] [--host H] [--limit N]", help: "list repos, by URL",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&f.state, "state", "", "only repos in this state (pending, cloning, ok, failing, gone, overflow, deleting)")
				fs.StringVar(&f.host, "host", "", "only repos on this upstream host (github.com, or host:port)")
				fs.IntVar(&f.limit, "limit", 0, "at most this many repos (0: all)")
			},
			run: func(c *client, ctx context.Context, _ []string) error { return c.list(ctx, f.state, f.host, f.limit) }},
		{name: "repos show", args: "ID|URL", help: "one repo: state, last error, mirror path, clone URL, next poll", nargs: one,
			run: func(c *client, ctx context.Context, a []string) error { return c.show(ctx, a[0]) }},
		{name: "repos rm", args: "ID|URL... | --file F [-y]", help: "stop mirroring repos and delete their mirrors (no undo; asks first)",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&f.file, "file", "", "read ids or URLs from this file (one per line, # comments): undoes a repos add --file")
				fs.BoolVar(&f.yes, "y", false, "delete without asking (needed when stdin is not a terminal)")
				fs.BoolVar(&f.yes, "yes", false, "same as -y")
			},
			nargs: func(int) bool { return true },
			run:   func(c *client, ctx context.Context, a []string) error { return c.removeAll(ctx, a, f.file, f.yes) }},
		{name: "repos sync", args: "ID|URL", help: "fetch a repo now", nargs: one,
			run: func(c *client, ctx context.Context, a []string) error {
				return c.request(ctx, http.MethodPost, a[0], "/sync", "sync requested for %s (%s)\n")
			}},
		{name: "workers", args: "[--all]", help: "the workers and their health (dead ones with --all)",
			flags: func(fs *flag.FlagSet) {
				fs.BoolVar(&f.all, "all", false, "list dead workers too (kept an hour after they stop)")
			},
			run: func(c *client, ctx context.Context, _ []string) error { return c.workers(ctx, f.all) }},
		{name: "ring", help: "the consistent-hash ring",
			run: func(c *client, ctx context.Context, _ []string) error { return c.ring(ctx) }},
		{name: "status", help: "fleet summary",
			run: func(c *client, ctx context.Context, _ []string) error { return c.status(ctx) }},
		{name: "backup", args: "FILE", help: "copy the running fleet's store to FILE (a consistent snapshot)", nargs: one,
			run: func(c *client, ctx context.Context, a []string) error { return c.backup(ctx, a[0]) }},
		{name: "list", help: "the repo list kept in git: commit, bad lines, held purge",
			run: func(c *client, ctx context.Context, _ []string) error { return c.listStatus(ctx) }},
		{name: "list confirm", args: "COMMIT", help: "let the held purge of COMMIT go ahead", nargs: one,
			run: func(c *client, ctx context.Context, a []string) error { return c.listConfirm(ctx, a[0]) }},
		{name: "smoke", args: "--repo URL [--timeout D] [--metrics URL]",
			help: "check a fleet end to end: add --repo, wait until it is ok, clone it through its clone URL, read the serving front's metrics",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&f.smoke.repo, "repo", "", "the repository to add and clone: a small public one (on AWS e.g. https://github.com/octocat/Hello-World)")
				fs.DurationVar(&f.smoke.timeout, "timeout", 10*time.Minute, "give up after this long (a new repo waits for the next coordinator tick, then its clone)")
				fs.StringVar(&f.smoke.metrics, "metrics", "", "the serving front's Prometheus metrics (default: the clone URL's origin + /metrics)")
			},
			run: func(c *client, ctx context.Context, _ []string) error { return c.smoke(ctx, f.smoke) }},
	}
}

const commonFlagsHelp = `Common flags: --api URL, --token T, --data DIR (a fleet's data directory, for its
token), --aws (sign with AWS SigV4: the AWS stack's API), -o table|json. Without them the
CLI reads $MIRRORFLEET_URL, $MIRRORFLEET_TOKEN, $MIRRORFLEET_AWS and the config file
(docs/operations.md: "Configure it").
`

// clientUsage is the usage of the client commands whose name starts with prefix.
func clientUsage(prefix string) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, c := range commands(&clientFlags{}) {
		if c.name == prefix || strings.HasPrefix(c.name, prefix+" ") {
			fmt.Fprintf(tw, "  mirrorfleet %s %s\t%s\n", c.name, c.args, c.help)
		}
	}
	tw.Flush()
	return b.String()
}

// runClient runs a client command: args[0] is "repos", "workers", ... Each command has
// its own flag set (the common flags and its own), and flags may follow its arguments.
func runClient(args []string, stdout, stderr io.Writer) error {
	f := &clientFlags{}
	cmds := commands(f)
	name := args[0]
	rest := args[1:]
	// Two-word commands: "repos add", "list confirm".
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		if i := slices.IndexFunc(cmds, func(c command) bool { return c.name == name+" "+rest[0] }); i >= 0 {
			name, rest = cmds[i].name, rest[1:]
		}
	}
	i := slices.IndexFunc(cmds, func(c command) bool { return c.name == name })
	if i < 0 {
		// "repos" alone, or with an unknown word: its sub-commands.
		if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "--help" || rest[0] == "help") {
			fmt.Fprintf(stderr, "Usage:\n%s\n%s", clientUsage(name), commonFlagsHelp)
			return flag.ErrHelp
		}
		if len(rest) == 0 {
			return usageError{fmt.Sprintf("%s needs a sub-command:\n%s", name, clientUsage(name))}
		}
		return usageError{fmt.Sprintf("unknown %s sub-command %q:\n%s", name, rest[0], clientUsage(name))}
	}
	cmd := cmds[i]
	fs := flag.NewFlagSet("mirrorfleet "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	apiURL := fs.String("api", "", "API base URL (default $MIRRORFLEET_URL, the config file's url, else "+defaultAPI+")")
	token := fs.String("token", "", "API bearer token (default $MIRRORFLEET_TOKEN, the config file's token, else <data>/token)")
	data := fs.String("data", ".mirrorfleet", "a fleet's data directory, to read its generated token from")
	awsSign := fs.Bool("aws", false, "sign requests with AWS SigV4 for execute-api (the AWS stack's API takes IAM auth), with the AWS SDK's default credentials and region, instead of the token (default $MIRRORFLEET_AWS, the config file's aws)")
	output := fs.String("o", "table", "output: table or json")
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: mirrorfleet %s %s\n  %s\n\nFlags:\n", cmd.name, cmd.args, cmd.help)
		fs.PrintDefaults()
	}
	// Flags may follow the arguments: parse arguments and flags in any order.
	var words []string
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return errUsageShown // the flag package has said what is wrong, and the usage
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
	if (cmd.nargs == nil && len(words) > 0) || (cmd.nargs != nil && !cmd.nargs(len(words))) {
		return usageError{fmt.Sprintf("usage: mirrorfleet %s %s", cmd.name, cmd.args)}
	}
	tf := targetFlags{api: *apiURL, token: *token, data: *data}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "aws" {
			tf.aws = awsSign
		}
	})
	tg, err := resolve(tf, os.Getenv)
	if err != nil {
		return err
	}
	c := &client{in: os.Stdin, inTTY: isTerminal(os.Stdin), base: tg.api, token: tg.token, http: &http.Client{Timeout: 60 * time.Second},
		out: stdout, errOut: stderr, json: *output == "json", data: *data}
	ctx := context.Background()
	if tg.aws {
		if err := c.signWithAWS(ctx); err != nil {
			return err
		}
	}
	return cmd.run(c, ctx, words)
}

// refusedError is an error the server answered; in JSON mode its body has been printed.
type refusedError struct {
	msg    string
	status int // the API's HTTP status, when it answered
}

func (e refusedError) Error() string { return e.msg }

// do sends a request and decodes a 2xx answer into out. An error answer is returned as
// an error (and, with -o json, its body printed on stdout too, in the one format).
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("bad API URL %q: %w", c.base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the API at %s (is `mirrorfleet run` running? --api, $MIRRORFLEET_URL or the config file name another): %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode >= 400 {
		var e api.ErrorBody
		if json.Unmarshal(b, &e) != nil || e.Error == nil || e.Error.Message == "" {
			if c.signed {
				return gatewayRefusal(method, path, resp, b)
			}
			return fmt.Errorf("%s %s: %s", method, path, resp.Status)
		}
		if c.json {
			_ = c.printJSON(e)
		}
		msg := fmt.Sprintf("%s (%d %s)", e.Error.Message, resp.StatusCode, e.Error.Code)
		if resp.StatusCode == http.StatusUnauthorized && c.token == "" && !c.signed {
			msg += "; pass --token, set MIRRORFLEET_TOKEN, point --data at the fleet's data directory or set token_file in the config file"
		}
		return refusedError{msg: msg, status: resp.StatusCode}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode response of %s %s: %w", method, path, err)
	}
	return nil
}

// printJSON is the one JSON format of every command: indented, one document.
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

// repoPath is the API path of a repo named by id or URL.
func repoPath(idOrURL string) string { return "/v1/repos/" + url.PathEscape(idOrURL) }

// request sends a delete or sync request for a repo; done is a format for its id and URL.
func (c *client) request(ctx context.Context, method, idOrURL, suffix, done string) error {
	var repo api.Repo
	if err := c.do(ctx, http.MethodGet, repoPath(idOrURL), nil, &repo); err != nil {
		return err
	}
	var out api.Accepted
	if err := c.do(ctx, method, repoPath(repo.ID)+suffix, nil, &out); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(out)
	}
	fmt.Fprintf(c.out, done, repo.ID, repo.URL)
	return nil
}

// backup saves GET /v1/backup to file: written beside it, synced, checked to open as
// a store, then renamed into place, so file is either the whole snapshot or untouched.
func (c *client) backup(ctx context.Context, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/backup", nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	// A large store takes longer than the client's usual timeout; ctx bounds it.
	hc := *c.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e api.ErrorBody
		if json.Unmarshal(body, &e) == nil && e.Error != nil && e.Error.Message != "" {
			return refusedError{msg: fmt.Sprintf("backup: %s (%s)", e.Error.Message, resp.Status)}
		}
		return refusedError{msg: "backup: " + resp.Status}
	}
	tmp := file + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	n, err := io.Copy(f, resp.Body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = checkStoreFile(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, file)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup: %w", err)
	}
	if c.json {
		return c.printJSON(map[string]any{"file": file, "bytes": n})
	}
	abs, _ := filepath.Abs(file)
	fmt.Fprintf(c.out, "store copied to %s (%d bytes)\nTo restore it, stop the fleet, then run:\n  %s restore --data %s %s\n",
		file, n, cliCommand(os.Getwd, os.Executable, exec.LookPath), shellQuote(c.data), shellQuote(cmp.Or(abs, file)))
	return nil
}

// remove deletes a repo once confirmed: by -y, or by a person answering "y" on a
// terminal. Without a terminal and without -y it refuses: a script that meant to
// delete says so, and one that did not loses nothing.
func (c *client) remove(ctx context.Context, idOrURL string, yes bool) error {
	var repo api.Repo
	if err := c.do(ctx, http.MethodGet, repoPath(idOrURL), nil, &repo); err != nil {
		return err
	}
	if !yes {
		if !c.inTTY {
			return usageError{fmt.Sprintf("repos rm deletes %s and its mirror, with no undo: pass -y to confirm (stdin is not a terminal to ask on)", repo.URL)}
		}
		fmt.Fprintf(c.errOut, "Delete %s (%s) and its mirror? There is no undo. [y/N] ", repo.ID, repo.URL)
		answer, _ := bufio.NewReader(c.in).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return refusedError{msg: "not deleted"}
		}
	}
	var out api.Accepted
	if err := c.do(ctx, http.MethodDelete, repoPath(repo.ID), nil, &out); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(out)
	}
	fmt.Fprintf(c.out, "deleting %s (%s): its record and mirror are removed within seconds\n", repo.ID, repo.URL)
	return nil
}

// withFileLines is args followed by file's lines (one id or URL a line, # comments), and
// where each came from: "file:line", or "" for an argument.
func withFileLines(args []string, file string) (items, where []string, err error) {
	items, where = slices.Clone(args), make([]string, len(args))
	if file == "" {
		return items, where, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, fmt.Errorf("--file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			items = append(items, line)
			where = append(where, fmt.Sprintf("%s:%d", file, n))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("--file: %w", err)
	}
	return items, where, nil
}

// upstreamOf is the URL to show for a repo: the one it was added with (and is fetched
// from), or its normalized URL from a server that does not say.
func upstreamOf(r api.Repo) string { return cmp.Or(r.Upstream, r.URL) }

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '+' || r == '=' || r == ',' ||
			('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// plural is "1 URL", "2 URLs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// removeAll deletes the repos named by args and file's lines, once confirmed (-y, or a
// person answering "y" for all of them at once). One repo is shown before it goes; many
// are counted, and each that cannot be deleted (unknown, refused) is reported while the
// others go on.
func (c *client) removeAll(ctx context.Context, args []string, file string, yes bool) error {
	items, where, err := withFileLines(args, file)
	if err != nil {
		return err
	}
	switch len(items) {
	case 0:
		return usageError{"repos rm needs ids or URLs, or --file"}
	case 1:
		return c.remove(ctx, items[0], yes)
	}
	if !yes {
		if !c.inTTY {
			return usageError{fmt.Sprintf("repos rm deletes %d repos and their mirrors, with no undo: pass -y to confirm (stdin is not a terminal to ask on)", len(items))}
		}
		for _, it := range items[:min(len(items), 5)] {
			fmt.Fprintf(c.errOut, "  %s\n", it)
		}
		if len(items) > 5 {
			fmt.Fprintf(c.errOut, "  … and %d more\n", len(items)-5)
		}
		fmt.Fprintf(c.errOut, "Delete these %d repos and their mirrors? There is no undo. [y/N] ", len(items))
		answer, _ := bufio.NewReader(c.in).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return refusedError{msg: "not deleted"}
		}
	}
	type result struct {
		Item   string `json:"item"`
		ID     string `json:"id,omitempty"`
		Status string `json:"status"`
		Error  string `json:"error,omitempty"`
	}
	tty := isTerminal(c.errOut)
	quiet := *c // one JSON document at the end, not one per refusal
	quiet.json = false
	var results []result
	failed := 0
	for i, it := range items {
		var out api.Accepted
		r := result{Item: it, Status: "deleting"}
		if err := quiet.do(ctx, http.MethodDelete, repoPath(it), nil, &out); err != nil {
			var re refusedError
			// Unreachable, or not allowed: the rest would fail alike.
			if !errors.As(err, &re) || re.status == http.StatusUnauthorized || re.status == http.StatusForbidden {
				return fmt.Errorf("after %d of %d: %w", i, len(items), err)
			}
			r.Status, r.Error = "refused", re.msg
			if where[i] != "" {
				r.Error = where[i] + ": " + r.Error
			}
			failed++
		}
		r.ID = out.ID
		results = append(results, r)
		if len(items) > bulkChunk && (i+1)%100 == 0 {
			c.progress(tty, fmt.Sprintf("deleted %d/%d (%d refused)", i+1, len(items), failed))
		}
	}
	if len(items) > bulkChunk && tty {
		fmt.Fprintln(c.errOut)
	}
	if failed > 0 {
		err = refusedError{msg: plural(failed, "repo") + " not deleted"}
	}
	if c.json {
		return errors.Join(c.printJSON(results), err)
	}
	var rows [][]string
	for _, r := range results {
		if len(results) <= 50 || r.Error != "" {
			rows = append(rows, []string{r.Status, r.ID, r.Item, r.Error})
		}
	}
	if err := c.table("STATUS\tID\tREPO\tERROR", rows); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%d deleting (records and mirrors go within seconds), %d not deleted\n", len(items)-failed, failed)
	return err
}

// progress writes a bulk command's progress: over one line on a terminal, a line per
// step into a log or a pipe.
func (c *client) progress(tty bool, line string) {
	if tty {
		fmt.Fprint(c.errOut, "\r"+line)
		return
	}
	fmt.Fprintln(c.errOut, line)
}

func (c *client) add(ctx context.Context, urls []string, file string) error {
	// where says where each URL came from: "file:line" for --file, so a refused line
	// can be found and fixed; "" for an argument.
	urls, where, err := withFileLines(urls, file)
	if err != nil {
		return err
	}
	if len(urls) == 0 {
		return usageError{"repos add needs URLs or --file"}
	}
	// Progress rewrites one line on a terminal; into a log or a pipe it is a line per
	// chunk, without carriage returns.
	tty := isTerminal(c.errOut)
	var all api.BulkAdd
	for start := 0; start < len(urls); start += bulkChunk {
		end := min(start+bulkChunk, len(urls))
		var resp api.BulkAdd
		if err := c.do(ctx, http.MethodPost, "/v1/repos", map[string]any{"urls": urls[start:end]}, &resp); err != nil {
			return fmt.Errorf("after %d of %d URLs: %w", start, len(urls), err)
		}
		all.Results = append(all.Results, resp.Results...)
		all.Created, all.Exists, all.Errors = all.Created+resp.Created, all.Exists+resp.Exists, all.Errors+resp.Errors
		if len(urls) > bulkChunk {
			c.progress(tty, fmt.Sprintf("added %d/%d (%d new, %d existing, %d refused)", end, len(urls), all.Created, all.Exists, all.Errors))
		}
	}
	if len(urls) > bulkChunk && tty {
		fmt.Fprintln(c.errOut)
	}
	if all.Errors > 0 {
		err = refusedError{msg: plural(all.Errors, "URL") + " refused"}
	}
	if c.json {
		return errors.Join(c.printJSON(all), err)
	}
	var rows [][]string
	for i, r := range all.Results {
		msg := ""
		if r.Error != nil {
			msg = r.Error.Message
		}
		if len(all.Results) <= 50 || r.Error != nil {
			row := []string{r.Status, r.ID, r.URL, msg}
			if file != "" {
				row = append([]string{cmp.Or(where[i], "argument")}, row...)
			}
			rows = append(rows, row)
		}
	}
	if len(rows) > 0 {
		header := "STATUS\tID\tURL\tERROR"
		if file != "" {
			header = "LINE\t" + header
		}
		if err := c.table(header, rows); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.out, "%d created, %d already present, %d refused\n", all.Created, all.Exists, all.Errors)
	return err
}

// hostOf is the host (with its port, if any) of a repo URL.
func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Host
}

func (c *client) list(ctx context.Context, state, host string, limit int) error {
	if limit < 0 {
		return usageError{"--limit must be 0 (all) or more"}
	}
	var repos []api.Repo
	cursor := ""
	for {
		q := url.Values{"limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if state != "" {
			q.Set("state", state)
		}
		var page api.RepoList
		if err := c.do(ctx, http.MethodGet, "/v1/repos?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		for _, r := range page.Repos {
			if host == "" || strings.EqualFold(hostOf(r.URL), host) {
				repos = append(repos, r)
			}
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	slices.SortFunc(repos, func(a, b api.Repo) int { return cmp.Or(cmp.Compare(a.URL, b.URL), cmp.Compare(a.ID, b.ID)) })
	total := len(repos)
	if limit > 0 && limit < total {
		repos = repos[:limit]
	}
	if c.json {
		return c.printJSON(api.RepoList{Repos: repos})
	}
	var rows [][]string
	for _, r := range repos {
		rows = append(rows, []string{r.ID, string(r.State), deref(r.Owner), ago(r.LastSuccessAt), errKind(r.LastError), upstreamOf(r), deref(r.CloneURL)})
	}
	if total == 0 {
		fmt.Fprintln(c.out, "no repos")
		return nil
	}
	if err := c.table("ID\tSTATE\tOWNER\tLAST SUCCESS\tLAST ERROR\tURL\tCLONE URL", rows); err != nil {
		return err
	}
	if len(repos) < total {
		fmt.Fprintf(c.out, "%d of %s (--limit)\n", len(repos), plural(total, "repo"))
	} else {
		fmt.Fprintln(c.out, plural(total, "repo"))
	}
	return nil
}

func (c *client) show(ctx context.Context, idOrURL string) error {
	var r api.Repo
	if err := c.do(ctx, http.MethodGet, repoPath(idOrURL), nil, &r); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r)
	}
	mpath := "-"
	if rel, err := mirrorpath.Rel(r.URL); err == nil {
		mpath = "<data>/mirrors/" + rel
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("id", r.ID)
	row("url", upstreamOf(r))
	row("state", string(r.State))
	row("last error", r.LastError)
	row("clone url", deref(r.CloneURL))
	row("mirror path", mpath)
	row("source", string(r.Source))
	row("owner", fmt.Sprintf("%s (epoch %d)", deref(r.Owner), r.OwnerEpoch))
	row("added", when(r.CreatedAt))
	row("last checked", when(r.LastCheckedAt))
	row("last fetch", when(r.LastFetchAt))
	row("last success", when(r.LastSuccessAt))
	row("last change", when(r.LastChangeAt))
	row("last commit", when(r.LastCommitAt))
	row("next poll", nextPoll(r))
	if r.PollStretch != nil && *r.PollStretch > 1 {
		row("polled", fmt.Sprintf("as a fall-back: steps %.3g× the policy's (push webhooks or a change feed cover it)", *r.PollStretch))
	}
	row("failures", fmt.Sprintf("%d clone, %d fetch (consecutive)", r.CloneFailCnt, r.FetchFailCnt))
	row("size", fmt.Sprintf("%d bytes", r.SizeBytes))
	row("priority", fmt.Sprintf("%.4g", r.Priority))
	if r.SyncRequested {
		row("sync", "requested")
	}
	return tw.Flush()
}

// nextPoll is the worker's estimate of the next fetch, or why there is none.
func nextPoll(r api.Repo) string {
	switch {
	case r.NextPollAt != nil:
		at := *r.NextPollAt
		if d := time.Until(at); d > time.Second {
			return "about " + at.Local().Format(time.DateTime) + " (in " + d.Round(time.Second).String() + ", its worker's estimate)"
		}
		return "now (due or in flight)"
	case r.Owner == nil:
		return "not yet: no worker holds it"
	}
	return "unknown here: only its worker knows (not in this process, or waiting for its host)"
}

// when is a time with how long ago it was, or "never".
func when(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Local().Format(time.DateTime) + " (" + ago(t) + ")"
}

func (c *client) workers(ctx context.Context, all bool) error {
	var resp api.WorkerList
	if err := c.do(ctx, http.MethodGet, "/v1/workers", nil, &resp); err != nil {
		return err
	}
	dead := 0
	if !all {
		resp.Workers = slices.DeleteFunc(resp.Workers, func(w api.Worker) bool {
			if w.State == "dead" {
				dead++
				return true
			}
			return false
		})
	}
	if c.json {
		return c.printJSON(resp)
	}
	var rows [][]string
	for _, w := range resp.Workers {
		disk := "-"
		if w.DiskTotal > 0 {
			disk = fmt.Sprintf("%.0f%%", 100*float64(w.DiskUsed)/float64(w.DiskTotal))
		}
		hb := "never"
		if w.HeartbeatAgeSeconds != nil {
			hb = fmt.Sprintf("%.0fs ago", *w.HeartbeatAgeSeconds)
		}
		rows = append(rows, []string{w.ID, fmt.Sprint(w.Slot), string(w.State), hb, fmt.Sprint(w.QueueLen), fmt.Sprint(w.Fetching), disk})
	}
	if len(rows) == 0 {
		fmt.Fprintln(c.out, "no workers")
	} else if err := c.table("ID\tSLOT\tSTATE\tHEARTBEAT\tQUEUE\tFETCHING\tDISK", rows); err != nil {
		return err
	}
	if dead > 0 {
		fmt.Fprintf(c.out, "(%d dead workers not shown; --all lists them)\n", dead)
	}
	return nil
}

func (c *client) ring(ctx context.Context) error {
	var resp api.Ring
	if err := c.do(ctx, http.MethodGet, "/v1/ring", nil, &resp); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(resp)
	}
	fmt.Fprintf(c.out, "ring version %d, %d members, %d virtual nodes\n", resp.Version, len(resp.Members), resp.Tokens)
	if len(resp.Members) == 0 {
		return nil
	}
	var rows [][]string
	for _, m := range resp.Members {
		rows = append(rows, []string{m.ID, fmt.Sprint(m.Slot), fmt.Sprintf("%.2f%%", 100*m.Share)})
	}
	return c.table("MEMBER\tSLOT\tSHARE", rows)
}

func (c *client) status(ctx context.Context) error {
	var resp api.Status
	if err := c.do(ctx, http.MethodGet, "/v1/status", nil, &resp); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(resp)
	}
	if resp.Leader != nil {
		fmt.Fprintf(c.out, "leader %s (term %d), ring version %d\n", resp.Leader.ID, resp.Leader.Term, resp.RingVersion)
	} else {
		fmt.Fprintf(c.out, "no leader yet, ring version %d\n", resp.RingVersion)
	}
	fmt.Fprintf(c.out, "workers: %s\n", counts(resp.WorkersByState))
	if resp.ReposTotal == 0 {
		fmt.Fprintln(c.out, "repos:   none (add one with `mirrorfleet repos add URL`)")
		return nil
	}
	fmt.Fprintf(c.out, "repos:   %d (%s)\n", resp.ReposTotal, counts(resp.ReposByState))
	if len(resp.Stalest) > 0 {
		fmt.Fprintln(c.out, "\nstalest:")
		var rows [][]string
		for _, r := range resp.Stalest {
			rows = append(rows, []string{r.ID, string(r.State), ago(r.LastSuccessAt), errKind(r.LastError), cmp.Or(r.Upstream, r.URL)})
		}
		return c.table("ID\tSTATE\tLAST SUCCESS\tLAST ERROR\tURL", rows)
	}
	return nil
}

// counts is "3 active, 1 dead", in lifecycle order, or "none".
func counts[S ~string](m map[S]int) string {
	var parts []string
	for _, k := range []string{"active", "joining", "suspect", "draining", "dead", "pending", "cloning", "ok", "failing", "gone", "overflow", "deleting"} {
		if m[S(k)] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[S(k)], k))
		}
	}
	if len(parts) == 0 {
		return "none"
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

func (c *client) listStatus(ctx context.Context) error {
	var st api.ListStatus
	if err := c.do(ctx, http.MethodGet, "/v1/list", nil, &st); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(st)
	}
	return c.printList(st)
}

func (c *client) listConfirm(ctx context.Context, commit string) error {
	var st api.ListStatus
	if err := c.do(ctx, http.MethodPost, "/v1/list/confirm", map[string]string{"commit": commit}, &st); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(st)
	}
	if h := st.HeldPurge; h != nil {
		fmt.Fprintf(c.out, "confirmed: the purge of %d list repos from commit %s goes ahead at the coordinator's next tick\n", h.Remove, short(h.Commit))
	} else {
		fmt.Fprintln(c.out, "confirmed")
	}
	return nil
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
			fmt.Fprintf(c.out, "confirm with:  %s list confirm %s\n", cliCommand(os.Getwd, os.Executable, exec.LookPath), h.Commit)
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
