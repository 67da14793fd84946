package dynamo

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// cutter passes calls on to DynamoDB and cuts the body of the next responses to the
// operations armed with cut: the call is carried out, its answer ends halfway, as when
// a connection drops mid-response.
type cutter struct {
	base http.RoundTripper
	mu   sync.Mutex
	left map[string]int // operation → responses still to cut
	cuts int
}

func (c *cutter) cut(op string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.left[op] += n
}

func (c *cutter) RoundTrip(req *http.Request) (*http.Response, error) {
	target := req.Header.Get("X-Amz-Target")
	op := target[strings.LastIndex(target, ".")+1:]
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	c.mu.Lock()
	cut := c.left[op] > 0
	if cut {
		c.left[op]--
		c.cuts++
	}
	c.mu.Unlock()
	if !cut {
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[:len(body)/2]), failing{io.ErrUnexpectedEOF}))
	return resp, nil
}

type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

// A response cut off in transit is retried when a repeat cannot change the outcome: a
// read, and a transaction, whose ClientRequestToken makes DynamoDB (Local too) answer a
// repeat without applying it again. A conditional single-item write is not retried: the
// cut is reported, not taken for a conflict or hidden.
func TestRetryCutResponses(t *testing.T) {
	ep := os.Getenv(endpointEnv)
	if ep == "" {
		t.Skip("DynamoDB Local not running: set MIRRORFLEET_DYNAMODB_ENDPOINT (make test starts it)")
	}
	c := &cutter{base: http.DefaultTransport, left: map[string]int{}}
	client := newClient(ep, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Timeout: 30 * time.Second, Transport: c} })
	s := newStore(t, client, Config{})
	ctx := t.Context()

	// The slot claim's transaction is applied and its answer cut: the repeat carries the
	// same token, so the claim succeeds with the slot the first attempt took.
	c.cut("TransactWriteItems", 1)
	w, err := s.ClaimSlot(ctx, store.Worker{ID: "w-a"}, 8)
	if err != nil || w.Slot != 0 {
		t.Fatalf("ClaimSlot after a cut answer: %+v, %v", w, err)
	}
	c.cut("Query", 1)
	c.cut("GetItem", 1)
	ws, err := s.ListWorkers(ctx)
	if err != nil || len(ws) != 1 || ws[0].ID != "w-a" || ws[0].Slot != 0 {
		t.Fatalf("ListWorkers after a cut answer: %+v, %v", ws, err)
	}
	if got, err := s.GetWorker(ctx, "w-a"); err != nil || got.Slot != 0 {
		t.Fatalf("GetWorker after a cut answer: %+v, %v", got, err)
	}
	if b, err := s.ClaimSlot(ctx, store.Worker{ID: "w-b"}, 8); err != nil || b.Slot != 1 {
		t.Fatalf("next claim: %+v, %v; want slot 1 (the repeat must not have taken another)", b, err)
	}
	if c.cuts != 3 {
		t.Fatalf("%d answers cut, want 3 (the transaction, the query and the read)", c.cuts)
	}

	// A conditional UpdateItem whose answer is cut: not repeated, the error says why.
	if _, _, err := s.CreateRepo(ctx, store.Repo{ID: "r1", URL: "https://example.org/r1", State: store.RepoPending}); err != nil {
		t.Fatal(err)
	}
	c.cut("UpdateItem", 1)
	err = s.RequestSync(ctx, "r1")
	if !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RequestSync with a cut answer: %v; want the cut reported", err)
	}
}
