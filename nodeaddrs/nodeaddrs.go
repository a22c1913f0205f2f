// Package nodeaddrs lists the node's own addresses, where NodePort
// Services are served.
package nodeaddrs

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"

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
	// Each list is read whole: links come and go with pods, and a list
	// read while they did may lack addresses, which would take the node's
	// NodePorts away.
	links, err := n.conn.Links()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, l := range links {
		if l.Name == n.skip {
			continue
		}
		addrs, err := n.conn.LinkAddresses(l.Index)
		if err != nil {
			return nil, fmt.Errorf("list addresses of %s: %w", l.Name, err)
		}
		for _, a := range addrs {
			if usable(a) && !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, nil
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
