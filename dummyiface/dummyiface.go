package dummyiface

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
)

// DefaultLinkName is the link upstream kube-proxy uses; keeping it makes us a drop-in.
const DefaultLinkName = "kube-ipvs0"

// Interface is the set of addresses bound to the dummy link.
type Interface interface {
	// EnsureLink creates the link if it is missing and leaves an existing one alone.
	EnsureLink() error
	Addresses() ([]netip.Addr, error)
	AddAddress(netip.Addr) error
	DeleteAddress(netip.Addr) error
}

// Netlink manages the link over rtnetlink.
type Netlink struct {
	name string
	mu   sync.Mutex
	link netlink.Link
}

var _ Interface = (*Netlink)(nil)

func NewNetlink(name string) *Netlink { return &Netlink{name: name} }

func (n *Netlink) EnsureLink() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ensureLocked()
}

func (n *Netlink) ensureLocked() error {
	link, err := netlink.LinkByName(n.name)
	if err == nil {
		n.link = link
		return nil
	}
	var notFound netlink.LinkNotFoundError
	if !errors.As(err, &notFound) {
		return fmt.Errorf("look up link %s: %w", n.name, err)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = n.name
	if err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: attrs}); err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("create dummy link %s (is the dummy module available?): %w", n.name, err)
	}
	if n.link, err = netlink.LinkByName(n.name); err != nil {
		return fmt.Errorf("look up link %s: %w", n.name, err)
	}
	return nil
}

func (n *Netlink) linkLocked() (netlink.Link, error) {
	if n.link == nil {
		if err := n.ensureLocked(); err != nil {
			return nil, err
		}
	}
	return n.link, nil
}

// Addresses lists the link's addresses; a missing link has none. It looks
// the link up by name every time: listing by a stale index (the link deleted
// and re-created behind our back) would silently return nothing.
func (n *Netlink) Addresses() ([]netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	link, err := netlink.LinkByName(n.name)
	if err != nil {
		n.link = nil
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("look up link %s: %w", n.name, err)
	}
	n.link = link
	list, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", n.name, err)
	}
	out := make([]netip.Addr, 0, len(list))
	for _, a := range list {
		if addr, ok := netip.AddrFromSlice(a.IP); ok && !addr.IsLinkLocalUnicast() {
			out = append(out, addr.Unmap())
		}
	}
	return out, nil
}

func hostPrefix(a netip.Addr) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}}
}

// AddAddress binds a, succeeding if it is already bound.
func (n *Netlink) AddAddress(a netip.Addr) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	link, err := n.linkLocked()
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(link, hostPrefix(a)); err != nil && !errors.Is(err, syscall.EEXIST) {
		n.link = nil
		return fmt.Errorf("bind %s to %s: %w", a, n.name, err)
	}
	return nil
}

// DeleteAddress unbinds a, succeeding if it is not bound.
func (n *Netlink) DeleteAddress(a netip.Addr) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	link, err := n.linkLocked()
	if err != nil {
		return err
	}
	if err := netlink.AddrDel(link, hostPrefix(a)); err != nil && !errors.Is(err, syscall.EADDRNOTAVAIL) && !errors.Is(err, syscall.ENOENT) {
		n.link = nil
		return fmt.Errorf("unbind %s from %s: %w", a, n.name, err)
	}
	return nil
}

// Fake is an in-memory link for unit tests.
type Fake struct {
	mu    sync.Mutex
	Exist bool
	addrs map[netip.Addr]bool
	ops   oplog.Log
}

var _ Interface = (*Fake)(nil)

func NewFake() *Fake { return &Fake{addrs: map[netip.Addr]bool{}} }

func (f *Fake) EnsureLink() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Exist = true
	return nil
}

func (f *Fake) Addresses() ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]netip.Addr, 0, len(f.addrs))
	for a := range f.addrs {
		out = append(out, a)
	}
	return out, nil
}

func (f *Fake) AddAddress(a netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.Exist {
		return fmt.Errorf("bind %s: no link", a)
	}
	f.ops.Record("add-addr " + a.String())
	f.addrs[a] = true
	return nil
}

func (f *Fake) DeleteAddress(a netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops.Record("delete-addr " + a.String())
	delete(f.addrs, a)
	return nil
}

// TakeOps returns the recorded operations and clears the record.
func (f *Fake) TakeOps() []string { return f.ops.Take() }

// Dump lists the bound addresses, sorted, one per line.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lines []string
	for a := range f.addrs {
		lines = append(lines, a.String())
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
