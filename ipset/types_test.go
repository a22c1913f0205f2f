package ipset

import (
	"net/netip"
	"testing"
	"unsafe"
)

func TestEntryStringMatchesIpsetSave(t *testing.T) {
	ip, ip2 := netip.MustParseAddr("10.244.0.5"), netip.MustParseAddr("10.244.0.6")
	for _, c := range []struct {
		e    Entry
		want string
	}{
		{Entry{IP: ip}, "10.244.0.5"},
		{Entry{IP: ip, Protocol: EntryTCP, Port: 80}, "10.244.0.5,tcp:80"},
		{Entry{IP: ip, Protocol: EntryUDP, Port: 53, IP2: ip2}, "10.244.0.5,udp:53,10.244.0.6"},
		{Entry{IP: ip, Protocol: EntrySCTP, Port: 9}.WithNet(netip.MustParsePrefix("192.0.2.0/24")), "10.244.0.5,sctp:9,192.0.2.0/24"},
		{Entry{IP: ip, Protocol: EntryTCP, Port: 80}.WithNet(netip.MustParsePrefix("192.0.2.9/0")), "10.244.0.5,tcp:80,0.0.0.0/0"},
		{Entry{IP: ip, Protocol: EntryTCP, Port: 80}.WithNet(netip.MustParsePrefix("2001:db8::1/128")), "10.244.0.5,tcp:80,2001:db8::1"},
		{Entry{IP: ip, Protocol: EntryTCP, Port: 80}.WithNet(netip.MustParsePrefix("192.0.2.9/32")), "10.244.0.5,tcp:80,192.0.2.9"},
		{Entry{IP: ip, Protocol: 1, Port: 7}, "10.244.0.5,1:7"},
		{Entry{Port: 30080}, "30080"},
	} {
		if got := c.e.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
}

// An entry is a map key in the reconciler's want, belief and reads, 100k of
// each at 50k Services: its size is the proxier's memory.
func TestEntryStaysSmall(t *testing.T) {
	if n := unsafe.Sizeof(Entry{}); n > 56 {
		t.Errorf("an Entry takes %d bytes, want at most 56", n)
	}
}
