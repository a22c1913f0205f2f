package ipset

import (
	"net/netip"
	"testing"
)

func TestEntryStringMatchesIpsetSave(t *testing.T) {
	ip, ip2 := netip.MustParseAddr("10.244.0.5"), netip.MustParseAddr("10.244.0.6")
	for _, c := range []struct {
		e    Entry
		want string
	}{
		{Entry{IP: ip}, "10.244.0.5"},
		{Entry{IP: ip, Protocol: "tcp", Port: 80}, "10.244.0.5,tcp:80"},
		{Entry{IP: ip, Protocol: "udp", Port: 53, IP2: ip2}, "10.244.0.5,udp:53,10.244.0.6"},
		{Entry{IP: ip, Protocol: "sctp", Port: 9, Net: netip.MustParsePrefix("192.0.2.0/24")}, "10.244.0.5,sctp:9,192.0.2.0/24"},
		{Entry{Port: 30080}, "30080"},
	} {
		if got := c.e.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
}
