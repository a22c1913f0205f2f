package ipset

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// revisions pins each type to the revision the ipset(8) tool of current
// distributions creates, so that `ipset save` prints the same sets as
// upstream kube-proxy's (ipset v7.17 on Linux 6.1, read off `ipset list -t`).
var revisions = map[Type]uint8{
	HashIP:        5,
	HashIPPort:    6,
	HashIPPortIP:  6,
	HashIPPortNet: 8,
	BitmapPort:    3,
}

// Netlink manages sets over the ipset netlink protocol.
type Netlink struct {
	mu sync.Mutex
	h  *netlink.Handle
}

var _ Interface = (*Netlink)(nil)

// NewNetlink opens a netfilter netlink socket; it fails when the kernel has no ip_set.
func NewNetlink() (*Netlink, error) {
	h, err := netlink.NewHandle(unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("open ipset netlink: %w", err)
	}
	if _, _, err := h.IpsetProtocol(); err != nil {
		h.Close()
		return nil, fmt.Errorf("kernel has no usable ipset (is ip_set loaded?): %w", err)
	}
	return &Netlink{h: h}, nil
}

func (n *Netlink) EnsureSet(s Set) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	opts := netlink.IpsetCreateOptions{
		Revision:    revisions[s.Type],
		MaxElements: s.MaxElem,
		Family:      unix.AF_INET,
	}
	if s.Family == "inet6" {
		opts.Family = unix.AF_INET6
	}
	if s.Type == BitmapPort {
		opts.PortFrom, opts.PortTo = 0, 65535
		opts.MaxElements = 0
	}
	err := n.h.IpsetCreate(s.Name, string(s.Type), opts)
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.EEXIST) || errors.Is(err, nl.IPSetError(nl.IPSET_ERR_EXIST)) {
		return nil
	}
	return fmt.Errorf("create ipset %s (%s): %w", s.Name, s.Type, err)
}

func (n *Netlink) Entries(set string) ([]Entry, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	res, err := n.h.IpsetList(set)
	if err != nil {
		return nil, fmt.Errorf("list ipset %s: %w", set, err)
	}
	out := make([]Entry, 0, len(res.Entries))
	for _, e := range res.Entries {
		out = append(out, fromLib(e))
	}
	return out, nil
}

func fromLib(e netlink.IPSetEntry) Entry {
	var out Entry
	if ip, ok := netip.AddrFromSlice(e.IP); ok {
		out.IP = ip.Unmap()
	}
	if e.Port != nil {
		out.Port = *e.Port
		if e.Protocol != nil && out.IP.IsValid() {
			out.Protocol = protocolName(*e.Protocol)
		}
	}
	if ip2, ok := netip.AddrFromSlice(e.IP2); ok {
		ip2 = ip2.Unmap()
		// The kernel reports a prefix length only for net types.
		if e.CIDR2 != 0 {
			out.Net = netip.PrefixFrom(ip2, int(e.CIDR2))
		} else {
			out.IP2 = ip2
		}
	}
	return out
}

func toLib(e Entry) (*netlink.IPSetEntry, error) {
	// Replace clears NLM_F_EXCL: adding a present entry or deleting a
	// missing one is then not an error, which keeps retries idempotent.
	out := &netlink.IPSetEntry{Replace: true}
	if e.IP.IsValid() {
		out.IP = net.IP(e.IP.AsSlice())
	}
	// Only port-carrying entries send a port: the library then also sends a
	// protocol, which hash:ip rejects.
	if e.Protocol != "" || !e.IP.IsValid() {
		port := e.Port
		out.Port = &port
	}
	if e.Protocol != "" {
		p, ok := protocolNumber(e.Protocol)
		if !ok {
			return nil, fmt.Errorf("unknown protocol %q", e.Protocol)
		}
		out.Protocol = &p
	}
	if e.IP2.IsValid() {
		out.IP2 = net.IP(e.IP2.AsSlice())
	}
	if e.Net.IsValid() {
		out.IP2 = net.IP(e.Net.Masked().Addr().AsSlice())
		out.CIDR2 = uint8(e.Net.Bits())
	}
	return out, nil
}

// AddEntry adds e, succeeding if it is already there.
func (n *Netlink) AddEntry(set string, e Entry) error {
	le, err := toLib(e)
	if err != nil {
		return fmt.Errorf("add %s to ipset %s: %w", e, set, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.h.IpsetAdd(set, le); err != nil {
		return fmt.Errorf("add %s to ipset %s: %w", e, set, err)
	}
	return nil
}

// DeleteEntry removes e, succeeding if it is not there.
func (n *Netlink) DeleteEntry(set string, e Entry) error {
	le, err := toLib(e)
	if err != nil {
		return fmt.Errorf("delete %s from ipset %s: %w", e, set, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.h.IpsetDel(set, le); err != nil && !errors.Is(err, nl.IPSetError(nl.IPSET_ERR_EXIST)) {
		return fmt.Errorf("delete %s from ipset %s: %w", e, set, err)
	}
	return nil
}

// Has tests for one entry without listing the set.
func (n *Netlink) Has(set string, e Entry) (bool, error) {
	le, err := toLib(e)
	if err != nil {
		return false, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.h.IpsetTest(set, le)
}
