package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// hookFlags adds the webhook secrets of `mirrorfleet run`: --webhook-secret (default
// $MIRRORFLEET_WEBHOOK_SECRET) and --webhook-secret-for HOST=SECRET, repeatable.
func hookFlags(fs *flag.FlagSet, secret *string, secretFor *map[string]string) {
	fs.StringVar(secret, "webhook-secret", os.Getenv("MIRRORFLEET_WEBHOOK_SECRET"),
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
