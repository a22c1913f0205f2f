package nodeaddrs

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch/nstest"
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

// While pods come and go (links added and deleted), every list is whole:
// no read fails for a dump the changes interrupted, and none lacks an
// address that stayed.
func TestAddressesAreWholeWhileLinksChange(t *testing.T) {
	ns := nstest.New(t)
	var want []netip.Addr
	err := ns.Do(func() error {
		for i := 0; i < 40; i++ {
			a := fmt.Sprintf("192.0.2.%d", i+1)
			want = append(want, netip.MustParseAddr(a))
			if err := nstest.AddVeth(fmt.Sprintf("s%d", i), fmt.Sprintf("p%d", i), a+"/32"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(want, netip.Addr.Compare)
	stop := ns.Churn(t)
	defer stop()
	n := NewNetlink("")
	err = ns.Do(func() error {
		for i := 0; i < 300; i++ {
			got, err := n.Addresses()
			if err != nil {
				return fmt.Errorf("read %d: %w", i, err)
			}
			// The churning link's address may be there or not.
			got = slices.DeleteFunc(got, func(a netip.Addr) bool { return a == netip.MustParseAddr("198.51.100.1") })
			if !slices.Equal(got, want) {
				return fmt.Errorf("read %d: got %v, want %v", i, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
