package cloud

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/feeds"
	"github.com/mirrorfleet/mirrorfleet/shared/secrets"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
	"github.com/mirrorfleet/mirrorfleet/shared/worker"
)

// workerFeeds builds the worker's feed runner (ADR 28): the tokens read from the
// Secrets Manager secret cfg.ForgeTokensARN (HOST=TOKEN lines) at start, where a
// secret that cannot be read or parsed stops the worker, and again at most once per
// secrets.DefaultTTL while it runs, so a rotated token is taken up without a restart;
// then the sources of cfg.Feeds. The feeds that stop covering are counted on rec. Nil
// without feeds.
func workerFeeds(ctx context.Context, cfg WorkerConfig, log *slog.Logger, rec feeds.Recorder) (*feeds.Runner, error) {
	if len(cfg.Feeds) == 0 {
		return nil, nil
	}
	tokens := map[string]string{}
	var read func(context.Context) (map[string]string, error)
	if cfg.ForgeTokensARN != "" {
		client := cfg.SecretsManager
		if client == nil {
			awsCfg, err := LoadAWSConfig(ctx)
			if err != nil {
				return nil, err
			}
			client = secretsmanager.NewFromConfig(awsCfg)
		}
		cache := secrets.New(client, cfg.ForgeTokensARN, 0, nil)
		read = func(ctx context.Context) (map[string]string, error) {
			v, err := cache.Get(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", EnvForgeTokensARN, err)
			}
			tokens, err := feeds.ParseTokens(strings.Split(v, "\n"))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", EnvForgeTokensARN, err)
			}
			return tokens, nil
		}
		var err error
		if tokens, err = read(ctx); err != nil {
			return nil, err
		}
	}
	period := cfg.FeedEvery
	if period <= 0 {
		period = feeds.DefaultPeriod
	}
	// The operator's own forges: no URL policy, as locally; the prober follows
	// redirects within a feed's origin only.
	client := &http.Client{Timeout: 30 * time.Second}
	var ps []*feeds.Prober
	for _, spec := range cfg.Feeds {
		src, err := feeds.ParseSource(spec, tokens)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvFeeds, err)
		}
		ps = append(ps, feeds.New(src, client, clock.Real{}, period))
	}
	log.Info("feeds", "feeds", len(ps), "every", period, "tokens", len(tokens))
	r := feeds.NewRunner(ps, clock.Real{}, log)
	r.Metrics, r.Tokens = rec, read
	return r, nil
}

// runWorkerFeeds probes the feeds every period for the worker's own repos until ctx
// ends: a change to a repo it owns is fetched at once; the others are other workers',
// whose probes see them too. Nothing is written to the store for a change.
func runWorkerFeeds(ctx context.Context, w *worker.Worker, r *feeds.Runner, period time.Duration, policy urlpolicy.Policy) {
	repos := func(src feeds.Source) []string { return w.OwnedURLs(src.Web.Host) }
	sink := func(ctx context.Context, cs []feeds.Change) {
		owned := ownedRepos{w.Owned()}
		for _, c := range cs {
			if ctx.Err() != nil {
				return
			}
			if id, ok := api.MatchRepo(ctx, owned, policy, []string{c.URL}); ok {
				w.FetchNow(id, worker.AskFeed)
			}
		}
	}
	r.Run(ctx, period, repos, sink)
}

// ownedRepos answers api.MatchRepo from the worker's own repos, with no store read.
type ownedRepos struct{ ids map[string]int64 }

func (o ownedRepos) GetRepo(_ context.Context, id string) (store.Repo, error) {
	if _, ok := o.ids[id]; ok {
		return store.Repo{ID: id}, nil
	}
	return store.Repo{}, store.ErrNotFound
}
