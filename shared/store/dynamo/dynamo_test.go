package dynamo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	minidyn "github.com/truora/minidyn/server"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
)

// endpointEnv names the DynamoDB Local endpoint `make unit` starts.
const endpointEnv = "MIRRORFLEET_DYNAMODB_ENDPOINT"

// newClient points the SDK at a local endpoint with static credentials. Response checksum
// validation is off: DynamoDB Local's error responses carry CRC32s that do not match, and
// the SDK would log a harmless warning for each. Cut answers are retried as the fleet's
// clients do (RetryCutResponses); opts adjust the rest.
func newClient(endpoint string, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test", Source: "test"}, nil
		}),
		DisableValidateResponseChecksum: true,
		HTTPClient:                      &http.Client{Timeout: 30 * time.Second},
	}, append([]func(*dynamodb.Options){RetryCutResponses}, opts...)...)
}

var tableSeq atomic.Int64

var nonTableChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// newStore creates a fresh table named after the test and deletes it at cleanup.
func newStore(t *testing.T, client *dynamodb.Client, cfg Config) *Store {
	t.Helper()
	name := nonTableChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 180 {
		name = name[len(name)-180:]
	}
	cfg.Client = client
	cfg.Table = fmt.Sprintf("mf_%d_%d_%s", time.Now().UnixNano()%1e9, tableSeq.Add(1), name)
	s, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("dynamo.New: %v", err)
	}
	if err := s.CreateTable(t.Context()); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.DeleteTable(ctx); err != nil {
			t.Errorf("DeleteTable: %v", err)
		}
	})
	return s
}

// ---- tiers ----

type tier struct {
	name   string
	client *dynamodb.Client // through the interposer
	direct *dynamodb.Client // around it, for a test's own writes from within a hook
	hooks  *interposer
}

// minidynTier serves minidyn's DynamoDB API in process.
func minidynTier(t *testing.T) tier {
	srv := httptest.NewServer(newMinidynShim(minidyn.NewServer()))
	t.Cleanup(srv.Close)
	return newTier(t, "minidyn", srv.URL)
}

// localTier uses the DynamoDB Local that `make unit` starts.
func localTier(t *testing.T) tier {
	ep := os.Getenv(endpointEnv)
	if ep == "" {
		t.Skip("DynamoDB Local not running: set MIRRORFLEET_DYNAMODB_ENDPOINT (make test starts it)")
	}
	return newTier(t, "dynamodb-local", ep)
}

func newTier(t *testing.T, name, endpoint string) tier {
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatalf("endpoint %q: %v", endpoint, err)
	}
	ip := &interposer{next: httputil.NewSingleHostReverseProxy(target)}
	srv := httptest.NewServer(ip)
	t.Cleanup(srv.Close)
	return tier{name: name, client: newClient(srv.URL), direct: newClient(endpoint), hooks: ip}
}

// interposer forwards DynamoDB API calls, and lets a test run code before, or answer
// instead of, the next call of an operation: to move the election between Apply's read
// and its transaction, or to make DynamoDB report transaction conflicts, which neither
// DynamoDB Local nor minidyn produce (they serialise transactions).
type interposer struct {
	next  http.Handler
	mu    sync.Mutex
	hooks []hook
}

type hook struct {
	op    string
	times int                                     // < 0: every call
	fn    func() (code int, body string, ok bool) // ok: answer with code and body
}

// on arms fn for the next times calls of op (times < 0: all of them).
func (ip *interposer) on(op string, times int, fn func() (int, string, bool)) {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	ip.hooks = append(ip.hooks, hook{op, times, fn})
}

func (ip *interposer) clear() {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	ip.hooks = nil
}

func (ip *interposer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndex(target, ".")+1:]
	var fn func() (int, string, bool)
	ip.mu.Lock()
	for i := range ip.hooks {
		if h := &ip.hooks[i]; h.op == op && h.times != 0 {
			fn = h.fn
			if h.times > 0 {
				h.times--
			}
			break
		}
	}
	ip.mu.Unlock()
	if fn != nil {
		if code, body, ok := fn(); ok {
			writeRaw(w, code, []byte(body))
			return
		}
	}
	ip.next.ServeHTTP(w, r)
}

// minidynIndexBug is why some subtests cannot run on minidyn v0.7.0: its global
// secondary indexes go wrong when a write changes or removes an item's index key (Put
// updates the index's reference but not its sorted key list; Update and sparse removals
// likewise), so queries miss moved items. DynamoDB Local runs these subtests.
const minidynIndexBug = "minidyn v0.7.0: GSI entries go stale when an item's index key changes or is removed (covered by TestConformanceDynamoDBLocal)"

// minidynSkips are the conformance subtests that move repos between index partitions or
// along an index's sort key and then check the index.
var minidynSkips = map[string]string{
	"AssignRepo":       minidynIndexBug,
	"DeleteRepo":       minidynIndexBug,
	"ListStalest":      minidynIndexBug,
	"CountRepos":       minidynIndexBug,
	"IndexesStayExact": minidynIndexBug,
	// Pending repos sit in their own needs_decision partition: being assigned, then
	// needing an action, moves them between partitions; a new salt moves a repo along
	// by_owner_pos.
	"RequestDeleteAndSync":     minidynIndexBug,
	"HandBack":                 minidynIndexBug,
	"ListReposByOwnerRange":    minidynIndexBug,
	"ListReposNeedingDecision": minidynIndexBug,
	"StaleTermWritesNothing":   minidynIndexBug,
	// REMOVE in an UpdateItem leaves the attribute in place (its Environment.Apply only
	// writes what is left), and the move at the end changes the owner index.
	"ReportFetchKeepingState": "minidyn v0.7.0: UpdateItem's REMOVE is a no-op (covered by TestConformanceDynamoDBLocal)",
	// A DELETE that empties a string set leaves an empty set in the item (DynamoDB drops
	// it), which reads back as another set's ids.
	"Signals": "minidyn v0.7.0: a DELETE that empties a string set reads back wrong (covered by TestConformanceDynamoDBLocal)",
}

func TestConformanceMinidyn(t *testing.T) {
	t.Parallel()
	tr := minidynTier(t)
	storetest.Run(t, func(t *testing.T) storetest.Store {
		if why, ok := minidynSkips[path.Base(t.Name())]; ok {
			t.Skip(why)
		}
		return newStore(t, tr.client, Config{})
	})
}

func TestConformanceDynamoDBLocal(t *testing.T) {
	t.Parallel()
	tr := localTier(t)
	storetest.Run(t, func(t *testing.T) storetest.Store { return newStore(t, tr.client, Config{}) })
}

// bothTiers runs fn against minidyn and, when it is running, DynamoDB Local.
func bothTiers(t *testing.T, fn func(t *testing.T, tr tier)) {
	t.Run("minidyn", func(t *testing.T) { fn(t, minidynTier(t)) })
	t.Run("dynamodb-local", func(t *testing.T) { fn(t, localTier(t)) })
}

// ---- the minidyn shim ----

// minidynShim adapts minidyn v0.7.0's HTTP server to what this backend uses and it lacks:
//   - BatchGetItem is answered with one GetItem per key (the backend's batch reads are
//     consistent reads of independent items, so this is the same answer);
//   - UpdateTimeToLive is acknowledged and DescribeTimeToLive says disabled (minidyn has
//     no TTL; nothing here relies on expiry);
//   - DescribeTable gets TableStatus ACTIVE (minidyn's tables are ready at once but it
//     leaves the status out).
//
// It also serialises requests: minidyn's CreateTable and DeleteTable touch its table map
// without its lock.
type minidynShim struct {
	mu    sync.Mutex
	inner http.Handler
}

func newMinidynShim(inner http.Handler) *minidynShim { return &minidynShim{inner: inner} }

func (h *minidynShim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndex(target, ".")+1:]
	h.mu.Lock()
	defer h.mu.Unlock()
	switch op {
	case "BatchGetItem":
		h.batchGet(w, body)
	case "UpdateTimeToLive":
		var in struct{ TimeToLiveSpecification json.RawMessage }
		_ = json.Unmarshal(body, &in)
		writeJSON(w, http.StatusOK, map[string]any{"TimeToLiveSpecification": in.TimeToLiveSpecification})
	case "DescribeTimeToLive":
		writeJSON(w, http.StatusOK, map[string]any{"TimeToLiveDescription": map[string]any{"TimeToLiveStatus": "DISABLED"}})
	case "DescribeTable":
		code, out := h.call("DescribeTable", body)
		var m map[string]map[string]any
		if code != http.StatusOK || json.Unmarshal(out, &m) != nil || m["Table"] == nil {
			writeRaw(w, code, out)
			return
		}
		m["Table"]["TableStatus"] = "ACTIVE"
		writeJSON(w, code, m)
	default:
		code, out := h.call(op, body)
		writeRaw(w, code, out)
	}
}

func (h *minidynShim) call(op string, body []byte) (int, []byte) {
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	rec := httptest.NewRecorder()
	h.inner.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func (h *minidynShim) batchGet(w http.ResponseWriter, body []byte) {
	var in struct {
		RequestItems map[string]struct{ Keys []json.RawMessage }
	}
	if err := json.Unmarshal(body, &in); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"__type": "ValidationException", "message": err.Error()})
		return
	}
	responses := map[string][]json.RawMessage{}
	for table, ka := range in.RequestItems {
		responses[table] = []json.RawMessage{}
		for _, k := range ka.Keys {
			req, _ := json.Marshal(map[string]any{"TableName": table, "Key": k, "ConsistentRead": true})
			code, out := h.call("GetItem", req)
			if code != http.StatusOK {
				writeRaw(w, code, out)
				return
			}
			var got struct{ Item json.RawMessage }
			if err := json.Unmarshal(out, &got); err != nil {
				writeJSON(w, http.StatusInternalServerError, map[string]string{"__type": "InternalServerError", "message": err.Error()})
				return
			}
			if len(got.Item) > 0 && string(got.Item) != "null" && string(got.Item) != "{}" {
				responses[table] = append(responses[table], got.Item)
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"Responses": responses, "UnprocessedKeys": map[string]any{}})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	writeRaw(w, code, b)
}

func writeRaw(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// A create repeated after its first answer was lost (the SDK retries a reset
// connection) finds the table the first made, and succeeds.
func TestCreateTableTwice(t *testing.T) {
	bothTiers(t, func(t *testing.T, tr tier) {
		s := newStore(t, tr.client, Config{})
		if err := s.CreateTable(t.Context()); err != nil {
			t.Fatalf("second CreateTable: %v", err)
		}
	})
}
