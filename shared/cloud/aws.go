package cloud

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
)

// LoadAWSConfig loads the SDK's default configuration: credentials from the environment,
// the ECS task role or the Lambda execution role; the region from AWS_REGION; an endpoint
// override from AWS_ENDPOINT_URL (or the per-service AWS_ENDPOINT_URL_DYNAMODB,
// AWS_ENDPOINT_URL_SCHEDULER), which is how DynamoDB Local and LocalStack are reached.
// A missing region is an error here rather than a confusing one at the first call.
func LoadAWSConfig(ctx context.Context) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("AWS_REGION is not set (Lambda and ECS set it; for a local run set it, e.g. AWS_REGION=us-east-1)")
	}
	return cfg, nil
}

// NewDynamoClient returns a DynamoDB client on cfg; a non-empty endpoint overrides the
// configured one (tests pass DynamoDB Local's). Answers cut off in transit are retried
// where a repeat cannot change the outcome (dynamo.RetryCutResponses).
func NewDynamoClient(cfg aws.Config, endpoint string) *dynamodb.Client {
	custom := endpoint != "" || cfg.BaseEndpoint != nil || os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") != ""
	return dynamodb.NewFromConfig(cfg, dynamo.RetryCutResponses, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		if custom {
			// DynamoDB Local's error responses carry CRC32s that do not match; the SDK
			// would log a harmless warning for each. Real DynamoDB keeps the check.
			o.DisableValidateResponseChecksum = true
		}
	})
}

// NewSchedulerClient returns an EventBridge Scheduler client on cfg.
func NewSchedulerClient(cfg aws.Config) *scheduler.Client {
	return scheduler.NewFromConfig(cfg)
}

// OpenDynamoStore is NewDynamoStore for a process that uses the table: it also checks
// the table's schema version (dynamo.Store.CheckSchema), writing it into a new table,
// migrating an older one and refusing a newer one before anything else is read.
func OpenDynamoStore(ctx context.Context, endpoint, table string) (*dynamo.Store, error) {
	st, err := NewDynamoStore(ctx, endpoint, table)
	if err != nil {
		return nil, err
	}
	if _, err := st.CheckSchema(ctx); err != nil {
		return nil, err
	}
	return st, nil
}

// NewDynamoStore returns the store on table, with a client from the default AWS
// configuration; a non-empty endpoint overrides the configured one. It does not create
// the table (the CDK stack does; tests call CreateTable).
func NewDynamoStore(ctx context.Context, endpoint, table string) (*dynamo.Store, error) {
	cfg, err := LoadAWSConfig(ctx)
	if err != nil {
		return nil, err
	}
	st, err := dynamo.New(ctx, dynamo.Config{Client: NewDynamoClient(cfg, endpoint), Table: table})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvTable, err)
	}
	return st, nil
}
