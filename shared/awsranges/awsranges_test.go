package awsranges

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// In the shape AWS publishes it (a few of its entries).
const sample = `{
  "syncToken": "1767225600",
  "createDate": "2026-01-01-00-00-00",
  "prefixes": [
    {"ip_prefix": "3.172.64.0/18", "region": "GLOBAL", "service": "CLOUDFRONT_ORIGIN_FACING", "network_border_group": "GLOBAL"},
    {"ip_prefix": "3.160.0.0/14", "region": "GLOBAL", "service": "CLOUDFRONT", "network_border_group": "GLOBAL"},
    {"ip_prefix": "15.158.0.0/16", "region": "GLOBAL", "service": "CLOUDFRONT_ORIGIN_FACING", "network_border_group": "GLOBAL"},
    {"ip_prefix": "52.94.76.0/22", "region": "us-west-2", "service": "AMAZON", "network_border_group": "us-west-2"}
  ],
  "ipv6_prefixes": [
    {"ipv6_prefix": "2600:9000:fff::/48", "region": "GLOBAL", "service": "CLOUDFRONT_ORIGIN_FACING", "network_border_group": "GLOBAL"},
    {"ipv6_prefix": "2600:9000::/28", "region": "GLOBAL", "service": "CLOUDFRONT", "network_border_group": "GLOBAL"}
  ]
}`

func TestParse(t *testing.T) {
	got, err := Parse(strings.NewReader(sample), CloudFrontOriginFacing)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, p := range got {
		s = append(s, p.String())
	}
	if !slices.Equal(s, []string{"3.172.64.0/18", "15.158.0.0/16", "2600:9000:fff::/48"}) {
		t.Errorf("origin-facing prefixes %v", s)
	}
	for name, doc := range map[string]string{
		"no such service": sample[:strings.Index(sample, `"prefixes"`)] + `"prefixes": []}`,
		"not JSON":        "<html>",
		"a bad prefix":    `{"prefixes":[{"ip_prefix":"3.172.64.0/99","service":"CLOUDFRONT_ORIGIN_FACING"}]}`,
	} {
		if _, err := Parse(strings.NewReader(doc), CloudFrontOriginFacing); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ip-ranges.json" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(sample))
	}))
	defer srv.Close()
	got, err := Fetch(t.Context(), srv.Client(), srv.URL+"/ip-ranges.json", CloudFrontOriginFacing)
	if err != nil || len(got) != 3 {
		t.Fatalf("%v, %v", got, err)
	}
	if _, err := Fetch(t.Context(), srv.Client(), srv.URL+"/gone", CloudFrontOriginFacing); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a 404: %v", err)
	}
}
