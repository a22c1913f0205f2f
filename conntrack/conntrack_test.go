package conntrack

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func TestFilterMatchesOnlyFlowsAnsweredByOthers(t *testing.T) {
	ap := netip.MustParseAddrPort
	f := newFilter([]Stale{{VIP: ap("10.96.0.10:53"), Keep: []netip.AddrPort{ap("10.244.0.2:5353")}}})
	flow := func(proto uint8, dst, reply string) *netlink.ConntrackFlow {
		d, r := ap(dst), ap(reply)
		fl := &netlink.ConntrackFlow{}
		fl.Forward.Protocol = proto
		fl.Forward.DstIP, fl.Forward.DstPort = net.IP(d.Addr().AsSlice()).To16(), d.Port()
		fl.Reverse.SrcIP, fl.Reverse.SrcPort = net.IP(r.Addr().AsSlice()), r.Port()
		return fl
	}
	cases := []struct {
		name  string
		flow  *netlink.ConntrackFlow
		match bool
	}{
		{"answered by a removed pod", flow(unix.IPPROTO_UDP, "10.96.0.10:53", "10.244.0.9:5353"), true},
		{"answered by a kept pod", flow(unix.IPPROTO_UDP, "10.96.0.10:53", "10.244.0.2:5353"), false},
		{"kept pod, other port", flow(unix.IPPROTO_UDP, "10.96.0.10:53", "10.244.0.2:5354"), true},
		{"another virtual server", flow(unix.IPPROTO_UDP, "10.96.0.11:53", "10.244.0.9:5353"), false},
		{"TCP to the same address", flow(unix.IPPROTO_TCP, "10.96.0.10:53", "10.244.0.9:5353"), false},
	}
	for _, c := range cases {
		if got := f.MatchConntrackFlow(c.flow); got != c.match {
			t.Errorf("%s: match %v, want %v", c.name, got, c.match)
		}
	}
}
