package ipset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// Netlink manages sets over the ipset netlink protocol.
type Netlink struct {
	mu sync.Mutex
	h  *netlink.Handle // creates, swaps and destroys sets
	w  *nlbatch.Conn   // adds, deletes (batched) and tests entries
	// r lists sets: a netlink socket answers one request at a time, and
	// a drift check's listing of a big set must not hold up a sync's writes.
	r *nlbatch.Conn
	// revisions are the kernel's known revisions per set type and family,
	// asked once (revision).
	revisions map[typeKey]kernelRevisions
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
	w, err := nlbatch.Dial(unix.NETLINK_NETFILTER)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("open ipset netlink: %w", err)
	}
	r, err := nlbatch.Dial(unix.NETLINK_NETFILTER)
	if err != nil {
		h.Close()
		w.Close()
		return nil, fmt.Errorf("open ipset netlink: %w", err)
	}
	return &Netlink{h: h, w: w, r: r}, nil
}

func (n *Netlink) EnsureSet(s Set) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var family uint8 = unix.AF_INET
	if s.Family == "inet6" {
		family = unix.AF_INET6
	}
	rev, err := n.revision(s.Type, family)
	if err != nil {
		// A set that is there is kept as it is, whatever the question's
		// answer: it holds entries, and rules match on it.
		if _, _, herr := n.header(s.Name); herr == nil {
			return nil
		}
		return fmt.Errorf("create ipset %s (%s): %w", s.Name, s.Type, err)
	}
	opts := netlink.IpsetCreateOptions{Revision: rev, MaxElements: s.MaxElem, Family: family}
	if s.Type == BitmapPort {
		opts.PortFrom, opts.PortTo = 0, 65535
		opts.MaxElements = 0
	}
	err = n.h.IpsetCreate(s.Name, string(s.Type), opts)
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.EEXIST) || errors.Is(err, nl.IPSetError(nl.IPSET_ERR_EXIST)) {
		return nil
	}
	return fmt.Errorf("create ipset %s (%s): %w", s.Name, s.Type, err)
}

// listHeaderOnly is IPSET_FLAG_LIST_HEADER: a list request answered with
// the set's header alone.
const listHeaderOnly = 1 << 2

// Count reads the set's header, where the kernel keeps its number of
// entries: one short request, where listing a 50k-entry set takes the
// kernel seconds in the test VM.
func (n *Netlink) Count(set string) (int, error) {
	count, _, err := n.header(set)
	return count, err
}

// Capacity reads the set's maxelem from its header; a bitmap:port set,
// which has none, holds every port.
func (n *Netlink) Capacity(set string) (int, error) {
	_, maxElem, err := n.header(set)
	if err == nil && maxElem == 0 {
		maxElem = 65536
	}
	return maxElem, err
}

// Grow fills a temporary set of the same type with s's entries, swaps the
// two (the kernel exchanges them under one lock, and rules follow the
// name) and destroys the temporary one, which then holds the old set.
func (n *Netlink) Grow(s Set, maxElem uint32) error {
	tmp := s
	tmp.Name, tmp.MaxElem = growName(s.Name), maxElem
	n.mu.Lock()
	_ = n.h.IpsetDestroy(tmp.Name) // left by an interrupted Grow
	n.mu.Unlock()
	if err := n.EnsureSet(tmp); err != nil {
		return err
	}
	fail := func(err error) error {
		n.mu.Lock()
		defer n.mu.Unlock()
		_ = n.h.IpsetDestroy(tmp.Name)
		return fmt.Errorf("grow ipset %s to %d: %w", s.Name, maxElem, err)
	}
	entries, err := n.Entries(s.Name)
	if err != nil {
		return fail(err)
	}
	if err := errors.Join(n.AddEntries(tmp.Name, entries)...); err != nil {
		return fail(err)
	}
	n.mu.Lock()
	err = n.h.IpsetSwap(s.Name, tmp.Name)
	n.mu.Unlock()
	if err != nil {
		return fail(err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.h.IpsetDestroy(tmp.Name); err != nil {
		return fmt.Errorf("grow ipset %s: destroy the old set: %w", s.Name, err)
	}
	return nil
}

// header reads the set's entry count and maxelem (0 if it has none) from
// its header alone.
func (n *Netlink) header(set string) (count, maxElem int, err error) {
	b := []byte{unix.AF_INET, nl.NFNETLINK_V0, 0, 0}
	b = nlbatch.Attr(b, nl.IPSET_ATTR_PROTOCOL, nlbatch.U8(nl.IPSET_PROTOCOL))
	b = nlbatch.Attr(b, nl.IPSET_ATTR_SETNAME, nlbatch.String(set))
	b = nlbatch.Attr(b, nl.IPSET_ATTR_FLAGS|nlbatch.NetByteOrder, binary.BigEndian.AppendUint32(nil, listHeaderOnly))
	err = nlbatch.Whole(func() error {
		count, maxElem = -1, 0
		return n.w.Dump(nlbatch.Request{Type: nl.IPSET_CMD_LIST | unix.NFNL_SUBSYS_IPSET<<8, Data: b}, func(body []byte) {
			parseHeader(body, &count, &maxElem)
		})
	})
	if err != nil {
		return 0, 0, fmt.Errorf("read ipset %s's header: %w", set, ipsetError(err))
	}
	if count < 0 {
		return 0, 0, fmt.Errorf("read ipset %s's header: the kernel's answer has no entry count", set)
	}
	return count, maxElem, nil
}

// parseHeader reads a set's entry count and maxelem from one IPSET_CMD_LIST
// answer, leaving each as it is if the answer does not carry it.
func parseHeader(body []byte, count, maxElem *int) {
	if len(body) < 4 {
		return
	}
	nlbatch.Attrs(body[4:], func(typ uint16, v []byte) {
		if typ == nl.IPSET_ATTR_DATA {
			parseHeaderData(v, count, maxElem)
		}
	})
}

// parseHeaderData reads the entry count and maxelem from a header's
// IPSET_ATTR_DATA.
func parseHeaderData(data []byte, count, maxElem *int) {
	nlbatch.Attrs(data, func(typ uint16, v []byte) {
		switch {
		case typ == nl.IPSET_ATTR_ELEMENTS && len(v) == 4:
			*count = int(binary.BigEndian.Uint32(v))
		case typ == nl.IPSET_ATTR_MAXELEM && len(v) == 4:
			*maxElem = int(binary.BigEndian.Uint32(v))
		}
	})
}

// AddEntries adds entries to a set, many to a system call; an entry already
// there counts as done. It returns one result per entry.
func (n *Netlink) AddEntries(set string, entries []Entry) []error {
	return n.write(nl.IPSET_CMD_ADD, set, entries, "add %s to ipset %s")
}

// DeleteEntries removes entries from a set; an entry not there counts as done.
func (n *Netlink) DeleteEntries(set string, entries []Entry) []error {
	return n.write(nl.IPSET_CMD_DEL, set, entries, "delete %s from ipset %s")
}

func (n *Netlink) write(cmd int, set string, entries []Entry, what string) []error {
	errs := make([]error, len(entries))
	var reqs []nlbatch.Request
	var index []int // reqs[i] is entries[index[i]]
	for i, e := range entries {
		data, err := encodeEntry(set, e)
		if err != nil {
			errs[i] = fmt.Errorf(what+": %w", e, set, err)
			continue
		}
		reqs = append(reqs, nlbatch.Request{Type: uint16(cmd | unix.NFNL_SUBSYS_IPSET<<8), Data: data})
		index = append(index, i)
	}
	for i, err := range n.w.Do(reqs) {
		if err == nil {
			continue
		}
		err = ipsetError(err)
		// Without NLM_F_EXCL an add of a present entry succeeds; a
		// delete of a missing one still reports it.
		if cmd == nl.IPSET_CMD_DEL && errors.Is(err, nl.IPSetError(nl.IPSET_ERR_EXIST)) {
			continue
		}
		e := entries[index[i]]
		errs[index[i]] = fmt.Errorf(what+": %w", e, set, err)
	}
	return errs
}

// encodeEntry builds an add or delete request's payload: the netfilter
// header, the protocol version, the set's name and the entry. Only entries
// with a protocol, and port-only ones, carry a port: hash:ip rejects one.
func encodeEntry(set string, e Entry) ([]byte, error) {
	b := []byte{unix.AF_NETLINK, nl.NFNETLINK_V0, 0, 0}
	b = nlbatch.Attr(b, nl.IPSET_ATTR_PROTOCOL, nlbatch.U8(nl.IPSET_PROTOCOL))
	b = nlbatch.Attr(b, nl.IPSET_ATTR_SETNAME, nlbatch.String(set))
	switch e.Protocol {
	case 0, EntryTCP, EntryUDP, EntrySCTP:
	default:
		return nil, fmt.Errorf("unknown protocol %s", e.Protocol)
	}
	b = nlbatch.Nest(b, nl.IPSET_ATTR_DATA|nlbatch.Nested, func(b []byte) []byte {
		if e.IP.IsValid() {
			b = nestIP(b, nl.IPSET_ATTR_IP, e.IP)
		}
		if e.IP2.IsValid() {
			b = nestIP(b, nl.IPSET_ATTR_IP2, e.IP2)
		}
		if n := e.Net(); n.IsValid() {
			b = nlbatch.Attr(b, nl.IPSET_ATTR_CIDR2, nlbatch.U8(uint8(n.Bits())))
		}
		if e.Protocol != 0 && e.IP.IsValid() {
			b = nlbatch.Attr(b, nl.IPSET_ATTR_PROTO, nlbatch.U8(uint8(e.Protocol)))
		}
		if e.Protocol != 0 || !e.IP.IsValid() {
			// bitmap:port takes the port alone: the kernel refuses a
			// protocol there ("invalid protocol").
			b = nlbatch.Attr(b, nl.IPSET_ATTR_PORT|nlbatch.NetByteOrder, nlbatch.BE16(e.Port))
		}
		return nlbatch.Attr(b, nl.IPSET_ATTR_LINENO|nlbatch.NetByteOrder, nlbatch.U32(0))
	})
	return b, nil
}

func nestIP(b []byte, typ uint16, a netip.Addr) []byte {
	return nlbatch.Nest(b, typ|nlbatch.Nested, func(b []byte) []byte {
		if a.Is4() {
			return nlbatch.Attr(b, nl.IPSET_ATTR_IPADDR_IPV4|nlbatch.NetByteOrder, a.AsSlice())
		}
		return nlbatch.Attr(b, nl.IPSET_ATTR_IPADDR_IPV6|nlbatch.NetByteOrder, a.AsSlice())
	})
}

// Has tests for one entry without listing the set.
func (n *Netlink) Has(set string, e Entry) (bool, error) {
	data, err := encodeEntry(set, e)
	if err != nil {
		return false, err
	}
	err = ipsetError(n.w.Do([]nlbatch.Request{{Type: nl.IPSET_CMD_TEST | unix.NFNL_SUBSYS_IPSET<<8, Data: data}})[0])
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, nl.IPSetError(nl.IPSET_ERR_EXIST)):
		return false, nil
	}
	return false, fmt.Errorf("test %s in ipset %s: %w", e, set, err)
}

// ipsetError names ipset's own error numbers, which are beyond errno's,
// and a missing set (ENOENT: no set of the name).
func ipsetError(err error) error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%w (%w)", ErrNoSet, err)
	case errors.As(err, &errno) && errno >= nl.IPSET_ERR_PRIVATE:
		return nl.IPSetError(uintptr(errno))
	}
	return err
}

// Destroy deletes a set; a missing one is no error. The kernel refuses a
// set an iptables rule still matches on (EBUSY).
func (n *Netlink) Destroy(set string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	err := n.h.IpsetDestroy(set)
	if err == nil || errors.Is(err, syscall.ENOENT) || errors.Is(err, nl.IPSetError(nl.IPSET_ERR_PROTOCOL)) {
		return nil
	}
	return fmt.Errorf("destroy ipset %s: %w", set, err)
}
