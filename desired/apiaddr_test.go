package desired

import (
	"net/netip"
	"testing"

	netutils "k8s.io/utils/net"
)

func TestParseAPIAddrAndPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"010.096.000.010":    "10.96.0.10", // decimal, not octal
		"0000010.1.2.3":      "10.1.2.3",
		"::ffff:010.1.2.3":   "10.1.2.3",
		"::ffff:10.1.2.3":    "10.1.2.3",
		"fd00::0010":         "fd00::10",
		"fe80::1%eth0":       "", // zones: upstream rejects them
		"1.2.3":              "",
		"256.0.0.1":          "",
		"0x0a.0.0.1":         "",
		"":                   "",
		" 10.0.0.1":          "",
		"10.0.0.1/32":        "",
		"0010.000.000.00001": "10.0.0.1",
	} {
		a, ok := ParseAddr(in)
		if got := map[bool]string{true: a.String(), false: ""}[ok]; got != want {
			t.Errorf("ParseAddr(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"010.000.000.000/08":  "10.0.0.0/8",
		"10.1.2.3/8":          "10.0.0.0/8",
		"010.1.2.3/32":        "10.1.2.3/32",
		"::ffff:10.0.0.0/104": "::ffff:10.0.0.0/104",
		"fd00::1/64":          "fd00::/64",
		"10.0.0.0/33":         "",
		"fe80::/64%eth0":      "",
		"10.0.0.0":            "",
		"10.0.0.0/-1":         "",
	} {
		p, ok := ParsePrefix(in)
		if got := map[bool]string{true: p.String(), false: ""}[ok]; got != want {
			t.Errorf("parseAPIPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzAPIAddr checks that the address parsers accept exactly what
// k8s.io/utils/net's sloppy parsers accept, the same addresses and
// prefixes, whichever of their two paths they take.
func FuzzAPIAddr(f *testing.F) {
	for _, s := range []string{"010.096.000.010", "10.0.0.1", "::ffff:1.2.3.4", "fe80::1%eth0", "fd00::0010",
		"010.000.000.000/08", "::ffff:010.0.0.0/104", "10.1.2.3/8", "1:2:3:4:5:6:7:8", "::", "0/0", "00001::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := ParseAddr(s)
		ip := netutils.ParseIPSloppy(s)
		want, wantOK := netip.AddrFromSlice(ip)
		if ok != wantOK || ok && a != want.Unmap() {
			t.Fatalf("ParseAddr(%q) = %v, %v; upstream reads %v", s, a, ok, ip)
		}
		if a.Is4In6() || a.Zone() != "" {
			t.Fatalf("ParseAddr(%q) = %v: mapped or zoned", s, a)
		}
		p, ok := ParsePrefix(s)
		_, n, err := netutils.ParseCIDRSloppy(s)
		if ok != (err == nil) {
			t.Fatalf("parseAPIPrefix(%q) = %v, %v; upstream: %v", s, p, ok, err)
		}
		if ok {
			ones, _ := n.Mask.Size()
			na, _ := netip.AddrFromSlice(n.IP)
			if p.Addr() != na || p.Bits() != ones || p != p.Masked() {
				t.Fatalf("parseAPIPrefix(%q) = %v; upstream reads %v", s, p, n)
			}
		}
	})
}
