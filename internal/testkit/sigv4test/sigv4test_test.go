package sigv4test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

var creds = aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}

// TestVerify: a request signed by the SDK and received by a server verifies; one whose
// body, path, credentials, service, region or time differ from what was signed, or
// that is not signed, does not.
func TestVerify(t *testing.T) {
	recv := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		recv <- got{r, b}
	}))
	defer srv.Close()
	send := func(path, body string, signBody string, c aws.Credentials, region string, at time.Time) got {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if c.AccessKeyID != "" {
			sum := sha256.Sum256([]byte(signBody))
			if err := v4.NewSigner().SignHTTP(t.Context(), c, req, hex.EncodeToString(sum[:]), "execute-api", region, at); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return <-recv
	}
	now := time.Now()
	const body = `{"url":"https://example.org/a"}`
	ok := send("/v1/repos/https%3A%2F%2Fexample.org%2Fa?x=1", body, body, creds, "us-east-1", now)
	if err := Verify(ok.r, ok.body, creds, "execute-api", "us-east-1", now); err != nil {
		t.Fatalf("a signed request: %v", err)
	}
	withToken := creds
	withToken.SessionToken = "session"
	if g := send("/v1/repos", body, body, withToken, "us-east-1", now); Verify(g.r, g.body, withToken, "execute-api", "us-east-1", now) != nil {
		t.Errorf("a request signed with a session token: %v", Verify(g.r, g.body, withToken, "execute-api", "us-east-1", now))
	}
	other := creds
	other.SecretAccessKey = "another secret"
	for name, tc := range map[string]struct {
		g       got
		service string
		region  string
		want    string
	}{
		"another body":     {send("/v1/repos", body, `{"url":"x"}`, creds, "us-east-1", now), "execute-api", "us-east-1", "does not match"},
		"another secret":   {send("/v1/repos", body, body, other, "us-east-1", now), "execute-api", "us-east-1", "does not match"},
		"another region":   {send("/v1/repos", body, body, creds, "eu-west-1", now), "execute-api", "us-east-1", "region"},
		"another service":  {ok, "lambda", "us-east-1", "service"},
		"signed long ago":  {send("/v1/repos", body, body, creds, "us-east-1", now.Add(-10*time.Minute)), "execute-api", "us-east-1", "expired"},
		"not signed":       {send("/v1/repos", body, body, aws.Credentials{}, "us-east-1", now), "execute-api", "us-east-1", "is not AWS4-HMAC-SHA256"},
		"unknown key":      {send("/v1/repos", body, body, aws.Credentials{AccessKeyID: "AKIDOTHER", SecretAccessKey: "s"}, "us-east-1", now), "execute-api", "us-east-1", "access key"},
		"another path too": {tamper(ok), "execute-api", "us-east-1", "does not match"},
	} {
		err := Verify(tc.g.r, tc.g.body, creds, tc.service, tc.region, now)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}

// got is a request as the server received it.
type got struct {
	r    *http.Request
	body []byte
}

// tamper is g with another path than the one signed.
func tamper(g got) got {
	r := g.r.Clone(g.r.Context())
	r.URL.Path, r.URL.RawPath = "/v1/repos/other", ""
	return got{r, bytes.Clone(g.body)}
}
