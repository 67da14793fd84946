// Package eventbridgefake is an in-process FAKE of Amazon EventBridge's PutEvents, for
// tests. It is not EventBridge: it is an httptest server that speaks the service's JSON
// 1.1 protocol (POST /, X-Amz-Target: AWSEvents.PutEvents) well enough for
// aws-sdk-go-v2's eventbridge client, keeps the accepted entries in memory and, on
// request, fails calls (an error for the whole call) or single entries (an ErrorCode
// in the answer and FailedEntryCount, as the service does when it is throttled or has
// an internal failure), so a publisher's retries can be tested.
//
// It checks what the service documents: 1 to 10 entries a call, Source, DetailType and
// Detail present, Detail a JSON object, each entry and the whole call at most 256 KB
// (Source + DetailType + Detail + Resources, and 14 bytes for a Time), the bus one that
// exists.
package eventbridgefake

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
)

// MaxEntrySize is the service's bound on one entry and on one call's entries.
const MaxEntrySize = 256 * 1024

const region = "us-east-1"

// Entry is an accepted entry.
type Entry struct {
	Bus        string
	Source     string
	DetailType string
	Detail     string
	Time       time.Time
	Resources  []string
	EventID    string
}

// Fake is the fake service. Safe for concurrent use.
type Fake struct {
	srv *httptest.Server

	mu          sync.Mutex
	buses       map[string]bool
	entries     []Entry
	calls       int
	failCalls   []string // error types the next calls answer with
	failEntries []string // error codes the next entries get
	seq         int
}

// New starts a fake knowing the buses named (and "default"). Close it when done.
func New(buses ...string) *Fake {
	f := &Fake{buses: map[string]bool{"default": true}}
	for _, b := range buses {
		f.buses[b] = true
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// Close stops the server.
func (f *Fake) Close() { f.srv.Close() }

// Client returns an SDK client for the fake (BaseEndpoint, static credentials, a fixed
// region); optFns adjust it.
func (f *Fake) Client(optFns ...func(*eventbridge.Options)) *eventbridge.Client {
	return eventbridge.New(eventbridge.Options{
		Region:       region,
		BaseEndpoint: aws.String(f.srv.URL),
		HTTPClient:   f.srv.Client(),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "fake", SecretAccessKey: "fake", Source: "eventbridgefake"}, nil
		}),
	}, optFns...)
}

// FailCalls makes the next n calls answer with the error type (e.g.
// "InternalException", HTTP 500) and accept nothing.
func (f *Fake) FailCalls(n int, errorType string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.failCalls = append(f.failCalls, errorType)
	}
}

// FailEntries makes the next n entries fail with the error code (e.g.
// "ThrottlingException", "InternalFailure"), each counted in FailedEntryCount.
func (f *Fake) FailEntries(n int, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.failEntries = append(f.failEntries, code)
	}
}

// Entries returns the accepted entries in order.
func (f *Fake) Entries() []Entry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Entry(nil), f.entries...)
}

// Calls is the number of PutEvents calls served (failed ones included).
func (f *Fake) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

type apiError struct {
	status  int
	typ     string
	message string
}

func writeError(w http.ResponseWriter, e apiError) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", e.typ)
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": e.typ, "message": e.message})
}

type putEntry struct {
	Source       *string
	DetailType   *string
	Detail       *string
	EventBusName *string
	Time         *float64
	Resources    []string
	TraceHeader  *string
}

type putRequest struct {
	Entries    []putEntry
	EndpointId *string
}

type resultEntry struct {
	EventId      string `json:",omitempty"`
	ErrorCode    string `json:",omitempty"`
	ErrorMessage string `json:",omitempty"`
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		writeError(w, apiError{http.StatusNotFound, "UnknownOperationException", "fake EventBridge: " + r.Method + " " + r.URL.Path})
		return
	}
	if op := r.Header.Get("X-Amz-Target"); op != "AWSEvents.PutEvents" {
		writeError(w, apiError{http.StatusBadRequest, "UnknownOperationException", "fake EventBridge serves AWSEvents.PutEvents only, not " + op})
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
		writeError(w, apiError{http.StatusBadRequest, "SerializationException", "Content-Type " + ct})
		return
	}
	if !strings.Contains(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256") {
		writeError(w, apiError{http.StatusBadRequest, "MissingAuthenticationTokenException", "request not signed"})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		writeError(w, apiError{http.StatusBadRequest, "SerializationException", err.Error()})
		return
	}
	var req putRequest
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, apiError{http.StatusBadRequest, "SerializationException", err.Error()})
		return
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if len(f.failCalls) > 0 {
		typ := f.failCalls[0]
		f.failCalls = f.failCalls[1:]
		writeError(w, apiError{http.StatusInternalServerError, typ, "fake failure"})
		return
	}
	if n := len(req.Entries); n < 1 || n > 10 {
		writeError(w, apiError{http.StatusBadRequest, "ValidationException", fmt.Sprintf("%d entries: want 1 to 10", n)})
		return
	}
	total := 0
	for i, e := range req.Entries {
		if e.Source == nil || e.DetailType == nil || e.Detail == nil {
			writeError(w, apiError{http.StatusBadRequest, "ValidationException", fmt.Sprintf("entry %d: Source, DetailType and Detail are required here", i)})
			return
		}
		size := len(*e.Source) + len(*e.DetailType) + len(*e.Detail)
		for _, rs := range e.Resources {
			size += len(rs)
		}
		if e.Time != nil {
			size += 14
		}
		if size > MaxEntrySize {
			writeError(w, apiError{http.StatusBadRequest, "ValidationException", fmt.Sprintf("entry %d is %d bytes, over 256 KB", i, size)})
			return
		}
		total += size
		bus := "default"
		if e.EventBusName != nil {
			bus = *e.EventBusName
			if i := strings.LastIndex(bus, ":event-bus/"); i >= 0 && strings.HasPrefix(bus, "arn:") {
				bus = bus[i+len(":event-bus/"):]
			}
		}
		if !f.buses[bus] {
			writeError(w, apiError{http.StatusBadRequest, "ResourceNotFoundException", "Event bus " + bus + " does not exist."})
			return
		}
	}
	if total > MaxEntrySize {
		writeError(w, apiError{http.StatusRequestEntityTooLarge, "ValidationException", fmt.Sprintf("entries total %d bytes, over 256 KB", total)})
		return
	}
	out := struct {
		Entries          []resultEntry
		FailedEntryCount int
	}{}
	for _, e := range req.Entries {
		var obj map[string]any
		if err := json.Unmarshal([]byte(*e.Detail), &obj); err != nil {
			out.Entries = append(out.Entries, resultEntry{ErrorCode: "MalformedDetail", ErrorMessage: "Detail is not a JSON object"})
			out.FailedEntryCount++
			continue
		}
		if len(f.failEntries) > 0 {
			out.Entries = append(out.Entries, resultEntry{ErrorCode: f.failEntries[0], ErrorMessage: "fake failure"})
			f.failEntries = f.failEntries[1:]
			out.FailedEntryCount++
			continue
		}
		f.seq++
		id := fmt.Sprintf("00000000-0000-0000-0000-%012d", f.seq)
		ent := Entry{Bus: "default", Source: *e.Source, DetailType: *e.DetailType, Detail: *e.Detail, Resources: e.Resources, EventID: id}
		if e.EventBusName != nil {
			ent.Bus = *e.EventBusName
		}
		if e.Time != nil {
			ent.Time = time.Unix(0, int64(*e.Time*1e9)).UTC()
		}
		f.entries = append(f.entries, ent)
		out.Entries = append(out.Entries, resultEntry{EventId: id})
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}
