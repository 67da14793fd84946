// Command api is the API Lambda (shared/api/openapi.yaml): API Gateway HTTP API (payload format
// 2.0, IAM authorization on the routes but the forges' webhooks) in front of the same HTTP
// handler the local fleet serves. Build it for provided.al2023 on arm64 as a binary named
// bootstrap, with -tags lambda.norpc. Its environment is documented in functions/README.md.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/secrets"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
)

func main() {
	cfg, err := cloud.APIConfigFromEnv()
	log := cloud.NewLogger(cfg.LogLevel)
	if err != nil {
		log.Error(err.Error())
		os.Exit(1)
	}
	slog.SetDefault(log)
	ctx := context.Background()
	awsCfg, err := cloud.LoadAWSConfig(ctx)
	if err != nil {
		log.Error("api init", "err", err)
		os.Exit(1)
	}
	st, err := dynamo.New(ctx, dynamo.Config{Client: cloud.NewDynamoClient(awsCfg, ""), Table: cfg.Table, Log: log})
	if err != nil {
		log.Error("api init", "err", err)
		os.Exit(1)
	}
	if _, err := st.CheckSchema(ctx); err != nil {
		log.Error("api init", "err", err)
		os.Exit(1)
	}
	var hookSecrets HookSecrets
	if cfg.WebhookSecretARN != "" {
		cache := secrets.New(secretsmanager.NewFromConfig(awsCfg), cfg.WebhookSecretARN, cfg.WebhookSecretTTL, clock.Real{})
		hookSecrets = func(ctx context.Context) (api.HookSecrets, error) {
			v, err := cache.Get(ctx)
			if err != nil {
				return api.HookSecrets{}, err
			}
			return cloud.ParseHookSecrets(v)
		}
		// Read at cold start, so the first delivery does not wait for it. A failure is not
		// fatal: the rest of the API works, and the hooks answer 503 until it is readable.
		if _, err := hookSecrets(ctx); err != nil {
			log.Error("api init: the webhook secret", "secret", cfg.WebhookSecretARN, "err", err)
		}
	}
	lambda.Start(NewHandler(cfg, st, clock.Real{}, log, hookSecrets))
}
