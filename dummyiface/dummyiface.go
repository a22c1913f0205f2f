package dummyiface

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
)

// DefaultLinkName is the link upstream kube-proxy uses; keeping it makes us a drop-in.
const DefaultLinkName = "kube-ipvs0"

// Interface is the set of addresses bound to the dummy link.
type Interface interface {
	// EnsureLink creates the link if it is missing and leaves an existing one alone.
	EnsureLink() error
	// Exists says whether the link is there, for a reader that must not create it.
	Exists() (bool, error)
	Addresses() ([]netip.Addr, error)
	// AddAddresses and DeleteAddresses return one result per address.
	AddAddresses([]netip.Addr) []error
	DeleteAddresses([]netip.Addr) []error
}

// Netlink manages the link over rtnetlink.
type Netlink struct {
	name string
	mu   sync.Mutex
	link netlink.Link
	conn *nlbatch.Conn // for writes; opened on first use
	// read lists the link's addresses, filtered by the kernel (StrictDumps):
	// not the other links'. Opened on first use.
	read   *nlbatch.Conn
	listed int // the last list's length: the next one's capacity, and some
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

func (n *Netlink) Exists() (bool, error) {
	_, err := netlink.LinkByName(n.name)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		return false, nil
	}
	return err == nil, err
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
	if n.read == nil {
		conn, err := nlbatch.Dial(unix.NETLINK_ROUTE)
		if err == nil {
			if err = conn.StrictDumps(); err != nil {
				conn.Close()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("list addresses of %s: %w", n.name, err)
		}
		n.read = conn
	}
	// Read whole (see nlbatch.Whole): a drift check adopts this list, and
	// an address missing from it would be unbound and bound again.
	list, err := n.read.AppendLinkAddresses(make([]netip.Addr, 0, n.listed+n.listed/16), uint32(link.Attrs().Index))
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", n.name, err)
	}
	n.listed = len(list)
	out := list[:0]
	for _, a := range list {
		if !a.IsLinkLocalUnicast() {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}

// AddAddresses binds the addresses, many to a system call; an address
// already bound counts as done. It returns one result per address.
func (n *Netlink) AddAddresses(addrs []netip.Addr) []error {
	return n.write(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL, addrs, "bind %s to %s", syscall.EEXIST)
}

// DeleteAddresses unbinds the addresses; one not bound counts as done.
func (n *Netlink) DeleteAddresses(addrs []netip.Addr) []error {
	return n.write(unix.RTM_DELADDR, 0, addrs, "unbind %s from %s", syscall.EADDRNOTAVAIL, syscall.ENOENT)
}

func (n *Netlink) write(typ, flags uint16, addrs []netip.Addr, what string, fine ...error) []error {
	errs := make([]error, len(addrs))
	if len(addrs) == 0 {
		return errs
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	link, err := n.linkLocked()
	if err == nil && n.conn == nil {
		n.conn, err = nlbatch.Dial(unix.NETLINK_ROUTE)
	}
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	reqs := make([]nlbatch.Request, len(addrs))
	for i, a := range addrs {
		reqs[i] = nlbatch.Request{Type: typ, Flags: flags, Data: hostAddress(link.Attrs().Index, a)}
	}
	for i, err := range n.conn.Do(reqs) {
		if err == nil || slices.ContainsFunc(fine, func(f error) bool { return errors.Is(err, f) }) {
			continue
		}
		// The link may have been re-created under a new index.
		n.link = nil
		errs[i] = fmt.Errorf(what+": %w", addrs[i], n.name, err)
	}
	return errs
}

// hostAddress is an ifaddrmsg with a host prefix: what `ip addr add A/32 dev L` sends.
func hostAddress(index int, a netip.Addr) []byte {
	b := []byte{uint8(unix.AF_INET), 32, 0, unix.RT_SCOPE_UNIVERSE}
	if a.Is6() {
		b[0], b[1] = unix.AF_INET6, 128
	}
	b = append(b, nlbatch.U32(uint32(index))...)
	b = nlbatch.Attr(b, unix.IFA_LOCAL, a.AsSlice())
	return nlbatch.Attr(b, unix.IFA_ADDRESS, a.AsSlice())
}

// Fake is an in-memory link for unit tests.
type Fake struct {
	mu     sync.Mutex
	Exist  bool
	addrs  map[netip.Addr]bool
	routes []netip.Prefix // local routes through the link
	ops    oplog.Log
}

var _ Interface = (*Fake)(nil)

func NewFake() *Fake { return &Fake{addrs: map[netip.Addr]bool{}} }

func (f *Fake) EnsureLink() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Exist = true
	return nil
}

func (f *Fake) Exists() (bool, error) {
	if _, err := f.ops.Begin("link-exists"); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Exist, nil
}

func (f *Fake) Addresses() ([]netip.Addr, error) {
	if _, err := f.ops.Begin("list-addrs"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]netip.Addr, 0, len(f.addrs))
	for a := range f.addrs {
		out = append(out, a)
	}
	return out, nil
}

func (f *Fake) AddAddresses(addrs []netip.Addr) []error {
	return each(addrs, f.AddAddress)
}

func (f *Fake) DeleteAddresses(addrs []netip.Addr) []error {
	return each(addrs, f.DeleteAddress)
}

func each(addrs []netip.Addr, fn func(netip.Addr) error) []error {
	errs := make([]error, len(addrs))
	for i, a := range addrs {
		errs[i] = fn(a)
	}
	return errs
}

func (f *Fake) AddAddress(a netip.Addr) error {
	op := "add-addr " + a.String()
	answer, err := f.ops.Begin(op)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.Exist {
		return fmt.Errorf("bind %s: no link", a)
	}
	f.ops.Record(op)
	f.addrs[a] = true
	return answer
}

func (f *Fake) DeleteAddress(a netip.Addr) error {
	op := "delete-addr " + a.String()
	answer, err := f.ops.Begin(op)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops.Record(op)
	delete(f.addrs, a)
	return answer
}

// SetHook makes h see every later operation (see oplog.Hook); nil
// removes it.
func (f *Fake) SetHook(h oplog.Hook) { f.ops.SetHook(h) }

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

// DeleteLink deletes the link and, with it, every address on it; a missing
// link is no error.
func (n *Netlink) DeleteLink() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.link = nil
	link, err := netlink.LinkByName(n.name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up link %s: %w", n.name, err)
	}
	if err := netlink.LinkDel(link); err != nil {
		return fmt.Errorf("delete link %s: %w", n.name, err)
	}
	return nil
}
