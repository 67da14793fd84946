// Package awsranges reads the IP address ranges AWS publishes for its services
// (ip-ranges.json): the addresses a service's servers connect from, such as
// CloudFront's origin-facing servers, which a server behind CloudFront trusts to name
// the client in X-Forwarded-For.
package awsranges

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
)

// URL is where AWS publishes its ranges.
const URL = "https://ip-ranges.amazonaws.com/ip-ranges.json"

// CloudFrontOriginFacing is the service of CloudFront's origin-facing servers: the
// addresses of the managed prefix list com.amazonaws.global.cloudfront.origin-facing.
const CloudFrontOriginFacing = "CLOUDFRONT_ORIGIN_FACING"

// maxBytes bounds what is read of the document (about 2 MB in 2026).
const maxBytes = 32 << 20

type document struct {
	Prefixes []struct {
		Prefix  string `json:"ip_prefix"`
		Service string `json:"service"`
	} `json:"prefixes"`
	IPv6Prefixes []struct {
		Prefix  string `json:"ipv6_prefix"`
		Service string `json:"service"`
	} `json:"ipv6_prefixes"`
}

// Parse reads an ip-ranges.json document and returns service's prefixes, IPv4 then
// IPv6. A document that names none of them is an error: trusting nothing by mistake
// would go unnoticed.
func Parse(r io.Reader, service string) ([]netip.Prefix, error) {
	var d document
	if err := json.NewDecoder(io.LimitReader(r, maxBytes)).Decode(&d); err != nil {
		return nil, fmt.Errorf("awsranges: %w", err)
	}
	var out []netip.Prefix
	add := func(s string) error {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("awsranges: %s: %w", service, err)
		}
		out = append(out, p.Masked())
		return nil
	}
	for _, p := range d.Prefixes {
		if p.Service == service {
			if err := add(p.Prefix); err != nil {
				return nil, err
			}
		}
	}
	for _, p := range d.IPv6Prefixes {
		if p.Service == service {
			if err := add(p.Prefix); err != nil {
				return nil, err
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("awsranges: no prefixes of %s", service)
	}
	return out, nil
}

// Fetch reads service's prefixes from the document at url.
func Fetch(ctx context.Context, client *http.Client, url, service string) ([]netip.Prefix, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("awsranges: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("awsranges: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New("awsranges: GET " + url + ": " + resp.Status)
	}
	return Parse(resp.Body, service)
}
