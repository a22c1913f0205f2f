package ipset

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// maxPresize bounds the room Entries makes up front from the count the
// kernel's header gives: more than any set of ours holds (maxelem).
const maxPresize = 1 << 22

// Entries lists a set, decoding the kernel's answer straight into Entry
// values as it arrives: at 50k Services the drift check lists ~100k
// entries, and a general decoder's per-entry slices and pointers cost
// about five times the entries themselves while the read is in flight.
func (n *Netlink) Entries(set string) ([]Entry, error) {
	b := []byte{unix.AF_INET, nl.NFNETLINK_V0, 0, 0}
	b = nlbatch.Attr(b, nl.IPSET_ATTR_PROTOCOL, nlbatch.U8(nl.IPSET_PROTOCOL))
	b = nlbatch.Attr(b, nl.IPSET_ATTR_SETNAME, nlbatch.String(set))
	req := nlbatch.Request{Type: nl.IPSET_CMD_LIST | unix.NFNL_SUBSYS_IPSET<<8, Data: b}
	var out []Entry
	err := nlbatch.Whole(func() error {
		out = out[:0]
		return n.r.Dump(req, func(body []byte) { out = appendListed(out, body) })
	})
	if err != nil {
		return nil, fmt.Errorf("list ipset %s: %w", set, ipsetError(err))
	}
	return out, nil
}

// appendListed appends the entries of one message of a set's listing (its
// IPSET_ATTR_ADT) to out. The first message's header says how many there
// are, and out is made that big at once rather than grown by doubling.
func appendListed(out []Entry, body []byte) []Entry {
	if len(body) < 4 {
		return out
	}
	nlbatch.Attrs(body[4:], func(typ uint16, v []byte) {
		switch typ {
		case nl.IPSET_ATTR_DATA:
			count, maxElem := -1, 0
			parseHeaderData(v, &count, &maxElem)
			if count > cap(out) && count <= maxPresize {
				grown := make([]Entry, len(out), count)
				copy(grown, out)
				out = grown
			}
		case nl.IPSET_ATTR_ADT:
			nlbatch.Attrs(v, func(typ uint16, v []byte) {
				if typ != nl.IPSET_ATTR_DATA {
					return
				}
				if e, ok := parseEntry(v); ok {
					out = append(out, e)
				}
			})
		}
	})
	return out
}

// parseEntry reads one listed entry: the addresses, port, protocol and
// prefix length the set types of ours carry; anything else (counters,
// timeouts, comments) is not ours and is ignored. A protocol counts only
// with a port and an address: bitmap:port lists the port alone. An entry
// with neither an address nor a port is not one of ours: not ok.
func parseEntry(data []byte) (Entry, bool) {
	var e Entry
	var ip2 netip.Addr
	var cidr2 uint8
	var proto EntryProtocol
	hasPort := false
	nlbatch.Attrs(data, func(typ uint16, v []byte) {
		switch typ {
		case nl.IPSET_ATTR_IP:
			e.IP = nestedAddr(v)
		case nl.IPSET_ATTR_IP2:
			ip2 = nestedAddr(v)
		case nl.IPSET_ATTR_CIDR2:
			if len(v) >= 1 {
				cidr2 = v[0]
			}
		case nl.IPSET_ATTR_PORT:
			if len(v) == 2 {
				e.Port, hasPort = binary.BigEndian.Uint16(v), true
			}
		case nl.IPSET_ATTR_PROTO:
			if len(v) >= 1 {
				proto = EntryProtocol(v[0])
			}
		}
	})
	if hasPort && e.IP.IsValid() {
		e.Protocol = proto
	}
	switch {
	case !ip2.IsValid():
	case cidr2 != 0: // the kernel gives a prefix length for net types only
		e = e.WithNet(netip.PrefixFrom(ip2, int(cidr2)))
	default:
		e.IP2 = ip2
	}
	return e, hasPort || e.IP.IsValid()
}

// nestedAddr reads an IPSET_ATTR_IP or IP2 nest: one IPv4 or IPv6 address.
// An address of any other length reads as none.
func nestedAddr(v []byte) netip.Addr {
	var a netip.Addr
	nlbatch.Attrs(v, func(typ uint16, v []byte) {
		if typ == nl.IPSET_ATTR_IPADDR_IPV4 || typ == nl.IPSET_ATTR_IPADDR_IPV6 {
			if ip, ok := netip.AddrFromSlice(v); ok {
				a = ip.Unmap()
			}
		}
	})
	return a
}
