package ipset

import (
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
)

// The netlink library's IpsetList panics when a request fails with an error
// that is not an errno (it asserts err.(syscall.Errno)); the read fails
// instead, and the drift check retries it.
func TestAListThatPanicsIsAnError(t *testing.T) {
	libraryLike := func(string) (*netlink.IPSetResult, error) {
		var err error = errors.New("results may be incomplete or inconsistent")
		_ = int(err.(syscall.Errno)) // what the library does with it
		return nil, err
	}
	if _, err := listContained(libraryLike, "KUBE-CLUSTER-IP"); err == nil || !strings.Contains(err.Error(), "interface conversion") {
		t.Fatalf("err = %v, want the panic as an error", err)
	}
	ok := func(string) (*netlink.IPSetResult, error) { return &netlink.IPSetResult{}, nil }
	if res, err := listContained(ok, "KUBE-CLUSTER-IP"); err != nil || res == nil {
		t.Fatalf("a list that works: %v, %v", res, err)
	}
}

// Each of upstream's set types gets the attributes the kernel takes for
// it: bitmap:port a port and no protocol ("invalid protocol" otherwise),
// hash:ip an address and no port, the hash:ip,port kinds a protocol and a
// port, and a net its prefix length.
func TestEntryAttributesPerSetType(t *testing.T) {
	for _, c := range []struct {
		typ  Type
		e    Entry
		want string // attributes present: ip, ip2, cidr2, proto, port
	}{
		{BitmapPort, Entry{Port: 30080}, "port"},
		{HashIP, Entry{IP: netip.MustParseAddr("10.96.0.1")}, "ip"},
		{HashIP, Entry{IP: netip.MustParseAddr("fd00::1")}, "ip"},
		{HashIPPort, Entry{IP: netip.MustParseAddr("10.96.0.1"), Protocol: EntryUDP, Port: 53}, "ip proto port"},
		{HashIPPortIP, Entry{IP: netip.MustParseAddr("10.244.0.1"), Protocol: EntryTCP, Port: 8080, IP2: netip.MustParseAddr("10.244.0.1")}, "ip ip2 proto port"},
		{HashIPPortNet, Entry{IP: netip.MustParseAddr("198.51.100.7"), Protocol: EntrySCTP, Port: 80}.WithNet(netip.MustParsePrefix("10.0.0.0/8")), "ip ip2 cidr2 proto port"},
	} {
		req, err := encodeEntry("S", c.e)
		if err != nil {
			t.Fatalf("%s %s: %v", c.typ, c.e, err)
		}
		k := kernelEntry(t, req)
		var got []string
		for _, a := range []struct {
			name string
			has  bool
		}{{"ip", k.IP != nil}, {"ip2", k.IP2 != nil}, {"cidr2", k.CIDR2 != 0}, {"proto", k.Protocol != nil}, {"port", k.Port != nil}} {
			if a.has {
				got = append(got, a.name)
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s %s: attributes %v, want %s", c.typ, c.e, got, c.want)
		}
		if back := fromLib(k); back != c.e {
			t.Errorf("%s %s: reads back as %s", c.typ, c.e, back)
		}
	}
	if _, err := encodeEntry("S", Entry{IP: netip.MustParseAddr("10.96.0.1"), Protocol: 1, Port: 1}); err == nil {
		t.Error("an unknown protocol was encoded")
	}
}
