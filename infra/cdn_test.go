package main

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/mirrorfleet/mirrorfleet/shared/deployenv"
)

// Managed CloudFront policies (their ids are fixed by AWS).
const (
	cachingDisabled           = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"
	allViewerExceptHostHeader = "b689b0a8-53d0-40ab-baf2-68738e2966ac"
)

// distribution returns the one distribution's config.
func (t tpl) distribution(tt *testing.T) map[string]any {
	tt.Helper()
	_, d := t.one(tt, "AWS::CloudFront::Distribution")
	return props(d)["DistributionConfig"].(map[string]any)
}

// By default clones are HTTPS through CloudFront: https://<id>.cloudfront.net, HTTP
// redirected; git's smart HTTP passes (every method, nothing cached, every viewer
// header — Git-Protocol, Content-Encoding, Authorization — to the origin, no
// compression); the load balancer admits CloudFront's origin-facing servers alone; the
// git server trusts their X-Forwarded-For.
func TestClonesThroughCloudFront(t *testing.T) {
	d := tmpl.distribution(t)
	b := d["DefaultCacheBehavior"].(map[string]any)
	if b["ViewerProtocolPolicy"] != "redirect-to-https" || !strings.Contains(js(b["AllowedMethods"]), `"POST"`) ||
		b["CachePolicyId"] != cachingDisabled || b["OriginRequestPolicyId"] != allViewerExceptHostHeader || b["Compress"] != false {
		t.Errorf("default behaviour %s", js(b))
	}
	if d["PriceClass"] != "PriceClass_100" || d["Aliases"] != nil || d["ViewerCertificate"] != nil || d["Enabled"] != true {
		t.Errorf("distribution %s", js(d))
	}
	origins := list(d["Origins"])
	if len(origins) != 1 {
		t.Fatalf("origins %s", js(origins))
	}
	o := origins[0].(map[string]any)
	c := o["CustomOriginConfig"].(map[string]any)
	if js(o["DomainName"]) != js(getAtt(logicalID(stack.Serve.LoadBalancer), "DNSName")) || c["OriginProtocolPolicy"] != "http-only" ||
		c["HTTPPort"] != 80.0 || c["OriginReadTimeout"] != originReadTimeout.Seconds() || c["OriginResponseCompletionTimeout"] != nil {
		t.Errorf("origin %s", js(o))
	}
	// A clone slower than the read timeout lives on keep-alives (shared/serve:
	// TestCloneThroughSlowProxies shows git's, through a proxy that cuts a silent
	// origin): several fit in the timeout. Before git's first byte the server waits at
	// most its queue wait twice (a place, a shared pack generation).
	read := time.Duration(c["OriginReadTimeout"].(float64)) * time.Second
	if read < 4*gitKeepAlive || read <= 2*serveQueueWait {
		t.Errorf("origin read timeout %v: want several of git's keep-alive intervals (%v) and more than twice the server's queue wait (%v)",
			read, gitKeepAlive, serveQueueWait)
	}

	lb := logicalID(stack.Serve.LoadBalancer)
	template.ResourceCountIs(jsii.String("AWS::ElasticLoadBalancingV2::Listener"), jsii.Number(1))
	template.HasResourceProperties(jsii.String("AWS::ElasticLoadBalancingV2::Listener"), obj("LoadBalancerArn", ref(lb), "Port", 80, "Protocol", "HTTP"))
	lbSG := logicalID((*stack.Serve.LoadBalancer.Connections().SecurityGroups())[0])
	var into []map[string]any
	for _, r := range resourcesOf("AWS::EC2::SecurityGroupIngress") {
		if p := props(r); js(p["GroupId"]) == js(getAtt(lbSG, "GroupId")) {
			into = append(into, p)
		}
	}
	if len(into) != 1 || into[0]["SourcePrefixListId"] != placeholderPrefixList || into[0]["FromPort"] != 80.0 {
		t.Errorf("load balancer ingress %s, want HTTP from CloudFront's prefix list alone", js(into))
	}
	env := envVars(tmpl.taskDef(t, logicalID(stack.Service))["ContainerDefinitions"].([]any)[1].(map[string]any))
	if !strings.Contains(js(env[deployenv.TrustedProxy]), ","+deployenv.TrustedCloudFront) {
		t.Errorf("git server trusts %s, want the VPC and CloudFront", js(env[deployenv.TrustedProxy]))
	}
	template.HasOutput(jsii.String("ServeDistributionDomain"), obj("Value", getAtt(logicalID(stack.Serve.Distribution), "DomainName")))
}

// With a name and a certificate of the operator's, CloudFront serves that name (SNI,
// TLS 1.2 at least) and the clone URLs say it; the operator's own networks may reach
// the load balancer too.
func TestCloudFrontOnTheOperatorsDomain(t *testing.T) {
	const cert = "arn:aws:acm:us-east-1:123456789012:certificate/0d7f9c1e-1111-2222-3333-444455556666"
	s, at, tp := variant(t, "Domain", Props{DomainName: "git.example.org", CertificateARN: cert,
		ServeIngress: []string{"192.0.2.0/24", "198.51.100.0/24"}}, true)
	conforms(t, "CloudFront on a domain", tp)
	d := tp.distribution(t)
	if js(d["Aliases"]) != `["git.example.org"]` || js(d["ViewerCertificate"]) != js(map[string]any{
		"AcmCertificateArn": cert, "MinimumProtocolVersion": "TLSv1.2_2021", "SslSupportMethod": "sni-only"}) {
		t.Errorf("distribution %s", js(d))
	}
	at.HasOutput(jsii.String("CloneBaseUrl"), obj("Value", "https://git.example.org"))
	lbSG := logicalIDIn(s, (*s.Serve.LoadBalancer.Connections().SecurityGroups())[0])
	// Rules on the group itself (networks) and rules of their own (the prefix list).
	rules := list(props(tp.resources("AWS::EC2::SecurityGroup")[lbSG])["SecurityGroupIngress"])
	for _, r := range tp.resources("AWS::EC2::SecurityGroupIngress") {
		if p := props(r); js(p["GroupId"]) == js(getAtt(lbSG, "GroupId")) {
			rules = append(rules, p)
		}
	}
	var from []string
	for _, r := range rules {
		if p := r.(map[string]any); p["FromPort"] == 80.0 && p["ToPort"] == 80.0 {
			for _, k := range []string{"SourcePrefixListId", "CidrIp", "CidrIpv6"} {
				if v, ok := p[k].(string); ok {
					from = append(from, v)
				}
			}
		}
	}
	if !sameSet(from, []string{placeholderPrefixList, "192.0.2.0/24", "198.51.100.0/24"}) {
		t.Errorf("load balancer admits %v", from)
	}
	nagClean(t, s)
}

// cdn=false serves clones from the load balancer: HTTPS with a certificate (see
// TestServingSeparateHTTPSAndAccessLogs), plain HTTP only when asked, never by default.
func TestWithoutCloudFront(t *testing.T) {
	_, at, tp := variant(t, "Plain", Props{WithoutCDN: true, AllowPlainHTTP: true}, false)
	at.ResourceCountIs(jsii.String("AWS::CloudFront::Distribution"), jsii.Number(0))
	at.HasResourceProperties(jsii.String("AWS::ElasticLoadBalancingV2::Listener"), obj("Port", 80, "Protocol", "HTTP",
		"DefaultActions", []any{like("Type", "forward")}))
	base := tp["Outputs"].(map[string]any)["CloneBaseUrl"].(map[string]any)["Value"]
	if !strings.HasPrefix(js(base), `{"Fn::Join":["",["http://",`) {
		t.Errorf("clone base %s", js(base))
	}
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"cdn": "false"}})
	p, err := PropsFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	p.AlarmEmail, p.AllowPlaceholders = "a@b.c", true
	if err := p.Defaults().Check(); err == nil || !strings.Contains(err.Error(), "allowPlainHttp=true") || !strings.Contains(err.Error(), "certificateArn") {
		t.Errorf("cdn=false alone: %v, want it to name certificateArn and allowPlainHttp", err)
	}
}

// Every way to get HTTPS wrong stops synth with a message that says what to do.
func TestHTTPSSettingsChecked(t *testing.T) {
	const east = "arn:aws:acm:us-east-1:123456789012:certificate/0d7f9c1e-1111-2222-3333-444455556666"
	const west = "arn:aws:acm:eu-west-1:123456789012:certificate/0d7f9c1e-1111-2222-3333-444455556666"
	six := []string{"192.0.2.0/28", "192.0.2.16/28", "192.0.2.32/28", "192.0.2.48/28", "192.0.2.64/28", "192.0.2.80/28"}
	for name, c := range map[string]struct {
		p    Props
		want string
	}{
		"CloudFront's certificate elsewhere": {Props{DomainName: "git.example.org", CertificateARN: west}, "ACM in us-east-1"},
		"a domain without certificate":       {Props{DomainName: "git.example.org"}, "domainName needs certificateArn"},
		"a certificate without domain":       {Props{CertificateARN: east}, "certificateArn needs domainName"},
		"not a certificate":                  {Props{DomainName: "git.example.org", CertificateARN: "arn:aws:iam::1:x"}, "not an ACM certificate"},
		"not a host name":                    {Props{DomainName: "https://git.example.org/", CertificateARN: east}, "a host name only"},
		"plain HTTP through CloudFront":      {Props{AllowPlainHTTP: true}, "allowPlainHttp applies to cdn=false"},
		"too many networks":                  {Props{ServeIngress: six}, "at most 5"},
		"not a network":                      {Props{ServeIngress: []string{"anywhere"}}, `"anywhere" is not a network`},
		"an IPv6 network":                    {Props{ServeIngress: []string{"2001:db8::/32"}}, "IPv4 addresses only"},
		"networks without CloudFront":        {Props{WithoutCDN: true, AllowPlainHTTP: true, ServeIngress: []string{"192.0.2.0/24"}}, "serveIngressCidrs applies to the CDN"},
		"the load balancer's certificate elsewhere": {Props{WithoutCDN: true, DomainName: "git.example.org", CertificateARN: east,
			StackProps: awscdk.StackProps{Env: &awscdk.Environment{Account: jsii.String("123456789012"), Region: jsii.String("eu-west-1")}}},
			"from its own region"},
		"plain and a certificate": {Props{WithoutCDN: true, AllowPlainHTTP: true, DomainName: "git.example.org", CertificateARN: west}, "leave one out"},
	} {
		c.p.AlarmEmail, c.p.AllowPlaceholders = "a@b.c", true
		if err := c.p.Defaults().Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}
