package urlpolicy

import (
	"net/netip"
	"strings"
)

// metadataAddrs are cloud instance-metadata and credential endpoints. They are
// refused even with AllowPrivateHosts: reaching them hands out the server's
// cloud credentials, which no mirroring setup needs.
var metadataAddrs = map[netip.Addr]string{
	netip.MustParseAddr("169.254.169.254"):    "AWS, GCP, Azure, OCI and others",
	netip.MustParseAddr("169.254.170.2"):      "AWS ECS task credentials",
	netip.MustParseAddr("169.254.170.23"):     "AWS EKS pod identity credentials",
	netip.MustParseAddr("fd00:ec2::254"):      "AWS instance metadata (IPv6)",
	netip.MustParseAddr("fd00:ec2::23"):       "AWS EKS pod identity credentials (IPv6)",
	netip.MustParseAddr("fd20:ce::254"):       "GCP instance metadata (IPv6)",
	netip.MustParseAddr("fd00:c1::a9fe:a9fe"): "OCI instance metadata (IPv6)",
	netip.MustParseAddr("100.100.100.200"):    "Alibaba Cloud instance metadata",
	netip.MustParseAddr("168.63.129.16"):      "Azure WireServer",
}

// metadataNames resolve to metadata endpoints inside the respective clouds.
var metadataNames = map[string]bool{
	"metadata":                   true,
	"metadata.google.internal":   true,
	"instance-data":              true,
	"instance-data.ec2.internal": true,
}

type ipRange struct {
	prefix netip.Prefix
	what   string
}

// privateRanges are addresses that reach this machine or internal networks
// rather than a public git host. Refused unless AllowPrivateHosts.
var privateRanges = []ipRange{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified (\"this network\") address, which reaches this machine"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address, which reaches this machine"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private network address (RFC 1918)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private network address (RFC 1918)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private network address (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address (100.64.0.0/10)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a reserved address (IETF protocol assignments)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a reserved address (benchmarking networks)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved or broadcast address"},
	{netip.MustParsePrefix("::/128"), "the unspecified address, which reaches this machine"},
	{netip.MustParsePrefix("::1/128"), "a loopback address, which reaches this machine"},
	{netip.MustParsePrefix("fc00::/7"), "a unique local (private) address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address"},
}

// IPv6 ranges that carry an IPv4 address which a gateway may forward to; the
// embedded address is checked too so ::7f00:1 or 64:ff9b::a9fe:a9fe cannot
// smuggle a forbidden IPv4 past the rules.
var (
	ipv4Compatible = netip.MustParsePrefix("::/96")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

// privateSuffix says why, and how to allow them where that is wanted (a lab, a test):
// the local fleet's flag, the AWS workers' variable (deployenv.AllowPrivateHosts).
const privateSuffix = "; private and internal hosts are not allowed (they would let the mirror reach internal services): " +
	"start `mirrorfleet run` with --allow-private-hosts (MIRRORFLEET_ALLOW_PRIVATE_HOSTS=true on AWS) to mirror them"

// checkIP applies the address rules. Zones are ignored and IPv4-mapped IPv6
// addresses are judged as the IPv4 address they connect to.
func (p Policy) checkIP(a netip.Addr) *Error {
	if !a.IsValid() {
		return refuse(ReasonMalformed, "not a valid IP address")
	}
	a = a.WithZone("").Unmap()
	if what, ok := metadataAddrs[a]; ok {
		return refuse(ReasonMetadataHost, "%s is a cloud metadata endpoint (%s), which is never allowed: it would expose the server's credentials", a, what)
	}
	if emb, ok := embeddedIPv4(a); ok {
		if e := p.checkIP(emb); e != nil {
			e.Detail = a.String() + " embeds the IPv4 address " + emb.String() + ": " + e.Detail
			return e
		}
	}
	if p.AllowPrivateHosts {
		return nil
	}
	for _, r := range privateRanges {
		if r.prefix.Contains(a) {
			return refuse(ReasonPrivateHost, "%s is %s%s", a, r.what, privateSuffix)
		}
	}
	return nil
}

func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() || a.IsUnspecified() || a.IsLoopback() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case ipv4Compatible.Contains(a), nat64.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// canonHost validates a URL host (brackets already removed) and returns its
// canonical spelling: lower case, no trailing dot, IPv4-mapped IPv6 unmapped,
// IPv6 in RFC 5952 form. isV6 tells the caller to bracket it.
func (p Policy) canonHost(host string, bracketed bool) (canon string, isV6 bool, e *Error) {
	if host == "" {
		return "", false, refuse(ReasonMalformed, "has no host")
	}
	if bracketed || strings.Contains(host, ":") {
		if strings.Contains(host, "%") {
			return "", false, refuse(ReasonMalformed, "IPv6 zone identifiers and percent-encoding are not allowed in the host")
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return "", false, refuse(ReasonMalformed, "host %q is not a valid IPv6 address", host)
		}
		a = a.Unmap()
		if e := p.checkIP(a); e != nil {
			return "", false, e
		}
		return a.String(), a.Is6(), nil
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return "", false, refuse(ReasonMalformed, "host %q contains non-ASCII characters; write internationalized names in punycode (xn--...)", host)
		}
	}
	h := strings.ToLower(host)
	// "example.com." is the same host as "example.com" (absolute DNS name).
	h = strings.TrimSuffix(h, ".")
	if len(h) > 253 {
		return "", false, refuse(ReasonMalformed, "host name is longer than 253 characters")
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if e := checkLabel(h, l); e != nil {
			return "", false, e
		}
	}
	// Resolvers (inet_aton) and some URL parsers read 2130706433, 0x7f.1,
	// 0177.0.0.1 or 127.1 as IPv4 addresses. Rather than guess which, any host
	// whose last label is numeric must be a canonical dotted quad.
	if numericLabel(labels[len(labels)-1]) {
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is4() {
			return "", false, refuse(ReasonMalformed, "host %q looks like a numeric IP address in a non-standard form (decimal, octal, hex or shortened); write IPv4 addresses as four decimal numbers a.b.c.d", host)
		}
		if e := p.checkIP(a); e != nil {
			return "", false, e
		}
		return a.String(), false, nil
	}
	if metadataNames[h] {
		return "", false, refuse(ReasonMetadataHost, "host %q is a cloud metadata endpoint, which is never allowed: it would expose the server's credentials", h)
	}
	if !p.AllowPrivateHosts {
		if what := privateName(h); what != "" {
			return "", false, refuse(ReasonPrivateHost, "host %q is %s%s", h, what, privateSuffix)
		}
	}
	return h, false, nil
}

func checkLabel(host, l string) *Error {
	if l == "" {
		return refuse(ReasonMalformed, "host %q has an empty label (consecutive or leading dots)", host)
	}
	if len(l) > 63 {
		return refuse(ReasonMalformed, "host %q has a label longer than 63 characters", host)
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return refuse(ReasonMalformed, "host %q contains the character %q; host names may only contain letters, digits, '-', '_' and '.'", host, string(c))
		}
	}
	// A leading '-' would be read as an option by ssh (CVE-2017-1000117).
	if l[0] == '-' || l[len(l)-1] == '-' {
		return refuse(ReasonMalformed, "host %q has a label starting or ending with '-'", host)
	}
	return nil
}

// numericLabel reports whether a label would be read as a number by IPv4
// parsers (the WHATWG "ends in a number" rule): decimal, or 0x-prefixed hex.
func numericLabel(l string) bool {
	digits := l
	hex := false
	if strings.HasPrefix(l, "0x") {
		digits, hex = l[2:], true
	}
	if digits == "" {
		return hex
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c >= '0' && c <= '9' || hex && c >= 'a' && c <= 'f' {
			continue
		}
		return false
	}
	return true
}

// privateName classifies names that resolve to this machine or only on a
// local network. The dialer still checks the resolved address; this gives
// users an early, clear refusal.
func privateName(h string) string {
	switch {
	case h == "localhost" || strings.HasSuffix(h, ".localhost"):
		return "a loopback name, which reaches this machine"
	case !strings.Contains(h, "."):
		return "a single-label name, which only resolves on a local network"
	case strings.HasSuffix(h, ".local"):
		return "a multicast DNS (.local) name on the local network"
	case strings.HasSuffix(h, ".internal"), strings.HasSuffix(h, ".localdomain"), strings.HasSuffix(h, ".home.arpa"):
		return "a name in a reserved private-use domain"
	}
	return ""
}
