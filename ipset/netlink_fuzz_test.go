package ipset

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// entryData is the IPSET_ATTR_DATA of an add request: the entry.
func entryData(t *testing.T, req []byte) []byte {
	var data []byte
	nlbatch.Attrs(req[4:], func(typ uint16, v []byte) {
		if typ == nl.IPSET_ATTR_DATA {
			data = v
		}
	})
	if data == nil {
		t.Fatalf("request without data: %x", req)
	}
	return data
}

// kernelListed is an entry's IPSET_ATTR_DATA as the kernel's list
// functions put it (hash_ipportnet4_data_list and its kin, written apart
// from our encoder): addresses nested with no byte-order flag, the port
// flagged, the protocol with a port and an address, a net's prefix length.
func kernelListed(e Entry) []byte {
	addr := func(b []byte, typ uint16, a netip.Addr) []byte {
		return nlbatch.Nest(b, typ|nlbatch.Nested, func(b []byte) []byte {
			if a.Is4() {
				return nlbatch.Attr(b, nl.IPSET_ATTR_IPADDR_IPV4, a.AsSlice())
			}
			return nlbatch.Attr(b, nl.IPSET_ATTR_IPADDR_IPV6, a.AsSlice())
		})
	}
	if !e.IP.IsValid() { // bitmap:port
		return nlbatch.Attr(nil, nl.IPSET_ATTR_PORT|nlbatch.NetByteOrder, nlbatch.BE16(e.Port))
	}
	b := addr(nil, nl.IPSET_ATTR_IP, e.IP)
	if n := e.Net(); n.IsValid() {
		b = addr(b, nl.IPSET_ATTR_IP2, n.Addr())
		b = nlbatch.Attr(b, nl.IPSET_ATTR_CIDR2, nlbatch.U8(uint8(n.Bits())))
	} else if e.IP2.IsValid() {
		b = addr(b, nl.IPSET_ATTR_IP2, e.IP2)
	}
	if e.Protocol != 0 {
		b = nlbatch.Attr(b, nl.IPSET_ATTR_PORT|nlbatch.NetByteOrder, nlbatch.BE16(e.Port))
		b = nlbatch.Attr(b, nl.IPSET_ATTR_PROTO, nlbatch.U8(uint8(e.Protocol)))
	}
	return b
}

// listAnswer is one message of a set's listing as the kernel answers it:
// the set's name, its header with the set's entry count, and the entries.
func listAnswer(count int, entries ...Entry) []byte {
	body := append([]byte{unix.AF_INET, nl.NFNETLINK_V0, 0, 0}, nlbatch.Attr(nil, nl.IPSET_ATTR_PROTOCOL, nlbatch.U8(nl.IPSET_PROTOCOL))...)
	body = nlbatch.Attr(body, nl.IPSET_ATTR_SETNAME, nlbatch.String("KUBE-X"))
	body = nlbatch.Nest(body, nl.IPSET_ATTR_DATA|nlbatch.Nested, func(b []byte) []byte {
		return nlbatch.Attr(b, nl.IPSET_ATTR_ELEMENTS|nlbatch.NetByteOrder, binary.BigEndian.AppendUint32(nil, uint32(count)))
	})
	return nlbatch.Nest(body, nl.IPSET_ATTR_ADT|nlbatch.Nested, func(b []byte) []byte {
		for _, e := range entries {
			b = nlbatch.Attr(b, nl.IPSET_ATTR_DATA|nlbatch.Nested, kernelListed(e))
		}
		return b
	})
}

// attrTypes are the types of the attributes in b, sorted, without the line
// number our requests carry and the kernel does not list.
func attrTypes(b []byte) []uint16 {
	var out []uint16
	nlbatch.Attrs(b, func(typ uint16, _ []byte) {
		if typ != nl.IPSET_ATTR_LINENO {
			out = append(out, typ)
		}
	})
	slices.Sort(out)
	return out
}

// FuzzEntryCodec checks the entry encoder and decoder on every entry shape
// the proxier writes (port; ip; ip,proto:port; ip,proto:port,ip;
// ip,proto:port,net) with any values: an unknown protocol is an error,
// never a panic, and any other entry, written and listed back, reads as
// itself: the request carries the attributes the kernel lists for it, and
// the kernel's listing of it reads back as it. A listing of any bytes at
// all reads without a panic, and never yields an IPv4-mapped address.
func FuzzEntryCodec(f *testing.F) {
	f.Add(uint8(2), []byte{10, 96, 0, 10}, uint8(6), uint16(80), []byte{10, 0, 0, 0}, uint8(8))
	f.Add(uint8(4), netip.MustParseAddr("fd00::1").AsSlice(), uint8(132), uint16(0), netip.MustParseAddr("2001:db8::").AsSlice(), uint8(64))
	f.Add(uint8(0), []byte{}, uint8(0), uint16(30080), []byte{}, uint8(0))
	f.Add(uint8(3), []byte{10, 244, 0, 1}, uint8(1), uint16(1), []byte{10, 244, 0, 1}, uint8(200))
	f.Fuzz(func(t *testing.T, shape uint8, ip []byte, protoNum uint8, port uint16, ip2 []byte, bits uint8) {
		for _, junk := range [][]byte{ip, ip2, append(append([]byte{2, 0, 0, 0}, ip...), ip2...)} {
			for _, out := range appendListed(nil, junk) {
				if out.IP.Is4In6() || out.IP2.Is4In6() || out.Net().Addr().Is4In6() {
					t.Fatalf("the listing kept a mapped address: %+v", out)
				}
			}
		}
		var v4 [4]byte
		copy(v4[:], ip)
		mapped := nlbatch.Nest(nil, nl.IPSET_ATTR_IP|nlbatch.Nested, func(b []byte) []byte {
			return nlbatch.Attr(b, nl.IPSET_ATTR_IPADDR_IPV6|nlbatch.NetByteOrder, netip.AddrFrom16(netip.AddrFrom4(v4).As16()).AsSlice())
		})
		if out, _ := parseEntry(mapped); out.IP.Is4In6() || !out.IP.Is4() {
			t.Fatalf("a mapped address listed reads as %s", out.IP)
		}

		a, ok1 := netip.AddrFromSlice(ip)
		a2, ok2 := netip.AddrFromSlice(ip2)
		a, a2 = a.Unmap(), a2.Unmap()
		proto := EntryProtocol(protoNum)
		var e Entry
		switch shape % 5 {
		case 0:
			e = Entry{Port: port}
		case 1:
			e = Entry{IP: a}
		case 2:
			e = Entry{IP: a, Protocol: proto, Port: port}
		case 3:
			e = Entry{IP: a, Protocol: proto, Port: port, IP2: a2}
		case 4:
			e = Entry{IP: a, Protocol: proto, Port: port}.WithNet(netip.PrefixFrom(a2, int(bits)))
		}
		if shape%5 != 0 && !ok1 || shape%5 >= 2 && proto == 0 || shape%5 >= 3 && !ok2 || shape%5 == 4 && (!e.Net().IsValid() || bits == 0) {
			return // not a shape the proxier writes; nor does the kernel take a /0 net (IPSET_ERR_INVALID_CIDR)
		}
		req, err := encodeEntry("KUBE-X", e)
		if known := proto == EntryTCP || proto == EntryUDP || proto == EntrySCTP; err != nil {
			if known || e.Protocol == 0 {
				t.Fatalf("encodeEntry(%+v): %v", e, err)
			}
			return
		}
		if w, k := attrTypes(entryData(t, req)), attrTypes(kernelListed(e)); !slices.Equal(w, k) {
			t.Fatalf("entry %+v: written with attributes %v, listed by the kernel with %v", e, w, k)
		}
		if got := appendListed(nil, listAnswer(1, e)); len(got) != 1 || got[0] != e {
			t.Fatalf("entry %+v reads back as %+v", e, got)
		}
	})
}

// FuzzHeader: any answer is read without a panic, and a header built as the
// kernel builds it reads back its count and maxelem.
func FuzzHeader(f *testing.F) {
	f.Add(uint32(3), uint32(65536), []byte{})
	f.Add(uint32(0), uint32(1), []byte{4, 0, 1, 0})
	f.Fuzz(func(t *testing.T, count, maxElem uint32, junk []byte) {
		count0, max0 := -1, 0
		parseHeader(junk, &count0, &max0) // anything at all
		data := nlbatch.Nest(nil, nl.IPSET_ATTR_DATA|nlbatch.Nested, func(b []byte) []byte {
			b = nlbatch.Attr(b, nl.IPSET_ATTR_MAXELEM|nlbatch.NetByteOrder, binary.BigEndian.AppendUint32(nil, maxElem))
			return nlbatch.Attr(b, nl.IPSET_ATTR_ELEMENTS|nlbatch.NetByteOrder, binary.BigEndian.AppendUint32(nil, count))
		})
		body := append([]byte{2, 0, 0, 0}, nlbatch.Attr(nil, nl.IPSET_ATTR_SETNAME, []byte("KUBE-CLUSTER-IP\x00"))...)
		body = append(body, data...)
		gotCount, gotMax := -1, 0
		parseHeader(body, &gotCount, &gotMax)
		if gotCount != int(count) || gotMax != int(maxElem) {
			t.Fatalf("read count %d, maxelem %d; built %d, %d", gotCount, gotMax, count, maxElem)
		}
	})
}
