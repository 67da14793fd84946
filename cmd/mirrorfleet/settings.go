package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// A setting of `mirrorfleet run` comes from the first of: the command line; the
// environment, MIRRORFLEET_<NAME> with the flag's name upper-cased and its dashes as
// underscores (--host-rate is MIRRORFLEET_HOST_RATE, the names the AWS stack sets); the
// config file (--config, else $MIRRORFLEET_CONFIG), TOML whose keys are the flags' names;
// the flag's default.

// envName is the environment variable of a flag.
func envName(flag string) string {
	return "MIRRORFLEET_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// flagGroup is a heading of `run -h` and `config example`, and the flags under it.
type flagGroup struct {
	title string
	names []string
}

// runGroups orders run's flags for people: the few most users set first, then by what
// they are about. Every flag is in exactly one group (TestEveryRunFlagHasAGroup).
func runGroups() []flagGroup {
	return []flagGroup{
		{"Most used", []string{"config", "data", "listen", "workers", "repos-file", "clone-base-url", "allow-private-hosts", "token", "log-level"}},
		{"Fleet", []string{"fetchers", "policy", "min-interval", "poll-budget", "tick", "heartbeat", "grace", "warmup", "maintain-every", "scrub-every", "case-insensitive-host"}},
		{"Repo list kept in git", []string{"list-repo", "list-branch", "list-path", "list-interval", "list-purge-threshold", "list-dir", "list-max-bytes", "list-max-urls"}},
		{"Serving (git clone from the fleet)", []string{"serve-token", "serve-allow", "serve-max-per-client", "serve-queue-per-client", "serve-queue", "serve-queue-wait", "serve-max-per-repo", "serve-max-total", "trusted-proxy", "site-abbr", "site-name", "aws-ip-ranges", "pack-cache-dir", "pack-cache-bytes", "pack-cache-ttl", "pack-cache-max-entries"}},
		{"Hooks and events", []string{"webhook-secret", "webhook-secret-for", "notify-url", "notify-secret", "events-backlog", "event-streams", "event-streams-per-client", "events-token", "cors-origin"}},
		{"Feeds", []string{"feed", "forge-token", "forge-token-file", "feed-every"}},
		{"Limits", []string{"memory-budget", "host-concurrency", "host-rate", "host-pause", "max-ref-bytes", "max-refs", "max-pack-bytes", "max-pack-bytes-for", "max-pack-objects", "max-object-bytes", "min-rate", "rate-window", "allow-host", "max-conns", "http-header-timeout", "http-body-timeout", "http-response-timeout", "http-idle-timeout", "http-max-header-bytes"}},
	}
}

// secretFlags hold credentials: a config file that sets one must be readable by its
// owner only.
var secretFlags = map[string]bool{
	"token": true, "serve-token": true, "webhook-secret": true, "webhook-secret-for": true,
	"notify-secret": true, "forge-token": true, "events-token": true,
}

// clientKeys are the config file's keys for the CLI's client commands (config.go); run
// takes token from the same file and leaves the others alone.
var clientKeys = map[string]bool{"url": true, "token_file": true, "aws": true}

// repeatable flags take a TOML array (each element is one use of the flag); the
// HOST=VALUE ones also take a table.
func repeatable(fs *flag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	return strings.Contains(f.Usage, "repeat")
}

// applySettings fills the flags the command line left unset from the environment and
// the config file at path ("" for none).
func applySettings(fs *flag.FlagSet, path string, getenv func(string) string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	file, err := readSettings(fs, path)
	if err != nil {
		return err
	}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || f.Name == "config" {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("$%s: %w", envName(f.Name), err))
			}
			return
		}
		v, ok := file[f.Name]
		if !ok {
			return
		}
		vals, err := tomlValues(v, repeatable(fs, f.Name))
		for _, s := range vals {
			if err == nil {
				err = fs.Set(f.Name, s)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", path, f.Name, err))
		}
	})
	return errors.Join(errs...)
}

// readSettings decodes the config file; a key that is no flag of run's (nor one of the
// client's) is an error, and so is a secret in a file others can read.
func readSettings(fs *flag.FlagSet, path string) (map[string]any, error) {
	if path == "" {
		return nil, nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	m := map[string]any{}
	if _, err := toml.DecodeFile(path, &m); err != nil {
		return nil, fmt.Errorf("config file %s is not valid TOML: %w", path, err)
	}
	var unknown, secrets []string
	for k := range m {
		switch {
		case secretFlags[k]:
			secrets = append(secrets, k)
		case fs.Lookup(k) != nil, clientKeys[k]:
		default:
			hint := ""
			if alt := strings.ReplaceAll(k, "_", "-"); fs.Lookup(alt) != nil {
				hint = fmt.Sprintf(" (did you mean %s?)", alt)
			}
			unknown = append(unknown, fmt.Sprintf("%q%s", k, hint))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("config file %s: unknown key %s: the keys are the flags' names ('mirrorfleet config example' lists them)", path, strings.Join(unknown, ", "))
	}
	if perm := st.Mode().Perm(); len(secrets) > 0 && perm&0o077 != 0 {
		sort.Strings(secrets)
		return nil, fmt.Errorf("config file %s holds a secret (%s) and other users can read it (mode %04o): chmod 600 it", path, strings.Join(secrets, ", "), perm)
	}
	return m, nil
}

// tomlValues turns a TOML value into the strings a flag's Set takes.
func tomlValues(v any, many bool) ([]string, error) {
	switch v := v.(type) {
	case string:
		return []string{v}, nil
	case bool:
		return []string{strconv.FormatBool(v)}, nil
	case int64:
		return []string{strconv.FormatInt(v, 10)}, nil
	case float64:
		return []string{strconv.FormatFloat(v, 'g', -1, 64)}, nil
	case []any:
		if !many {
			return nil, errors.New("takes one value, not an array")
		}
		var out []string
		for _, e := range v {
			s, err := tomlValues(e, false)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	case map[string]any:
		if !many {
			return nil, errors.New("takes one value, not a table")
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []string
		for _, k := range keys {
			s, err := tomlValues(v[k], false)
			if err != nil {
				return nil, err
			}
			out = append(out, k+"="+s[0])
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %T is not a value this setting takes (use a string, a number or true/false)", v)
}

// printGrouped is run's -h: the flags under their groups' headings, the most used first.
func printGrouped(w io.Writer, fs *flag.FlagSet, intro string, groups []flagGroup, outro string) {
	fmt.Fprint(w, intro)
	seen := map[string]bool{}
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, name := range g.names {
			if f := fs.Lookup(name); f != nil {
				seen[name] = true
				printFlag(w, f)
			}
		}
	}
	var rest []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !seen[f.Name] {
			rest = append(rest, f)
		}
	})
	if len(rest) > 0 {
		fmt.Fprintf(w, "\nOther:\n")
		for _, f := range rest {
			printFlag(w, f)
		}
	}
	fmt.Fprint(w, outro)
}

// printFlag prints one flag as Go's flag package does, with two dashes.
func printFlag(w io.Writer, f *flag.Flag) {
	name, usage := flag.UnquoteUsage(f)
	line := "  --" + f.Name
	if name != "" {
		line += " " + name
	}
	line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
	switch d := f.DefValue; {
	case d == "" || d == "0" || d == "0s" || d == "false" || strings.Contains(usage, "(default"):
	case isString(f):
		line += fmt.Sprintf(" (default %q)", d)
	default:
		line += fmt.Sprintf(" (default %v)", d)
	}
	fmt.Fprintln(w, line)
}

// isString says whether a flag's value is a string (whose default -h quotes).
func isString(f *flag.Flag) bool {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	_, ok = g.Get().(string)
	return ok
}

// exampleConfig is `mirrorfleet config example`: every key of run's, commented out at
// its default, under the same headings as run -h.
func exampleConfig(w io.Writer, fs *flag.FlagSet, groups []flagGroup) {
	fmt.Fprint(w, `# mirrorfleet run --config FILE (or $MIRRORFLEET_CONFIG=FILE)
#
# TOML; each key is one of run's flags, without the dashes in front. Precedence: the
# command line, then the environment (MIRRORFLEET_<KEY>, upper case, dashes as
# underscores), then this file, then the defaults shown here. A file that sets a secret
# (token, serve-token, webhook-secret, webhook-secret-for, notify-secret, forge-token)
# must be readable by its owner only (chmod 600). The CLI's commands read url, token and
# token_file from the same file.
`)
	seen := map[string]bool{}
	emit := func(f *flag.Flag) {
		_, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "\n# %s\n", strings.ReplaceAll(usage, "\n", "\n# "))
		fmt.Fprintf(w, "# %s = %s\n", f.Name, tomlDefault(fs, f))
	}
	for _, g := range groups {
		fmt.Fprintf(w, "\n## %s\n", g.title)
		for _, name := range g.names {
			if f := fs.Lookup(name); f != nil && name != "config" {
				seen[name] = true
				emit(f)
			}
		}
	}
	var rest []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !seen[f.Name] && f.Name != "config" {
			rest = append(rest, f)
		}
	})
	if len(rest) > 0 {
		fmt.Fprintf(w, "\n## Other\n")
		for _, f := range rest {
			emit(f)
		}
	}
	fmt.Fprint(w, "\n## The CLI's commands (repos, status, ...)\n\n# the fleet's API\n# url = \"http://127.0.0.1:8080\"\n\n# a file holding the API token (relative to this file)\n# token_file = \"token\"\n")
}

// tomlDefault writes a flag's default as a TOML value of the type the file takes.
func tomlDefault(fs *flag.FlagSet, f *flag.Flag) string {
	if g, ok := f.Value.(flag.Getter); ok {
		switch v := g.Get().(type) {
		case bool:
			return strconv.FormatBool(v)
		case int, int64, uint, uint64:
			return f.DefValue
		case float64:
			s := strconv.FormatFloat(v, 'g', -1, 64)
			if !strings.ContainsAny(s, ".e") {
				s += ".0"
			}
			return s
		}
	}
	d := f.DefValue
	if d == "" {
		d = usageDefault(f.Usage)
	}
	if repeatable(fs, f.Name) {
		if d == "" {
			return "[]"
		}
		return "[" + strconv.Quote(d) + "]"
	}
	return strconv.Quote(d)
}

// usageDefault is the default a flag of its own type states in its usage text:
// "(default 1M)", "(default \"repos.txt\")"; where that is prose, the usage's example
// value ("e.g. 384M"); else "".
func usageDefault(usage string) string {
	if _, after, ok := strings.Cut(usage, "(default "); ok {
		v, _, _ := strings.Cut(after, ")")
		if u, err := strconv.Unquote(v); err == nil {
			return u
		}
		// Not "(default $VARIABLE)" nor "(default <data>/list)": those are no values.
		if !strings.ContainsAny(v, " ,;$<") {
			return v
		}
	}
	if _, after, ok := strings.Cut(usage, "e.g. "); ok {
		v, _, _ := strings.Cut(after, ")")
		// An example value, not prose: "e.g. 384M", never "e.g. the load balancer's".
		if f := strings.Fields(v); len(f) > 0 && strings.ContainsAny(f[0], "0123456789") {
			return strings.TrimRight(f[0], ",;")
		}
	}
	return ""
}
