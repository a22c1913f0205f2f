package ipset

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// Each of upstream's set types gets the attributes the kernel takes for
// it: bitmap:port a port and no protocol ("invalid protocol" otherwise),
// hash:ip an address and no port, the hash:ip,port kinds a protocol and a
// port, and a net its prefix length.
func TestEntryAttributesPerSetType(t *testing.T) {
	for _, c := range []struct {
		typ  Type
		e    Entry
		want string // attributes present: ip, ip2, cidr2, proto, port
	}{
		{BitmapPort, Entry{Port: 30080}, "port"},
		{HashIP, Entry{IP: netip.MustParseAddr("10.96.0.1")}, "ip"},
		{HashIP, Entry{IP: netip.MustParseAddr("fd00::1")}, "ip"},
		{HashIPPort, Entry{IP: netip.MustParseAddr("10.96.0.1"), Protocol: EntryUDP, Port: 53}, "ip proto port"},
		{HashIPPortIP, Entry{IP: netip.MustParseAddr("10.244.0.1"), Protocol: EntryTCP, Port: 8080, IP2: netip.MustParseAddr("10.244.0.1")}, "ip ip2 proto port"},
		{HashIPPortNet, Entry{IP: netip.MustParseAddr("198.51.100.7"), Protocol: EntrySCTP, Port: 80}.WithNet(netip.MustParsePrefix("10.0.0.0/8")), "ip ip2 cidr2 proto port"},
	} {
		req, err := encodeEntry("S", c.e)
		if err != nil {
			t.Fatalf("%s %s: %v", c.typ, c.e, err)
		}
		var got []string
		nlbatch.Attrs(entryData(t, req), func(typ uint16, _ []byte) {
			if name, ok := map[uint16]string{nl.IPSET_ATTR_IP: "ip", nl.IPSET_ATTR_IP2: "ip2", nl.IPSET_ATTR_CIDR2: "cidr2", nl.IPSET_ATTR_PROTO: "proto", nl.IPSET_ATTR_PORT: "port"}[typ]; ok {
				got = append(got, name)
			}
		})
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s %s: attributes %v, want %s", c.typ, c.e, got, c.want)
		}
		if back := appendListed(nil, listAnswer(1, c.e)); len(back) != 1 || back[0] != c.e {
			t.Errorf("%s %s: reads back as %v", c.typ, c.e, back)
		}
	}
	if _, err := encodeEntry("S", Entry{IP: netip.MustParseAddr("10.96.0.1"), Protocol: 1, Port: 1}); err == nil {
		t.Error("an unknown protocol was encoded")
	}
}

// A listing arrives in several messages, the first with the set's header:
// the entries of all of them are read in order, room for the header's
// count is made at once, and what is not an entry of ours (a counter, a
// comment, an entry with no address or port) is skipped.
func TestListedAcrossMessages(t *testing.T) {
	es := []Entry{
		{IP: netip.MustParseAddr("10.96.0.1"), Protocol: EntryTCP, Port: 443},
		{IP: netip.MustParseAddr("fd00::a"), Protocol: EntryUDP, Port: 53},
		{Port: 30080},
	}
	// The kernel's header counts the whole set, not the message's entries.
	out := appendListed(nil, listAnswer(len(es), es[0]))
	if len(out) != 1 || cap(out) != len(es) {
		t.Fatalf("after the first message: %v with room for %d, want 1 entry with room for %d", out, cap(out), len(es))
	}
	// A later message: no header; besides the entries, attributes the
	// reader does not know or cannot read.
	later := nlbatch.Nest([]byte{unix.AF_INET, 0, 0, 0}, nl.IPSET_ATTR_ADT|nlbatch.Nested, func(b []byte) []byte {
		b = nlbatch.Attr(b, nl.IPSET_ATTR_DATA|nlbatch.Nested, append(kernelListed(es[1]),
			nlbatch.Attr(nil, nl.IPSET_ATTR_PACKETS|nlbatch.NetByteOrder, binary.BigEndian.AppendUint64(nil, 7))...))
		b = nlbatch.Attr(b, nl.IPSET_ATTR_COMMENT, nlbatch.String("not ours"))
		// A port with a protocol and no address: a port-only entry.
		b = nlbatch.Attr(b, nl.IPSET_ATTR_DATA|nlbatch.Nested, append(kernelListed(es[2]),
			nlbatch.Attr(nil, nl.IPSET_ATTR_PROTO, nlbatch.U8(uint8(EntryTCP)))...))
		return nlbatch.Attr(b, nl.IPSET_ATTR_DATA|nlbatch.Nested, nlbatch.Attr(nil, nl.IPSET_ATTR_PORT, []byte{1}))
	})
	if out = appendListed(out, later); !slices.Equal(out, es) {
		t.Fatalf("listed %v, want %v", out, es)
	}
}

// BenchmarkListed reads a 1,000-entry message of a hash:ip,port listing:
// the listing's own allocation is the entries' slice, made once.
func BenchmarkListed(b *testing.B) {
	var es []Entry
	for i := range 1000 {
		es = append(es, Entry{IP: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Protocol: EntryTCP, Port: 80})
	}
	msg := listAnswer(len(es), es...)
	b.ReportAllocs()
	for b.Loop() {
		if out := appendListed(nil, msg); len(out) != len(es) {
			b.Fatalf("%d entries", len(out))
		}
	}
}
