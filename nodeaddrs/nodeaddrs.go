// Package nodeaddrs lists the node's own addresses, where NodePort
// Services are served.
package nodeaddrs

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// Interface lists the node's addresses: those of every link but the dummy
// link (whose addresses are Service VIPs), without loopback and IPv6
// link-local addresses, sorted.
type Interface interface {
	Addresses() ([]netip.Addr, error)
}

// Netlink reads the addresses over rtnetlink, one filtered dump per link,
// so that the tens of thousands of VIPs on the dummy link are never read.
type Netlink struct {
	skip string
	mu   sync.Mutex
	conn *nlbatch.Conn
}

var _ Interface = (*Netlink)(nil)

// NewNetlink lists the addresses of every link but skip.
func NewNetlink(skip string) *Netlink { return &Netlink{skip: skip} }

func (n *Netlink) Addresses() ([]netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		conn, err := nlbatch.Dial(unix.NETLINK_ROUTE)
		if err != nil {
			return nil, err
		}
		if err := conn.StrictDumps(); err != nil {
			conn.Close()
			return nil, err
		}
		n.conn = conn
	}
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var out []netip.Addr
	for _, l := range links {
		if l.Attrs().Name == n.skip {
			continue
		}
		// ifaddrmsg: any family, no prefix length, flags or scope filter,
		// this link's index.
		req := nlbatch.Request{Type: unix.RTM_GETADDR, Data: append([]byte{unix.AF_UNSPEC, 0, 0, 0}, nlbatch.U32(uint32(l.Attrs().Index))...)}
		err := n.conn.Dump(req, func(body []byte) {
			if a, ok := parse(body); ok && usable(a) && !slices.Contains(out, a) {
				out = append(out, a)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("list addresses of %s: %w", l.Attrs().Name, err)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, nil
}

// parse reads one RTM_NEWADDR message: the local address when there is one
// (a point-to-point link's IFA_ADDRESS is its peer), else IFA_ADDRESS.
func parse(body []byte) (netip.Addr, bool) {
	const ifaddrmsgLen = 8
	if len(body) < ifaddrmsgLen {
		return netip.Addr{}, false
	}
	var local, address netip.Addr
	nlbatch.Attrs(body[ifaddrmsgLen:], func(typ uint16, val []byte) {
		a, ok := netip.AddrFromSlice(val)
		if !ok {
			return
		}
		switch typ {
		case unix.IFA_LOCAL:
			local = a
		case unix.IFA_ADDRESS:
			address = a
		}
	})
	if local.IsValid() {
		return local, true
	}
	return address, address.IsValid()
}

// usable drops the addresses no NodePort is served on, as upstream.
func usable(a netip.Addr) bool {
	return !a.IsLoopback() && !(a.Is6() && a.IsLinkLocalUnicast())
}

// Fake is a node's address list for unit tests.
type Fake struct {
	mu    sync.Mutex
	addrs []netip.Addr
	err   error
}

var _ Interface = (*Fake)(nil)

// Set replaces the list, and the error Addresses returns (nil for none).
func (f *Fake) Set(err error, addrs ...netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs, f.err = slices.Clone(addrs), err
	slices.SortFunc(f.addrs, netip.Addr.Compare)
}

func (f *Fake) Addresses() ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.addrs), f.err
}
