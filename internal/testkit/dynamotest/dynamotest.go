// Package dynamotest gives tests a fresh table on the DynamoDB Local that `make test`
// starts (scripts/with-dynamodb-local.sh), and skips them with a message where it is not
// running.
package dynamotest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
)

// EndpointEnv names the DynamoDB Local endpoint `make test` exports.
const EndpointEnv = "MIRRORFLEET_DYNAMODB_ENDPOINT"

// Static credentials and region: DynamoDB Local keeps one database per access key and
// region, so every process of a test (workers started as subprocesses too) uses these.
const (
	AccessKey = "test"
	Region    = "us-east-1"
)

var seq atomic.Int64

// Endpoint returns the DynamoDB Local endpoint, or skips t saying how to get one. It also
// sets the credentials and region subprocesses of the test must share.
func Endpoint(t testing.TB) string {
	t.Helper()
	ep := os.Getenv(EndpointEnv)
	if ep == "" {
		t.Skip("DynamoDB Local not running: set " + EndpointEnv + " (make test starts it; or bash scripts/dynamodb-local.sh start)")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", AccessKey)
	t.Setenv("AWS_REGION", Region)
	return ep
}

// Client is an SDK client for endpoint. Response checksums are not checked: DynamoDB
// Local's error responses carry CRC32s that do not match, and the SDK would warn on each.
// Answers cut off in transit are retried where that is safe, as the fleet's clients do
// (dynamo.RetryCutResponses). opts adjust the client's options (a retryer, an HTTP client).
func Client(endpoint string, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: AccessKey, SecretAccessKey: AccessKey, Source: "dynamotest"}, nil
		}),
		DisableValidateResponseChecksum: true,
		HTTPClient:                      &http.Client{Timeout: 30 * time.Second},
	}, append([]func(*dynamodb.Options){dynamo.RetryCutResponses}, opts...)...)
}

// Table returns a store on a new table named after prefix, deleted when the test ends.
// cfg's Table is filled in, and its Client if nil; its other fields (OnConsumed, ...)
// are kept.
func Table(t testing.TB, prefix string, cfg dynamo.Config) *dynamo.Store {
	t.Helper()
	ep := Endpoint(t)
	if cfg.Client == nil {
		cfg.Client = Client(ep)
	}
	cfg.Table = fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano()%1e9, seq.Add(1))
	st, err := dynamo.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTable(t.Context()); err != nil {
		t.Fatalf("create table %s: %v", cfg.Table, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := st.DeleteTable(ctx); err != nil {
			t.Errorf("delete table %s: %v", cfg.Table, err)
		}
	})
	return st
}
