package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
)

// signService is what the stack's API (API Gateway, IAM authorization) verifies
// signatures for.
const signService = "execute-api"

// credentialsWait bounds the look-up of credentials: the default chain ends at the
// instance metadata service, which does not answer off EC2.
const credentialsWait = 30 * time.Second

// signWithAWS makes the client sign its API requests with SigV4 for execute-api, with
// the credentials and region of the AWS SDK's default chain (the stack's API takes IAM
// auth, no token). The region is the API URL's when it is an execute-api host. It
// fails, saying where it looked, when there are no credentials or no region.
func (c *client) signWithAWS(ctx context.Context) error {
	u, err := url.Parse(c.base)
	if err != nil || u.Host == "" {
		return fmt.Errorf("--aws: API URL %q is not an http(s) URL", c.base)
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("--aws: AWS configuration: %w", err)
	}
	region := cfg.Region
	// <id>.execute-api.<region>.amazonaws.com
	if parts := strings.Split(u.Hostname(), "."); len(parts) >= 4 && parts[1] == "execute-api" {
		region = parts[2]
	}
	if region == "" {
		return errors.New("--aws: no AWS region: set AWS_REGION (or region in your AWS profile), or use the API's execute-api URL")
	}
	// Found now, not at the first request: a missing credential is one clear error
	// rather than a failed request. The chain caches what it found.
	if cfg.Credentials == nil {
		return errors.New("--aws: no AWS credentials found " + credentialSources)
	}
	cctx, cancel := context.WithTimeout(ctx, credentialsWait)
	defer cancel()
	if _, err := cfg.Credentials.Retrieve(cctx); err != nil {
		return fmt.Errorf("--aws: no AWS credentials found %s: %w", credentialSources, err)
	}
	c.token, c.signed = "", true
	next := c.http.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc := *c.http
	hc.Transport = sigv4{next: next, creds: cfg.Credentials, region: region, signer: v4.NewSigner(), host: u.Host}
	c.http = &hc
	return nil
}

// credentialSources is where the SDK's default chain looks, in its order.
const credentialSources = "(the AWS SDK looked at AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE " +
	"and ~/.aws/config and credentials, SSO, a web identity token, and a container or instance role)"

// sigv4 signs the requests to the API it carries.
type sigv4 struct {
	next   http.RoundTripper
	creds  aws.CredentialsProvider
	region string
	signer *v4.Signer
	host   string // the API's: requests elsewhere (the serving URL) go unsigned
}

func (s sigv4) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != s.host {
		return s.next.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	sum := sha256.Sum256(body)
	creds, err := s.creds.Retrieve(req.Context())
	if err != nil {
		return nil, fmt.Errorf("AWS credentials: %w", err)
	}
	if err := s.signer.SignHTTP(req.Context(), creds, r, hex.EncodeToString(sum[:]), signService, s.region, time.Now()); err != nil {
		return nil, err
	}
	return s.next.RoundTrip(r)
}

// gatewayRefusal is the error of an answer that is not the API's own: API Gateway
// refusing a signed request answers {"message": "..."} (403 when IAM does not allow it
// or the signature does not match).
func gatewayRefusal(method, path string, resp *http.Response, body []byte) error {
	var g struct {
		Message string `json:"message"`
	}
	msg := fmt.Sprintf("%s %s: %s", method, path, resp.Status)
	if json.Unmarshal(body, &g) == nil && g.Message != "" {
		msg += ": " + g.Message
	}
	if resp.StatusCode == http.StatusForbidden {
		msg += " (the request was signed with --aws: your AWS identity needs execute-api:Invoke on this API, and its credentials and region must be the API's account and region)"
	}
	return refusedError{msg: msg, status: resp.StatusCode}
}
