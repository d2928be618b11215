// Package egress builds the one HTTP client Marlowe's tools use to reach the
// internet. It refuses every IANA special-purpose address (private, loopback,
// link-local, CGNAT and cloud metadata, documentation, benchmarking,
// multicast, reserved, and the IPv6 forms that embed such an IPv4 address),
// checked on the resolved address at connect time, so neither DNS nor a
// redirect nor a proxy from the environment can route a fetch inside.
// NewPlatformTransport is the one exception, for downloads from a
// platform's own file hosts: it honours the operator's proxy settings
// (ProxyFromEnv), and its callers allow only those host names.
package egress

import (
	"net/netip"
)

// deniedRange is one special-purpose prefix and why it is refused.
type deniedRange struct {
	prefix netip.Prefix
	name   string
}

func mustRanges(pairs ...string) []deniedRange {
	out := make([]deniedRange, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, deniedRange{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return out
}

// IPv4 special-purpose blocks (IANA iana-ipv4-special-registry, plus
// multicast and the reserved 240/4). Every one is refused, including the
// few the registry marks globally reachable (AS112, AMT, 192.0.0.9/.10):
// nothing a web fetch needs lives there.
var deniedV4 = mustRanges(
	"0.0.0.0/8", "this network",
	"10.0.0.0/8", "private",
	"100.64.0.0/10", "shared address space (CGNAT; 100.100.100.200 is a cloud metadata address)",
	"127.0.0.0/8", "loopback",
	"169.254.0.0/16", "link-local (cloud metadata)",
	"172.16.0.0/12", "private",
	"192.0.0.0/24", "IETF protocol assignments",
	"192.0.2.0/24", "documentation (TEST-NET-1)",
	"192.31.196.0/24", "AS112-v4",
	"192.52.193.0/24", "AMT",
	"192.88.99.0/24", "deprecated 6to4 relay anycast",
	"192.168.0.0/16", "private",
	"192.175.48.0/24", "AS112 direct delegation",
	"198.18.0.0/15", "benchmarking",
	"198.51.100.0/24", "documentation (TEST-NET-2)",
	"203.0.113.0/24", "documentation (TEST-NET-3)",
	"224.0.0.0/4", "multicast",
	"240.0.0.0/4", "reserved",
	"255.255.255.255/32", "limited broadcast",
)

// IPv6: only global unicast (2000::/3) is reachable at all; inside it the
// special-purpose blocks (iana-ipv6-special-registry) are refused. 6to4 is
// judged by the IPv4 address it embeds; IPv4-mapped addresses are unmapped
// before any check. NAT64 and Teredo are refused outright: their IPv4 end
// is chosen by a translator we cannot see.
var (
	globalUnicast = netip.MustParsePrefix("2000::/3")
	sixToFour     = netip.MustParsePrefix("2002::/16")
	deniedV6      = mustRanges(
		"::/128", "unspecified",
		"::1/128", "loopback",
		"::/96", "IPv4-compatible (deprecated)",
		"64:ff9b::/96", "NAT64",
		"64:ff9b:1::/48", "local-use NAT64",
		"100::/64", "discard-only",
		"100:0:0:1::/64", "dummy prefix",
		"2001::/23", "IETF protocol assignments (Teredo, ORCHID, AS112, AMT, ...)",
		"2001:db8::/32", "documentation",
		"2620:4f:8000::/48", "AS112 direct delegation",
		"3fff::/20", "documentation",
		"5f00::/16", "SRv6 SIDs",
		"fc00::/7", "unique local",
		"fec0::/10", "site-local (deprecated)",
		"fe80::/10", "link-local",
		"ff00::/8", "multicast",
	)
)

// Denied reports whether a connection to addr must be refused, and which
// special-purpose range it falls in. The zero Addr is denied.
func Denied(addr netip.Addr) (bool, string) {
	if !addr.IsValid() {
		return true, "invalid address"
	}
	addr = addr.WithZone("").Unmap() // ::ffff:a.b.c.d is a.b.c.d
	if addr.Is4() {
		for _, r := range deniedV4 {
			if r.prefix.Contains(addr) {
				return true, r.name
			}
		}
		return false, ""
	}
	for _, r := range deniedV6 {
		if r.prefix.Contains(addr) {
			return true, r.name
		}
	}
	if sixToFour.Contains(addr) {
		b := addr.As16()
		v4 := netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
		if bad, why := Denied(v4); bad {
			return true, "6to4 embedding " + v4.String() + " (" + why + ")"
		}
		return false, ""
	}
	if !globalUnicast.Contains(addr) {
		return true, "not IPv6 global unicast (reserved)"
	}
	return false, ""
}
