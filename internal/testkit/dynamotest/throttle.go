package dynamotest

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Throttler is an HTTP transport in front of DynamoDB Local that answers a share of the
// calls as DynamoDB does when it throttles — HTTP 400 with
// ProvisionedThroughputExceededException or ThrottlingException — without passing them
// on (a throttled request changes nothing). The SDK sees real throttling responses:
// its deserializers, its retryer (with its retry quota) and the store's error handling
// all run as against DynamoDB.
type Throttler struct {
	Base http.RoundTripper

	mu        sync.Mutex
	rate      float64
	rng       *rand.Rand
	calls     int
	throttled int
}

// NewThrottler throttles nothing until SetRate.
func NewThrottler(seed uint64) *Throttler {
	return &Throttler{Base: http.DefaultTransport, rng: rand.New(rand.NewPCG(seed, seed+1))}
}

// SetRate throttles that share of the calls from now on (0 to stop).
func (t *Throttler) SetRate(r float64) {
	t.mu.Lock()
	t.rate = r
	t.mu.Unlock()
}

// Counts returns the calls seen and the calls throttled.
func (t *Throttler) Counts() (calls, throttled int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls, t.throttled
}

// RoundTrip answers a throttling error for a share of the calls, passes the others on.
func (t *Throttler) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	t.calls++
	throttle := t.rng.Float64() < t.rate
	kind := "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"
	if t.rng.IntN(2) == 0 {
		kind = "com.amazon.coral.availability#ThrottlingException"
	}
	if throttle {
		t.throttled++
	}
	t.mu.Unlock()
	if !throttle {
		return t.Base.RoundTrip(req)
	}
	if req.Body != nil {
		req.Body.Close()
	}
	body := fmt.Sprintf(`{"__type":%q,"message":"Rate of requests exceeds the allowed throughput."}`, kind)
	return &http.Response{
		Status: "400 Bad Request", StatusCode: http.StatusBadRequest, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"},
			"X-Amzn-Requestid": {fmt.Sprintf("throttled-%d", time.Now().UnixNano())}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}, nil
}

// Options makes a client go through t, with the SDK's standard retryer (3 attempts,
// its retry quota) but millisecond backoffs, so a simulated fleet does not sleep
// through real seconds.
func (t *Throttler) Options(o *dynamodb.Options) {
	o.HTTPClient = &http.Client{Timeout: 30 * time.Second, Transport: t}
	o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxBackoff = 5 * time.Millisecond
	})
}
