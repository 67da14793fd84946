// Package secrets reads a secret from AWS Secrets Manager and keeps it for a while: a
// function is given the secret's ARN (never its value) in its environment and reads the
// value at cold start, then again at most once per TTL, so a rotated value is taken up
// without a redeploy and an invocation costs no call.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
)

// GetSecretValueAPI is the part of the Secrets Manager client a Cache uses.
type GetSecretValueAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// DefaultTTL is how long a value read is used before it is read again: a rotated
// secret is in use everywhere within this.
const DefaultTTL = 5 * time.Minute

// readTimeout bounds one read of the secret.
const readTimeout = 5 * time.Second

// Cache is one secret's value, read on first use and again once per TTL.
type Cache struct {
	client GetSecretValueAPI
	id     string
	ttl    time.Duration
	clock  clock.Clock

	mu    sync.Mutex
	value string
	at    time.Time // when value was read; zero: never
}

// New returns a Cache of the secret id (its ARN or name); ttl <= 0 is DefaultTTL, a nil
// clock the wall clock.
func New(client GetSecretValueAPI, id string, ttl time.Duration, clk clock.Clock) *Cache {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &Cache{client: client, id: id, ttl: ttl, clock: clk}
}

// ErrNoString: the secret holds binary data, not a string.
var ErrNoString = errors.New("the secret has no string value")

// Get returns the secret's current string. A value younger than the TTL is returned
// as is; an older one is read again, and if that read fails the old value is kept (a
// Secrets Manager outage does not take the secret away) and read again at the next
// call. Without any value read yet, the read's error is returned.
func (c *Cache) Get(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if !c.at.IsZero() && now.Sub(c.at) < c.ttl {
		return c.value, nil
	}
	v, err := c.read(ctx)
	if err != nil {
		if !c.at.IsZero() {
			return c.value, nil
		}
		return "", err
	}
	c.value, c.at = v, now
	return v, nil
}

func (c *Cache) read(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	out, err := c.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(c.id)})
	if err != nil {
		return "", fmt.Errorf("secrets: read %s: %w", c.id, err)
	}
	if out.SecretString == nil {
		return "", fmt.Errorf("secrets: read %s: %w", c.id, ErrNoString)
	}
	return *out.SecretString, nil
}
