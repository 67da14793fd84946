package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/feeds"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
)

// hookFlags adds the webhook secrets of `mirrorfleet run`: --webhook-secret (default
// $MIRRORFLEET_WEBHOOK_SECRET) and --webhook-secret-for HOST=SECRET, repeatable.
func hookFlags(fs *flag.FlagSet, secret *string, secretFor *map[string]string) {
	// The environment's value is taken after parsing (secretFromEnv), not as the flag's
	// default, so -h never prints the secret.
	fs.StringVar(secret, "webhook-secret", "",
		"shared `secret` of the forges' push webhooks at /v1/hooks/{github,gitlab,gitea} (default $MIRRORFLEET_WEBHOOK_SECRET; none: the hooks answer 403)")
	fs.Func("webhook-secret-for", "`HOST=SECRET`: the webhook secret for the repos of one upstream host, instead of --webhook-secret; repeatable",
		func(v string) error {
			host, s, ok := strings.Cut(v, "=")
			host = strings.ToLower(strings.TrimSpace(host))
			if !ok || host == "" || s == "" || strings.ContainsAny(host, "/: ") {
				return fmt.Errorf("want HOST=SECRET (a host name, no scheme or port)")
			}
			if *secretFor == nil {
				*secretFor = map[string]string{}
			}
			if _, dup := (*secretFor)[host]; dup {
				return fmt.Errorf("a second secret for %s", host)
			}
			(*secretFor)[host] = s
			return nil
		})
}

// corsFlag adds --cors-origin ORIGIN (repeat or comma-separate; "*": any): the pages of
// those origins may read /v1/events and /tunasync.json.
func corsFlag(fs *flag.FlagSet, origins *[]string) {
	fs.Func("cors-origin", "an `ORIGIN` (https://status.example.org, or \"*\") whose pages may read /v1/events, /tunasync.json and /mirrorz.json (CORS); repeat or comma-separate; none by default",
		func(v string) error {
			for _, o := range strings.Split(v, ",") {
				if o = strings.TrimSpace(o); o == "" {
					continue
				}
				if err := httpguard.CheckOrigin(o); err != nil {
					return err
				}
				*origins = append(*origins, strings.TrimRight(o, "/"))
			}
			return nil
		})
}

// secretFromEnv fills an unset secret flag (a token, a webhook secret) from the
// environment variable env after parsing: as a flag's default the value would be printed
// by -h.
func secretFromEnv(secret *string, env string) {
	if *secret == "" {
		*secret = os.Getenv(env)
	}
}

// feedFlags adds the forges' change feeds of `mirrorfleet run`: --feed KIND=URL
// (repeatable), --forge-token HOST=TOKEN (repeatable), --forge-token-file and
// --feed-every. finish turns them into sources once the flags are parsed.
type feedFlags struct {
	specs, tokens []string
	tokenFile     string
}

func addFeedFlags(fs *flag.FlagSet, every *time.Duration) *feedFlags {
	ff := &feedFlags{}
	fs.Func("feed", "`KIND=URL`: a forge's change feed to probe, github, gitlab (URL may end in a group's path) or gitea/forgejo, at the forge's web root; repeatable",
		func(v string) error { ff.specs = append(ff.specs, v); return nil })
	fs.Func("forge-token", "`HOST=TOKEN`: the API token of a forge's feed (GitHub needs one); repeatable; never logged, never sent over plain http",
		func(v string) error { ff.tokens = append(ff.tokens, v); return nil })
	fs.StringVar(&ff.tokenFile, "forge-token-file", "", "a `file` of HOST=TOKEN lines, one a line (mode 0600 or stricter)")
	fs.DurationVar(every, "feed-every", feeds.DefaultPeriod, "how often each feed is probed")
	return ff
}

func (ff *feedFlags) finish() ([]feeds.Source, error) {
	lines := slices.Clone(ff.tokens)
	if ff.tokenFile != "" {
		st, err := os.Stat(ff.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--forge-token-file: %w", err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("--forge-token-file %s: other users can read it (mode %04o); chmod 600 it", ff.tokenFile, st.Mode().Perm())
		}
		b, err := os.ReadFile(ff.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--forge-token-file: %w", err)
		}
		lines = append(lines, strings.Split(string(b), "\n")...)
	}
	tokens, err := feeds.ParseTokens(lines)
	if err != nil {
		return nil, err
	}
	var out []feeds.Source
	for _, spec := range ff.specs {
		src, err := feeds.ParseSource(spec, tokens)
		if err != nil {
			return nil, err
		}
		out = append(out, src)
	}
	return out, nil
}
