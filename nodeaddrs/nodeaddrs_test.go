package nodeaddrs

import (
	"net"
	"net/netip"
	"slices"
	"testing"
)

// stdlibAddresses lists what the Go standard library sees on the link
// (every link when name is empty), filtered as Addresses filters.
func stdlibAddresses(t *testing.T, skip string) []netip.Addr {
	t.Helper()
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, ifi := range ifaces {
		if ifi.Name == skip {
			continue
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			p, err := netip.ParsePrefix(a.String())
			if err != nil {
				t.Fatal(err)
			}
			if ip := p.Addr(); usable(ip) && !slices.Contains(out, ip) {
				out = append(out, ip)
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// TestAddressesMatchTheStandardLibrary reads this host's own addresses
// over rtnetlink, link by link, and compares them with the standard
// library's view; skipping a link drops its addresses.
func TestAddressesMatchTheStandardLibrary(t *testing.T) {
	got, err := NewNetlink("").Addresses()
	if err != nil {
		t.Fatal(err)
	}
	if want := stdlibAddresses(t, ""); !slices.Equal(got, want) {
		t.Fatalf("addresses: got %v, want %v", got, want)
	}
	ifaces, _ := net.Interfaces()
	for _, ifi := range ifaces {
		want := stdlibAddresses(t, ifi.Name)
		got, err := NewNetlink(ifi.Name).Addresses()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("without %s: got %v, want %v", ifi.Name, got, want)
		}
	}
}

func TestUsable(t *testing.T) {
	for s, want := range map[string]bool{
		"10.0.2.15": true, "127.0.0.1": false, "127.1.2.3": false,
		"fe80::1": false, "2001:db8::1": true, "::1": false,
	} {
		if got := usable(netip.MustParseAddr(s)); got != want {
			t.Errorf("usable(%s) = %v, want %v", s, got, want)
		}
	}
}
