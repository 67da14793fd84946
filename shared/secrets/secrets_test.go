package secrets_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/secretsfake"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/secrets"
)

func client(f *secretsfake.Fake) *secretsmanager.Client {
	return secretsmanager.New(secretsmanager.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(f.URL()),
		Credentials:      credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		RetryMaxAttempts: 1,
	})
}

// The real SDK client reads a secret from the fake by ARN and by name; an unknown one is
// the SDK's typed ResourceNotFoundException.
func TestFakeSpeaksTheSDKsProtocol(t *testing.T) {
	f := secretsfake.New()
	defer f.Close()
	arn := f.Put("mirrorfleet/webhook", "s3cret")
	c := client(f)
	for _, id := range []string{arn, "mirrorfleet/webhook"} {
		out, err := c.GetSecretValue(t.Context(), &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
		if err != nil || aws.ToString(out.SecretString) != "s3cret" || aws.ToString(out.ARN) != arn || out.CreatedDate == nil {
			t.Fatalf("GetSecretValue(%s) = %+v, %v", id, out, err)
		}
	}
	_, err := c.GetSecretValue(t.Context(), &secretsmanager.GetSecretValueInput{SecretId: aws.String("other")})
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Fatalf("unknown secret: %v, want a ResourceNotFoundException", err)
	}
}

// The cache reads once per TTL, takes up a new value after it, keeps the old value
// through a failed read, and without any value returns the error.
func TestCache(t *testing.T) {
	f := secretsfake.New()
	defer f.Close()
	f.Put("hook", "v1")
	clk := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := secrets.New(client(f), "hook", time.Minute, clk)
	ctx := context.Background()
	get := func(want string) {
		t.Helper()
		if v, err := c.Get(ctx); err != nil || v != want {
			t.Fatalf("Get = %q, %v; want %q", v, err, want)
		}
	}
	get("v1")
	f.Put("hook", "v2")
	get("v1")
	if f.Calls() != 1 {
		t.Fatalf("%d reads within the TTL, want 1", f.Calls())
	}
	clk.Advance(time.Minute)
	get("v2")
	clk.Advance(time.Minute)
	f.FailNext(1)
	get("v2") // the read failed: the old value stays
	get("v2") // and the next call reads again
	if f.Calls() != 4 {
		t.Fatalf("%d reads, want 4 (a failed read is retried at the next call)", f.Calls())
	}

	missing := secrets.New(client(f), "absent", time.Minute, clk)
	if _, err := missing.Get(ctx); err == nil {
		t.Fatal("a secret that does not exist gave a value")
	}
}
