package nlbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// The two rtnetlink lists the proxier reads: the node's links, and one
// link's addresses. Both are read whole (see Whole): links come and go with
// pods, and a node-address list read while they did could lack addresses
// that are there.

// Link is a network interface, as a link dump lists it.
type Link struct {
	Index uint32
	Name  string
}

const (
	ifinfomsgLen = 16 // struct ifinfomsg
	ifaddrmsgLen = 8  // struct ifaddrmsg
)

// Links lists the network interfaces.
func (c *Conn) Links() ([]Link, error) {
	var out []Link
	err := Whole(func() error {
		out = out[:0]
		return c.Dump(Request{Type: unix.RTM_GETLINK, Data: make([]byte, ifinfomsgLen)}, func(body []byte) {
			if len(body) < ifinfomsgLen {
				return
			}
			l := Link{Index: binary.NativeEndian.Uint32(body[4:8])}
			Attrs(body[ifinfomsgLen:], func(typ uint16, val []byte) {
				if typ == unix.IFLA_IFNAME {
					l.Name = cString(val)
				}
			})
			out = append(out, l)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	return out, nil
}

// LinkAddresses lists the addresses of link index, of every family; a link
// that is gone has none. The kernel filters the dump by link only on a
// Conn with StrictDumps; without, it answers every link's addresses.
func (c *Conn) LinkAddresses(index uint32) ([]netip.Addr, error) {
	return c.AppendLinkAddresses(nil, index)
}

// AppendLinkAddresses is LinkAddresses appending to dst: a caller that
// lists one link again and again (50k addresses each drift check) passes
// a slice of the last list's size rather than growing one each time.
func (c *Conn) AppendLinkAddresses(dst []netip.Addr, index uint32) ([]netip.Addr, error) {
	out, start := dst, len(dst)
	req := Request{Type: unix.RTM_GETADDR, Data: append([]byte{unix.AF_UNSPEC, 0, 0, 0}, U32(index)...)}
	err := Whole(func() error {
		out = out[:start]
		return c.Dump(req, func(body []byte) {
			if a, i, ok := parseAddress(body); ok && i == index {
				out = append(out, a)
			}
		})
	})
	if errors.Is(err, unix.ENODEV) {
		return dst, nil // deleted since it was listed
	}
	if err != nil {
		return dst, fmt.Errorf("list addresses of link %d: %w", index, err)
	}
	return out, nil
}

// parseAddress reads one RTM_NEWADDR message: its link, and its local
// address when it has one (a point-to-point link's IFA_ADDRESS is its
// peer), else IFA_ADDRESS.
func parseAddress(body []byte) (netip.Addr, uint32, bool) {
	if len(body) < ifaddrmsgLen {
		return netip.Addr{}, 0, false
	}
	var local, address netip.Addr
	Attrs(body[ifaddrmsgLen:], func(typ uint16, val []byte) {
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
	index := binary.NativeEndian.Uint32(body[4:8])
	if local.IsValid() {
		return local, index, true
	}
	return address, index, address.IsValid()
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
