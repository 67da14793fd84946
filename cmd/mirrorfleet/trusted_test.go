package main

import (
	"flag"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/logtest"
	"github.com/mirrorfleet/mirrorfleet/shared/cloud"
	"github.com/mirrorfleet/mirrorfleet/shared/serve"
)

// MIRRORFLEET_TRUSTED_PROXY as the stack writes it behind CloudFront: the VPC's network
// and "cloudfront", whose origin-facing ranges the front reads from AWS's document when
// it starts. An unreachable document leaves the front serving, and says what that means.
func TestTrustedProxyCloudFront(t *testing.T) {
	doc := `{"prefixes":[{"ip_prefix":"15.158.0.0/16","service":"CLOUDFRONT_ORIGIN_FACING"},` +
		`{"ip_prefix":"3.160.0.0/14","service":"CLOUDFRONT"}],` +
		`"ipv6_prefixes":[{"ipv6_prefix":"2600:9000:fff::/48","service":"CLOUDFRONT_ORIGIN_FACING"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ip-ranges.json" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(doc))
	}))
	defer srv.Close()
	t.Setenv(cloud.EnvTrustedProxy, "10.0.0.0/16,cloudfront")

	start := func(url string) (serve.Config, string) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		var c serve.Config
		sf := addServeFlags(fs, &c)
		if err := fs.Parse([]string{"--aws-ip-ranges", url}); err != nil {
			t.Fatal(err)
		}
		if err := sf.finish(&c); err != nil {
			t.Fatal(err)
		}
		logs := &logtest.Buffer{}
		sf.backoff = time.Millisecond
		sf.resolve(t.Context(), &c, slog.New(slog.NewTextHandler(logs, nil)))
		return c, logs.String()
	}
	c, _ := start(srv.URL + "/ip-ranges.json")
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("15.158.0.0/16"), netip.MustParsePrefix("2600:9000:fff::/48")}
	if !slices.Equal(c.TrustedProxies, want) {
		t.Errorf("trusted %v, want %v", c.TrustedProxies, want)
	}
	c, logs := start(srv.URL + "/gone")
	if !slices.Equal(c.TrustedProxies, want[:1]) || !strings.Contains(logs, "share one per-client limit") {
		t.Errorf("unreachable ranges: trusted %v, log %s", c.TrustedProxies, logs)
	}
}
