// Package conntrack deletes the connection-tracking entries of UDP flows
// that a virtual server no longer sends to one of its real servers. UDP has
// no connection end: without this a client that keeps its source port keeps
// matching an entry whose reply comes from a removed pod, until the entry
// times out. It speaks ctnetlink through vishvananda/netlink; no conntrack
// binary is needed.
package conntrack

import (
	"errors"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// Stale names the UDP flows to one virtual server that must go: those to
// VIP whose reply comes from anything but one of Keep (its real servers).
type Stale struct {
	VIP  netip.AddrPort
	Keep []netip.AddrPort
}

// Interface deletes stale flows.
type Interface interface {
	// Clear deletes the entries of every stale flow given, all of one
	// family, with one pass over that family's table, and says how many
	// it deleted.
	Clear(stale []Stale) (int, error)
}

// Netlink is the kernel's conntrack table.
type Netlink struct{}

func (Netlink) Clear(stale []Stale) (int, error) {
	if len(stale) == 0 {
		return 0, nil
	}
	var fam netlink.InetFamily = unix.AF_INET
	if stale[0].VIP.Addr().Is6() {
		fam = unix.AF_INET6
	}
	f := newFilter(stale)
	return passes(func() (uint, error) { return netlink.ConntrackDeleteFilters(netlink.ConntrackTable, fam, f) })
}

// passes makes a deleting pass over the table until one is not
// interrupted, and counts what every pass deleted. A flow changing while
// the table is dumped interrupts the dump; the flows it deleted matched
// the filter, but others may have been missed, so the pass is made again,
// as a whole.
func passes(pass func() (uint, error)) (int, error) {
	total := 0
	var err error
	for i := 0; i < nlbatch.WholeAttempts; i++ {
		var n uint
		n, err = pass()
		total += int(n)
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	return total, err
}

// filter matches the UDP entries the stale list names.
type filter map[netip.AddrPort]map[netip.AddrPort]bool

func newFilter(stale []Stale) filter {
	f := filter{}
	for _, s := range stale {
		keep := map[netip.AddrPort]bool{}
		for _, k := range s.Keep {
			keep[k] = true
		}
		f[s.VIP] = keep
	}
	return f
}

func (f filter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	if flow.Forward.Protocol != unix.IPPROTO_UDP {
		return false
	}
	return f.matches(addrPort(flow.Forward.DstIP, flow.Forward.DstPort), addrPort(flow.Reverse.SrcIP, flow.Reverse.SrcPort))
}

// matches says a flow sent to dst and answered from replySrc is stale.
func (f filter) matches(dst, replySrc netip.AddrPort) bool {
	keep, ok := f[dst]
	return ok && !keep[replySrc]
}

func addrPort(ip []byte, port uint16) netip.AddrPort {
	a, _ := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(a.Unmap(), port)
}
