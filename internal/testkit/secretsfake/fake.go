// Package secretsfake is an in-process FAKE of AWS Secrets Manager's GetSecretValue,
// for tests. It is not Secrets Manager: it is an httptest server speaking the protocol
// aws-sdk-go-v2's secretsmanager client uses (AWS JSON 1.1: POST /, X-Amz-Target
// secretsmanager.GetSecretValue, a JSON body with SecretId) and answering as the API
// reference documents — the secret's ARN, Name, SecretString, VersionId, VersionStages
// and CreatedDate, or a ResourceNotFoundException (HTTP 400) for an unknown secret. It
// refuses unsigned requests and any other operation, so a client that sends something
// else fails the test.
package secretsfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

const (
	region  = "us-east-1"
	account = "000000000000"
	target  = "secretsmanager.GetSecretValue"
)

// Fake is a running fake. Its zero value is not usable: call New.
type Fake struct {
	srv *httptest.Server

	mu      sync.Mutex
	secrets map[string]*secret // by name
	calls   int
	fail    int // the next fail calls answer 500
}

type secret struct {
	name, arn, value string
	version          int
	created          time.Time
}

// New starts a fake; Close stops it.
func New() *Fake {
	f := &Fake{secrets: map[string]*secret{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// URL is the endpoint to give the client (AWS_ENDPOINT_URL_SECRETS_MANAGER or BaseEndpoint).
func (f *Fake) URL() string { return f.srv.URL }

// Close stops the server.
func (f *Fake) Close() { f.srv.Close() }

// Put stores (or replaces, as a new version) the string value of the secret name and
// returns its ARN, which GetSecretValue accepts as well as the name.
func (f *Fake) Put(name, value string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.secrets[name]
	if !ok {
		// Secrets Manager appends six random characters to the name in the ARN.
		s = &secret{name: name, arn: fmt.Sprintf("arn:aws:secretsmanager:%s:%s:secret:%s-AbCdEf", region, account, name), created: time.Now()}
		f.secrets[name] = s
	}
	s.value = value
	s.version++
	return s.arn
}

// Calls is how many GetSecretValue requests arrived.
func (f *Fake) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// FailNext makes the next n requests answer 500 InternalServiceError.
func (f *Fake) FailNext(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = n
}

func writeErr(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"__type": typ, "Message": msg})
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		writeErr(w, http.StatusNotFound, "UnknownOperationException", "POST / only")
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		writeErr(w, http.StatusBadRequest, "MissingAuthenticationTokenException", "the request is not signed")
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
		writeErr(w, http.StatusBadRequest, "SerializationException", "content type "+ct)
		return
	}
	if op := r.Header.Get("X-Amz-Target"); op != target {
		writeErr(w, http.StatusBadRequest, "UnknownOperationException", "the fake serves "+target+" only, not "+op)
		return
	}
	var in struct {
		SecretID     string `json:"SecretId"`
		VersionID    string `json:"VersionId"`
		VersionStage string `json:"VersionStage"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || in.SecretID == "" {
		writeErr(w, http.StatusBadRequest, "InvalidParameterException", fmt.Sprintf("a SecretId is required (%v)", err))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail > 0 {
		f.fail--
		writeErr(w, http.StatusInternalServerError, "InternalServiceError", "injected failure")
		return
	}
	var s *secret
	for _, c := range f.secrets {
		if c.name == in.SecretID || c.arn == in.SecretID {
			s = c
		}
	}
	if s == nil || in.VersionStage != "" && in.VersionStage != "AWSCURRENT" {
		writeErr(w, http.StatusBadRequest, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	json.NewEncoder(w).Encode(map[string]any{
		"ARN": s.arn, "Name": s.name, "SecretString": s.value,
		"VersionId":     fmt.Sprintf("00000000-0000-0000-0000-%012d", s.version),
		"VersionStages": []string{"AWSCURRENT"},
		"CreatedDate":   float64(s.created.UnixMilli()) / 1000,
	})
}
