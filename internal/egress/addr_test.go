package egress

import (
	"net/netip"
	"testing"
)

func TestDeniedRanges(t *testing.T) {
	denied := []string{
		// IPv4 special-purpose, first and last of each block where it matters.
		"0.0.0.0", "0.255.255.255",
		"10.0.0.1", "10.255.255.255",
		"100.64.0.0", "100.100.100.200", "100.127.255.255",
		"127.0.0.1", "127.255.255.254",
		"169.254.0.1", "169.254.169.254",
		"172.16.0.1", "172.31.255.255",
		"192.0.0.1", "192.0.0.9", "192.0.0.170",
		"192.0.2.1",
		"192.31.196.1", "192.52.193.1",
		"192.88.99.1",
		"192.168.0.1", "192.168.255.255",
		"192.175.48.1",
		"198.18.0.1", "198.19.255.255",
		"198.51.100.7",
		"203.0.113.9",
		"224.0.0.1", "239.255.255.255",
		"240.0.0.1", "254.255.255.255",
		"255.255.255.255",
		// IPv4-mapped forms of the above.
		"::ffff:127.0.0.1", "::ffff:100.100.100.200", "::ffff:169.254.169.254", "::ffff:10.1.2.3", "::ffff:0.0.0.0",
		// IPv4-compatible (deprecated) forms.
		"::127.0.0.1", "::169.254.169.254", "::8.8.8.8",
		// NAT64, both prefixes, even embedding a public address.
		"64:ff9b::a9fe:a9fe", "64:ff9b::808:808", "64:ff9b::100.100.100.200", "64:ff9b:1::1",
		// IPv6 special-purpose.
		"::", "::1",
		"100::1", "100::ffff:ffff:ffff:ffff", "100:0:0:1::1",
		"2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", // Teredo
		"2001:10::1", "2001:20::1", "2001:1ff:ffff::1", // ORCHID, ORCHIDv2, end of 2001::/23
		"2001:db8::1", "2001:db8:ffff::1",
		"2620:4f:8000::1",
		"3fff::1",
		"5f00::1",
		"fc00::1", "fd00::1", "fdff:ffff::1",
		"fec0::1",
		"fe80::1", "febf::1", "fe80::1%eth0",
		"ff02::1", "ff0e::1",
		// Outside 2000::/3: reserved.
		"4000::1", "e000::1", "1::1",
		// 6to4 embedding a special-purpose IPv4 address.
		"2002:7f00:1::1", "2002:a9fe:a9fe::1", "2002:0a00:0001::1", "2002:6464:64c8::1", "2002:c0a8:0101::1",
	}
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "93.184.215.14", "100.63.255.255", "100.128.0.0",
		"172.15.255.255", "172.32.0.0", "192.0.1.1", "192.0.3.1", "192.167.255.255", "192.169.0.1",
		"198.17.255.255", "198.20.0.1", "223.255.255.255",
		"::ffff:8.8.8.8",
		"2606:4700:4700::1111", "2a00:1450:4001:82a::200e", "2001:200::1", // 2001:200::/23 is WIDE, just past 2001::/23
		"2002:0808:0808::1", // 6to4 of 8.8.8.8
	}
	for _, s := range denied {
		a := netip.MustParseAddr(s)
		if bad, why := Denied(a); !bad {
			t.Errorf("Denied(%s) = false; want refused", s)
		} else if why == "" {
			t.Errorf("Denied(%s) gives no reason", s)
		}
	}
	for _, s := range allowed {
		if bad, why := Denied(netip.MustParseAddr(s)); bad {
			t.Errorf("Denied(%s) = true (%s); want allowed", s, why)
		}
	}
	if bad, _ := Denied(netip.Addr{}); !bad {
		t.Error("the zero Addr is allowed")
	}
}

func TestCheckAddressAsTheDialerSeesIt(t *testing.T) {
	strict, loop := options{}, options{allowLoopback: true}
	cases := []struct {
		addr         string
		strict, loop bool // allowed?
	}{
		{"127.0.0.1:80", false, true},
		{"[::1]:443", false, true},
		{"[::ffff:127.0.0.1]:80", false, true},
		{"100.100.100.200:80", false, false},
		{"169.254.169.254:80", false, false},
		{"[fe80::1%25eth0]:80", false, false},
		{"[fe80::1%eth0]:80", false, false},
		{"10.0.0.1:80", false, false},
		{"8.8.8.8:443", true, true},
		{"[2606:4700:4700::1111]:443", true, true},
		{"not-an-address:80", false, false},
	}
	for _, c := range cases {
		if got := strict.check(c.addr) == nil; got != c.strict {
			t.Errorf("strict check(%s) allowed = %v; want %v", c.addr, got, c.strict)
		}
		if got := loop.check(c.addr) == nil; got != c.loop {
			t.Errorf("loopback-for-tests check(%s) allowed = %v; want %v", c.addr, got, c.loop)
		}
	}
}
