// Package sigv4test checks, in tests, a request signed with AWS Signature Version 4 the
// way a service that takes IAM auth does (API Gateway's IAM authorizer for
// execute-api): the Authorization header's shape, its credential scope, the request's
// time, and the signature itself, recomputed with aws-sdk-go-v2's own signer over the
// signed headers and the body as received, with the caller's credentials. It is not
// IAM: there are no policies, only the one set of credentials a test gives.
package sigv4test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Algorithm is the scheme of an Authorization header signed with SigV4.
const Algorithm = "AWS4-HMAC-SHA256"

// MaxSkew is how far a request's X-Amz-Date may be from the receiver's clock: "a
// request must reach AWS within five minutes of the time stamp in the request" (IAM
// user guide, "AWS Signature Version 4 for API requests").
const MaxSkew = 5 * time.Minute

// Authorization is an Authorization header's parts.
type Authorization struct {
	AccessKey, Date, Region, Service string // the credential and its scope
	SignedHeaders                    []string
	Signature                        string
}

// Parse reads an Authorization header of the form
// AWS4-HMAC-SHA256 Credential=AKID/20300101/us-east-1/execute-api/aws4_request,
// SignedHeaders=host;x-amz-date, Signature=<64 hex digits>.
func Parse(header string) (Authorization, error) {
	var a Authorization
	rest, ok := strings.CutPrefix(header, Algorithm+" ")
	if !ok {
		return a, fmt.Errorf("authorization %q is not %s", header, Algorithm)
	}
	fields := map[string]string{}
	for _, f := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok {
			return a, fmt.Errorf("authorization field %q is not key=value", f)
		}
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return a, fmt.Errorf("credential %q is not KEY/DATE/REGION/SERVICE/aws4_request", fields["Credential"])
	}
	a.AccessKey, a.Date, a.Region, a.Service = scope[0], scope[1], scope[2], scope[3]
	if fields["SignedHeaders"] == "" {
		return a, fmt.Errorf("authorization %q has no SignedHeaders", header)
	}
	a.SignedHeaders = strings.Split(fields["SignedHeaders"], ";")
	a.Signature = fields["Signature"]
	if b, err := hex.DecodeString(a.Signature); err != nil || len(b) != sha256.Size {
		return a, fmt.Errorf("signature %q is not 64 hex digits", a.Signature)
	}
	return a, nil
}

// Verify checks r, received with body, as signed by creds for service in region, at
// now: the scope, X-Amz-Date within MaxSkew, host and x-amz-date among the signed
// headers, and the signature recomputed by the SDK's signer. An error says what is
// wrong, as the service would refuse the request.
func Verify(r *http.Request, body []byte, creds aws.Credentials, service, region string, now time.Time) error {
	a, err := Parse(r.Header.Get("Authorization"))
	if err != nil {
		return err
	}
	switch {
	case a.AccessKey != creds.AccessKeyID:
		return fmt.Errorf("signed with access key %q, not a known one", a.AccessKey)
	case a.Service != service:
		return fmt.Errorf("signed for service %q, want %q", a.Service, service)
	case a.Region != region:
		return fmt.Errorf("signed for region %q, want %q", a.Region, region)
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date %q: %w", r.Header.Get("X-Amz-Date"), err)
	}
	if d := now.Sub(at); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("signature expired or not yet valid: X-Amz-Date %s is %s from now", at.Format(time.RFC3339), d.Round(time.Second))
	}
	if a.Date != at.Format("20060102") {
		return fmt.Errorf("credential date %s is not X-Amz-Date's day %s", a.Date, at.Format("20060102"))
	}
	for _, h := range []string{"host", "x-amz-date"} {
		if !slices.Contains(a.SignedHeaders, h) {
			return fmt.Errorf("%s is not among the signed headers %v", h, a.SignedHeaders)
		}
	}
	if creds.SessionToken != "" && r.Header.Get("X-Amz-Security-Token") != creds.SessionToken {
		return fmt.Errorf("X-Amz-Security-Token is not the session's")
	}

	// Sign a copy that has only the signed headers, as received, and compare.
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	re, err := http.NewRequestWithContext(context.Background(), r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	re.Host = r.Host
	re.ContentLength = 0
	for _, h := range a.SignedHeaders {
		switch h {
		case "host":
		case "content-length":
			if r.ContentLength < 0 {
				return fmt.Errorf("content-length is signed but the request has none")
			}
			re.ContentLength = r.ContentLength
		default:
			re.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, re, hex.EncodeToString(sum[:]), service, region, at); err != nil {
		return err
	}
	if got, want := r.Header.Get("Authorization"), re.Header.Get("Authorization"); got != want {
		return fmt.Errorf("the request signature does not match the one computed over its signed headers and body:\n got %s\nwant %s", got, want)
	}
	return nil
}
